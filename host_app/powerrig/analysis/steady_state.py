"""Steady state per SNIA SSS PTS: in a window of 5 rounds, the data excursion (max - min) is within
20 % of the window average and the least-squares slope excursion (slope x (rounds - 1)) within 10 %."""
from __future__ import annotations

import numpy as np

WINDOW = 5
MAX_ROUNDS = 25
DATA_EXCURSION = 0.20
SLOPE_EXCURSION = 0.10


def steady_state(values, window: int = WINDOW) -> dict:
    """First window of ``window`` rounds that meets both criteria (rounds are 1-based)."""
    y = np.asarray(values, dtype=np.float64)
    base = {"rounds": len(y), "window": window, "steady": False, "first_round": None, "last_round": None}
    if len(y) < window:
        return base | {"reason": f"{len(y)} rounds; steady state needs at least {window}"}
    best = None
    for s in range(0, len(y) - window + 1):
        w = y[s:s + window]
        avg = float(w.mean())
        excursion = float(w.max() - w.min())
        slope = float(np.polyfit(np.arange(window), w, 1)[0])
        fig = {"average": avg, "data_excursion": excursion / abs(avg) if avg else np.inf,
               "slope_excursion": abs(slope) * (window - 1) / abs(avg) if avg else np.inf}
        if fig["data_excursion"] <= DATA_EXCURSION and fig["slope_excursion"] <= SLOPE_EXCURSION:
            return base | fig | {"steady": True, "first_round": s + 1, "last_round": s + window}
        best = fig
    reason = "not reached" + (f" within {MAX_ROUNDS} rounds" if len(y) >= MAX_ROUNDS else "")
    return base | best | {"reason": reason}
