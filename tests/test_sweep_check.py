"""`powerrig sweep --check` is the truth: a plan whose content would fail hours into a run (a non-finite
number, a power state listed twice, a plan of 990,000 steps or 945 hours) is refused there, with one
line naming the key and its line, and `inf` never crashes the check itself."""
from __future__ import annotations

import pytest

from conftest import run_cli
from powerrig.sweep.plan import MAX_HOURS, MAX_STEPS, PlanError, parse

BASE = """\
name = "t"
power_states = [0, 2]

[rig]
port = "sim:d5-p5336"
reconnect_s = 60

[drive]
serial = "SN1"

[timing]
settle_s = 1
idle_s = 1
measure_s = 2
cooldown_s = 0

[steady_state]
range_pct = 20
slope_pct = 10

[checks]
self_reported_tolerance_pct = 10

[[workload]]
name = "r"
rw = "read"
runtime_s = 2
waf_every_s = 1
ranges = [[0, 50], [50, 100]]
"""

# every float a plan can hold: (the line as written in BASE, how to write it with VALUE, its key path)
FLOATS = [
    ("settle_s = 1", "settle_s = {}", "timing.settle_s"),
    ("idle_s = 1", "idle_s = {}", "timing.idle_s"),
    ("measure_s = 2", "measure_s = {}", "timing.measure_s"),
    ("cooldown_s = 0", "cooldown_s = {}", "timing.cooldown_s"),
    ("reconnect_s = 60", "reconnect_s = {}", "rig.reconnect_s"),
    ("range_pct = 20", "range_pct = {}", "steady_state.range_pct"),
    ("slope_pct = 10", "slope_pct = {}", "steady_state.slope_pct"),
    ("self_reported_tolerance_pct = 10", "self_reported_tolerance_pct = {}", "checks.self_reported_tolerance_pct"),
    ("runtime_s = 2", "runtime_s = {}", "workload[0].runtime_s"),
    ("waf_every_s = 1", "waf_every_s = {}", "workload[0].waf_every_s"),
    ("ranges = [[0, 50]", "ranges = [[{}, 50]", "workload[0].ranges[0][0]"),
]


def _line(text: str, fragment: str) -> int:
    return next(n for n, ln in enumerate(text.splitlines(), 1) if fragment.split("{}")[0] in ln)


def test_the_base_plan_passes():
    assert len(parse(BASE).steps()) == 4


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "+nan"])
@pytest.mark.parametrize("old,new,key", FLOATS, ids=[f[2] for f in FLOATS])
def test_non_finite_numbers_are_refused_with_key_and_line(old, new, key, value):
    text = BASE.replace(old, new.format(value), 1)
    assert text != BASE
    with pytest.raises(PlanError) as e:
        parse(text, "p.toml")
    msg = str(e.value)
    assert f"{key} (line {_line(text, new)})" in msg and "not a finite number" in msg, msg
    assert "\n" not in msg


def test_limits_max_hours_is_a_float_too():
    with pytest.raises(PlanError, match=r"limits.max_hours \(line \d+\): nan is not a finite number"):
        parse(BASE + "[limits]\nmax_hours = nan\n")


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_check_on_the_command_line_refuses_non_finite_in_one_line(tmp_path, value):
    p = tmp_path / "p.toml"
    p.write_text(BASE.replace("measure_s = 2", f"measure_s = {value}"))
    r = run_cli("sweep", "--check", str(p))
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr == f"powerrig: error: plan {p}: timing.measure_s (line 14): {value} is not a finite number: " \
                       "give a number such as 2 or 0.5\n"
    assert "Traceback" not in r.stdout + r.stderr


def test_a_power_state_listed_twice_is_refused():
    with pytest.raises(PlanError, match=r"power_states\[1\] \(line 2\): PS0 is listed twice \(at \[0\] and \[1\]\)"):
        parse(BASE.replace("[0, 2]", "[0, 0]"))
    with pytest.raises(PlanError, match=r"power_states\[3\] .*PS2 is listed twice \(at \[1\] and \[3\]\)"):
        parse(BASE.replace("[0, 2]", "[0, 2, 1, 2]"))


def test_a_steady_state_metric_listed_twice_is_refused():
    with pytest.raises(PlanError, match=r"steady_state.metrics\[1\] .*power is listed twice"):
        parse(BASE.replace("range_pct = 20", 'range_pct = 20\nmetrics = ["power", "power"]'))


def test_step_count_cap_and_its_override():
    text = BASE.replace("[0, 2]", str(list(range(32)))).replace("[timing]", "[timing]\nrepetitions = 100")
    with pytest.raises(PlanError, match=rf"power_states \(line 2\): the plan has 6400 steps, over the limit of "
                                        rf"{MAX_STEPS}: .*\[limits\] max_steps = 6400"):
        parse(text)
    plan = parse(text.replace("measure_s = 2", "measure_s = 0.1").replace("runtime_s = 2", "runtime_s = 0.1")
                 .replace("settle_s = 1", "settle_s = 0").replace("idle_s = 1", "idle_s = 0")
                 + "[limits]\nmax_steps = 6400\n")
    assert len(plan.steps()) == 6400


def test_duration_cap_and_its_override():
    text = BASE.replace("[timing]", "[timing]\nrepetitions = 1000").replace("measure_s = 2", "measure_s = 300")
    text = text.replace("runtime_s = 2", "runtime_s = 300")
    with pytest.raises(PlanError, match=rf"timing.repetitions \(line 12\): the plan takes about 168.\d h, over the limit of "
                                        rf"{MAX_HOURS:g} h: .*\[limits\] max_hours = 169"):
        parse(text.replace("[timing]\nrepetitions = 1000", "[timing]\nrepetitions = 1000") + "[limits]\nmax_steps = 4000\n")
    plan = parse(text + "[limits]\nmax_steps = 4000\nmax_hours = 169\n")
    assert plan.estimate_s() > MAX_HOURS * 3600


def test_one_huge_duration_is_refused_even_when_the_total_would_pass():
    with pytest.raises(PlanError, match=r"timing.cooldown_s \(line 15\): 1e\+300 s is longer than the whole-plan limit"):
        parse(BASE.replace("cooldown_s = 0", "cooldown_s = 1e300"))


def test_an_interval_that_does_not_divide_a_second_is_refused():
    # it used to pass --check and fail in the capture writer at the first step
    with pytest.raises(PlanError, match=r"rig.interval_us \(line 7\): 300 us does not divide one second"):
        parse(BASE.replace("reconnect_s = 60", "reconnect_s = 60\ninterval_us = 300"))
    assert parse(BASE.replace("reconnect_s = 60", "reconnect_s = 60\ninterval_us = 250")).rig.interval_us == 250


def test_limits_leave_the_plan_hash_alone():
    assert parse(BASE + "[limits]\nmax_steps = 5000\n").hash == parse(BASE).hash


def test_check_never_crashes_on_any_float_spelling(tmp_path, capsys):
    from powerrig.cli import main

    p = tmp_path / "p.toml"
    for old, new, key in FLOATS:
        for value in ("inf", "1e308", "-0.0", "-1e-308"):
            p.write_text(BASE.replace(old, new.format(value), 1))
            rc = main(["sweep", "--check", str(p)])       # no exception escapes: an error is a return code
            err = capsys.readouterr().err
            assert rc == 0 or (rc == 2 and err.count("\n") == 1 and key in err), (key, value, err)
