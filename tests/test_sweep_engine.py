"""The sweep engine on the virtual rig: refusals before anything runs, and resume after the sweep
process is killed with SIGKILL in the middle of a step (same steps, none duplicated or missing,
figures as the drive model says), never mixing two plans."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace as NS

import numpy as np
import pytest

from conftest import run_cli
from powerrig.analysis.checks import judge
from powerrig.analysis.transitions import time_transition
from powerrig.results import ResultStore
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.model import expected_point
from powerrig.sweep import measure
from powerrig.sweep.engine import Sweep, steady_state_met
from powerrig.sweep.plan import PlanError, parse

SHORT = """name = "short"
power_states = [0, 2]
[rig]
port = "{port}"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.3
idle_s = 1.0
measure_s = 2.5
[[workload]]
name = "seq-read-128k"
rw = "read"
[[workload]]
name = "seq-write-128k"
rw = "write"
"""


def test_steady_state_criteria():
    assert steady_state_met([100, 101, 99, 100, 100], 5, 20, 10)
    assert not steady_state_met([100, 101, 99, 100], 5, 20, 10)             # too few rounds
    assert not steady_state_met([70, 100, 100, 100, 100], 5, 20, 10)        # range 30 % > 20 %
    assert not steady_state_met([90, 94, 98, 102, 106], 5, 20, 10)          # slope: 16 % over the window


def test_rig_that_does_not_answer_is_refused_before_anything_runs(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    plan = parse(SHORT.format(port="/dev/powerrig-no-such-port"), "p.toml")
    with pytest.raises(PlanError, match=r"^rig.port: the interposer at /dev/powerrig-no-such-port does not answer"):
        Sweep(plan, store, tmp_path / "out").run()
    assert store.runs() == []


def test_power_state_the_drive_lacks_is_refused_on_the_rig(tmp_path, simdir):
    store = ResultStore(tmp_path / "r.sqlite")
    plan = parse(SHORT.format(port="sim:d5-p5336").replace("[0, 2]", "[0, 4]"), "p.toml")
    with pytest.raises(PlanError, match=r"power_states\[1\] \(line 2\): the drive .* has no PS4 \(it has PS0..PS2\)"):
        Sweep(plan, store, tmp_path / "out").run()
    assert store.runs() == []


def test_serial_mismatch_is_refused_on_the_rig(tmp_path, simdir):
    store = ResultStore(tmp_path / "r.sqlite")
    plan = parse(SHORT.format(port="sim:d5-p5336").replace("VPHA5336000001", "WRONG"), "p.toml")
    with pytest.raises(PlanError, match=r"drive.serial \(line 6\): .*serial 'VPHA5336000001', the plan names 'WRONG'"):
        Sweep(plan, store, tmp_path / "out").run()
    assert store.runs() == []


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_resume_after_sigkill_mid_step(tmp_path, simdir, results_db):
    plan_file = tmp_path / "short.toml"
    plan_file.write_text(SHORT.format(port="sim:d5-p5336"))
    db, out = results_db, tmp_path / "out"
    args = [sys.executable, "-m", "powerrig", "sweep", str(plan_file), "--results", db, "--out", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = out / "sweep.jsonl"
    deadline = time.monotonic() + 120
    while len(_lines(log)) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert len(_lines(log)) == 2, proc.stdout.read() if proc.poll() is not None else "timeout"
    time.sleep(2.0)                       # in the middle of step 3 (settle 0.3 + idle 1 + 2.5 s workload)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = ResultStore(db)
    [run] = store.runs()
    assert run["status"] == "running" and run["steps"] == 2

    # a changed plan never resumes the old run
    plan_file.write_text(SHORT.format(port="sim:d5-p5336").replace("measure_s = 2.5", "measure_s = 2.6"))
    r = run_cli("sweep", str(plan_file), "--results", db, "--resume")
    assert r.returncode == 2 and "changed since run 1" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    plan_file.write_text(SHORT.format(port="sim:d5-p5336"))

    r = run_cli("sweep", str(plan_file), "--results", db, "--resume", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 steps, 2 already done" in r.stdout
    [run] = store.runs()
    assert (run["id"], run["status"], run["steps"]) == (1, "done", 6)
    steps = store.steps(1)
    plan = parse(plan_file.read_text(), str(plan_file))
    assert [s["key"] for s in steps] == [s.key for s in plan.steps()]       # none missing, none twice
    assert [x["key"] for x in _lines(log)] == [s.key for s in plan.steps()]
    ms = store.measurements(1)
    for s in plan.steps():
        if s.workload is None:
            continue
        want = expected_point("d5-p5336", s.power_state, rw=s.workload.rw)
        got = {m["name"]: m["value"] for m in ms if m["step"] == s.key}
        assert got["throughput.mib_s"] == pytest.approx(want["MiBps"], rel=0.05), s.key
        assert got["power.mean"] == pytest.approx(want["watts"], rel=0.05), s.key
    rec = json.loads((out / "run-1.json").read_text())
    assert len(rec["steps"]) == 6 and rec["plan_hash"] == plan.hash


def test_waf_comes_from_the_nvme_runners_fdp_stats_events():
    """The runner records fdp stats as its parsed FdpStats (host/media_bytes_written); analysis must
    read those, or a sweep's FDP write amplification is silently empty."""
    from powerrig.analysis.waf import waf_samples, waf_series
    from powerrig.core.timeline import Event
    evs = [Event("nvme", "fdp stats", t, t + 0.01, result={"parsed": {"host_bytes_written": h, "media_bytes_written": m,
                                                                      "media_bytes_erased": 0}})
           for t, h, m in ((0.0, 0, 0), (60.0, 100, 230), (120.0, 200, 430))]
    rows = waf_series(waf_samples(evs))
    assert [r["waf_instant"] for r in rows] == [2.3, 2.0]
    assert rows[-1]["waf_cumulative"] == 2.15


PLANS = os.path.join(os.path.dirname(__file__), "..", "fixtures", "plans")
# Micron FMS 2025 (REFERENCE.md section 1): (power state, workload) -> (WAF, MiB/s, W)
MICRON = {(0, "nonfdp-distinct"): (2.3, 2000, 13.09), (0, "fdp-distinct"): (1.05, 5000, 12.36),
          (0, "nonfdp-uniform"): (2.0, 2000, 12.95), (0, "fdp-uniform"): (1.05, 5000, 12.28),
          (1, "fdp-uniform"): (1.05, 1937, 6.47)}


def micron_short_form() -> str:
    """fixtures/plans/micron-fdp.toml itself, with seconds instead of SNIA rounds of 10 minutes."""
    with open(os.path.join(PLANS, "micron-fdp.toml")) as f:
        text = f.read()
    for old, new in (('kind = "precondition"', 'kind = "none"'), ("settle_s = 1.0", "settle_s = 0.3"),
                     ("idle_s = 2.0", "idle_s = 0.5"), ("measure_s = 600.0", "measure_s = 3.0"),
                     ("steady_state = true", "steady_state = false"), ("waf_every_s = 60", "waf_every_s = 1")):
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_micron_fdp_plan_reproduces_the_fdp_vs_non_fdp_table(tmp_path, simdir):
    """The whole published table through the rig: FDP (placement directives, one reclaim unit handle per
    job) and non-FDP (the same jobs without directives, mixing in the default handle), distinct and
    uniform block sizes; WAF, MiB/s, W and MiB/s/W within 15 %, and FDP in the 10 W state."""
    store = ResultStore(tmp_path / "r.sqlite")
    plan = parse(micron_short_form(), "micron-fdp.toml")
    run = Sweep(plan, store, tmp_path / "out").run()
    steps = {s["key"]: s for s in store.steps(run)}
    got: dict = {}
    for m in store.measurements(run):
        got.setdefault(m["step"], {})[m["name"]] = m["value"]
    assert len(steps) == 8 and all(s["status"] == "done" for s in steps.values())
    for (ps, w), (waf, mib_s, watts) in MICRON.items():
        g = got[f"ps{ps}/{w}/r1"]
        for name, want in (("waf.cumulative", waf), ("throughput.mib_s", mib_s), ("power.mean", watts),
                           ("efficiency.mib_s_per_w", mib_s / watts)):
            assert g[name] == pytest.approx(want, rel=0.15), f"ps{ps} {w} {name}: {g[name]:.3f} vs published {want}"
    # the comparison the source makes: FDP more than doubles MiB/s per W in the same state
    for shape in ("distinct", "uniform"):
        assert got[f"ps0/fdp-{shape}/r1"]["efficiency.mib_s_per_w"] > \
            2 * got[f"ps0/nonfdp-{shape}/r1"]["efficiency.mib_s_per_w"]
    fio_dir = tmp_path / "out" / "fio"
    jobs = {p.parent.parent.name: p.read_text() for p in fio_dir.glob("*/round1/*.fio")}
    assert any("fdp=1" in t and "/dev/ng0n" in t for k, t in jobs.items() if "_fdp-" in k)
    assert not any("fdp=1" in t for k, t in jobs.items() if "nonfdp" in k)


def test_fdp_writes_need_a_passthrough_engine_as_real_fio(tmp_path, simdir):
    """fdp=1 on a block device or with a plain engine fails the way fio does; no I/O is started."""
    from powerrig.sim import rig as simrig
    st = simrig.start("micron-fdp")
    try:
        base = st["fio"] + ["--name=j", "--rw=write", "--bs=128k", "--runtime=0.2", "--time_based", "--fdp=1",
                            "--output-format=json"]
        p = subprocess.run(base + ["--filename=/dev/nvme0n1", "--ioengine=libaio"], capture_output=True, text=True)
        assert p.returncode == 1 and "does not support fdp=1" in p.stderr
        p = subprocess.run(base + ["--filename=/dev/nvme0n1", "--ioengine=io_uring_cmd"], capture_output=True, text=True)
        assert p.returncode == 1 and "generic char devices" in p.stderr
        p = subprocess.run(base + ["--filename=/dev/ng0n2", "--ioengine=io_uring_cmd"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["jobs"][0]["write"]["io_bytes"] > 0
    finally:
        simrig.stop(st["id"])


def test_interposer_that_stalls_mid_step_is_waited_for_and_the_step_redone(tmp_path, simdir, monkeypatch):
    """The virtual interposer hangs for 6 s during the first step (the firmware stops, like an
    unplugged board): the sweep waits for it, keeps the cut capture (its end reason says why) and
    redoes the step; the stored step has the model's figures and says it took two attempts."""
    from powerrig.capture import CaptureReader
    from powerrig.core.errors import CaptureError
    monkeypatch.setenv("POWERRIG_SIM_FAULTS", json.dumps({"stall_at": 3.0, "stall_for": 6.0}))
    text = SHORT.format(port="sim:d5-p5336").replace("power_states = [0, 2]", "power_states = [2]") \
        .replace("measure_s = 2.5", "measure_s = 5.0").replace("idle_s = 1.0", "idle_s = 2.0")
    text = text.replace('[[workload]]\nname = "seq-read-128k"\nrw = "read"\n', "").replace("[rig]", "idle_steps = false\n[rig]")
    plan = parse(text, "stall.toml")
    assert [s.key for s in plan.steps()] == ["ps2/seq-write-128k/r1"]
    store = ResultStore(tmp_path / "r.sqlite")
    notes = []
    run = Sweep(plan, store, tmp_path / "out", on_progress=lambda d: notes.append(d.get("text", ""))).run()
    [step] = store.steps(run)
    assert step["attempts"] == 2 and step["status"] == "done"
    assert any("waiting up to" in n for n in notes) and any("interposer back" in n for n in notes)
    [lost] = json.loads(step["params"])["lost_attempts"]          # the gap is recorded with the step
    assert lost["attempt"] == 1 and lost["back_after_s"] > 0 and lost["capture"].endswith("-a1.jls")
    cut = sorted((tmp_path / "out" / "captures").glob("000-*-a1.jls"))
    assert len(cut) == 1
    try:
        with CaptureReader(cut[0]) as cap:       # cut before its first block, a capture holds no metadata
            assert cap.metadata["recording"]["end_reason"] == "link-lost"
    except CaptureError:
        pass
    assert step["capture"].endswith("-a2.jls")
    got = {m["name"]: m["value"] for m in store.measurements(run)}
    want = expected_point("d5-p5336", 2, rw="write")
    assert got["power.mean"] == pytest.approx(want["watts"], rel=0.05)
    assert got["throughput.mib_s"] == pytest.approx(want["MiBps"], rel=0.05)


def test_snia_emerald_hot_band_plan_short_form_runs_and_reports_efficiency(tmp_path, simdir):
    """fixtures/plans/snia-emerald-hotband.toml in seconds: its 13 streams used to time out while the
    virtual SSD ran its FTL for the new mix (many random writers take seconds of CPU, past the
    endpoint's 10 s on a loaded host); fio's job set-up now waits for it. IOPS/W, MiB/s/W and the
    ready-idle GB/W come out, with the IOPS the plan's rate limits ask (100,000 x 8 KiB)."""
    from powerrig.sim.ssd.model import JobLoad, operating_point
    from powerrig.sim.ssd.profile import load
    with open(os.path.join(PLANS, "snia-emerald-hotband.toml")) as f:
        text = f.read()
    for old, new in (("idle_s = 40.0", "idle_s = 1.0\nsettle_s = 0.3"), ("measure_s = 300.0", "measure_s = 3.0")):
        assert old in text, old
        text = text.replace(old, new)
    plan = parse(text, "snia-emerald-hotband.toml")
    store = ResultStore(tmp_path / "r.sqlite")
    run = Sweep(plan, store, tmp_path / "out").run()
    assert [s["status"] for s in store.steps(run)] == ["done", "done"]
    got: dict = {}
    for m in store.measurements(run):
        got.setdefault(m["step"], {})[m["name"]] = m["value"]
    hot = got["ps0/hot-band/r1"]
    streams = plan.steps()[1].workload.all_streams()
    assert len(streams) == 13
    assert hot["throughput.iops"] == pytest.approx(sum(s.rate_iops for s in streams), rel=0.05)
    jobs = [JobLoad(f"j{k}", s.rw, s.bs, s.iodepth, s.rwmixread or 50, offset_frac=s.range_pct[0] / 100,
                    size_frac=(s.range_pct[1] - s.range_pct[0]) / 100, rate_iops=s.rate_iops)
            for k, s in enumerate(streams)]
    want_w = operating_point(load("d5-p5336"), 0, jobs).watts
    assert hot["power.mean"] == pytest.approx(want_w, rel=0.05)
    assert hot["efficiency.iops_per_w"] == pytest.approx(hot["throughput.iops"] / hot["power.mean"], rel=0.02)
    assert hot["efficiency.mib_s_per_w"] == pytest.approx(hot["throughput.mib_s"] / hot["power.mean"], rel=0.02)
    idle = got["ps0/idle/r1"]
    assert idle["efficiency.ready_idle_gb_per_w"] == pytest.approx(61.44e12 / 1e9 / idle["power.idle"], rel=0.02)


def test_datasheet_validation_plan_checks_transition_time_and_self_reported_power(tmp_path, simdir):
    """fixtures/plans/datasheet-validation.toml in seconds (PS0 and PS2): ENLAT + EXLAT against the
    measured transition, and the drive's own power report (a measurement started and stopped with Set
    Features 25h through the guarded door around each window, log 25h's AIPWR through `nvme get-log`:
    +4 % gain, -0.35 W offset in the virtual D5-P5336) against the interposer's over the span of the
    drive's counted intervals: the verdicts are stored with their limits, and the error found is the drive's."""
    with open(os.path.join(PLANS, "datasheet-validation.toml")) as f:
        text = f.read()
    for old, new in (("power_states = [0, 1, 2]", "power_states = [0, 2]"), ("settle_s = 2.0", "settle_s = 0.3"),
                     ("idle_s = 40.0", "idle_s = 2.6"), ("measure_s = 30.0", "measure_s = 2.6")):
        assert old in text, old
        text = text.replace(old, new)
    plan = parse(text, "datasheet-validation.toml")
    assert plan.checks.self_reported_power
    store = ResultStore(tmp_path / "r.sqlite")
    run = Sweep(plan, store, tmp_path / "out").run()
    ms = store.measurements(run)
    by: dict = {}
    for m in ms:
        by.setdefault((m["step"], m["name"], m["phase"]), m)
    steps = [s["key"] for s in store.steps(run)]
    assert len(steps) == 4
    judged = 0
    for key in steps:
        t = by[(key, "transition.after_completion_s", "set-feature power")]
        assert t["upper"] == pytest.approx(0.12)            # EXLAT 60 ms + ENLAT 60 ms from id-ctrl
        assert t["outcome"] == "pass" and t["requirement_met"] and 0 <= t["value"] <= 0.12
        # the traced change too (sweep/command_trace.py), judged by judge() against the latencies reported
        r = by[(key, "transition.rails_settle_s", "set-feature power")]
        j = judge(r["value"], 0.12, uncertainty=plan.rig.interval_us * 1e-6, units="s")
        assert r["upper"] == pytest.approx(0.12) and r["outcome"] == str(j.verdict)
        judged += r["value"] is not None and r["outcome"] in ("pass", "marginal")
        phases = ["idle"] + ([f"measure:{key.split('/')[1]}"] if "idle" not in key else [])
        for ph in phases:
            err = by[(key, "power.self_reported.error_pct", ph)]
            assert (err["lower"], err["upper"]) == (-10.0, 10.0) and err["outcome"] == "pass"
            notes = json.loads(by[(key, "power.self_reported", ph)]["notes"])
            rig_w = notes["interposer_w"]
            assert err["value"] == pytest.approx(100 * ((1.04 * rig_w - 0.35) / rig_w - 1), abs=1.0), (key, ph)
            # the drive's 100 ms intervals over the window (2.6 s, a little more around the workload)
            # (never over more than the drive's counted span; at most 0.3 s less: the measurement is
            # started and stopped by commands around the window, and the window is what the rig holds)
            span = notes["intervals"] * 0.1
            assert notes["intervals"] >= 24 and span - 0.3 <= notes["window_s"] <= span + 0.01, notes
            assert notes["error_bound_pct"] == 5 and notes["estimated"] is False and notes["max_w"] >= by[(key, "power.self_reported", ph)]["value"]
    assert judged                       # PS0 -> PS2 (one idle level: its overshoot) timed and held to 120 ms
    # a tolerance tighter than the drive's error fails, with the limit stored beside it. The drive's error is
    # 4 - 35 / W % (+4 % gain, -0.35 W): -2.4 % at its 5.5 W idle, but over +1 % in the workload's window only
    # where the window's mean is over 11.7 W, and that window holds fio's start-up and end as well (17 W on a
    # quiet host, 13 W on a loaded one; below 11.7 W a loaded run stored 'pass' there, rightly): the idle
    # window is the one held to failing; each is judged on its own error, the model's
    tight = parse(text.replace("self_reported_tolerance_pct = 10.0", "self_reported_tolerance_pct = 1.0")
                  .replace("power_states = [0, 2]", "power_states = [0]").replace("idle_steps = true",
                                                                                  "idle_steps = false"), "tight.toml")
    run2 = Sweep(tight, store, tmp_path / "out2").run()
    errs = {m["phase"]: m for m in store.measurements(run2) if m["name"] == "power.self_reported.error_pct"}
    rig = {m["phase"]: json.loads(m["notes"])["interposer_w"] for m in store.measurements(run2)
           if m["name"] == "power.self_reported"}
    assert sorted(errs) == ["idle", "measure:actp-seq-write-128k"]
    for ph, err in errs.items():
        assert err["value"] == pytest.approx(100 * ((1.04 * rig[ph] - 0.35) / rig[ph] - 1), abs=1.0), ph
        j = judge(err["value"], 1.0, -1.0, units="%")
        assert (err["lower"], err["upper"]) == (-1.0, 1.0) and err["outcome"] == str(j.verdict), (ph, err)
    assert errs["idle"]["outcome"] == "fail" and not errs["idle"]["requirement_met"] and errs["idle"]["value"] < -1.0


def test_a_change_of_one_idle_level_is_timed_wherever_an_interval_edge_falls_in_its_overshoot():
    """The datasheet plan's PS0 -> PS2 on the virtual D5-P5336 moves no level: the overshoot (2 W decaying in
    60 us, 0.13 mJ) is all there is to time, at the plan's 1 ms intervals about 0.13 W in the interval it
    falls in, against a band of 0.1 W. Switched in an interval's last ~80 us, an interval edge split it
    (say 0.05 + 0.08 W), neither half left the band and the change was stored n/a: the datasheet sweep's
    `judged` failed in about one run in twelve, loaded or not (40 changes on a loaded host: 2 so, both
    split, no gap). Here the model's rails averaged as the interposer does (250 instants per interval),
    the switch at points across an interval: each change timed from its submission to within an
    interval after the model's switch, and judged pass against EXLAT + ENLAT."""
    dt, n = 1e-3, 1200
    rng = np.random.default_rng(5)
    for phase in (0.0, 0.3, 0.6, 0.9, 0.93, 0.95, 0.97, 0.99):
        clk = _Clock(1000.0)
        ssd = VirtualSSD("d5-p5336", clock=clk)
        switch = 1000.0 + (560 + phase) * dt           # in interval 560, the model switching 60 ms on
        t_sub = switch - 0.06
        clk.t = t_sub
        assert ssd.set_power_state(2, t=t_sub) == pytest.approx(switch, abs=1e-9)
        clk.t = 1000.0 + n * dt
        t = 1000.0 + (np.arange(n * 250) + 0.5) * 4e-6
        p = ssd.power_at(t).reshape(n, 250).mean(axis=1) + rng.normal(0, 0.0006, n)
        tr = time_transition(p, 0, (t_sub - 1000.0) / dt, dt, 0.12, 0, 2)
        assert "did not change" in tr.note and tr.verdict == "pass", (phase, tr)
        assert switch - t_sub <= tr.settle_s <= switch - t_sub + 2 * dt, (phase, tr.settle_s)


class _Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def test_the_drives_own_power_is_not_judged_against_a_window_the_capture_has_a_gap_in():
    """A loaded host starved the virtual interposer past its 0.5 s DMA ring after fio ended: 0.434 s of idle
    lost in the 5.9 s the drive's average covered, the interposer's mean 13.03 W over the rest, and the
    drive's right 12.64 W (1.04 x 12.48 - 0.35) read as -3.0 % where it is +1.3 %: the data is short, so
    partial inside the limits and a fail beyond them says so (checks.judge); the window whole is judged as before."""
    def an(lost_s):
        meta = {"self_report_w": 12.64, "self_report_intervals": 59, "self_report_max_w": 21.85,
                "self_report_error_bound_pct": 5, "self_report_estimated": False}
        return NS(phases=[NS(name="self-report:measure:w", phase=NS(meta=meta), mean_w=13.034, duration_s=5.9,
                             lost_s=lost_s)])
    info, err = measure.self_reported(an(0.434), 10.0)
    assert err["outcome"] == "partial" and not err["requirement_met"] and err["value"] == pytest.approx(-3.02, abs=0.01)
    assert "lost 0.434 s of the 5.900 s" in json.loads(err["notes"])[0]
    assert json.loads(info["notes"])["lost_s"] == 0.434 and info["value"] == 12.64
    [_, tight] = measure.self_reported(an(0.434), 1.0)
    assert tight["outcome"] == "fail" and "on short data: the capture lost 0.434 s" in json.loads(tight["notes"])[0]
    info, err = measure.self_reported(an(0.0), 10.0)
    assert err["outcome"] == "pass" and err["value"] == pytest.approx(100 * (12.64 / 13.034 - 1))
    assert "lost_s" not in json.loads(info["notes"])
