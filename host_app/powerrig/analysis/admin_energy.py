"""A command's energy above the level before (issue 37: a controller reset, a format, a sanitize, a
flush, a firmware commit), from its real start: the submission the drive host's kernel traced.

Baseline: the mean over PRE_S before the interval holding the submission, never before ``pre_from``
(the last event that changed the load), and none (NaN, with why) when that leaves less than MIN_PRE_S:
the same rule as every command's energy (analysis.level_before). The energy is the sum of (P - baseline) x dt
from the interval holding the submission, whole (the rails were at the baseline before the
submission, so all of that interval's excess is the command's), until the rails have settled back:
the 1 ms mean stays within the band (BAND_MIN_W and four standard deviations of the level before)
for HOLD_S, looked for only after the command's completion (a sanitize's completion comes at its
start: its work runs on). The window is cut short at ``end_at`` (the next load-changing event: the
interval holding it counted for its part before the event), at the end of the samples, or after
MAX_S; ``cut_short`` says which. A gap (NaN) is read as the level of the interval before it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from powerrig.analysis.level_before import level_window, too_short
from powerrig.analysis.transitions import fill_gaps

PRE_S = 0.05        # the level before: this long (level_before.MIN_PRE_S: a load change inside it leaves none)
HOLD_S = 0.02
BAND_MIN_W = 0.05
SMOOTH_S = 0.001
MAX_S = 60.0


@dataclass
class CommandEnergy:
    start_s: float          # the submission, seconds from the first sample of ``p``
    baseline_w: float       # the level before
    energy_j: float         # above the baseline, start -> settled (or cut)
    duration_s: float       # start -> the rails settled back (or the cut)
    peak_w: float           # the largest excursion from the baseline (1 ms means; negative: a dip)
    cut_short: str | None   # why the window ended before the rails settled, or None
    note: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def energy_above(p: np.ndarray, start: float, interval_s: float, complete: float | None = None,
                 end_at: float | None = None, pre_from: float | None = None, pre_by: str = "") -> CommandEnergy:
    """``p``: power per interval; ``start``, ``complete``, ``end_at``, ``pre_from``: fractional sample
    positions in ``p`` (the submission, its completion, the next load-changing event, the last one,
    which ``pre_by`` names)."""
    dt = float(interval_s)
    p = fill_gaps(np.asarray(p, dtype=float))
    n = len(p)
    nan = math.nan
    a = int(math.floor(start))
    if not 0 <= a < n:
        return CommandEnergy(start * dt, nan, nan, nan, nan, None, "the submission lies outside the samples")
    lo, short = level_window(a, max(1, int(round(PRE_S / dt))), pre_from, dt)
    if short is not None:
        return CommandEnergy(start * dt, nan, nan, nan, nan, None, too_short(pre_by, short))
    if a - lo < 1:
        return CommandEnergy(start * dt, nan, nan, nan, nan, None, "no samples before the submission for a baseline")
    base = float(np.mean(p[lo:a]))
    w = max(1, int(round(SMOOTH_S / dt)))
    ps = np.convolve(p, np.ones(w) / w, mode="same") if w > 1 else p
    inner = ps[lo + w // 2:a - w // 2] if a - lo > w else ps[lo:a]
    band = max(BAND_MIN_W, 4.0 * float(np.std(inner)) if len(inner) > 1 else 0.0)
    stop, cut = n, "the samples ended before the rails settled back"
    if end_at is not None and end_at < stop:
        stop, cut = end_at, "the next load-changing event came before the rails settled back"
    if start + MAX_S / dt < stop:
        stop, cut = start + MAX_S / dt, f"the rails had not settled back after {MAX_S:g} s"
    hold = max(1, int(round(HOLD_S / dt)))
    first = max(a + 1, int(math.ceil(complete)) if complete is not None else a + 1)
    out = np.abs(ps - base) > band
    settled = None
    k_end = int(math.floor(stop))
    if first < k_end:
        # the first interval from ``first`` on that starts a run of ``hold`` within the band
        quiet = ~out[first:min(n, k_end + hold)]
        if len(quiet) >= hold:
            runs = np.convolve(quiet.astype(int), np.ones(hold, int), mode="valid") == hold
            k = np.flatnonzero(runs)
            if len(k) and first + int(k[0]) < stop:
                settled = first + int(k[0])
    if settled is not None:
        excess = float(np.sum(p[a:settled] - base)) * dt
        dur, cut = (settled - a) * dt, None
    else:
        whole = max(a, int(math.floor(stop)))
        excess = float(np.sum(p[a:whole] - base)) * dt
        if whole < n and stop > whole:          # the interval holding the cut, for its part before it
            excess += float(p[whole] - base) * dt * (stop - whole)
        dur = (stop - a) * dt
    seg = ps[a:max(a + 1, settled if settled is not None else int(math.ceil(stop)))] - base
    peak = float(seg[int(np.argmax(np.abs(seg)))]) if len(seg) else nan
    return CommandEnergy(start * dt, base, excess, dur, peak, cut)
