"""Highest sliding-window mean over a stream of chunks (OCP PCM-1/PCM-2, NVMe ACTP).

One cumulative sum per chunk serves every window length; the last (window - 1) samples carry into
the next chunk, so a 15-minute 4 us trace (225 M samples) or a 10-hour capture streams through in
fixed memory. Windows that touch a NaN (a gap) are skipped and counted, so a result over gappy
data can be marked partial. Sums restart every chunk, which keeps float64 rounding far below the
instrument's resolution.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class WindowMax:
    window: int                 # samples per window
    value: float = np.nan       # highest window mean seen (W)
    end: int = -1               # sample position (exclusive end) of that window
    windows: int = 0            # full windows examined
    skipped: int = 0            # windows skipped because they touched a gap

    @property
    def start(self) -> int:
        return self.end - self.window


class SlidingMax:
    """Feed consecutive chunks; read ``results`` (one WindowMax per window length)."""

    def __init__(self, windows, position: int = 0):
        self.results = [WindowMax(int(w)) for w in windows]
        if any(r.window < 1 for r in self.results):
            raise ValueError("window lengths must be >= 1 sample")
        self._tail = np.empty(0)
        self._keep = max(r.window for r in self.results) - 1
        self.position = position      # position of the next sample fed

    def feed(self, x: np.ndarray) -> None:
        x = np.asarray(x)
        if not len(x):
            return
        tail = self._tail
        buf = np.concatenate([tail, x]) if len(tail) else np.asarray(x, dtype=np.float64)
        base = self.position - len(tail)          # position of buf[0]
        c = np.empty(len(buf) + 1)
        c[0] = 0.0
        np.cumsum(buf, out=c[1:])
        has_nan = np.isnan(c[-1])          # one NaN poisons the sum: the cheap test first
        if has_nan:
            nan = np.isnan(buf)
            np.cumsum(np.where(nan, 0.0, buf), out=c[1:])
            cn = np.zeros(len(buf) + 1, np.int64)
            np.cumsum(nan, out=cn[1:])
        scratch = np.empty(len(buf))
        for r in self.results:
            w = r.window
            # windows ending in this chunk's new samples only (earlier ones were scored last time)
            first_end = max(w, len(tail) + 1)
            if len(buf) < first_end:
                continue
            n = len(buf) + 1 - first_end
            s = np.subtract(c[first_end:], c[first_end - w:len(buf) + 1 - w], out=scratch[:n])
            if has_nan:
                bad = (cn[first_end:] - cn[first_end - w:len(buf) + 1 - w]) > 0
                nbad = int(bad.sum())
                r.skipped += nbad
                if nbad == n:
                    r.windows += n
                    continue
                s[bad] = -np.inf
            r.windows += n
            k = int(np.argmax(s))
            m = s[k] / w
            if not (m <= r.value):       # also true while value is NaN
                r.value = float(m)
                r.end = base + first_end + k
        self.position += len(x)
        self._tail = buf[max(0, len(buf) - self._keep):] if self._keep else np.empty(0)
        if self._tail.dtype != np.float64:
            self._tail = self._tail.astype(np.float64)


def max_window_mean(x: np.ndarray, window: int, chunk: int = 1 << 22) -> WindowMax:
    """Highest mean of any ``window`` consecutive samples of x (NaN windows skipped)."""
    sm = SlidingMax([window])
    for s in range(0, len(x), chunk):
        sm.feed(x[s:s + chunk])
    return sm.results[0]
