"""Inrush, hold-up and edge timing from the raw 4 us burst around a power action (pure numpy).

Why from the raw burst: a 12 V cut and the drive's PLP hold-up last a few milliseconds and an inrush a
few hundred microseconds; the 1 ms interval stream averages them away. Each figure is measured from
the samples alone (where the current really fell or rose), so comparing it with the sample the
firmware reports, or with the simulator's truth, checks the whole chain.
"""
from __future__ import annotations

import numpy as np


def find_fall(amps: np.ndarray, before: int = 50, min_level_a: float = 0.05, hold: int = 8) -> int:
    """First sample whose current is below half the drive's level in the samples before it (the median
    of up to ``before`` of them, at least one) and stays below it for ``hold`` samples (or to the
    burst's end): a cut, found on its sample wherever it is in the burst from sample 1 on (sample 0 has
    no sample before it; :func:`cut_holdup` says so). -1 when there is none, or when the rail carried
    less than ``min_level_a`` before (a rail the drive does not draw from: its noise around zero is no
    cut, and no hold-up can be read from it)."""
    a = np.asarray(amps, dtype=float)
    n = len(a)
    if n < 2:
        return -1
    runmax = np.maximum.accumulate(a)[:-1]
    cand = np.flatnonzero((a[1:] < 0.5 * runmax) & (runmax >= min_level_a)) + 1
    if not len(cand):
        return -1
    level = np.empty(len(cand))
    early = cand < before                        # fewer than ``before`` samples before it
    for j in np.flatnonzero(early):
        level[j] = np.median(a[:cand[j]])
    if (~early).any():
        win = np.lib.stride_tricks.sliding_window_view(a, before)
        level[~early] = np.median(win[cand[~early] - before], axis=1)
    tail = np.r_[a, np.full(hold - 1, -np.inf)] if hold > 1 else a
    after = np.lib.stride_tricks.sliding_window_view(tail, hold).max(axis=1)[cand]
    ok = np.flatnonzero((level >= min_level_a) & (after < 0.5 * level))
    return int(cand[ok[0]]) if len(ok) else -1


def cut_holdup(volts: np.ndarray, amps: np.ndarray, threshold_v: float, period_s: float,
               reported: int | None = None, min_level_a: float = 0.05) -> dict:
    """The cut and the hold-up after it in one burst, each with the reason when it cannot be had.

    ``reported``: the cut's sample as the interposer reported its edge, in burst samples (negative
    before the burst's first sample, None when not known). The cut is found in the samples wherever
    they can show it (sample 1 on: :func:`find_fall`); ``cut`` is then that sample, else None with
    ``cut_reason``. The hold-up counts from the found cut, or from the reported one when the samples
    cannot place it but agree with it (the current off there); it is measured whenever the drive
    side's fall through ``threshold_v`` is inside the burst, else None with ``holdup_reason``."""
    a = np.asarray(amps, dtype=float)
    v = np.asarray(volts, dtype=float)
    n = len(a)
    us = period_s * 1e6
    found = find_fall(a, min_level_a=min_level_a)
    out = {"cut": found if found >= 0 else None, "cut_reason": None, "holdup_s": None, "holdup_reason": None,
           "holdup_from": None}
    ref = found if found >= 0 else None
    if found >= 0 and reported is not None and found != reported:
        out["cut_reason"] = (f"the samples show the fall {found - reported:+d} samples from the sample the "
                             "interposer reported; the samples' is kept")
    if found < 0:
        if reported is not None and reported < 0:
            out["cut_reason"] = (f"the cut is {-reported} samples ({-reported * us:.0f} us) before the burst's "
                                 "first sample: the burst does not hold it")
        elif reported is not None and reported >= n:
            out["cut_reason"] = f"the cut is {reported - n + 1} samples after the burst's last sample"
        elif reported == 0 or (n and a[0] < min_level_a and float(np.max(v[:1])) > threshold_v):
            out["cut_reason"] = ("the cut is on the burst's first sample: no sample before it shows the drive's "
                                 "current, so the samples cannot place the fall")
        elif n and float(np.max(a)) < min_level_a:
            out["cut_reason"] = f"the rail carried less than {min_level_a:g} A in the whole burst: no fall to find"
        else:
            out["cut_reason"] = "no sample falls below half the drive's current and stays there"
        if reported is not None and reported < n and a[max(reported, 0)] < min_level_a:
            ref = reported                       # the samples agree: the current is off there
    if ref is None:
        out["holdup_reason"] = "no cut to count from: " + (out["cut_reason"] or "")
        if reported is not None and 0 <= reported < n and found < 0:
            out["holdup_reason"] = ("the samples do not show the cut the interposer reported at burst sample "
                                    f"{reported} (the current is not off there)")
        return out
    start = max(ref, 0)
    below = np.flatnonzero(v[start:] < threshold_v)
    if not len(below):
        out["holdup_reason"] = (f"the drive side is still above {threshold_v:g} V at the burst's end, "
                                f"{(n - 1 - ref) * us:.0f} us after the cut: the decay runs past the burst")
        return out
    k = start + int(below[0])
    if k == 0 and ref < 0:
        out["holdup_reason"] = (f"the drive side had already fallen through {threshold_v:g} V at the burst's "
                                f"first sample, {-ref * us:.0f} us after the cut")
        return out
    if k == ref:
        out["holdup_s"] = 0.0
    else:
        frac = (v[k - 1] - threshold_v) / (v[k - 1] - v[k])
        out["holdup_s"] = (k - 1 - ref + float(frac)) * period_s
    out["holdup_from"] = "found cut" if found >= 0 else "reported edge"
    return out


def find_rise(amps: np.ndarray, off_level_a: float = 0.05, before: int = 50) -> int:
    """First sample whose current rises above ``off_level_a`` plus the off noise (a power-on); -1 if none."""
    base = amps[:before]
    thr = float(np.median(base)) + max(off_level_a, 6.0 * float(np.std(base)))
    hit = np.flatnonzero(amps[before:] > thr)
    return int(hit[0]) + before if len(hit) else -1


def holdup_s(volts: np.ndarray, cut: int, threshold_v: float, period_s: float) -> float:
    """Time from the cut sample until the drive-side volts fall through ``threshold_v``, interpolated
    between the two samples around the crossing; NaN when it never does within the burst."""
    v = volts[cut:]
    below = np.flatnonzero(v < threshold_v)
    if not len(below) or below[0] == 0:
        return float("nan") if not len(below) else 0.0
    k = int(below[0])
    frac = (v[k - 1] - threshold_v) / (v[k - 1] - v[k])
    return (k - 1 + float(frac)) * period_s


def inrush(amps: np.ndarray, on: int, period_s: float, window: int | None = None) -> dict:
    """Peak current and the charge above the settled current, from the power-on sample ``on``.

    The settled level is the median of the window's last quarter; the charge is the trapezoid sum of
    what lies above it (trapezoids from the edge, which falls at the start of sample ``on``).
    """
    seg = amps[on: on + window if window else None]
    settled = float(np.median(seg[-max(1, len(seg) // 4):]))
    excess = seg - settled
    charge = float((excess.sum() - 0.5 * (excess[0] + excess[-1])) * period_s)
    return {"peak_a": float(seg.max()), "charge_c": charge, "settled_a": settled}


def verify(acked: dict[int, int], read: dict[int, int | None]) -> dict[int, str]:
    """Every acknowledged write the drive does not return: lba -> "missing" (nothing there) or "stale"
    (an older version). What a power-loss verdict counts; an unacknowledged write is no loss."""
    out = {}
    for lba, token in acked.items():
        got = read.get(lba)
        if got != token:
            out[lba] = "missing" if got is None else "stale"
    return out
