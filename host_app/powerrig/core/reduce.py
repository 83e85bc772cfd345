"""Instantaneous V and I samples -> the interval columns the interposer's firmware computes (mean V,
mean I, mean of V*I, min/max instantaneous power, highest 100 us window mean ending in the interval).

The host does this for sources that hand over raw samples (Joulescopes live, imported Joulescope
captures); one function, so every such source reduces exactly alike.
"""
from __future__ import annotations

import numpy as np


def reduce_intervals(v: np.ndarray, i: np.ndarray, edges: np.ndarray, window: int) -> dict[str, np.ndarray]:
    """Columns for the intervals [edges[k], edges[k+1]) of the samples ``v``, ``i`` (indices into them).

    ``window``: samples in 100 us. A peak window may reach back before edges[0] into the samples given
    (pass ``window - 1`` samples of history); where no full window exists the peak is NaN."""
    v = np.asarray(v, np.float64)
    i = np.asarray(i, np.float64)
    edges = np.asarray(edges, np.int64)
    p = v * i
    starts, cnt = edges[:-1], np.diff(edges)
    out = {"v": np.add.reduceat(v, starts) / cnt, "i": np.add.reduceat(i, starts) / cnt,
           "p": np.add.reduceat(p, starts) / cnt, "p_min": np.minimum.reduceat(p, starts),
           "p_max": np.maximum.reduceat(p, starts)}
    # window sums from running sums; a NaN sample (an instrument's invalid reading, a lost sample) makes
    # only the windows holding it NaN, never every window after it
    # (the usual block has none: the mask costs its passes over the samples only when one does)
    bad = np.isnan(p)
    has_bad = bool(bad.any())
    cs = np.concatenate([[0.0], np.cumsum(np.where(bad, 0.0, p) if has_bad else p)])
    win = (cs[window:] - cs[:-window]) / window            # win[k]: samples k .. k + window - 1
    if has_bad:
        cb = np.concatenate([[0], np.cumsum(bad)])
        win[(cb[window:] - cb[:-window]) > 0] = np.nan
    peak = np.full(len(starts), np.nan)
    for n, (a, b) in enumerate(zip(starts - window + 1, edges[1:] - window)):   # windows ending inside
        a = max(a, 0)
        if b >= a and b < len(win):
            peak[n] = win[a:b + 1].max()
    out["p_peak"] = peak
    return out
