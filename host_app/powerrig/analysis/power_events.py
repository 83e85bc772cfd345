"""Inrush, hold-up and edge timing from the raw 4 us burst around a power action (pure numpy).

Why from the raw burst: a 12 V cut and the drive's PLP hold-up last a few milliseconds and an inrush a
few hundred microseconds; the 1 ms interval stream averages them away. Each figure is measured from
the samples alone (where the current really fell or rose), so comparing it with the sample the
firmware reports, or with the simulator's truth, checks the whole chain.
"""
from __future__ import annotations

import numpy as np


def find_fall(amps: np.ndarray, before: int = 50, min_level_a: float = 0.05) -> int:
    """First sample whose current is below half the level of the first ``before`` samples (a cut);
    -1 when there is none, or when the rail carried less than ``min_level_a`` before (a rail the drive
    does not draw from: its noise around zero is no cut, and no hold-up can be read from it)."""
    level = float(np.median(amps[:before]))
    if level < min_level_a:
        return -1
    hit = np.flatnonzero(amps[before:] < 0.5 * level)
    return int(hit[0]) + before if len(hit) else -1


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
