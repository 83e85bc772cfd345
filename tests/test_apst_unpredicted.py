"""APST moves the drive's table does not give (analysis/apst.py), on synthetic rails of known steps:
a move before ITPT, from a state the table moves nowhere, long after it was due, or to a level nearer
another state's IDLP is flagged with one line, never matched to the table's move or dropped; a short
blip, a move as predicted, and a step after another load-changing command are not."""
from __future__ import annotations

import math

import pytest

import numpy as np

from powerrig.analysis.apst import apst_moves
from powerrig.results import command_report
from powerrig.results.step_trace import plot_step  # noqa: F401  (drawn in the simulator tier's sweep test)

DT = 1e-4                                      # 100 us intervals
N = 20000                                      # 2 s
TABLE = [(3, 100), (0, 0), (3, 100), (4, 1000)] + [(0, 0)] * 28
IDLP = {0: 1.1, 1: 1.1, 2: 1.1, 3: 0.07, 4: 0.005}


def _rails(steps: list[tuple[float, float]], start_w: float = 1.1, tau_s: float = 0.0005) -> np.ndarray:
    """1.1 W from 0, then each (t s, W) a level reached with a first-order approach (tau 0.5 ms), plus
    1 mW of noise."""
    t = np.arange(N) * DT
    p = np.full(N, start_w)
    for at, w in steps:
        m = t >= at
        p[m] = w + (p[m][0] - w) * np.exp(-(t[m] - at) / tau_s)
    return p + np.random.default_rng(1).normal(0, 0.001, N)


def _moves(p, table=TABLE, ps=0, level_of=None, busy=(), **kw):
    return apst_moves(lambda a, b: p[max(0, a):min(N, b)], DT, np.array(busy, dtype=float).reshape(-1, 2), 0.0,
                      float(N), ps, table, lambda old, new: 1.41e-3, level_of, **kw)


def test_a_move_before_itpt_is_flagged_not_matched():
    """The drive leaves PS0 after 100 ms of idle; the table the host read gives 300 ms: one flagged move
    where the rails began to step, none reported as the table's (its due time never comes as PS0)."""
    p = _rails([(0.1, 0.07)])
    table = [(3, 300)] + TABLE[1:]
    [m] = _moves(p, table)
    assert not m.predicted and "before the table's ITPT of 300 ms (to PS3)" in m.flag and "left PS0 after" in m.flag
    assert m.expected_s == pytest.approx(0.1, abs=3 * DT)           # the step's onset, not the table's 0.3 s
    assert m.tr.from_ps == 0 and m.tr.to_ps is None                 # no IDLP stated: the state is not named
    assert "\n" not in m.flag
    # the same rails with the table the drive used: the move is the table's, timed from its due time
    ok = _moves(p)
    assert all(m.predicted for m in ok) and [(m.tr.from_ps, m.tr.to_ps) for m in ok] == [(0, 3), (3, 4)]
    assert ok[0].expected_s == pytest.approx(0.1, abs=DT) and ok[0].tr.latency_s < 3 * DT
    assert math.isnan(ok[1].tr.latency_s)          # PS3 -> PS4 (65 mW) is under the band: no step to time


def test_a_move_whose_latency_the_drive_does_not_report_is_timed_not_judged():
    """EXLAT(0) is 0, not reported (libnvme struct nvme_id_psd): the table's PS0 -> PS3 is timed as ever,
    n/a with the why from ``no_limit_of`` (sweep/engine.py: analysis/descriptors.transition_limit_s),
    where a 0 read as 0 us would hold it to ENLAT(3) alone and fail it."""
    p = _rails([(0.1, 0.07)])
    why = "no limit: the drive does not report EXLAT of PS0 (a latency of 0 is not reported: ...)"
    lim = {(0, 3): None, (3, 4): 0.01}
    rails = lambda a, b: p[max(0, a):min(N, b)]  # noqa: E731
    got = apst_moves(rails, DT, np.zeros((0, 2)), 0.0, float(N), 0, TABLE, lambda o, n: lim[(o, n)],
                     no_limit_of=lambda o, n: why if lim[(o, n)] is None else "")
    zero = apst_moves(rails, DT, np.zeros((0, 2)), 0.0, float(N), 0, TABLE,
                      lambda o, n: 0.21e-3 if (o, n) == (0, 3) else 0.01)
    m, z = got[0], zero[0]
    assert (m.tr.from_ps, m.tr.to_ps) == (0, 3) and m.predicted
    assert m.tr.settle_s == z.tr.settle_s > 0.21e-3 and z.tr.verdict == "fail"     # measured the same
    assert m.tr.verdict == "n/a" and math.isnan(m.tr.limit_s) and m.tr.note.startswith(why)
    assert got[1].tr.note is None or why not in got[1].tr.note                    # PS3 -> PS4 has its limit


def test_a_step_where_the_table_gives_no_move_is_flagged():
    p = _rails([(0.4, 0.07)])
    [m] = _moves(p, ps=1)                                           # PS1's entry is (0, 0): never moves
    assert not m.predicted and "the APST table gives PS1 no move" in m.flag
    assert m.expected_s == pytest.approx(0.4, abs=3 * DT) and math.isnan(m.itpt_s)


def test_a_move_long_after_it_was_due_is_flagged_beside_the_table_s_missing_one():
    """Due at 0.1 s, the rails step at 0.9 s: the table's move shows no step within EXLAT + ENLAT + LATE_S
    of its due time, and the step at 0.9 s is flagged as later than the table gives, not taken for it."""
    p = _rails([(0.9, 0.07)])
    ms = _moves(p)
    assert [m.predicted for m in ms] == [True, False], [(m.expected_s, m.flag) for m in ms]
    assert math.isnan(ms[0].tr.latency_s) and "did not change" in (ms[0].tr.note or "")
    assert ms[1].expected_s == pytest.approx(0.9, abs=3 * DT)
    assert "800.0 ms after the table's PS0 -> PS3 was due at 0.100 s, which showed no step" in ms[1].flag
    # a move 30 ms late (within LATE_S) is still the table's, judged late against EXLAT + ENLAT
    [late, _] = _moves(_rails([(0.13, 0.07)]))
    assert late.predicted and late.tr.latency_s == pytest.approx(0.03, abs=3 * DT) and late.tr.verdict == "fail"


def test_a_move_to_a_state_the_table_does_not_give_is_flagged_by_idlp():
    """At ITPT the rails fall to PS4's 5 mW, not PS3's 70 mW: with IDLP stated the move is flagged and the
    state named; without IDLP the rails cannot say which state it is (not flagged)."""
    p = _rails([(0.1, 0.005)])
    [m] = _moves(p, level_of=IDLP.get)
    assert not m.predicted and m.tr.to_ps == 4 and "nearest PS4's IDLP" in m.flag and "not the table's PS3" in m.flag
    assert m.expected_s == pytest.approx(0.1, abs=DT)
    plain = _moves(p)
    assert all(m.predicted for m in plain) and plain[0].tr.to_ps == 3
    # to PS3 as the table says, then PS3 -> PS4 1 s later as the table says: nothing flagged
    # (PS3 -> PS4 is a 65 mW step, under the 0.1 W band: not timed, as transitions.py says, and not flagged)
    assert [m.predicted for m in _moves(_rails([(0.1, 0.07), (1.1, 0.005)]), level_of=IDLP.get)] == [True, True]


def test_a_short_blip_and_a_step_after_another_command_are_not_apst_moves():
    """An admin command's 2 ms blip in idle is no step; a step after ``quiet_until`` (a format's start)
    is the command's, not looked at; I/O before the move restarts the idle count."""
    p = _rails([(0.25, 2.0), (0.252, 1.1)])                         # a 2 ms blip in idle
    p[int(0.7 / DT):] = 3.0                                          # a format from 0.7 s
    [m] = _moves(p, busy=[(0.0, 0.2 / DT)], quiet_until=0.7 / DT)     # I/O until 0.2 s: due at 0.3 s
    assert m.predicted and m.expected_s == pytest.approx(0.3, abs=DT)
    assert math.isnan(m.tr.latency_s)                               # PS0 -> PS3 never seen (the rails stayed)
    flagged = _moves(p, busy=[(0.0, 0.2 / DT)])                     # without it: the format's step is flagged,
    assert [x.predicted for x in flagged] == [True, False]          # not taken for the table's move 0.4 s late
    assert flagged[1].expected_s == pytest.approx(0.7, abs=5 * DT) and "later than the table gives" in flagged[1].flag


def test_a_step_inside_a_gap_of_the_capture_says_it_may_have_begun_earlier():
    """A move the table does not give, inside 50 ms the capture lost (NaN): seen at the gap's end (a gap
    holds the last level), and its why says how many intervals were lost before it."""
    p = _rails([(0.62, 0.07)])
    p[6000:6500] = np.nan                                           # 0.60 to 0.65 s
    [m] = _moves(p, ps=1)
    assert m.expected_s == pytest.approx(0.65, abs=5 * DT)
    assert "gives PS1 no move" in m.flag and "500 intervals lost in the capture before it" in m.flag


def _row(name, step, value, outcome, **notes):
    import json
    return {"name": name, "step": step, "phase": "apst", "value": value, "units": "s", "outcome": outcome,
            "upper": 1.41e-3 if name == "apst.rails_settle_s" else None, "lower": None, "marginal_upper": None,
            "notes": json.dumps(notes)}


def test_the_report_table_and_the_trace_marks_show_a_flagged_move_in_time_order():
    why = "left PS0 after 100.2 ms idle (1.100 -> 0.070 W), before the table's ITPT of 300 ms (to PS3)"
    ms = [_row("apst.entry_latency_s", "s1", 0.0007, "info", from_ps=0, to_ps=3, expected_s=2.0),
          _row("apst.rails_settle_s", "s1", 0.0012, "pass", from_ps=0, to_ps=3, expected_s=2.0, itpt_ms=100),
          _row("apst.unpredicted_s", "s1", 0.1002, "marginal", from_ps=0, to_ps=None, expected_s=1.2,
               idle_from_s=1.1, why=why, predicted=False)]
    html = command_report.tables(ms)
    rows = html.split("<tr")[2:]
    assert "unpredicted" in rows[0] and "not as the table predicts" in rows[0] and "ITPT of 300 ms" in rows[0]
    assert "<td>PS0</td><td>PS?</td>" in rows[0] and "<td>PS0</td><td>PS3</td>" in rows[1]
    assert "unpredicted" not in rows[1] and "<b>pass</b>" in rows[1]
    marks = command_report.apst_marks(ms, "s1")
    assert marks == [(1.2, "APST PS0->PS? not in table", False), (pytest.approx(2.0007), "APST PS0->PS3", True)]
