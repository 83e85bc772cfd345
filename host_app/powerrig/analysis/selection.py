"""Figures of any time range of a capture: the markers and selections of the desktop app, or a script.

The range goes through the very pass ``analyse()`` runs for every phase (one streaming pass over the
signals, partial edge intervals weighted), so a selection and a phase over the same samples agree
exactly: there is no second implementation of mean, energy, min/max, 1 s / 10 s maxima or peaks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from powerrig.analysis.phases import CAPTURE, Phase
from powerrig.analysis.result import PhaseResult
from powerrig.core.errors import PowerrigError
from powerrig.analysis.pipeline import _phase_pass

CHUNK = 1 << 20


class SelectionError(PowerrigError):
    """The range holds no data of the source."""


def range_stats(source, t_a: float, t_b: float, rails: list[str] | None = None, name: str = "selection",
                chunk: int = CHUNK) -> PhaseResult:
    """Statistics of [t_a, t_b] s from the source's first sample (either order), clipped to the data,
    over any AnalysisSource (a capture, an array, the live view's full-rate rows)."""

    a, b = sorted((float(t_a), float(t_b)))
    dt = source.interval_s
    sa, sb = max(0.0, a / dt), min(float(source.length), b / dt)
    if sb <= sa:
        raise SelectionError(f"the range {a:g} .. {b:g} s holds no data (the source has "
                             f"{source.length * dt:g} s); choose a range over the signal")
    return _phase_pass(source, [Phase(name, CAPTURE, sa, sb)], list(rails or source.rails), dt, chunk)[0]


@dataclass
class RangeFigures:
    """What two markers read: the analysis' own figures over [t_a, t_b], per rail and "total"."""
    t_a: float
    t_b: float
    dt_s: float
    mean_w: dict = field(default_factory=dict)      # rail / "total" -> W
    energy_j: dict = field(default_factory=dict)
    min_w: dict = field(default_factory=dict)
    max_w: dict = field(default_factory=dict)
    lost_s: float = 0.0


def range_figures(source, t_a: float, t_b: float) -> RangeFigures:
    """Figures between two times by :func:`range_stats`, over any AnalysisSource: a capture, or the
    live view's full-rate rows. A source that holds only its recent rows at full rate (``held()``:
    first and end row) refuses a range older than that, saying where the data is."""
    a, b = sorted((t_a, t_b))
    dt = source.interval_s
    held = getattr(source, "held", None)
    if held is not None:
        first, end = held()
        if max(0.0, a / dt) < first:
            raise SelectionError(f"marker A at {a:.3f} s is older than the {(end - first) * dt:.0f} s the live view "
                                 "holds at full rate; stop the recording and open its capture to measure there")
    try:
        res = range_stats(source, a, b, name="markers")
    except SelectionError:
        raise SelectionError("the markers enclose no data; drag them apart over the plotted signal") from None
    out = RangeFigures(a, b, b - a, lost_s=res.lost_s)
    for k, s in res.rails.items():
        out.mean_w[k], out.energy_j[k] = s["mean_w"], s["energy_j"]
        out.min_w[k], out.max_w[k] = s["min_w"], s["max_w"]
    return out
