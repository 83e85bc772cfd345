"""An APST-driven power-state change timed from the rails. No command marks the moment the drive moves
itself (NVMe base spec 2.0, 5.27.1.5 Autonomous Power State Transition, Set Features FID 0Ch), but the
host knows when it is due: ITPT (the idle time prior to transition of the current state's APST entry)
after the controller became idle, i.e. after the last traced I/O completion (admin commands are not
counted, as the virtual SSD does not count them) or after the state was entered, whichever is later.
From that expected start the rails step is timed as a Set Features' is (transitions.time_transition):
the latency to the rails leaving the old level and the time to settle at the new one, judged against
EXLAT(old) + ENLAT(new). A stretch of idle shorter than ITPT expects nothing and reports nothing; after
a move the next entry (e.g. PS3 -> PS4) counts from the measured entry into the new state.

A move the table does not give is flagged, never matched to a predicted one or dropped: a rails step in
idle (held HOLD_S, looked for from GUARD_S after the last I/O or move) before the next move is due, where
the table gives none, or later than LATE_S past a move's due time + EXLAT + ENLAT (the table's move then
shows no step); and, when id-ctrl states each state's idle power (IDLP), a move whose new level is nearer
another state's IDLP than the table's ITPS. The rails alone cannot tell an early APST move from the
drive's own idle work (a write cache flushed, a self-test): the flag says what was seen, not which.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from powerrig.analysis.transitions import BAND_MIN_W, POST_S, PRE_S, SMOOTH_S, Transition, fill_gaps, time_transition

MAX_CHAIN = 32        # moves in one idle stretch at most (one per APST entry)
GUARD_S = 0.02        # after the last I/O (or a move) the rails still fall to the idle level: not looked at
REF_S = 0.01          # the level a stretch starts at: the mean of its first 10 ms after the guard
HOLD_S = 0.005        # a level left for this long is a step (an admin command's blip is shorter)
LATE_S = 0.05         # a step this long after EXLAT + ENLAT past its due time is not the table's move


@dataclass
class ApstMove:
    idle_from_s: float        # the controller idle (or the state entered) since, capture seconds
    itpt_s: float             # the entry's idle time prior to transition (NaN: the table gives no move)
    expected_s: float         # idle_from_s + itpt_s: when the drive should leave (an unpredicted move: its onset)
    tr: Transition            # the rails step timed from expected_s (latency_s, settle_s, verdict)
    flag: str | None = None   # why the move is not the one the table gives (one line); None: as predicted

    @property
    def predicted(self) -> bool:
        return self.flag is None


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


def first_step(p: np.ndarray, lo: int, dt: float) -> tuple[int, float, float, int] | None:
    """The first level step in ``p`` (total power for sample ids [lo, lo + len(p))): where the 1 ms mean
    leaves the band (BAND_MIN_W, or 4 standard deviations) around the level of its first REF_S and stays
    out for HOLD_S; (sample id where it left, level before W, mean over the HOLD_S after W, intervals lost
    before it: a gap holds the last level, so a step inside one is seen at its end), or None."""
    ref, hold = max(2, int(round(REF_S / dt))), max(1, int(round(HOLD_S / dt)))
    if len(p) < ref + hold:
        return None
    w = max(1, int(round(SMOOTH_S / dt)))
    q = fill_gaps(p)
    ps = np.convolve(q, np.ones(w) / w, mode="same") if w > 1 else q
    ps[:w] = q[:w]                                      # the boxcar's ends, zero-padded, read as the samples
    ps[len(ps) - w:] = q[len(q) - w:]
    level = float(np.mean(q[:ref]))
    band = max(BAND_MIN_W, 4.0 * float(np.std(ps[:ref])))
    out = np.abs(ps - level) > band
    held = np.convolve(out.astype(int), np.ones(hold, dtype=int), mode="valid") == hold   # out for hold samples from k
    k = np.flatnonzero(held[ref:])
    if not len(k):
        return None
    k = int(k[0]) + ref
    return lo + k, level, float(np.mean(q[k:k + hold])), int(np.count_nonzero(np.isnan(p[:k + hold])))


def _nearest_state(level_w: float, level_of: Callable[[int], float | None], states: Sequence[int]) -> int | None:
    known = [(abs(level_w - w), s) for s in states if (w := level_of(s)) is not None]
    return min(known)[1] if known else None


def apst_moves(p_of: Callable[[int, int], np.ndarray], interval_s: float, busy: np.ndarray, start: float,
               end: float, ps: int, table: Sequence[tuple[int, int]],
               limit_of: Callable[[int, int], float | None], level_of: Callable[[int], float | None] | None = None,
               quiet_until: float | None = None, look_from: float | None = None,
               no_limit_of: Callable[[int, int], str] | None = None) -> list[ApstMove]:
    """Every APST move expected between sample ids ``start`` (the state ``ps``, operational, entered
    there) and ``end``, timed on the rails, and every rails step in idle the table does not give,
    flagged. ``p_of(lo, hi)``: total power for sample ids [lo, hi); ``busy``: traced I/O (submit, complete)
    in sample ids; ``table``: (ITPS, ITPT ms) per power state (the APST table in force); ``limit_of(old,
    new)``: EXLAT(old) + ENLAT(new) in s, or None; ``level_of(ps)``: the state's IDLP in W, or None (no
    check of the state moved to); ``quiet_until``: a sample id after which the rails may move for another
    reason (a format, a reset): unpredicted steps are looked for before it only; ``look_from``: where the
    rails have settled after the change that entered ``ps`` (default GUARD_S after ``start``);
    ``no_limit_of(old, new)``: why ``limit_of`` gives None (a latency not reported), in the move's note."""
    dt = interval_s

    def limit(old: int, new: int) -> tuple[float | None, str]:
        """The limit, and why there is none: the why rides with it to every move timed."""
        lim = limit_of(old, new)
        return lim, (no_limit_of(old, new) if lim is None and no_limit_of is not None else "")

    level_of = level_of or (lambda s: None)
    states = range(len(table))
    scan_end = end if quiet_until is None else min(end, quiet_until)
    guard = GUARD_S / dt
    out: list[ApstMove] = []
    for a, b in idle_stretches(busy, start, end):
        s, t, look, unseen = ps, a, a + guard, None
        if a == start and look_from is not None:
            look = max(look, look_from)
        for _ in range(MAX_CHAIN):
            move = next_move(table, s) if s is not None else None
            due = t + move[1] / dt if move is not None else math.inf
            early = _step(p_of, dt, look, min(due, b, scan_end))
            if early is not None:                      # the rails moved before the table's next move was due
                m = _unpredicted(p_of, dt, early, t, min(b, scan_end), s, move, limit, level_of, states, unseen)
                out.append(m)
                t, s, unseen = m.expected_s / dt, m.tr.to_ps, None
                look = t + _settled(m.tr, limit) / dt + guard
                continue
            if move is None or due >= min(b, scan_end):
                break                                  # I/O resumed (or the window ended) before ITPT: no move
            itps, itpt_s = move
            lim = limit_of(s, itps)
            late = due + ((lim if lim is not None and math.isfinite(lim) else 0.0) + LATE_S) / dt
            tr = _timed(p_of, dt, t, due, min(b, scan_end, late), s, itps, limit)
            flag = None
            seen = _nearest_state(tr.after_w, level_of, states) if math.isfinite(tr.latency_s) else None
            if seen not in (None, itps):
                flag = (f"moved at ITPT to a level of {tr.after_w:.3f} W, nearest PS{seen}'s IDLP "
                        f"({level_of(seen):.3f} W), not the table's PS{itps} ({_w(level_of(itps))})")
                tr.to_ps, itps = seen, seen
            out.append(ApstMove(t * dt, itpt_s, due * dt, tr, flag))
            # the next entry counts from entering the new state: the measured onset, else the expected start
            t = due + (tr.latency_s / dt if math.isfinite(tr.latency_s) else 0.0)
            unseen = None if math.isfinite(tr.latency_s) else (s, itps, due * dt)
            s = itps
            look = t + _settled(tr, limit) / dt + guard
    return out


def _w(v: float | None) -> str:
    return "IDLP not stated" if v is None else f"{v:.3f} W"


def _settled(tr: Transition, limit) -> float:
    """Seconds from a move's onset to where its level may be read: its measured settle, else its limit."""
    if math.isfinite(tr.settle_s):
        return max(0.0, tr.settle_s - (tr.latency_s if math.isfinite(tr.latency_s) else 0.0))
    lim = limit(tr.from_ps, tr.to_ps)[0] if tr.from_ps is not None and tr.to_ps is not None else None
    return float(lim) if lim is not None and math.isfinite(lim) else 0.0


def _timed(p_of, dt, t, at, b, s, to, limit) -> Transition:
    """The rails step from sample id ``at`` (the move's due time, or just before an unpredicted one's)."""
    lo = max(0, int(math.floor(max(t, at - PRE_S / dt))) - 2)
    hi = int(math.ceil(min(b, at + POST_S / dt))) + 2
    lim, why = limit(s, to) if s is not None and to is not None else (None, "")
    return time_transition(np.asarray(p_of(lo, hi), dtype=float), lo, at, dt,
                           math.nan if lim is None else float(lim), s, to, source="apst", pre_from=t, end_at=b,
                           no_limit=why)


def _step(p_of, dt, lo: float, hi: float) -> tuple[int, float, float, int] | None:
    lo_i, hi_i = int(math.ceil(lo)), int(math.floor(hi))
    if hi_i - lo_i < 4:
        return None
    return first_step(np.asarray(p_of(lo_i, hi_i), dtype=float), lo_i, dt)


def _unpredicted(p_of, dt, step, t, b, s, move, limit, level_of, states, unseen=None) -> ApstMove:
    """The step ``step`` (sample id, level before, after) found in idle where the table gives no move yet:
    timed from a millisecond before it left the band, its new state named by IDLP when id-ctrl states them,
    and the one line saying how it differs from the table. ``unseen``: (old, new, due s) of the table's
    move before it, which showed no step."""
    k, before, after, lost = step
    at = max(t, k - SMOOTH_S / dt)
    tr = _timed(p_of, dt, t, at, b, s, None, limit)
    level = tr.after_w if math.isfinite(tr.after_w) else after
    to = _nearest_state(level, level_of, states)
    if to is not None:
        tr = _timed(p_of, dt, t, at, b, s, to, limit)   # a state named: judged against its EXLAT + ENLAT
    onset = at + (tr.latency_s / dt if math.isfinite(tr.latency_s) else 0.0)
    idle_ms = (onset - t) * dt * 1e3
    where = "PS?" if s is None else f"PS{s}"
    lvl = f"{tr.before_w if math.isfinite(tr.before_w) else before:.3f} -> {level:.3f} W" + (
        f", nearest PS{to}'s IDLP" if to is not None else "")
    if s is None:
        why = f"a further step in idle ({lvl}) after a move the table did not give: the state is unknown"
    elif unseen is not None:
        why = (f"a step in idle ({lvl}) {(onset * dt - unseen[2]) * 1e3:.1f} ms after the table's PS{unseen[0]} -> "
               f"PS{unseen[1]} was due at {unseen[2]:.3f} s, which showed no step: later than the table gives")
    elif move is None:
        why = f"left {where} after {idle_ms:.1f} ms idle ({lvl}); the APST table gives {where} no move"
    else:
        why = (f"left {where} after {idle_ms:.1f} ms idle ({lvl}), before the table's ITPT of {move[1] * 1e3:.0f} ms"
               f" (to PS{move[0]})")
    if lost:
        why += f"; {lost} intervals lost in the capture before it: it may have begun earlier"
    tr.note = "; ".join(x for x in (why, tr.note) if x)
    return ApstMove(t * dt, math.nan if move is None else move[1], onset * dt, tr, why)
