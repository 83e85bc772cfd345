"""The [[dwell]] step kind (sweep/steps/dwell.py), added as a plugin: its keys and one-line errors, its
steps' place in the plan, the hash of plans without it unchanged, and a sweep on a virtual rig that holds
a power state and measures it as a whole and window by window."""
from __future__ import annotations

import json

import pytest

from powerrig.results.store import ResultStore
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import PlanError, parse

PLAN = """name = "dw"
power_states = [0, 2]
[rig]
port = "sim:d5-p5336"
[timing]
settle_s = 0.3
idle_s = 1.0
measure_s = 1.0
[[workload]]
name = "seqread"
rw = "read"
[[dwell]]
name = "hold"
hold_s = 3
windows = 3
power_states = [2]
"""
WITHOUT = PLAN.split("[[dwell]]")[0]


def test_dwell_steps_follow_their_states_workloads_and_only_where_asked():
    plan = parse(PLAN)
    assert [s.key for s in plan.steps()] == ["ps0/idle/r1", "ps0/seqread/r1", "ps2/idle/r1", "ps2/seqread/r1",
                                             "dwell/hold/ps2/r1"]
    step = plan.steps()[-1]
    assert step.kind == "dwell" and step.power_state == 2 and step.spec.hold_s == 3.0 and step.spec.windows == 3
    every = parse(PLAN.replace("power_states = [2]\n", ""))
    assert [s.key for s in every.steps() if s.kind == "dwell"] == ["dwell/hold/ps0/r1", "dwell/hold/ps2/r1"]
    assert every.estimate_s() == pytest.approx(parse(WITHOUT).estimate_s() + 2 * (0.3 + 1.0 + 3.0))


def test_a_plan_without_dwell_keeps_its_hash_and_one_with_it_hashes_its_values():
    without = parse(WITHOUT)
    assert "dwell" not in without.resolved() and "more" not in without.resolved()
    plan = parse(PLAN)
    assert plan.resolved()["dwell"] == [{"name": "hold", "hold_s": 3.0, "windows": 3, "power_states": [2]}]
    assert plan.hash != without.hash != parse(PLAN.replace("hold_s = 3", "hold_s = 4")).hash


@pytest.mark.parametrize("old, new, says", [
    ("hold_s = 3", "hold_s = 0.5", r"dwell\[0\].hold_s \(line 14\): 0.5 is out of range 1..604800 s"),
    ("hold_s = 3", "hold_s = nan", r"dwell\[0\].hold_s .*nan is not a finite number"),
    ("windows = 3", "windows = 1", r"dwell\[0\].windows \(line 15\): 1 is out of range 2..1000"),
    ("power_states = [2]", "power_states = [1]", r"dwell\[0\].power_states\[0\] .*PS1 is not one of the plan's "
                                                 r"power_states \(PS0, PS2\): add it there"),
    ("power_states = [2]", "power_states = [2, 2]", r"dwell\[0\].power_states\[1\] .*PS2 is listed twice"),
    ('name = "hold"', 'nme = "hold"', r"dwell\[0\].nme .*unknown key \(known here: hold_s, name, power_states, "
                                      r"windows\)"),
    ('name = "hold"\n', "", r"dwell\[0\].name .*missing: a dwell step needs a name"),
    ("windows = 3", 'windows = "3"', r"dwell\[0\].windows .*must be an integer, not a string"),
])
def test_bad_dwell_keys_are_one_line_errors(old, new, says):
    assert old in PLAN
    with pytest.raises(PlanError, match=says) as e:
        parse(PLAN.replace(old, new))
    assert "\n" not in str(e.value)


def test_dwell_names_are_unique_and_a_dwell_alone_is_a_plan():
    with pytest.raises(PlanError, match=r"dwell names must be unique \(hold repeats\)"):
        parse(PLAN + '[[dwell]]\nname = "hold"\n')
    alone = parse('name = "a"\nidle_steps = false\n[rig]\nport = "sim:d5-p5336"\n[[dwell]]\nname = "d"\n')
    assert [s.key for s in alone.steps()] == ["dwell/d/ps0/r1"]


def test_a_dwell_holds_the_state_and_measures_it_whole_and_by_window(tmp_path, simdir):
    text = PLAN.replace("[[workload]]\nname = \"seqread\"\nrw = \"read\"\n", "").replace("power_states = [0, 2]",
                                                                                        "power_states = [2]")
    store = ResultStore(tmp_path / "r.sqlite")
    run = Sweep(parse(text, "dw.toml"), store, tmp_path / "out").run()
    steps = {s["key"]: s for s in store.steps(run)}
    assert list(steps) == ["ps2/idle/r1", "dwell/hold/ps2/r1"]
    dwell = steps["dwell/hold/ps2/r1"]
    assert dwell["status"] == "done" and dwell["workload"] == "hold"
    assert json.loads(dwell["params"])["dwell"] == {"name": "hold", "hold_s": 3.0, "windows": 3, "power_states": [2]}
    got = {(m["step"], m["name"]): m for m in store.measurements(run)}
    held = got[("dwell/hold/ps2/r1", "power.mean")]
    assert held["phase"] == "dwell:hold"
    # held for hold_s after the settle and the idle window (sleeps only overrun); its phase is in the capture
    assert dwell["finished_utc"] - dwell["started_utc"] >= 0.3 + 1.0 + 3.0
    assert next(p for p in store.phases(run) if p["name"] == "dwell:hold")["duration_s"] > 1.0
    # the virtual SSD holds PS2 at one level: the held mean is its idle power, the windows agree
    assert held["value"] == pytest.approx(got[("dwell/hold/ps2/r1", "power.idle")]["value"], rel=0.05)
    drift = got[("dwell/hold/ps2/r1", "dwell.drift_pct")]
    windows = json.loads(drift["notes"])["window_w"]
    assert len(windows) == 3 and all(w == pytest.approx(held["value"], rel=0.05) for w in windows)
    assert drift["value"] == pytest.approx(100 * (windows[-1] - windows[0]) / windows[0])
    assert abs(drift["value"]) < 5
