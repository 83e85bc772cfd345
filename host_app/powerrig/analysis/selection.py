"""Figures of any time range of a capture: the markers and selections of the desktop app, or a script.

The range goes through the very pass ``analyse()`` runs for every phase (one streaming pass over the
signals, partial edge intervals weighted), so a selection and a phase over the same samples agree
exactly: there is no second implementation of mean, energy, min/max, 1 s / 10 s maxima or peaks.
"""
from __future__ import annotations

from powerrig.analysis.phases import CAPTURE, Phase
from powerrig.analysis.result import PhaseResult
from powerrig.core.errors import PowerrigError

CHUNK = 1 << 20


class SelectionError(PowerrigError):
    """The range holds no data of the source."""


def range_stats(source, t_a: float, t_b: float, rails: list[str] | None = None, name: str = "selection",
                chunk: int = CHUNK) -> PhaseResult:
    """Statistics of [t_a, t_b] s from the source's first sample (either order), clipped to the data,
    over any AnalysisSource (a capture, an array, the live view's full-rate rows)."""
    from powerrig.analysis.pipeline import _phase_pass

    a, b = sorted((float(t_a), float(t_b)))
    dt = source.interval_s
    sa, sb = max(0.0, a / dt), min(float(source.length), b / dt)
    if sb <= sa:
        raise SelectionError(f"the range {a:g} .. {b:g} s holds no data (the source has "
                             f"{source.length * dt:g} s); choose a range over the signal")
    return _phase_pass(source, [Phase(name, CAPTURE, sa, sb)], list(rails or source.rails), dt, chunk)[0]
