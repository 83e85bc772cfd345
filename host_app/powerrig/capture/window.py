"""A stretch of a capture that reads as a capture of its own: `powerrig report CAPTURE --from A --to B`.

The analysis and the report take a CaptureReader; a CaptureWindow answers the same questions for the
sample ids [start, stop) of one, numbered from 0 at ``start``, so every figure (phase energies, OCP
windows, peaks, commands) is computed on the window alone by the same code that does whole captures.
A window bound is seconds from the capture's start, or the name of a phase, command or marker on its
timeline: its start for ``--from``, its end for ``--to``.
"""
from __future__ import annotations

import math

from powerrig.core.errors import CaptureError
from powerrig.core.timeline import POWER_STATE, Event


def bound_s(cap, value: str, end: bool) -> float:
    """Seconds from the capture's start for a bound given as a number or an event's name."""
    try:
        t = float(value)
    except ValueError:
        t = None
    if t is not None:
        if not math.isfinite(t) or t < 0:
            raise CaptureError(f"{'--to' if end else '--from'} {value}: give seconds from the capture's start "
                               "(0 or more) or the name of a phase or marker")
        return t
    named = [e for e in cap.events if e.name == value]
    if not named:
        names = sorted({e.name for e in cap.events if e.kind not in (POWER_STATE,)})
        listed = ", ".join(repr(n) for n in names[:12]) + (" ..." if len(names) > 12 else "")
        raise CaptureError(f"{'--to' if end else '--from'} {value!r}: no phase, command or marker of that name in "
                           f"{cap.path.name}" + (f"; it has {listed}" if names else "; it has no events"))
    e = named[-1] if end else named[0]
    utc = (e.t_end if e.t_end is not None else e.t_start) if end else e.t_start
    return max(0.0, float(cap.sample_id(utc)) * cap.interval_s)


class CaptureWindow:
    """The intervals [start, stop) of ``cap`` as a capture (sample ids from 0). Anything not about
    samples or time (metadata, rails, the file's state) is the capture's own."""

    def __init__(self, cap, from_s: float | None, to_s: float | None):
        dur = cap.length * cap.interval_s
        a = 0 if from_s is None else int(math.floor(from_s / cap.interval_s + 1e-9))
        b = cap.length if to_s is None else min(cap.length, int(math.ceil(to_s / cap.interval_s - 1e-9)))
        if a >= cap.length:
            raise CaptureError(f"the window starts at {from_s:g} s, past the end of {cap.path.name} ({dur:.3f} s long)")
        if b <= a:
            raise CaptureError(f"the window {from_s or 0:g} .. {to_s:g} s is empty: --to must come after --from")
        self._cap, self.start, self.stop = cap, a, b
        self.length = b - a
        self.metadata = dict(cap.metadata, window={"from_s": a * cap.interval_s, "to_s": b * cap.interval_s,
                                                   "capture_s": dur})
        self.gaps = [dict(g, sample_id=max(g["sample_id"], a) - a,
                          intervals=min(g["sample_id"] + g["intervals"], b) - max(g["sample_id"], a))
                     for g in cap.gaps if g["sample_id"] < b and g["sample_id"] + g["intervals"] > a]
        self.events = [e for e in cap.events if self._touches(e)]

    def _touches(self, e: Event) -> bool:
        """Power-state changes are kept wherever they are (the state at the window's start comes from the
        last one before it); other events only when they overlap the window."""
        if e.kind == POWER_STATE:
            return True
        try:
            s0 = float(self._cap.sample_id(e.t_start))
            s1 = float(self._cap.sample_id(e.t_end if e.t_end is not None else e.t_start))
        except (CaptureError, ValueError):
            return False
        return s1 >= self.start and s0 <= self.stop

    def __getattr__(self, name):
        return getattr(self._cap, name)

    @property
    def duration_s(self) -> float:
        return self.length * self._cap.interval_s

    def sample_id(self, utc):
        return self._cap.sample_id(utc) - self.start

    def clipped(self, start: int | None = None, stop: int | None = None) -> dict[str, dict]:
        """The capture's clipped intervals in the window's [start, stop) (window sample ids)."""
        a = self.start + (0 if start is None else max(0, int(start)))
        b = self.start + (self.length if stop is None else min(self.length, int(stop)))
        return self._cap.clipped(a, max(a, b))

    def utc(self, sample_id):
        return self._cap.utc(sample_id + self.start)

    def _span(self, start, stop) -> tuple[int, int]:
        start = 0 if start is None else start
        stop = self.length if stop is None else stop
        return self.start + max(0, start), self.start + min(self.length, stop)

    def samples(self, name: str, start=None, stop=None):
        return self._cap.samples(name, *self._span(start, stop))

    def chunks(self, names, start=None, stop=None, *args, **kw):
        for s, data in self._cap.chunks(names, *self._span(start, stop), *args, **kw):
            yield s - self.start, data

    def summaries(self, name: str, start=None, stop=None, n: int = 1000):
        out = dict(self._cap.summaries(name, *self._span(start, stop), n))
        out["sample_id"] = out["sample_id"] - self.start
        return out

    def range_stats(self, name: str, start=None, stop=None):
        return self._cap.range_stats(name, *self._span(start, stop))

    def events_in(self, start=None, stop=None, kind=None):
        return self._cap.events_in(*self._span(start, stop), kind=kind)
