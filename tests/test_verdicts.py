"""The one verdict model (analysis/checks.judge) over the cases issue 40 names: a value over its limit, the
marginal band (PS2's 9.995 W against its 10 W maximum), short phases, the same value in two steps;
the store keeps the verdict the check decided (never decided again), each check runs once per
requirement and phase, and the run's summary lists what to read first with its why."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from powerrig.analysis.checks import IDLE_WINDOW_S, PWR6_LIMIT_W, idlp, judge, pcm1, pcm2, pcm3, pwr6, run_checks
from powerrig.analysis.descriptors import PowerState
from powerrig.analysis.phases import Phase
from powerrig.analysis.result import PhaseResult, WindowFigure
from powerrig.core.names import Verdict
from powerrig.analysis import verdicts
from powerrig.sweep import measure
from powerrig.sweep.display import verdict_lines

STATES = {0: PowerState(0, 25.0, False, 0, 0, 5.5, 21.5, 2), 2: PowerState(2, 10.0, False, 0, 0, 5.5, 9.9, 2)}


def _phase(name, kind, start_s, dur_s, value, ps=0, lost_s=0.0, rails=True, invalid=None, parent=None):
    """A phase result with ``value`` as every figure; per-rail means on 12V and 3V3 (so the source's
    stated accuracy gives an uncertainty) unless ``rails`` is False."""
    dt = 1e-3
    ph = Phase(name, kind, start_s / dt, (start_s + dur_s) / dt, ps, {"rw": "write"}, parent=parent)
    w = WindowFigure(value, start_s, start_s + 1, 10, 0)
    tot = {"mean_w": value, "energy_j": value * dur_s, "intervals": int(dur_s / dt)}
    r = {"total": tot}
    if rails:
        r |= {"12V": {"mean_w": value * 0.9}, "3V3": {"mean_w": value * 0.1}}
    return PhaseResult(ph, start_s, start_s + dur_s, dur_s, r, lost_s, w, w, w, True, value, invalid)


CASES = [
    # (why, value, upper, lower, uncertainty, enough, expected)
    ("clearly over the limit", 5.498, 5.25, None, 0.04, True, Verdict.FAIL),
    ("clearly over the limit on short data: still a fail", 5.498, 5.25, None, 0.04, False, Verdict.FAIL),
    ("PS2 9.995 W against 10 W: marginal, not partial", 9.995, 10.0, None, 0.03, False, Verdict.MARGINAL),
    ("inside the 5 % band on enough data", 9.6, 10.0, None, 0.03, True, Verdict.MARGINAL),
    ("over the limit but inside the uncertainty", 10.02, 10.0, None, 0.05, True, Verdict.MARGINAL),
    ("room under the limit on enough data", 9.0, 10.0, None, 0.03, True, Verdict.PASS),
    ("room under the limit on a short phase: partial", 9.0, 10.0, None, 0.03, False, Verdict.PARTIAL),
    ("an error under its lower bound", -12.0, 10.0, -10.0, 0.0, True, Verdict.FAIL),
    ("an error near its lower bound", -9.8, 10.0, -10.0, 0.0, True, Verdict.MARGINAL),
    ("an error inside both bounds", 2.0, 10.0, -10.0, 0.0, True, Verdict.PASS),
    ("no limit: a measurement", 7.0, None, None, 0.0, True, Verdict.INFO),
    ("no value", math.nan, 10.0, None, 0.0, True, Verdict.NA),
]


@pytest.mark.parametrize("why, value, upper, lower, u, enough, want", CASES, ids=[c[0] for c in CASES])
def test_judge_table(why, value, upper, lower, u, enough, want):
    j = judge(value, upper, lower, uncertainty=u, enough=enough, short="phase is 30 s; OCP asks for >= 15 min")
    assert j.verdict == want, (why, j)
    if want not in (Verdict.PASS,):
        assert j.why, f"{want} says why"
    if want == Verdict.FAIL and not enough:
        assert "short data" in j.why
    if want == Verdict.MARGINAL and upper is not None and lower is None:
        assert j.marginal_from == pytest.approx(upper - max(0.05 * upper, u))


def test_invalid_data_is_never_judged():
    assert judge(99.0, 10.0, invalid="thermal throttling").verdict == Verdict.INVALID


def test_the_same_idle_in_two_steps_gets_one_verdict():
    """5.498 W idle against PWR-6 (5.25 W) and IDLP (5.5 W): a full 30 s window, one placed a few ms
    short by host timing, and a 12 s window all say the same; IDLP is marginal, never partial."""
    windows = [_phase("idle (idle window)", "idle_window", 10, d, 5.498, parent="idle") for d in
               (IDLE_WINDOW_S, IDLE_WINDOW_S - 0.004, 12.0)]
    assert {str(pwr6(w).status) for w in windows} == {"fail"}
    assert {str(idlp(w, STATES).status) for w in windows} == {"marginal"}
    assert {pwr6(w).limit for w in windows} == {PWR6_LIMIT_W}
    # and a passing idle says partial on the short window only (a pass needs the whole window)
    assert [str(pwr6(_phase("i", "idle_window", 10, d, 4.0, parent="i")).status) for d in (30.0, 29.996, 12.0)] == \
        ["pass", "pass", "partial"]


def test_ps2_at_its_maximum_is_marginal_on_a_short_phase_and_the_store_keeps_it():
    c = pcm1(_phase("measure:w", "workload", 40, 30, 9.995, ps=2), STATES, 1e-3)
    assert c.status == Verdict.MARGINAL and "9.995 W is within the 10 W limit" in c.why and "15 min" in c.why
    assert c.uncertainty and 0 < c.uncertainty < 0.1                  # the interposer's stated accuracy
    row = measure._check(c)
    assert row["outcome"] == "marginal" and row["upper"] == 10.0 and row["marginal_upper"] == pytest.approx(9.5)
    assert json.loads(row["notes"])[0] == c.why                       # the why comes first, for every face


def test_each_check_once_per_requirement_and_phase():
    """fio's job phase and the sweep's measured phase over the same run, the dwell around both and the
    drive's self-report window (kind window): PCM-1/2/3 and ACTP once, on the measured phase."""
    res = [_phase("capture", "capture", 0, 80, 12.0),
           _phase("idle", "idle", 2, 40, 5.5),
           _phase("fio:w", "workload", 44.0, 30.0, 21.3),
           _phase("measure:w", "workload", 44.0, 30.0, 21.3),
           _phase("PS0 dwell 1", "dwell", 0.5, 79.0, 11.8),
           _phase("self-report:measure:w", "window", 43.7, 31.0, 20.8),
           _phase("idle (idle window)", "idle_window", 12, 30, 5.5, parent="idle")]
    got = [(c.check, c.phase) for c in run_checks(res, STATES, 1e-3)]
    assert sorted(got) == sorted([("OCP PCM-1", "measure:w"), ("OCP PCM-2", "measure:w"), ("OCP PCM-3", "measure:w"),
                                  ("NVMe ACTP", "measure:w"), ("OCP PWR-6", "idle"), ("NVMe IDLP", "idle")])
    # an idle-only step: the dwell is the state's span and is checked once
    idle_only = [res[0], res[1], res[4], res[6]]
    assert [c.phase for c in run_checks(idle_only, STATES, 1e-3) if c.check == "OCP PCM-1"] == ["PS0 dwell 1"]
    # two streams of one workload inside the sweep's phase: the sweep's phase only
    streams = [_phase("measure:w", "workload", 44.0, 30.0, 21.3), _phase("fio:w.0", "workload", 44.0, 29.9, 21.3),
               _phase("fio:w.1", "workload", 44.05, 29.9, 21.3)]
    assert {c.phase for c in run_checks(streams, STATES, 1e-3)} == {"measure:w"}


def _m(step, name, outcome, value=1.0, upper=2.0, notes=None):
    return {"step": step, "name": name, "phase": "p", "value": value, "units": "W", "outcome": outcome,
            "upper": upper, "lower": None, "notes": json.dumps(notes) if notes else None}


def test_summary_counts_worst_first_and_says_why():
    ms = [_m("a", "OCP PCM-1", "pass"), _m("a", "OCP PWR-6", "fail", 5.498, 5.25, ["5.498 W over the 5.25 W limit"]),
          _m("b", "NVMe IDLP", "marginal", 5.498, 5.5, ["within"]), _m("b", "OCP PCM-2", "partial", upper=None,
                                                                       notes=["phase is 30 s"]),
          _m("b", "power.mean", "info", upper=None)]
    s = verdicts.summary(ms)
    assert s["counts"] == {"fail": 1, "marginal": 1, "partial": 1, "pass": 1} and s["worst"] == "fail"
    assert [r["outcome"] for r in s["look"]] == ["fail", "marginal", "partial"]
    assert s["look"][0]["why"] == "5.498 W over the 5.25 W limit"
    text = verdicts.lines(s)
    assert text[0] == "verdicts: 1 fail, 1 marginal, 1 partial, 1 pass (of 4 verdicts)"
    assert "fail     a OCP PWR-6 (p) 5.498 W: 5.498 W over the 5.25 W limit" in text[1]
    assert verdicts.by_step(ms)["b"]["worst"] == "marginal"


def test_the_end_of_a_sweep_says_once_what_partial_and_marginal_mean():
    """A first run is mostly "partial" (the demo's 8 s windows, OCP's 15 min): under the counts, one line
    each for the words it uses, none for the ones it does not."""
    partial = verdicts.summary([_m("a", "OCP PCM-1", "partial", notes=["phase is 8 s"]), _m("a", "OCP PWR-6", "pass")])
    text = verdict_lines({"verdicts": partial})
    assert text[0].startswith("verdicts: ") and text[1].startswith("  (partial: inside the limit, but on less data")
    assert not any("(marginal:" in t for t in text) and "partial  a OCP PCM-1" in text[2]
    assert verdict_lines({"verdicts": verdicts.summary([_m("a", "OCP PCM-1", "pass")])}) == \
        ["verdicts: 1 pass (of 1 verdicts)"]
    assert verdict_lines({}) == []


def test_a_run_is_one_round_and_one_efficiency_row():
    """fio's job phase and the sweep's phase over the same run are one steady-state round (and one
    efficiency row, checked_phases); the sweep's phase over its last rounds is no round of its own."""
    from powerrig.analysis.pipeline import _rounds

    rounds = [_phase("fio:w", "workload", 11.0 * k, 10.0, 20.0) for k in range(3)]
    over = _phase("measure:w", "workload", 11.0, 21.0, 20.0)
    assert _rounds(rounds + [over], 1e-3) == rounds
    one = [_phase("fio:w", "workload", 44.0, 30.0, 21.3), _phase("measure:w", "workload", 44.0, 30.0, 21.3)]
    assert len(_rounds(one, 1e-3)) == 1


def test_span_selection_matches_the_pairwise_rules_on_random_nested_phases():
    """checked_phases and the rounds compare each phase with all others at once (numpy, issue 42: the
    pairwise loops were a fifth of a 10-hour analysis); the same phases come out as the rules say
    pair by pair, on random nested, repeated and near-slack spans (the rules written out here)."""
    import random

    from powerrig.analysis.checks import checked_phases
    from powerrig.analysis.pipeline import _rounds

    slack = 0.05

    def inside(a, b):
        return a.start_s >= b.start_s - slack and a.stop_s <= b.stop_s + slack

    def same(a, b):
        return abs(a.start_s - b.start_s) <= slack and abs(a.stop_s - b.stop_s) <= slack

    def checked_ref(rs):
        work = [r for r in rs if r.kind == "workload"]
        keep = []
        for r in work:
            outer = [q for q in work if q is not r and inside(r, q)]
            if any(not inside(q, r) for q in outer) or (outer and r.name.startswith("fio:")):
                continue
            keep.append(r)
        return keep + [r for r in rs if r.kind == "dwell" and not any(inside(q, r) for q in work)]

    def rounds_ref(rs):
        work, out = [r for r in rs if r.kind == "workload"], []
        for r in work:
            if any(same(r, q) for q in out) or any(
                    q is not r and not same(q, r) and q.start_s >= r.start_s - slack and q.stop_s <= r.stop_s + slack
                    for q in work):
                continue
            out.append(r)
        return out

    rng = random.Random(42)
    for _trial in range(200):
        rs = []
        for k in range(rng.randint(0, 25)):
            t0 = rng.choice([0.0, 10.0, 10.04, 10.06, 20.0]) + rng.randint(0, 3) * 11.0
            d = rng.choice([5.0, 10.0, 10.04, 21.0, 40.0])
            name = rng.choice(["fio:w", "measure:w", f"w{k}"])
            rs.append(_phase(name, rng.choice(["workload", "workload", "dwell", "idle"]), t0, d, 20.0))
        if rs and rng.random() < 0.3:
            rs.append(rs[0])                  # one phase listed twice
        assert checked_phases(rs, 1e-3) == checked_ref(rs)
        assert _rounds(rs, 1e-3) == rounds_ref(rs)


def test_pcm2_on_the_rails_peaks_sum_is_partial_and_says_why():
    """A board streams each rail's own 100 us peak: their sum bounds the total's peak from above, so PCM-2
    (a measurement) over 15 whole minutes is partial and its why says so, with no empty reason; PCM-3
    still passes on that upper bound when it is under the limit."""
    r = replace(_phase("measure:r", "workload", 10.0, 900.0, 10.5), peak_exact=False)
    c = pcm2(r)
    assert c.status == Verdict.PARTIAL and "bounded by the sum of the rails' own peaks" in c.why, c.why
    assert not c.why.rstrip().endswith(";"), c.why
    assert pcm2(replace(r, peak_exact=True)).status == Verdict.INFO
    assert pcm3(r, STATES).status == Verdict.PASS


@pytest.mark.parametrize("value,upper,u,says", [
    (9.995328, 10.0, 0.05235, "9.995 W is within the 10 W limit by 0.005 W (marginal from 9.5 W) "
                              "(measurement uncertainty +-0.052 W)"),
    (10.02, 10.0, 0.05, "10.02 W is over the 10 W limit by 0.02 W (marginal from 9.5 W) "
                        "(measurement uncertainty +-0.05 W)"),
    (4.9012, 5.0, 0.0, "4.901 W is within the 5 W limit by 0.099 W (marginal from 4.75 W)"),
    (9.99996, 10.0, 0.0, "10 W is within the 10 W limit by 4e-05 W (marginal from 9.5 W)"),
])
def test_a_margin_reads_to_the_decimals_of_its_value(value, upper, u, says):
    """A technician reads "9.995 W ... by 0.005 W ... +-0.052 W", not "by 0.004672 W ... +-0.05235 W":
    the margin and the uncertainty are shown to the value's own decimals (2 significant figures where
    those would show 0)."""
    j = judge(value, upper, uncertainty=u)
    assert str(j.verdict) == "marginal" and j.why == says, j.why
