"""FileSource: a capture file's summary levels (pyjls fsr_statistics through CaptureReader), for opened
captures and for the part of a live recording older than memory holds. Any length answers in about
the same time: the JLS file keeps its own reduction tree."""
from __future__ import annotations

import math
import threading

import numpy as np

from powerrig.capture.reader import CaptureReader
from powerrig.core.errors import PowerrigError
from powerrig.gui.source.base import Summary, TimeSource, signal_names

# the capture writer's first summary level (sample_decimate_factor): pyjls answers fsr_statistics
# exactly for spans up to this long or aligned to it, and interpolates (wrongly, for a min/max band)
# otherwise, so wider points start and end on its multiples
SUMMARY_ALIGN = 128


class SourceClosed(PowerrigError):
    """A summary was asked of a capture the app has closed (a request still in flight when it was)."""


class FileSource(TimeSource):
    def __init__(self, path):
        self.reader = CaptureReader(path)
        r = self.reader
        self.path = r.path
        self.rails = r.rails
        self.interval_s = r.interval_s
        self.length = r.length
        self.signals = [s for s in signal_names(self.rails) if r.has(s)]
        self._lock = threading.Lock()           # one pyjls reader, used by one worker at a time
        self.closed = False

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self.reader.close()

    def gaps(self, t0: float, t1: float) -> list[tuple[float, float]]:
        dt = self.interval_s
        out = []
        for g in self.reader.gaps:
            a, e = g["sample_id"] * dt, (g["sample_id"] + g["intervals"]) * dt
            if e >= t0 and a <= t1 and g.get("intervals", 0) > 0:
                out.append((a, e))
        return out

    def summaries(self, t0: float, t1: float, n: int, signals=None) -> Summary:
        """``n`` points over [t0, t1) from the file's summary levels (exact per point: each point is one
        fsr_statistics span of whole intervals)."""
        signals = list(signals or self.signals)
        dt = self.interval_s
        r0 = max(0, int(math.floor(t0 / dt)))
        r1 = min(self.length, max(r0 + 1, int(math.ceil(t1 / dt))))
        if r1 <= r0:
            t = np.array([t0])
            out = Summary(t, dt)
            for s in signals:
                out.mean[s] = out.min[s] = out.max[s] = np.full(1, np.nan)
            return out
        n = max(1, int(n))
        incr = -(-(r1 - r0) // n)
        if incr > SUMMARY_ALIGN:
            incr = -(-incr // SUMMARY_ALIGN) * SUMMARY_ALIGN
            r0 = r0 // SUMMARY_ALIGN * SUMMARY_ALIGN
        n = max(1, min(-(-(r1 - r0) // incr), (self.length - r0) // incr))
        r1 = r0 + n * incr
        with self._lock:
            if self.closed:
                raise SourceClosed(f"{self.path.name} was closed; open it again to browse it")
            first = None
            out = None
            for s in signals:
                d = self.reader.summaries(s, r0, r1, n)
                if out is None:
                    first = d
                    out = Summary(d["sample_id"] * dt, d["increment"] * dt)
                out.mean[s] = d["mean"].astype(np.float64)
                out.min[s] = d["min"].astype(np.float64)
                out.max[s] = d["max"].astype(np.float64)
        assert first is not None
        return out

    # the analysis reads the file itself (markers, the table)
    def analysis_source(self):
        return self.reader
