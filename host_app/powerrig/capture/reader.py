"""CaptureReader: open a capture, read samples, summaries and events for any range.

    with CaptureReader(path) as cap:
        cap.rails, cap.interval_s, cap.length, cap.metadata, cap.events, cap.gaps
        p = cap.samples("p_12V", start, stop)          # float32, NaN in gaps
        s = cap.summaries("p_total", start, stop, 800)  # one (mean, std, min, max) per pixel
        for sid0, cols in cap.chunks(["p_12V", "p_total"]):   # flat memory over any length
            ...

Positions are sample ids (interval numbers from 0); ``sample_id(utc)`` and ``utc(sample_id)`` map
them to host UTC through the clock anchors stored in the capture.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pyjls

from powerrig.capture import layout as L
from powerrig.capture.clocktrack import ClockTrack
from powerrig.errors import CaptureError
from powerrig.events import Event


@contextmanager
def _quiet_stderr():
    """The JLS library prints repair notes (stderr and the 'pyjls' logger) while it recovers a file
    that was not closed; the reader reports that as ``closed_cleanly`` instead."""
    log = logging.getLogger("pyjls")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with _quiet_fd():
            yield
    finally:
        log.setLevel(level)


@contextmanager
def _quiet_fd():
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


class CaptureReader:
    DEFAULT_CHUNK = 1 << 20

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise CaptureError(f"capture {self.path} not found; check the path")
        if self.path.stat().st_size == 0:
            raise CaptureError(f"capture {self.path} is empty (0 bytes): the recording wrote nothing; record again")
        with open(self.path, "rb") as f:
            magic = f.read(16)
        if not magic.startswith(b"jls"):
            raise CaptureError(f"{self.path} is not a JLS capture (unknown header {magic[:8]!r}); "
                               "open a .jls file written by `powerrig record`")
        try:
            with _quiet_stderr():
                self._r = pyjls.Reader(str(self.path))
        except Exception as e:
            raise CaptureError(f"capture {self.path} cannot be read ({e}); the file is damaged beyond repair") from None
        self._load_user_data()

    def _load_user_data(self) -> None:
        self.metadata: dict = {}
        self.events: list[Event] = []
        self.gaps: list[dict] = []
        self.segments: list[dict] = []
        self._anchors: list[dict] = []
        self.close_record: dict | None = None
        found = []

        def on(tag, data):
            found.append((tag, data))
            return False

        self.damaged = False
        try:
            with _quiet_stderr():
                self._r.user_data(on)
        except RuntimeError:
            self.damaged = True      # a torn end: keep every record before it
        for tag, data in found:
            if tag not in (L.UD_METADATA, L.UD_METADATA_UPDATE, L.UD_EVENT, L.UD_GAP, L.UD_CLOCK,
                           L.UD_SEGMENT, L.UD_CLOSE):
                continue
            try:
                doc = json.loads(bytes(data).decode())
            except (ValueError, UnicodeDecodeError):
                continue   # a torn record at the end of a killed capture
            if tag == L.UD_METADATA:
                self.metadata = doc
            elif tag == L.UD_METADATA_UPDATE:
                self.metadata.update(doc)
            elif tag == L.UD_EVENT:
                self.events.append(Event.from_dict(doc))
            elif tag == L.UD_GAP:
                self.gaps.append(doc)
            elif tag == L.UD_CLOCK:
                self._anchors.append(doc)
            elif tag == L.UD_SEGMENT:
                self.segments.append(doc)
            elif tag == L.UD_CLOSE:
                self.close_record = doc
        fmt = self.metadata.get("format", {})
        if fmt.get("name") != L.FORMAT:
            self._r.close()
            if self.damaged:
                raise CaptureError(f"capture {self.path} is damaged before its metadata; nothing can be recovered")
            raise CaptureError(f"{self.path} is a JLS file but not a powerrig capture (no powerrig metadata); "
                               "it was written by another tool")
        if fmt.get("version", 0) > L.FORMAT_VERSION:
            self._r.close()
            raise CaptureError(f"{self.path} uses capture format {fmt['version']}, newer than this powerrig "
                               f"reads ({L.FORMAT_VERSION}); update powerrig")
        lay = self.metadata["layout"]
        self.rails = tuple(lay["rails"])
        self.interval_samples = int(lay["interval_samples"])
        self.sample_period_s = float(lay["sample_period_s"])
        self.interval_s = self.interval_samples * self.sample_period_s
        self.sample_rate_hz = int(lay["sample_rate_hz"])
        self.first_index = int(lay["first_index"])
        self._ids = {str(k): int(v) for k, v in lay["signals"].items()}
        sigs = self._r.signals
        present = [sigs[i].length for n, i in self._ids.items() if i in sigs]
        # after an unclean stop the signals may end a chunk apart: the common length is what is whole
        self.length = int(min(present)) if present else 0
        self.events.sort(key=lambda e: e.t_start)
        self.clock = ClockTrack.from_anchors(self._anchors, self.interval_samples)

    # ---- basics -------------------------------------------------------------------------------------
    def __enter__(self) -> "CaptureReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._r.close()

    @property
    def closed_cleanly(self) -> bool:
        """False when the recording was killed or crashed: its last seconds may be missing."""
        return self.close_record is not None and not self.damaged

    @property
    def duration_s(self) -> float:
        return self.length * self.interval_s

    @property
    def signals(self) -> list[str]:
        return list(self._ids)

    def has(self, name: str) -> bool:
        return name in self._ids

    def _id(self, name: str) -> int:
        try:
            return self._ids[name]
        except KeyError:
            raise CaptureError(f"capture has no signal {name!r}; it has {', '.join(self._ids)}") from None

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except RuntimeError as e:
            raise CaptureError(f"capture {self.path} is damaged where it was read ({e}); "
                               "re-record, or analyse the part before it") from None

    def _range(self, start: int | None, stop: int | None) -> tuple[int, int]:
        start = 0 if start is None else max(0, int(start))
        stop = self.length if stop is None else min(self.length, int(stop))
        return start, max(start, stop)

    # ---- data ---------------------------------------------------------------------------------------
    def samples(self, name: str, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Per-interval values of a signal for sample ids [start, stop) (NaN in gaps)."""
        start, stop = self._range(start, stop)
        if stop == start:
            return np.empty(0, np.uint8 if name in L.DIGITAL_FIELDS else np.float32)
        return self._call(self._r.fsr, self._id(name), start, stop - start)

    def chunks(self, names, start: int | None = None, stop: int | None = None,
               chunk: int = DEFAULT_CHUNK) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """(first sample id, {name: values}) for consecutive chunks: memory flat in capture length."""
        start, stop = self._range(start, stop)
        ids = [(n, self._id(n)) for n in names]
        for s in range(start, stop, chunk):
            n = min(chunk, stop - s)
            yield s, {name: self._call(self._r.fsr, i, s, n) for name, i in ids}

    def summaries(self, name: str, start: int | None = None, stop: int | None = None,
                  n: int = 1000) -> dict[str, np.ndarray]:
        """``n`` summaries (mean, std, min, max) spanning [start, stop), from the file's summary levels.

        Fast at any length (for plots and overviews); inner boundaries are approximate, per pyjls.
        A summary touching a gap has NaN mean and std."""
        start, stop = self._range(start, stop)
        total = stop - start
        if total <= 0:
            raise CaptureError(f"empty range [{start}, {stop}) of a capture with {self.length} intervals")
        n = max(1, min(n, total))
        incr = -(-total // n)            # ceil: the n summaries must cover the whole range
        n = total // incr                # (a remainder shorter than one summary is left out)
        s = self._call(self._r.fsr_statistics, self._id(name), start, incr, n)
        return {"sample_id": start + np.arange(n) * incr, "increment": incr, "mean": s[:, 0], "std": s[:, 1],
                "min": s[:, 2], "max": s[:, 3]}

    def range_stats(self, name: str, start: int | None = None, stop: int | None = None) -> dict[str, float]:
        """Exact mean, std, min, max over one range (summary levels; NaN mean when a gap is inside)."""
        start, stop = self._range(start, stop)
        if stop <= start:
            return {"mean": np.nan, "std": np.nan, "min": np.nan, "max": np.nan}
        s = self._call(self._r.fsr_statistics, self._id(name), start, stop - start, 1)[0]
        return {"mean": float(s[0]), "std": float(s[1]), "min": float(s[2]), "max": float(s[3])}

    # ---- time and events ----------------------------------------------------------------------------
    def _need_clock(self) -> ClockTrack:
        if self.clock is None:
            raise CaptureError(f"capture {self.path} holds no clock anchors (the stream never answered a ping), "
                               "so its events cannot be placed on the samples; record again")
        return self.clock

    def utc(self, sample_id):
        """Host UTC of a sample id."""
        return self._need_clock().utc(sample_id)

    def sample_id(self, utc):
        """Fractional sample id of a host UTC time."""
        return self._need_clock().sample_id_at(utc)

    def events_in(self, start: int | None = None, stop: int | None = None, kind: str | None = None) -> list[Event]:
        """Events of a kind overlapping sample ids [start, stop)."""
        start, stop = self._range(start, stop)
        t0, t1 = self.utc(start), self.utc(stop)
        out = []
        for e in self.events:
            end = e.t_end if e.t_end is not None else e.t_start
            if (kind is None or e.kind == kind) and end >= t0 and e.t_start <= t1:
                out.append(e)
        return out

    def info(self) -> str:
        """A few lines for humans: length, rails, gaps, events, clean close."""
        lines = [f"{self.path}: {self.duration_s:.3f} s, {self.length} intervals of {self.interval_s * 1e6:g} us, "
                 f"rails {', '.join(self.rails)}",
                 f"  events {len(self.events)}, gaps {len(self.gaps)} ({sum(g['intervals'] for g in self.gaps)} intervals)"]
        if not self.closed_cleanly:
            lines.append("  NOT closed cleanly: the recording stopped abruptly; its last seconds may be missing")
        return "\n".join(lines)
