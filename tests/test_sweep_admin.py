"""The [[admin]] step kind (sweep/steps/admin.py), a plugin: a sweep on a virtual rig issues a flush, a
firmware commit, a controller reset, a format and a sanitize, and stores each one's energy above the
level before (command.energy_above_j) held to the virtual SSD's truth (sim/ssd/admin_power.py); a plan
that lists a guarded command without the drive's serial is refused when read, one with the wrong
serial before any command reaches the drive; the rows in the sweep report and on the web step page."""
from __future__ import annotations

import json

import pytest

from powerrig.results.store import ResultStore
from powerrig.results.sweep_report import write_sweep_report
from powerrig.sim import rig as simrig
from powerrig.sim.ssd.client import request
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import PlanError, parse
from powerrig.web.app import create_app

# the tolerance tests/test_admin_command_energy.py states (5 % of the truth, or 2 mJ for the small ones)
REL, ABS_J = 0.05, 0.002
QUICK = ('extends = "d5-p5336"\nname = "d5-quick-erase"\n[power.admin]\nformat_s_per_tb = 0.001\n'
         'sanitize_s_per_tb = 0.001\n')
KIND = {"format": "format", "sanitize": "sanitize", "flush": "flush", "fw-commit": "fw_commit", "reset": "reset"}

# the drive of tests/test_admin_command_energy.py; the sweep's rig erases faster (QUICK): its format
# (0.16 s) and sanitize (0.26 s, running on after its completion) settle within a 0.35 s gap
PLAN = '''name = "admin"
power_states = [0]
idle_steps = false
[rig]
port = "sim:d5-p5336"
interval_us = 100
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.3
idle_s = 0.5
[[admin]]
name = "all"
commands = ["flush", "fw-commit", "reset", "format", "sanitize"]
gap_s = 0.35
'''


def test_admin_steps_come_after_every_states_workloads_and_keep_other_plans_hashes():
    with_wl = PLAN.replace("idle_steps = false", "idle_steps = true").replace("power_states = [0]",
                                                                             "power_states = [0, 2]")
    plan = parse(with_wl + '[[workload]]\nname = "rd"\nrw = "read"\n')
    # after every state's steps (a format erases what a later read would measure)
    assert [s.key for s in plan.steps()] == ["ps0/idle/r1", "ps0/rd/r1", "ps2/idle/r1", "ps2/rd/r1",
                                             "admin/all/ps0/r1", "admin/all/ps2/r1"]
    step = plan.steps()[-1]
    assert step.kind == "admin" and step.power_state == 2 and step.spec.commands[-1] == "sanitize"
    assert plan.resolved()["admin"][0]["commands"] == ["flush", "fw-commit", "reset", "format", "sanitize"]
    without = parse(with_wl.split("[[admin]]")[0] + '[[workload]]\nname = "rd"\nrw = "read"\n')
    assert "admin" not in without.resolved() and plan.hash != without.hash
    assert plan.estimate_s() == pytest.approx(without.estimate_s() + 2 * (0.3 + 0.5 + 5 * 0.35))


@pytest.mark.parametrize("old, new, says", [
    ('serial = "VPHA5336000001"\n', "", r"drive.serial .*admin 'all' issues fw-commit, reset, format, sanitize, "
                                          r"which change or erase the drive: name its serial number"),
    ('"sanitize"]', '"erase"]', r"admin\[0\].commands\[4\] \(line 14\): 'erase' is not one of flush"),
    ('"sanitize"]', '"flush"]', r"admin\[0\].commands\[4\] .*flush is listed twice"),
    ("gap_s = 0.35", "gap_s = 0.05", r"admin\[0\].gap_s \(line 15\): 0.05 is out of range 0.1..3600 s"),
    ("gap_s = 0.35", "gap_s = 0.35\nsanact = 5", r"admin\[0\].sanact .*5 is out of range 1..4"),
    ("gap_s = 0.35", "gap_s = 0.35\npower_states = [1]", r"admin\[0\].power_states\[0\] .*PS1 is not one of the plan"),
    ("gap_s = 0.35", "gap_s = 0.35\ncmds = []", r"admin\[0\].cmds .*unknown key"),
])
def test_bad_admin_tables_and_a_guarded_command_without_the_serial_are_one_line_refusals(old, new, says):
    assert old in PLAN
    with pytest.raises(PlanError, match=says) as e:
        parse(PLAN.replace(old, new))
    assert "\n" not in str(e.value)


def test_a_flush_alone_needs_no_serial():
    plan = parse(PLAN.replace('serial = "VPHA5336000001"\n', "").replace(
        '["flush", "fw-commit", "reset", "format", "sanitize"]', '["flush"]'))
    assert [s.spec.commands for s in plan.steps()] == [("flush",)]


def test_an_admin_sweep_stores_each_commands_energy_against_the_virtual_ssds_truth(tmp_path, simdir):
    (tmp_path / "quick.toml").write_text(QUICK)
    st = simrig.start(str(tmp_path / "quick.toml"), owned=True)
    try:
        ep, ctrl = st["endpoint"], st["controller"]
        text = PLAN.replace('port = "sim:d5-p5336"', f'port = "rig:{st["id"]}"')
        store = ResultStore(tmp_path / "r.sqlite")
        # the wrong drive in the slot: refused before any step, no command reached the drive
        with pytest.raises(PlanError, match="has serial 'VPHA5336000001', the plan names 'NOT-IT'") as e:
            Sweep(parse(text.replace("VPHA5336000001", "NOT-IT"), "bad.toml"), store, tmp_path / "bad").run()
        assert "\n" not in str(e.value)
        assert request(ep, {"op": "admin_truth", "dev": ctrl})["commands"] == []
        run = Sweep(parse(text, "admin.toml"), store, tmp_path / "out").run()
        truth = request(ep, {"op": "admin_truth", "dev": ctrl})["commands"]
    finally:
        simrig.stop(st["id"])
    [step] = store.steps(run)
    assert step["key"] == "admin/all/ps0/r1" and step["status"] == "done" and step["workload"] == "all"
    assert json.loads(step["params"])["admin"]["commands"] == ["flush", "fw-commit", "reset", "format", "sanitize"]
    assert [t["kind"] for t in truth] == ["flush", "fw_commit", "reset", "format", "sanitize"]
    by_kind = {t["kind"]: t for t in truth}
    ms = store.measurements(run)
    rows = [m for m in ms if m["name"] == "command.energy_above_j"]
    assert [r["phase"] for r in rows] == ["flush", "fw-commit", "reset", "format", "sanitize"]
    for r in rows:
        n, t = json.loads(r["notes"]), by_kind[KIND[r["phase"]]]
        # from the traced submission, settled back within the gap (the next command never cut it)
        assert n["from"] == "nvme_trace" and n["cut_short"] is None, (r["phase"], n)
        assert abs(r["value"] - t["energy_j"]) <= max(REL * abs(t["energy_j"]), ABS_J), (r["phase"], r["value"], t)
    # the step's phase is the commands' span: its power and energy are stored beside them
    assert next(m for m in ms if m["name"] == "power.mean")["phase"] == "admin:all"
    html = write_sweep_report(store, run, tmp_path / "report").read_text()
    assert "id=command-energy" in html and all(c in html for c in ("fw-commit", "sanitize", "admin/all/ps0/r1"))
    page = create_app(store).test_client().get(f"/run/{run}/step/{step['idx'] + 1}")
    assert page.status_code == 200 and b"command-energy" in page.data and b"fw-commit" in page.data
