"""What the drive said during a step is a verdict of that step (issue 40 item 14): a SMART critical
warning, a removal and its return, a controller reset, each with its time; a warning raised mid-step
on the virtual rig (d5-p5336-hot-slot: its temperature crosses its critical threshold under the workload) fails
the step in the store, the sweep's summary, the sweep report and the capture report."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from powerrig.analysis.drive_said import BACK, REMOVED, RESET, WARNING, said, warning_text
from powerrig.core.timeline import NOTE, NVME, Event
from powerrig.analysis import verdicts
from powerrig.sweep import measure


def _smart(t, cw):
    return Event(NVME, "smart-log", t, t + 0.05, ok=True, result={"parsed": {"critical_warning": cw}})


def test_what_the_drive_said_once_per_change_with_its_time():
    ev = [_smart(1, 0), _smart(2, 2), _smart(3, 2), _smart(4, 0x0a), Event(NOTE, "drive removed", 5, 5, ok=True,
                                                                           meta={"controller": "nvme0", "removal": True}),
          Event(NOTE, "drive back", 7.5, 7.5, ok=True, meta={"controller": "nvme0", "removal": True}),
          Event(NVME, "reset", 9, 9.1, ok=True), Event(NVME, "smart-log", 10, 10.1, ok=False)]
    got = said(ev)
    assert [(s.kind, s.t_utc) for s in got] == [(WARNING, 2.05), (WARNING, 4.05), (REMOVED, 5), (BACK, 7.5), (RESET, 9)]
    assert warning_text(0x0a) == "critical warning 0x0a: temperature over or under a threshold, media read-only"
    rows = measure.drive_said(got, lambda u: u - 1.0)
    names = [(r["name"], r["outcome"], r["phase"]) for r in rows]
    assert names == [("drive.critical_warning", "fail", "at 1.05 s"), ("drive.critical_warning", "fail", "at 3.05 s"),
                     ("drive.removed", "invalid", "at 4.00 s"), ("drive.reset", "invalid", "at 8.00 s")]
    assert json.loads(rows[2]["notes"])[0] == ("drive removed (nvme0) at 4.00 s into the step, back at 6.50 s: the "
                                               "figures after it are not the drive's")
    s = verdicts.summary([{**r, "step": "ps0/w/r1"} for r in rows])
    assert s["worst"] == "fail" and s["counts"] == {"fail": 2, "invalid": 2}
    assert s["look"][0]["why"].startswith("critical warning 0x02: temperature") and "at 1.05 s" in s["look"][0]["why"]


PLAN = """name = "hot drive"
power_states = [0]
idle_steps = false
[rig]
port = "sim:d5-p5336-hot-slot"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.5
idle_s = 1.0
measure_s = 4.0
command_trace = false
[[workload]]
name = "seq-write"
rw = "write"
bs = "128k"
iodepth = 128
"""


def test_a_critical_warning_raised_mid_step_fails_the_step_in_every_report(tmp_path, simdir):
    from powerrig.results import ResultStore

    plan = tmp_path / "hot-plan.toml"
    plan.write_text(PLAN)
    db = tmp_path / "r.sqlite"
    r = run_cli("sweep", str(plan), "--results", str(db), "--out", str(tmp_path / "out"), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the drive said: critical warning 0x02: temperature over or under a threshold at" in r.stdout
    assert "fail     ps0/seq-write/r1 drive.critical_warning" in r.stdout          # the summary at the end
    [row] = [m for m in ResultStore(str(db)).measurements(1) if m["name"] == "drive.critical_warning"]
    assert row["outcome"] == "fail" and row["value"] == 2.0
    t = json.loads(row["notes"])[1]["t_s"]
    [step] = ResultStore(str(db)).steps(1)
    assert 0 < t < 30 and step["status"] == "done"
    index = (tmp_path / "out" / "report" / "index.html").read_text()
    assert "drive.critical_warning" in index.split("Power per step")[0]              # in the first screen's summary
    [cap_report] = (tmp_path / "out" / "report" / "captures").glob("*/report.html")
    text = cap_report.read_text()
    assert "What the drive said during this capture" in text and "critical warning 0x02" in text


TWO = """name = "removal"
power_states = [0]
idle_steps = false
[rig]
port = "sim:d5-p5336"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.3
idle_s = 1.0
measure_s = 2.0
command_trace = false
[[workload]]
name = "first"
rw = "write"
[[workload]]
name = "second"
rw = "read"
"""


def test_a_removal_under_fio_stores_the_step_interrupted_and_the_run_goes_on(tmp_path, simdir, monkeypatch):
    """The drive host's presence watch (dut/presence.py) is the boundary: on a drive host fio's runner adds
    its "drive removed" / "drive back" NOTEs and fails the FIO event as interrupted by removal. A virtual
    rig's drive cannot leave its slot, so the first workload's run fails that way here, as the runner
    fails it (tests/test_qemu_nvme.py pulls a real one in the QEMU guest)."""
    import time

    from powerrig.core.errors import ToolError
    from powerrig.core.timeline import FIO
    from powerrig.results import ResultStore
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.plan import parse

    real = Sweep._workload

    def pulled(self, step, tl, nvme, fio, fio_dir, rec):
        if step.workload.name != "first":
            return real(self, step, tl, nvme, fio, fio_dir, rec)
        ev = tl.begin(FIO, "fio")
        t = time.time()
        time.sleep(0.6)
        tl.add(Event(NOTE, "drive removed", t + 0.2, t + 0.2, ok=True, meta={"controller": "nvme0", "removal": True}))
        tl.add(Event(NOTE, "drive back", t + 0.5, t + 0.5, ok=True, meta={"controller": "nvme0", "removal": True}))
        ev.meta["interrupted"] = "removal"
        tl.end(ev, ok=False, error="removal")
        raise ToolError("fio interrupted by removal: nvme0 went away 0.20 s into the run and came back 0.30 s later")

    monkeypatch.setattr(Sweep, "_workload", pulled)
    store = ResultStore(tmp_path / "r.sqlite")
    run = Sweep(parse(TWO, "removal.toml"), store, tmp_path / "out").run()
    assert store.run(run)["status"] == "done"
    first, second = store.steps(run)
    assert first["status"] == "interrupted" and "went away 0.20 s into the run" in first["invalid_reason"]
    assert second["status"] == "done"
    [gone] = [m for m in store.measurements(run) if m["name"] == "drive.removed"]
    why, times = json.loads(gone["notes"])
    assert gone["step"] == first["key"] and gone["outcome"] == "invalid"
    assert times["back_s"] - times["t_s"] == pytest.approx(0.3, abs=0.01) and "back at" in why
    look = verdicts.summary(store.measurements(run))["look"]
    assert any(r["name"] == "drive.removed" and r["step"] == first["key"] and "back at" in r["why"] for r in look)
