"""`powerrig sweep --check` is the truth: a plan whose content would fail hours into a run (a non-finite
number, a power state listed twice, a plan of 990,000 steps or 945 hours) is refused there, with one
line naming the key and its line, and `inf` never crashes the check itself."""
from __future__ import annotations

import re

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
    with pytest.raises(PlanError, match=r"timing.cooldown_s \(line 15\): 1e\+300 is out of range 0..86400 s$"):
        parse(BASE.replace("cooldown_s = 0", "cooldown_s = 1e300"))
    with pytest.raises(PlanError, match=r"timing.cooldown_s \(line 15\): 7200 s is longer than the whole-plan limit"):
        parse(BASE.replace("cooldown_s = 0", "cooldown_s = 7200") + "[limits]\nmax_hours = 1\n")


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


# -- every number a plan takes has a floor and a ceiling, from one table (powerrig.core.bounds) ----------
RICH = {
    "name": "every-number", "power_states": [0],
    "rig": {"port": "sim:d5-p5336", "interval_us": 1000, "reconnect_s": 60, "reply_timeout_s": 2,
            "supply": "reference", "supply_channels": {"12V": 1}},
    "drive": {"serial": "SN1"},
    "preparation": {"kind": "fio", "job": {"rw": "write", "iodepth": 2, "numjobs": 1, "rwmixread": 50,
                                           "runtime_s": 1, "waf_every_s": 1}},
    "timing": {"settle_s": 1, "idle_s": 1, "measure_s": 2, "repetitions": 1, "cooldown_s": 0},
    "steady_state": {"rounds": 3, "max_rounds": 5, "range_pct": 20, "slope_pct": 10},
    "checks": {"self_reported_tolerance_pct": 10, "max_lost_pct": 5, "power_limit_w": 12.5},
    "limits": {"max_steps": 100, "max_hours": 10},
    "workload": [{"name": "r", "rw": "randrw", "iodepth": 4, "numjobs": 1, "rwmixread": 50, "runtime_s": 1,
                  "waf_every_s": 1, "ranges": [[0, 50], [50, 100]]},
                 {"name": "s", "rw": "read", "runtime_s": 1,
                  "streams": [{"rw": "read", "iodepth": 2, "rwmixread": 50, "range": [0, 10], "rate_iops": 100}]}],
    **{t: [{"name": t, "cycles": 1, "iodepth": 1, "cut_ms": [0, 10], "off_ms": [10, 20], "ready_timeout_s": 1,
            "holdup_threshold_v": 9, "inrush_trigger_w": 40, "seed": 1, "fsync_every": 64}]
        for t in ("power_loss", "perst_stress", "hotplug")},
    "margin": [{"name": "m", "rail": "12V", "volts": [12.0], "workload": "r", "settle_s": 1, "agree_pct": 2,
                "current_limit_a": 1}],
}


def _toml(d: dict, prefix: str = "") -> str:
    """A plan dict as TOML (scalars, arrays, tables and arrays of tables: what a plan uses)."""
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v + '"'
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return repr(v)
    lines = [f"{k} = {val(v)}" for k, v in d.items()
             if not isinstance(v, dict) and not (isinstance(v, list) and v and isinstance(v[0], dict))]
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            lines += ["", f"[{name}]", _toml(v, name + ".")]
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            for item in v:
                lines += ["", f"[[{name}]]", _toml(item, name + ".")]
    return "\n".join(lines)


def _numbers(d, path=()):
    """Every number in a plan dict: (its path, its value)."""
    items = d.items() if isinstance(d, dict) else enumerate(d)
    for k, v in items:
        if isinstance(v, (dict, list)):
            yield from _numbers(v, path + (k,))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            yield path + (k,), v


def _with(d, path, value):
    import copy
    d = copy.deepcopy(d)
    node = d
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return d


NUMBERS = [p for p, _ in _numbers(RICH) if p[:2] != ("margin", 0) or p[2] != "volts"]   # volts: the rail's range


def test_the_rich_plan_passes_and_every_number_in_it_has_a_bound():
    from powerrig.core.bounds import PLAN, key_of
    parse(_toml(RICH))
    keys = {key_of(p) for p in NUMBERS}
    keys = {k if k in PLAN else k.rsplit(".", 1)[0] for k in keys}       # rig.supply_channels.12V
    assert keys <= set(PLAN), keys - set(PLAN)
    assert {k for k in PLAN if not k.startswith(("preparation.job.", "perst_stress.", "hotplug."))} <= keys


@pytest.mark.parametrize("side", ["ceiling", "floor"])
@pytest.mark.parametrize("path", NUMBERS, ids=[".".join(map(str, p)) for p in NUMBERS])
def test_every_number_past_its_ceiling_or_floor_is_refused_with_its_key(path, side):
    from powerrig.core.bounds import PLAN, key_of
    from powerrig.sweep.plan import _fmt_path

    key = key_of(path)
    b = PLAN.get(key) or PLAN[key.rsplit(".", 1)[0]]
    bad = (b.hi * 10 + 1 if side == "ceiling" else b.lo - 1)
    bad = int(bad) if b.integer else float(bad)
    with pytest.raises(PlanError, match=rf"{re.escape(_fmt_path(path))} \(line \d+\): .* is out of range "):
        parse(_toml(_with(RICH, path, bad)))


@pytest.mark.parametrize("line,key", [("reply_timeout_s = 1e10", "rig.reply_timeout_s"),
                                      ("reconnect_s = 1e300", "rig.reconnect_s"),
                                      ("waf_every_s = 1e300", "workload[0].waf_every_s")])
def test_check_refuses_a_timing_key_past_its_ceiling_in_one_line(tmp_path, line, key):
    """`reply_timeout_s = 1e10` passed --check and died with an OverflowError traceback when the run began;
    `waf_every_s = 1e300` killed the WAF sampler thread and the step was stored "done" without WAF data."""
    text = BASE.replace("reconnect_s = 60", "reconnect_s = 60\nreply_timeout_s = 2")
    name = line.split(" = ")[0]
    text = re.sub(rf"(?m)^{name} = .*$", line, text)
    p = tmp_path / "p.toml"
    p.write_text(text)
    r = run_cli("sweep", str(p), "--check")
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and f": {key} (line " in r.stderr and "is out of range" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("port", ["/dev/ttyACM0\\u001b]0;x\\u0007", "/dev/ttyACM0\\r", "/dev/tty\\u202eACM0",
                                  "rfc2217://host:4000\\u0007"])
def test_a_rig_port_with_control_characters_is_refused_at_check(tmp_path, port):
    p = tmp_path / "p.toml"
    p.write_text(BASE.replace('port = "sim:d5-p5336"', f'port = "{port}"'))
    r = run_cli("sweep", str(p), "--check")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert ": rig.port (line 5): " in r.stderr and "remove it" in r.stderr, r.stderr
    assert not any(c in r.stderr for c in "\x1b\x07\r\u202e")


# -- a plan on `rig:ID`: the running rig's namespaces, judged at --check as at bring-up (issue 36) ---------
RIG_PLAN = """name = "p"
power_states = [0]
[rig]
port = "rig:{rig}"
[drive]
serial = "SN1"
{drive}
[[workload]]
name = "r"
rw = "read"
{streams}
"""


@pytest.fixture
def running_rig(simdir):
    import json
    r = run_cli("sim", "start", "--json", "--profile", "micron-fdp")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _check(tmp_path, text):
    p = tmp_path / "p.toml"
    p.write_text(text)
    return run_cli("sweep", str(p), "--check")


def test_check_judges_a_plans_namespace_against_the_running_rig(running_rig, tmp_path):
    """Before: `--check` passed a plan naming a namespace the running rig lacks; only bring-up refused it."""
    st = running_rig
    r = _check(tmp_path, RIG_PLAN.format(rig=st["id"], drive='namespace = "/dev/nvme0n9"', streams=""))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert "drive.namespace /dev/nvme0n9 is not one of this rig's" in r.stderr
    assert f"namespaces {', '.join(st['namespaces'])}" in r.stderr, r.stderr
    r = _check(tmp_path, RIG_PLAN.format(rig=st["id"], drive='namespace = "/dev/nvme0n3"', streams=""))
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_check_judges_a_streams_namespace_against_the_running_rig(running_rig, tmp_path):
    """Before: streams[].namespace on a virtual rig was never compared with the rig's namespaces."""
    st = running_rig
    bad = 'streams = [{rw = "read"}, {rw = "read", namespace = "/dev/nvme0n9"}]'
    r = _check(tmp_path, RIG_PLAN.format(rig=st["id"], drive="", streams=bad))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert "workload[0].streams[1].namespace /dev/nvme0n9 is not one of this rig's" in r.stderr, r.stderr
    good = 'streams = [{rw = "read"}, {rw = "read", namespace = "/dev/nvme0n2"}]'
    r = _check(tmp_path, RIG_PLAN.format(rig=st["id"], drive="", streams=good))
    assert r.returncode == 0, r.stderr


def test_bring_up_refuses_a_streams_namespace_the_rig_lacks(running_rig):
    from powerrig.sweep.plan_rig import bring_up

    st = running_rig
    bad = 'streams = [{rw = "read", namespace = "/dev/nvme0n9"}]'
    with pytest.raises(PlanError, match=r"workload\[0\]\.streams\[0\]\.namespace /dev/nvme0n9 is not one of this "
                                        "rig's: the rig .* has controller /dev/nvme0 and namespaces") as e:
        bring_up(parse(RIG_PLAN.format(rig=st["id"], drive="", streams=bad)))
    assert "\n" not in str(e.value)
    prep = RIG_PLAN.format(rig=st["id"], drive="", streams="") + \
        '[preparation]\nkind = "fio"\n[preparation.job]\nrw = "read"\nstreams = [{rw = "read", namespace = "/dev/nvme0n12"}]\n'
    with pytest.raises(PlanError, match=r"preparation\.job\.streams\[0\]\.namespace /dev/nvme0n12 is not one of"):
        bring_up(parse(prep))
    good = 'streams = [{rw = "read", namespace = "/dev/nvme0n2"}]'
    rig = bring_up(parse(RIG_PLAN.format(rig=st["id"], drive="", streams=good)))
    assert rig.namespaces == st["namespaces"]


def test_check_says_it_cannot_judge_a_rig_that_is_not_running(simdir, tmp_path):
    r = _check(tmp_path, RIG_PLAN.format(rig="0badc0de", drive='namespace = "/dev/nvme0n9"', streams=""))
    assert r.returncode == 0 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    note = [ln for ln in r.stdout.splitlines() if "0badc0de" in ln]
    assert len(note) == 1 and "not running" in note[0] and "cannot check" in note[0], r.stdout


def test_the_power_limit_run_counts_in_the_estimate_and_in_max_hours():
    """checks.power_limit_w runs each workload again, a lead and fio's first status second longer: the ETA
    and [limits] max_hours count that run too (they left it out: a plan could pass --check and run twice as
    long as its limit)."""
    without = parse(BASE)
    limited = parse(BASE.replace("self_reported_tolerance_pct = 10", "self_reported_tolerance_pct = 10\npower_limit_w = 12"))
    workloads = sum(1 for s in without.steps() if s.kind == "workload")
    # each: the 2 s workload again + a lead of a quarter of it (0.5 s) + fio's first status (1 s)
    assert workloads == 2 and limited.estimate_s() == pytest.approx(without.estimate_s() + workloads * 3.5)
    long = BASE.replace("runtime_s = 2", "runtime_s = 1700").replace("[timing]", "[timing]\nrepetitions = 1")
    assert parse(long + "[limits]\nmax_hours = 1\n").estimate_s() < 3600
    with pytest.raises(PlanError, match=r"the plan takes about 1\.9 h, over the limit of 1 h"):
        parse(long.replace("self_reported_tolerance_pct = 10", "self_reported_tolerance_pct = 10\npower_limit_w = 12")
              + "[limits]\nmax_hours = 1\n")


def test_check_shows_the_longest_a_steady_state_plan_can_take(tmp_path):
    """A steady-state workload runs rounds until it settles, at most max_rounds: the estimate counts the
    fewest (the ETA), ``longest_s`` the most, and `--check` prints both, so a technician planning a night
    sees that the plan may run five times its estimate (it printed the estimate alone)."""
    steady = BASE.replace('runtime_s = 2', 'runtime_s = 2\nsteady_state = true').replace(
        "[steady_state]", "[steady_state]\nrounds = 3\nmax_rounds = 12")
    plain, plan = parse(BASE), parse(steady)
    assert plain.longest_s() == pytest.approx(plain.estimate_s())
    workloads = sum(1 for s in plan.steps() if s.kind == "workload")
    # each workload step: 2 s rounds, 3 at the fewest and 12 at the most
    assert workloads == 2 and plan.longest_s() - plan.estimate_s() == pytest.approx(workloads * 2 * (12 - 3))
    assert plan.estimate_s() == pytest.approx(plain.estimate_s() + workloads * 2 * (3 - 1))
    p = tmp_path / "p.toml"
    p.write_text(steady)
    r = run_cli("sweep", "--check", str(p))
    assert r.returncode == 0, r.stdout + r.stderr
    last = [ln for ln in r.stdout.splitlines() if ln.startswith("plan ")][-1]
    assert re.search(r"ok: \d+ steps, about (\S+) \(up to (\S+) if its steady-state workloads run all 12 rounds, "
                     r"not 3\), hash", last), last
    p.write_text(BASE)
    r = run_cli("sweep", "--check", str(p))
    assert r.returncode == 0 and "up to" not in r.stdout, r.stdout + r.stderr


def test_a_margin_point_over_a_steady_state_workload_counts_its_rounds_too():
    """A [[margin]] point runs its workload as a workload step does, rounds and all: its longest counts
    max_rounds as well (each of the three voltages: 2 s rounds, 3 at the fewest, 12 at the most)."""
    steady = BASE.replace('runtime_s = 2', 'runtime_s = 2\nsteady_state = true').replace(
        "[steady_state]", "[steady_state]\nrounds = 3\nmax_rounds = 12").replace(
        'reconnect_s = 60', 'reconnect_s = 60\nsupply = "reference"\nsupply_channels = { "12V" = 1, "3V3" = 2 }')
    margin = '\n[[margin]]\nname = "12v"\nrail = "12V"\nvolts = [10.8, 12.0, 13.2]\nworkload = "r"\nsettle_s = 0.5\n'
    plain, with_margin = parse(steady), parse(steady + margin)
    points = sum(1 for s in with_margin.steps() if s.kind == "margin")
    extra = (with_margin.longest_s() - with_margin.estimate_s()) - (plain.longest_s() - plain.estimate_s())
    assert points == 3 and extra == pytest.approx(points * 2 * (12 - 3))
