"""The runners driving impersonated nvme-cli and fio on virtual SSDs, through the endpoint.

Same code path as the real rig: only the program the runners call differs.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from powerrig.dut.fio import Fio, FioJob, FioPlan
from powerrig.dut.guard import HostView
from powerrig.dut.nvme import NvmeCli
from powerrig.dut.guard import GuardRefused
from powerrig.core.errors import ToolError
from powerrig.core.timeline import FIO, NVME, PHASE, POWER_STATE, Timeline
from powerrig.sim.ssd.model import expected_point
from powerrig.sim.ssd.profile import load
from powerrig.sim.rig import tool_launcher
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.server import SsdServer


@pytest.fixture
def rig(tmp_path):
    ssds = [VirtualSSD("d5-p5336"), VirtualSSD("micron-fdp"), VirtualSSD("client-apst")]
    sock = str(tmp_path / "ssd.sock")
    with SsdServer(ssds, sock) as server:
        tl = Timeline()
        nvme = NvmeCli(tool_launcher("nvme", sock, tmp_path), tl, host=HostView(**server.host))
        fio = Fio(tool_launcher("fio", sock, tmp_path), tl, nvme=nvme)
        yield server, nvme, fio, tl, sock


def test_ps2_sequential_write_bandwidth_and_power_match_profile(rig, tmp_path):
    server, nvme, fio, tl, _ = rig
    ident = nvme.id_ctrl("/dev/nvme0")
    assert [s.max_power_w for s in ident.power_states] == [25.0, 15.0, 10.0]
    assert ident.state(2).worst_transition_us == 120000
    got = nvme.set_power_state("/dev/nvme0", 2)
    assert got.power_state == 2
    time.sleep(0.15)                                    # past ENLAT+EXLAT
    plan = FioPlan([FioJob("seqw", rw="write", bs="128k", iodepth=128, runtime=1.5, time_based=True,
                           filename="/dev/nvme0n1", ioengine="libaio", direct=True)], log_avg_msec=250)
    res = fio.run(plan, tmp_path / "run", serial=ident.sn)
    (job,) = res.jobs
    prof = load("d5-p5336")
    mibps, watts = prof.published_drive_point(2, "write")
    assert job.directions["write"].bw_bytes / 2**20 == pytest.approx(mibps, rel=0.05)
    assert job.time_source == "log" and res.t_call < job.start_utc < job.end_utc < res.t_return
    # the drive's modeled power over the run, as the interposer would see it on the rails
    ssd = server.ssds["/dev/nvme0"]
    t = np.linspace(job.start_utc + 0.1, job.end_utc - 0.1, 20000)
    amps = ssd.rail_currents(t)
    p = amps["12V"] * 12 + amps["3V3"] * 3.3
    assert p.mean() == pytest.approx(watts, rel=0.05)
    assert expected_point(prof, 2)["watts"] == pytest.approx(p.mean(), rel=0.01)
    (ps_ev,) = tl.events(POWER_STATE)
    assert ps_ev.ok and ps_ev.result["confirmed"] == 2 and ps_ev.meta["exit_latency_us"] == 60000
    assert [e.ok for e in tl.events(NVME)] == [True] * len(tl.events(NVME))
    assert len(tl.events(PHASE)) == 1


def test_fio_3_36_impersonation_gives_job_start(rig, tmp_path, monkeypatch):
    server, _, fio, _, _ = rig
    monkeypatch.setenv("POWERRIG_SIM_FIO_VERSION", "3.36")
    plan = FioPlan([FioJob(f"ns{k}", rw="write", bs="128k", iodepth=32, runtime=1, time_based=True,
                           filename=f"/dev/nvme1n{k + 1}") for k in range(2)], log_avg_msec=250)
    res = fio.run(plan, tmp_path / "run", serial=server.ssds["/dev/nvme1"].sn)
    assert res.fio_version == "fio-3.36" and [j.time_source for j in res.jobs] == ["job_start"] * 2
    assert all(j.directions["write"].io_bytes > 0 for j in res.jobs)


def test_io_log_plan_on_the_virtual_drive_places_edges_from_its_per_io_log(rig, tmp_path):
    """The impersonated fio 3.33 writes per-I/O latency logs as the real one does (its first and last
    I/O per direction): an io_log plan is placed by them, as on a QEMU or ssh drive host."""
    server, _, fio, _, _ = rig
    plan = FioPlan([FioJob("r", rw="randread", bs="4k", iodepth=16, runtime=1, time_based=True,
                           filename="/dev/nvme0n1")], io_log=True)
    res = fio.run(plan, tmp_path / "run")
    (job,) = res.jobs
    assert job.time_source == "io_log" and res.t_call <= job.start_utc < job.end_utc <= res.t_return
    assert 0.9 < job.end_utc - job.start_utc < 1.1
    logs = sorted(p.name for p in (tmp_path / "run" / "logs").iterdir())
    assert logs == ["r_clat.1.log", "r_lat.1.log", "r_slat.1.log"]
    # block tracepoints are a drive host's (ssh, agent): here the plan keeps fio's edges and says why
    plan.block_trace = True
    res = fio.run(plan, tmp_path / "run-bt")
    ph = [e for e in fio.timeline.events(kind=PHASE) if e.name == "fio:r"][-1]
    assert res.jobs[0].time_source == "io_log"
    assert ph.meta["block_trace"] == "block_trace: only on a drive host (ssh:// or agent://); fio's edges stand"


def test_missing_device_power_state_and_apst(rig):
    _, nvme, _, tl, _ = rig
    with pytest.raises(ToolError, match="No such file or directory"):
        nvme.id_ctrl("/dev/nvme7")
    assert not tl.events(NVME)[-1].ok
    with pytest.raises(ToolError, match="no power state 3"):
        nvme.set_power_state("/dev/nvme1", 3)
    ps_ev = tl.events(POWER_STATE)[-1]
    assert not ps_ev.ok and "PS0..PS1" in ps_ev.error
    assert not any("set-feature" in " ".join(e.argv or []) for e in tl.events(NVME))   # nothing sent
    from powerrig.dut.nvme import ApstEntry
    assert nvme.get_apst("/dev/nvme2").enabled
    nvme.set_apst("/dev/nvme2", True, [ApstEntry(3, 50)] * 3 + [ApstEntry(4, 500)])
    s = nvme.get_apst("/dev/nvme2")
    assert s.entries[3] == ApstEntry(4, 500)
    nvme.disable_apst("/dev/nvme2")
    assert not nvme.get_apst("/dev/nvme2").enabled


def test_fio_failing_mid_run_fails_the_event_and_returns_nothing(rig, tmp_path):
    server, _, fio, tl, _ = rig
    server.ssds["/dev/nvme0"].inject_fault(0.4)
    plan = FioPlan([FioJob("w", rw="write", bs="128k", runtime=2, time_based=True, filename="/dev/nvme0n1")])
    with pytest.raises(ToolError, match="fio failed.*Input/output error"):
        fio.run(plan, tmp_path / "run", serial=server.ssds["/dev/nvme0"].sn)
    (ev,) = tl.events(FIO)
    # the I/O stopped at the fault (0.4 s), not at the runtime (2 s): one 500 ms log window, not four
    assert len((tmp_path / "run" / "logs" / "w_bw.1.log").read_text().splitlines()) == 1
    assert not ev.ok and not tl.events(PHASE)


def test_fio_on_a_path_that_is_not_a_virtual_device(rig, tmp_path):
    _, _, fio, tl, _ = rig
    plan = FioPlan([FioJob("r", rw="read", runtime=1, time_based=True, filename="/dev/nvme9n1")])
    with pytest.raises(ToolError, match="No such file or directory"):
        fio.run(plan, tmp_path / "run")
    with pytest.raises(GuardRefused, match="not a block device"):      # a write never reaches fio
        fio.run(FioPlan([FioJob("w", runtime=1, time_based=True, filename="/dev/nvme9n1")]), tmp_path / "w",
                serial="ANY")


def test_smart_fdp_and_ocp_logs_through_tools(rig, tmp_path):
    server, nvme, fio, _, _ = rig
    before = nvme.smart_log("/dev/nvme1")
    # FDP: every job writes its namespace with placement directives (fio fdp=1 through passthrough)
    plan = FioPlan([FioJob(f"ns{k}", rw="write", bs="128k", iodepth=32, runtime=1, time_based=True,
                           filename=f"/dev/ng1n{k + 1}", ioengine="io_uring_cmd", extra={"fdp": 1})
                    for k in range(8)])
    res = fio.run(plan, tmp_path / "run", serial=server.ssds["/dev/nvme1"].sn)
    host = sum(j.directions["write"].io_bytes for j in res.jobs)
    after = nvme.smart_log("/dev/nvme1")
    assert (after.data_units_written - before.data_units_written) * 512000 == pytest.approx(host, rel=0.02)
    fdp = nvme.fdp_stats("/dev/nvme1")
    assert fdp.host_bytes_written == pytest.approx(host, rel=0.02) and fdp.waf == pytest.approx(1.0, abs=0.06)
    assert nvme.ocp_smart_add_log("/dev/nvme1")["physical_media_units_written"] >= fdp.media_bytes_written
    with pytest.raises(ToolError, match="Invalid Log Page"):
        nvme.fdp_stats("/dev/nvme0")
    # the same jobs without directives all land in the default reclaim unit handle and mix there
    plain = FioPlan([FioJob(f"ns{k}", rw="write", bs="128k", iodepth=32, runtime=1, time_based=True,
                            filename=f"/dev/nvme1n{k + 1}") for k in range(8)])
    fio.run(plain, tmp_path / "plain", serial=server.ssds["/dev/nvme1"].sn)
    mixed = nvme.fdp_stats("/dev/nvme1")
    assert (mixed.media_bytes_written - fdp.media_bytes_written) / (mixed.host_bytes_written - fdp.host_bytes_written) > 1.5


@pytest.mark.parametrize("version", ["1.16", "2.0", "2.6", "2.11", "2.16"])
def test_parsers_read_every_impersonated_nvme_cli_version(rig, monkeypatch, version):
    _, nvme, _, _, _ = rig
    monkeypatch.setenv("POWERRIG_SIM_NVME_VERSION", version)
    ident = nvme.id_ctrl("/dev/nvme2")
    assert [s.non_operational for s in ident.power_states] == [False, False, False, True, True]
    assert ident.state(4).max_power_w == 0.005
    assert nvme.smart_log("/dev/nvme2").temperature_k > 273
    assert nvme.version().major == int(version.split(".")[0])


def test_endpoint_missing_is_a_clear_error(tmp_path):
    nvme = NvmeCli(tool_launcher("nvme", str(tmp_path / "nope.sock"), tmp_path))
    with pytest.raises(ToolError, match="endpoint .* does not exist"):
        nvme.id_ctrl("/dev/nvme0")


def test_module_entry_points_run():
    p = subprocess.run([sys.executable, "-m", "powerrig.sim.tools.fio_cli", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.strip() == "fio-3.33"


def _sim_nvme(sock, version, *args):
    import os
    env = dict(os.environ, POWERRIG_SIM_NVME_VERSION=version)
    p = subprocess.run([sys.executable, "-m", "powerrig.sim.tools.nvme_cli", "--endpoint", sock, *args],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_impersonated_1x_prints_raw_scale_bytes_and_the_parser_decodes_them(rig, monkeypatch):
    _, nvme, _, _, sock = rig
    import json as _json
    psd0 = _json.loads(_sim_nvme(sock, "1.16", "id-ctrl", "/dev/nvme2", "-o", "json"))["psds"][0]
    assert psd0["idle_scale"] == 2 << 6 and psd0["active_work_scale"] == (2 << 6) | 2
    monkeypatch.setenv("POWERRIG_SIM_NVME_VERSION", "1.16")
    ps0 = nvme.id_ctrl("/dev/nvme2").state(0)
    assert ps0.idle_power_w == pytest.approx(load("client-apst").power["idle_w"]) and ps0.active_power_w == 8.0


@pytest.mark.parametrize("version,kind", [("1.16", float), ("2.0", float), ("2.3", str), ("2.6", int), ("2.16", int)])
def test_impersonated_smart_log_and_id_ctrl_print_what_that_version_prints(rig, version, kind):
    _, _, _, _, sock = rig
    import json as _json
    text = _sim_nvme(sock, version, "smart-log", "/dev/nvme0", "-o", "json")
    log = _json.loads(text)
    assert type(log["data_units_written"]) is kind and type(log["power_on_hours"]) is kind
    assert isinstance(log["thm_temp1_trans_count"], int) and isinstance(log["warning_temp_time"], int)
    assert log["temperature_sensor_1"] == log["temperature"] and "temperature_sensor_2" in log
    if version.startswith("1."):
        assert '"power_on_hours" : 1200.000000' in text          # 1.x: long double, "%Lf"
    ctrl = _json.loads(_sim_nvme(sock, version, "id-ctrl", "/dev/nvme0", "-o", "json"))
    assert {"cntrltype", "sanicap", "vwc", "sqes", "cqes", "oncs", "subnqn"} <= set(ctrl)
    assert (ctrl["sqes"], ctrl["cqes"]) == (0x66, 0x44)
    human = _sim_nvme(sock, version, "smart-log", "/dev/nvme0")
    import re
    m = re.search(r"^temperature\s*: (\d+) C(?: \((\d+) Kelvin\))?$", human, re.M)
    if version.startswith("1."):
        assert m and m.group(2) is None and abs(int(m.group(1)) - (log["temperature"] - 273)) <= 1
    else:
        assert m and int(m.group(1)) == int(m.group(2)) - 273          # nvme-cli's Celsius: K - 273


def test_impersonated_fio_reports_groups_as_real_fio_does(rig, tmp_path):
    """stonewall runs after the group before it, new_group beside it; under group_reporting one entry per
    group with job_runtime summed over its clones (real fio 3.33: tests/data/fio/group-reporting)."""
    server, _, fio, _, _ = rig
    sn = server.ssds["/dev/nvme1"].sn
    common = dict(bs="128k", runtime=0.6, time_based=True)
    plan = FioPlan([FioJob("a", rw="write", numjobs=2, iodepth=8, filename="/dev/nvme1n1", **common),
                    FioJob("b", rw="read", iodepth=128, filename="/dev/nvme1n2", extra={"stonewall": 1}, **common),
                    FioJob("c", rw="randwrite", numjobs=2, filename="/dev/nvme1n3", extra={"new_group": 1}, **common)],
                   group_reporting=True, log_avg_msec=100)
    res = fio.run(plan, tmp_path / "run", serial=sn)
    raw = json.loads((tmp_path / "run" / "fio.json").read_text())
    assert [j["groupid"] for j in raw["jobs"]] == [0, 1, 2] and [j.name for j in res.jobs] == ["a", "b", "c"]
    a, b, c = raw["jobs"]
    assert a["job_runtime"] > 1.7 * a["write"]["runtime"]        # summed over 2 clones, as fio does
    assert a["iodepth_level"]["8"] == 100.0 and b["iodepth_level"][">=64"] == 100.0
    assert c["iodepth_level"]["1"] == 100.0
    assert sum(a["latency_us"].values()) + sum(a["latency_ms"].values()) + sum(a["latency_ns"].values()) == \
        pytest.approx(100.0, abs=0.01) and max(a["latency_us"].values()) > 0
    assert {d["name"] for d in raw["disk_util"]} == {"nvme1n1", "nvme1n2", "nvme1n3"}
    ra, rb, rc = res.jobs
    assert ra.end_utc <= rb.start_utc + 0.05 and abs(rb.start_utc - rc.start_utc) < 0.2   # stages in order
    assert 0.4 < ra.end_utc - ra.start_utc < 0.9                 # its own span, not the summed runtime


def test_impersonated_fio_reads_sizes_itself():
    from powerrig.sim.tools import fio_cli
    import powerrig.dut.fio as runner
    assert fio_cli.parse_size is not runner.parse_size
    assert [fio_cli.parse_size(s) for s in ("4k", "4KiB", "1m", "512", "1.5g")] == [4096, 4096, 1 << 20, 512, 3 << 29]
    assert fio_cli.parse_size("25%", 1000) == 250
    with pytest.raises(ValueError):
        fio_cli.parse_size("4q")


def test_power_measurement_log_through_get_log(rig):
    """Log 25h the way nvme-cli 2.3 reads a log it has no command for: `get-log --log-id=0x25`, a hex
    dump (or raw bytes with -b), in the spec's layout (struct nvme_power_meas_log: version 0); the
    D5-P5336 measures from a Set Features 25h start (+4 % -0.35 W); a drive without it answers Invalid
    Log Page, an unknown log id likewise (tests/test_drive_claims.py has the rest)."""
    from powerrig.dut import claims

    server, nvme, _, tl, sock = rig
    claims.set_measurement(nvme, "/dev/nvme0", server.ssds["/dev/nvme0"].sn)
    time.sleep(1.0)
    log = claims.read_power_measurement(nvme, "/dev/nvme0")
    assert log.ver == 0 and log.pmgn == 1 and log.enabled and log.pmc >= 8 and log.phbs_mw == 250
    ssd = server.ssds["/dev/nvme0"]
    true_w = float(ssd.power_at(np.linspace(time.time() - 1.0, time.time(), 400)).mean())
    assert log.aipwr_w == pytest.approx(1.04 * true_w - 0.35, abs=0.01)
    ev = [e for e in tl.events(NVME) if e.name == "get-log power-measurement"][0]
    assert ev.argv[-2:] == ["--log-id=0x25", "--log-len=512"] and ev.ok
    cmd = [sys.executable, "-m", "powerrig.sim.tools.nvme_cli", "--endpoint", sock, "get-log", "/dev/nvme0",
           "--log-id=0x25", "--log-len=24"]
    raw = subprocess.run(cmd + ["-b"], capture_output=True).stdout
    assert len(raw) == 24 and raw[0] == 0 and int.from_bytes(raw[8:12], "little") >= log.pmc
    with pytest.raises(claims.NotSupported, match="Invalid Log Page"):
        claims.read_power_measurement(nvme, "/dev/nvme1")      # the FDP profile reports no power of its own
    p = subprocess.run(cmd[:-2] + ["--log-id=0x26", "--log-len=24"], capture_output=True, text=True)
    assert p.returncode == 1 and "Invalid Log Page" in p.stderr
