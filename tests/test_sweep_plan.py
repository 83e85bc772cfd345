"""Sweep plans: the ready-made ones load; bad plans are refused with one line naming the key path,
the line and the reason, before anything runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from powerrig.dut.nvme import ControllerId, PowerStateDescriptor
from powerrig.sweep.plan import PlanError, check_drive, load, parse

PLANS = Path(__file__).resolve().parents[1] / "fixtures" / "plans"

GOOD = """\
name = "t"
power_states = [0, 2]

[rig]
port = "sim:d5-p5336"

[drive]
serial = "SN1"

[timing]
measure_s = 2.0
repetitions = 2

[[workload]]
name = "seq-read"
rw = "read"
bs = "128k"
iodepth = 128

[[workload]]
name = "w8"
rw = "write"
bs = "128k"
iodepth = 32
ranges = [[0, 50], [50, 100]]
"""


def ident(npss=2, sn="SN1"):
    states = tuple(PowerStateDescriptor(k, 25.0 - 5 * k, False, 60000, 60000, None, None, 0) for k in range(npss + 1))
    return ControllerId("MODEL", sn, "FW", npss, False, states)


@pytest.mark.parametrize("path", sorted(PLANS.glob("*.toml")), ids=lambda p: p.stem)
def test_ready_made_plans_load_and_say_what_they_reproduce(path):
    plan = load(path)
    assert plan.steps()
    assert path.read_text().startswith("# ")          # the comment block
    assert len(plan.hash) == 16


def test_steps_are_power_states_x_idle_and_workloads_x_repetitions():
    plan = parse(GOOD)
    steps = plan.steps()
    assert len(steps) == 2 * 2 * 3
    assert [s.key for s in steps[:3]] == ["ps0/idle/r1", "ps0/seq-read/r1", "ps0/w8/r1"]
    assert len({s.key for s in steps}) == len(steps)
    w8 = plan.workloads[1]
    assert [s.range_pct for s in w8.all_streams()] == [(0.0, 50.0), (50.0, 100.0)]
    assert plan.runtime_of(w8) == 2.0
    r = plan.resolved()                  # every value used, defaults included
    assert r["timing"]["settle_s"] == 2.0 and r["steady"]["rounds"] == 5 and r["rig"]["interval_us"] == 1000


def test_plan_hash_ignores_comments_but_not_values():
    a = parse(GOOD)
    assert parse("# a comment\n" + GOOD).hash == a.hash
    assert parse(GOOD.replace("measure_s = 2.0", "measure_s = 3.0")).hash != a.hash


def test_keys_added_later_leave_an_older_plans_hash_alone():
    """A sweep stored before io_log, block_trace and the power-loss steps existed still resumes: unset, they are not
    in the resolved plan; set, they change the hash."""
    a = parse(GOOD)
    assert "io_log" not in a.resolved()["timing"] and "power_loss" not in a.resolved()
    assert parse(GOOD.replace("measure_s = 2.0", "measure_s = 2.0\nio_log = false")).hash == a.hash
    assert parse(GOOD.replace("measure_s = 2.0", "measure_s = 2.0\nio_log = true")).hash != a.hash
    assert "block_trace" not in a.resolved()["timing"]
    assert parse(GOOD.replace("measure_s = 2.0", "measure_s = 2.0\nblock_trace = false")).hash == a.hash
    b = parse(GOOD.replace("measure_s = 2.0", "measure_s = 2.0\nblock_trace = true"))
    assert b.hash != a.hash and b.timing.block_trace is True
    assert "reply_timeout_s" not in a.resolved()["rig"] and a.rig.reply_timeout_s == 2.0
    assert parse(GOOD.replace('port = "sim:d5-p5336"', 'port = "sim:d5-p5336"\nreply_timeout_s = 2')).hash == a.hash
    c = parse(GOOD.replace('port = "sim:d5-p5336"', 'port = "sim:d5-p5336"\nreply_timeout_s = 600'))
    assert c.hash != a.hash and c.rig.reply_timeout_s == 600.0


@pytest.mark.parametrize("edit, where, reason", [
    (("iodepth = 128", "iodepth = 128\nqueue = 4"), "workload[0].queue (line 19)", "unknown key"),
    (("measure_s = 2.0", 'measure_s = "long"'), "timing.measure_s (line 11)", "must be a number, not a string"),
    (('bs = "128k"\niodepth = 128', 'bs = 1000\niodepth = 128'), "workload[0].bs (line 17)", "multiple of 512"),
    (('bs = "128k"\niodepth = 128', 'bs = "32m"\niodepth = 128'), "workload[0].bs (line 17)", "out of range"),
    (("iodepth = 32", "iodepth = 0"), "workload[1].iodepth (line 24)", "out of range 1..4096"),
    (("iodepth = 32", "iodepth = 100000"), "workload[1].iodepth (line 24)", "out of range"),
    (('port = "sim:d5-p5336"', 'port = "sim:nope"'), "rig.port (line 5)", "no drive profile"),
    (('port = "sim:d5-p5336"', 'port = "rfc2217://host"'), "rig.port (line 5)", "not an RFC2217 URL"),
    (('port = "sim:d5-p5336"', 'port = "sim:d5-p5336"\nreply_timeout_s = 0'), "rig.reply_timeout_s (line 6)",
     "out of range 0.1.."),
    (('serial = "SN1"', 'serial = 5'), "drive.serial (line 8)", "must be a string"),
    (('serial = "SN1"', ''), "drive.serial", "writes to the drive: name its serial"),
    (('rw = "read"', 'rw = "sideways"'), "workload[0].rw (line 16)", "not a fio rw mode"),
    (("ranges = [[0, 50], [50, 100]]", "ranges = [[0, 50], [60, 40]]"), "workload[1].ranges[1] (line 25)", "is empty"),
    (("power_states = [0, 2]", "power_states = [0, true]"), "power_states[1] (line 2)", "not a boolean"),
])
def test_bad_plans_are_refused_with_key_path_line_and_reason(edit, where, reason):
    text = GOOD.replace(*edit)
    assert text != GOOD
    with pytest.raises(PlanError) as e:
        parse(text, "p.toml")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"plan p.toml: {where}"), msg
    assert reason in msg, msg


def test_invalid_toml_names_the_line():
    with pytest.raises(PlanError, match=r"not valid TOML: .*line 3"):
        parse('name = "x"\n[rig]\nport = \n')


def test_power_state_the_drive_lacks_is_refused():
    with pytest.raises(PlanError, match=r"power_states\[1\] \(line 2\): the drive MODEL has no PS2 \(it has PS0..PS1\)"):
        check_drive(parse(GOOD), ident(npss=1))


def test_serial_mismatch_is_refused():
    with pytest.raises(PlanError, match=r"drive.serial \(line 8\): .* has serial 'OTHER', the plan names 'SN1'"):
        check_drive(parse(GOOD), ident(sn="OTHER"))


def test_mounted_drive_is_refused_for_a_writing_plan(tmp_path):
    from test_guard import FakeHost

    host = FakeHost(tmp_path / "host")
    host.block(host.controller("nvme0", "SN1"), "nvme0n1", 1, parts=1)
    host.mount("/dev/sda1 / ext4 rw 0 0")
    check_drive(parse(GOOD), ident(), host.view)                    # another disk is mounted: fine
    host.mount("/dev/nvme0n1p1 /data ext4 rw 0 0")
    with pytest.raises(PlanError, match=r"mounted filesystems \(/data\)"):
        check_drive(parse(GOOD), ident(), host.view)


def test_missing_plan_file(tmp_path):
    with pytest.raises(PlanError, match="no plan file"):
        load(tmp_path / "none.toml")
