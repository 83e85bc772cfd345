"""An APST-driven power-state change timed from the rails. No command marks the moment the drive moves
itself (NVMe base spec 2.0, 5.27.1.5 Autonomous Power State Transition), but the host knows when it is
due: ITPT (the idle time prior to transition of the current state's APST entry) after the controller
became idle, i.e. after the last traced I/O completion (admin commands are not counted, as the virtual
SSD does not count them) or after the state was entered, whichever is later.
From that expected start the rails step is timed as a Set Features' is (transitions.time_transition):
the latency to the rails leaving the old level and the time to settle at the new one, judged against
EXLAT(old) + ENLAT(new). A stretch of idle shorter than ITPT expects nothing and reports nothing; after
a move the next entry (e.g. PS3 -> PS4) counts from the measured entry into the new state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from powerrig.analysis.transitions import POST_S, PRE_S, Transition, time_transition

MAX_CHAIN = 32        # moves in one idle stretch at most (one per APST entry)


@dataclass
class ApstMove:
    idle_from_s: float        # the controller idle (or the state entered) since, capture seconds
    itpt_s: float             # the entry's idle time prior to transition
    expected_s: float         # idle_from_s + itpt_s: when the drive should leave, capture seconds
    tr: Transition            # the rails step timed from expected_s (latency_s, settle_s, verdict)


def next_move(table: Sequence[tuple[int, int]], ps: int) -> tuple[int, float] | None:
    """(ITPS, ITPT s) of the APST entry of state ``ps``, or None when the table moves it nowhere."""
    if ps >= len(table):
        return None
    itps, itpt_ms = table[ps]
    return None if itpt_ms <= 0 or itps == ps else (itps, itpt_ms * 1e-3)


def idle_stretches(busy: np.ndarray, start: float, end: float) -> list[tuple[float, float]]:
    """The gaps of ``busy`` (rows of submit, complete in sample ids) within [start, end): from the end
    of each merged busy interval (or ``start``) to the next submission (or ``end``)."""
    busy = np.asarray(busy, dtype=float).reshape(-1, 2)
    busy = busy[np.argsort(busy[:, 0], kind="stable")] if len(busy) else busy
    out, t = [], start
    for s, c in busy:
        if s > t and t < end:
            out.append((t, min(s, end)))
        t = max(t, c)
    if t < end:
        out.append((t, end))
    return [(a, b) for a, b in out if b > a]


def apst_moves(p_of: Callable[[int, int], np.ndarray], interval_s: float, busy: np.ndarray, start: float,
               end: float, ps: int, table: Sequence[tuple[int, int]],
               limit_of: Callable[[int, int], float | None]) -> list[ApstMove]:
    """Every APST move expected between sample ids ``start`` (the state ``ps``, operational, entered
    there) and ``end``, timed on the rails. ``p_of(lo, hi)``: total power for sample ids [lo, hi);
    ``busy``: traced I/O (submit, complete) in sample ids; ``table``: (ITPS, ITPT ms) per power state
    (the APST table in force); ``limit_of(old, new)``: EXLAT(old) + ENLAT(new) in s, or None."""
    dt = interval_s
    out = []
    for a, b in idle_stretches(busy, start, end):
        s, t = ps, a
        for _ in range(MAX_CHAIN):
            move = next_move(table, s)
            if move is None:
                break
            itps, itpt_s = move
            due = t + itpt_s / dt
            if due >= b:
                break                          # I/O resumed (or the window ended) before ITPT: no move
            lo = max(0, int(math.floor(max(t, due - PRE_S / dt))) - 2)
            hi = int(math.ceil(min(b, due + POST_S / dt))) + 2
            p = np.asarray(p_of(lo, hi), dtype=float)
            lim = limit_of(s, itps)
            tr = time_transition(p, lo, due, dt, math.nan if lim is None else float(lim), s, itps, source="apst",
                                 pre_from=t, end_at=b)
            out.append(ApstMove(t * dt, itpt_s, due * dt, tr))
            # the next entry counts from entering the new state: the measured onset, else the expected start
            t = due + (tr.latency_s / dt if math.isfinite(tr.latency_s) else 0.0)
            s = itps
    return out
