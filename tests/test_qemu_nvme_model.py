"""The QEMU drive host's pieces that need no guest: its trace read into commands, the power model
those commands drive (live and offline alike), the agent transport's URL and the clock mapping."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time

import numpy as np
from pathlib import Path
import pytest

from powerrig.dut.agent import AgentHost
from powerrig.dut.remote import RemoteError, drive_host
from powerrig.sim.qemu import priority
from powerrig.sim.qemu.machine import AgentLink
from powerrig.sim.qemu.power import PowerParams, TracePower, energy
from powerrig.sim.qemu.trace import TraceParser, read_all

T0 = 1795590000.0


def _lines(t0=T0):
    """A read of 128 KiB on queue 2 from t0 to t0 + 1 ms, and an admin identify 10 ms later."""
    return [f"1@{t0:.6f}:pci_nvme_io_cmd cid 7 nsid 0x1 sqid 2 opc 0x2 opname 'NVME_NVM_CMD_READ'",
            f"1@{t0:.6f}:pci_nvme_read cid 7 nsid 1 nlb 256 count 131072 lba 0x0",
            f"1@{t0 + 0.001:.6f}:pci_nvme_enqueue_req_completion cid 7 cqid 2 dw0 0x0 dw1 0x0 status 0x0",
            f"1@{t0 + 0.010:.6f}:pci_nvme_admin_cmd cid 4 sqid 0 opc 0x6 opname 'NVME_ADM_CMD_IDENTIFY'",
            f"1@{t0 + 0.0102:.6f}:pci_nvme_enqueue_req_completion cid 4 cqid 0 dw0 0x0 dw1 0x0 status 0x410e",
            "garbage that is not a trace line"]


def test_qemu_nvme_trace_lines_become_commands(tmp_path):
    p = TraceParser()
    cmds = [c for c in (p.feed(ln) for ln in _lines()) if c is not None]
    rd, idf = cmds
    assert (rd.kind, rd.nbytes, rd.qid, rd.status) == ("read", 131072, 2, 0)
    assert rd.t_complete - rd.t_submit == pytest.approx(0.001, abs=1e-6)
    assert (idf.kind, idf.opname, idf.status) == ("admin", "NVME_ADM_CMD_IDENTIFY", 0x410E)
    assert p.open == {}


def test_qemu_nvme_power_follows_the_commands_and_the_offline_truth_agrees(tmp_path):
    f = tmp_path / "trace.log"
    f.write_text("\n".join(_lines()) + "\n")
    pp = PowerParams()
    read_w = pp.base_w["read"] + pp.per_byte_w["read"] * 131072
    admin_s = max(0.0002, pp.min_busy_s)
    want = (pp.idle_w + pp.aux_3v3_w) * 0.1 + read_w * 0.001 + pp.base_w["admin"] * admin_s
    assert energy(f, T0 - 0.05, T0 + 0.05) == pytest.approx(want, rel=1e-3)
    # the live model, fed by the tail, answers the same power at the same instants
    live = TracePower(f).start()
    try:
        deadline = time.time() + 5
        while time.time() < deadline and len(live._cmds) < 2:
            time.sleep(0.01)
        t = np.array([T0 - 0.001, T0 + 0.0005, T0 + 0.005, T0 + 0.0101])
        w = live.power_at(t)
        assert w == pytest.approx([pp.idle_w + pp.aux_3v3_w, pp.idle_w + pp.aux_3v3_w + read_w,
                                   pp.idle_w + pp.aux_3v3_w, pp.idle_w + pp.aux_3v3_w + pp.base_w["admin"]])
        cur = live.rail_currents(t)
        assert cur["12V"] * 12.0 + cur["3V3"] * 3.3 == pytest.approx(w)
        assert live.known_until() <= time.time()
    finally:
        live.stop()


def test_qemu_nvme_a_command_not_completed_yet_is_busy_until_it_is(tmp_path):
    f = tmp_path / "trace.log"
    f.write_text("\n".join(_lines()[:2]) + "\n")              # submitted, no completion yet
    pp = PowerParams()
    busy = pp.idle_w + pp.aux_3v3_w + pp.base_w["read"] + pp.per_byte_w["read"] * 131072
    cmds = read_all(f)
    assert cmds[0].t_complete is None
    assert energy(cmds, T0, T0 + 0.5) == pytest.approx(busy * 0.5, rel=1e-3)


def test_qemu_nvme_agent_urls_and_a_stopped_drive_host(tmp_path):
    h = drive_host(f"agent://{tmp_path}/relay.sock")
    assert isinstance(h, AgentHost) and h.url == f"agent://{tmp_path}/relay.sock"
    for bad in ("agent:relative.sock", "agent://host/x.sock"):
        with pytest.raises(RemoteError, match="agent:///path/to/socket"):
            drive_host(bad)
    with pytest.raises(RemoteError, match="no agent listens there") as e:
        h.check()
    assert "\n" not in str(e.value)


def test_qemu_nvme_guest_clock_from_the_shortest_round_trip(tmp_path):
    """A relay whose guest runs 0.25 s behind, answering after varying delays: the offset comes
    from the shortest round trip, within its half-width."""
    import json
    import socket

    path = str(tmp_path / "relay.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(16)
    # the slower answers 100-250 ms: a host that starves this thread for 15 ms (the parallel run, 30 Nov)
    # stretches the shortest round trip, but cannot make it look like one of them
    delays = iter([0.15, 0.001, 0.25, 0.1] * 10)

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                c.makefile("rb").readline()
                d = next(delays)
                time.sleep(d)
                c.sendall(json.dumps({"ok": True, "t_guest": time.time() - 0.25}).encode() + b"\n")
                time.sleep(0.0)

    threading.Thread(target=serve, daemon=True).start()
    try:
        c = AgentHost(path).clock(fresh=True)
        assert c.offset_s == pytest.approx(-0.25, abs=c.uncertainty_s + 0.002)
        assert c.uncertainty_s < 0.05           # half the next-shortest round trip: the shortest was taken
        assert AgentHost(path).to_host(T0) == pytest.approx(T0 + 0.25, abs=c.uncertainty_s + 0.002)
    finally:
        srv.close()


def test_qemu_nvme_a_fractional_runtime_ends_in_real_fio(tmp_path):
    """fio reads runtime=0.6 as 0 s, which with time_based never ends (the benchmark's first sweep step
    ran 300 s before this was caught): the job file says 600ms."""
    from powerrig.dut.fio import Fio, FioJob, FioPlan

    job = FioJob("short", rw="read", bs="4k", size="1m", runtime=0.6, time_based=True, filename=str(tmp_path / "f"))
    assert job.options()["runtime"] == "600ms"
    assert FioJob("whole", runtime=2.0).options()["runtime"] == "2"
    t0 = time.monotonic()
    res = Fio(timeline=None, timeout_margin=20).run(FioPlan([job]), tmp_path / "out")
    assert time.monotonic() - t0 < 20
    assert 0.4 <= res.jobs[0].job_runtime_ms / 1000 <= 1.5


# -- phase edges from fio's per-I/O logs (recorded: fio 3.33 in the QEMU guest, randread 4k qd8 0.6 s) ----------
IO_LOG = Path(__file__).parent / "data" / "fio" / "io-log"


def test_qemu_nvme_io_log_span_is_first_submission_and_last_completion_of_recorded_fio():
    from powerrig.dut.fio import STAMP_MID_S, read_io_log_span

    lines = (IO_LOG / "logs" / "j_lat.1.log").read_text().splitlines()
    first_done, first_lat = (int(x) for x in lines[0].split(",")[:2])
    start, end = read_io_log_span(IO_LOG / "logs" / "j_lat.1.log")
    # the first I/O went in its latency before it was reaped (the stamp is cut to whole ms twice)
    assert start == pytest.approx(first_done / 1000 + STAMP_MID_S - first_lat / 1e9, abs=1e-6)
    assert end == int(lines[-1].split(",")[0]) / 1000
    # 0.6 s of time_based I/O, as the job file asked, and fio's own runtime agrees within a few ms
    doc = json.loads((IO_LOG / "fio.json").read_text())
    assert abs((end - start) * 1000 - doc["jobs"][0]["job_runtime"]) < 25
    assert doc["fio version"] == "fio-3.33" and "job_start" not in doc["jobs"][0]


def test_qemu_nvme_io_log_out_of_order_completions_and_what_is_not_a_per_io_log(tmp_path):
    from powerrig.dut.fio import STAMP_MID_S, read_io_log_span

    f = tmp_path / "x_lat.1.log"
    # the second line completed later but was submitted 5 ms before the first line's I/O
    f.write_text(f"{int(T0 * 1000) + 10}, 2000000, 0, 4096, 0\n{int(T0 * 1000) + 12}, 9000000, 0, 4096, 0\n"
                 f"{int(T0 * 1000) + 11}, 1000000, 1, 4096, 0\n")
    start, end = read_io_log_span(f)
    assert start == pytest.approx(T0 + 0.003 + STAMP_MID_S, abs=1e-6) and end == pytest.approx(T0 + 0.012)
    f.write_text("10, 2000000, 0, 4096, 0\n")                # ms since the job's start: no log_unix_epoch
    assert read_io_log_span(f) is None
    f.write_text("")
    assert read_io_log_span(f) is None
    assert read_io_log_span(tmp_path / "missing.log") is None


def test_qemu_nvme_io_log_plan_places_its_job_from_the_recorded_log(tmp_path):
    from powerrig.dut.fio import FioJob, FioPlan, parse_fio_json, read_io_log_span, results_from_report

    plan = FioPlan([FioJob("j", rw="randread", bs="4k", iodepth=8, size="64m", runtime=0.6, time_based=True,
                           filename="/dev/nvme0n1", direct=True, ioengine="libaio")], io_log=True)
    text = plan.job_file("/tmp/out/logs")
    assert "write_lat_log=/tmp/out/logs/j" in text and "log_avg_msec=0" in text and "log_unix_epoch=1" in text
    assert "write_bw_log" not in text                      # per-I/O bandwidth lines would only repeat it
    final, jobs, _ = parse_fio_json((IO_LOG / "fio.json").read_text())
    report = final["timestamp_ms"] / 1000
    shift = 0.25                                             # the drive host's clock runs 0.25 s ahead
    (r,) = results_from_report(plan, final, jobs, IO_LOG / "logs", report - 5, report + 1,
                               to_host=lambda t: t - shift)
    start, end = read_io_log_span(IO_LOG / "logs" / "j_lat.1.log")
    assert r.time_source == "io_log"
    assert (r.start_utc, r.end_utc) == pytest.approx((start - shift, end - shift))
    # without its per-I/O log the same job falls back to the runner's clock, not to a wrong span
    (r2,) = results_from_report(plan, final, jobs, tmp_path, report - 5, report + 1)
    assert r2.time_source == "runner_clock"


def test_qemu_nvme_clock_stepped_by_an_hour_maps_by_the_samples_after_the_step():
    """A guest clock stepped by 1 h between samples of the last 90 s (a GUI, a pytest session or two
    sweeps in a row sampled it before): the map follows the clock as it is now, and the step is seen."""
    from powerrig.dut.agent import estimate, jump_s

    off = -0.25
    before = [(100.0 + k, 100.0 + k + 0.0004 + off, 100.001 + k) for k in range(8)]
    after = [(130.0 + k, 130.0 + k + 0.0006 + off + 3600.0, 130.001 + k) for k in range(8)]
    c = estimate(before + after)
    assert c.offset_s == pytest.approx(off + 3600.0, abs=0.001) and c.uncertainty_s < 0.001
    assert jump_s(before + after) == pytest.approx(3600.0, abs=0.002)
    assert jump_s(before) is None and estimate(before).offset_s == pytest.approx(off, abs=0.001)


def test_qemu_nvme_clock_estimate_is_the_intersection_of_the_samples_bounds():
    from powerrig.dut.agent import estimate

    off = 1.234
    # (sent, guest, answered): one sample quick on the way in, another quick on the way back
    samples = [(10.000, 10.001 + off, 10.020), (20.000, 20.019 + off, 20.020), (30.0, 30.010 + off, 30.030)]
    c = estimate(samples)
    assert c.offset_s == pytest.approx(off, abs=c.uncertainty_s) and c.uncertainty_s <= 0.0011
    assert c.uncertainty_s < min(b - a for a, g, b in samples) / 2          # narrower than any round trip
    # bounds that do not meet (a clock stepped between them): the newest that agree are the clock now
    c = estimate([(0.0, 0.005 + off, 0.010), (50.0, 50.5 + off, 50.030)])
    assert c.offset_s == pytest.approx(off + 0.485) and c.uncertainty_s == pytest.approx(0.015)


def test_qemu_nvme_agent_sync_takes_the_guests_own_time_out_of_the_bounds():
    """agent.sh answers SYNC with its clock on the request's arrival and as the answer leaves (NTP's
    T2, T3): the sample's answer time comes back less the guest's time between, so a slow guest
    (0.6 ms of glob on TCG) widens no bound; an agent with one stamp still maps."""
    host, guest = socket.socketpair()
    link = AgentLink(host)
    f = guest.makefile("rwb", buffering=0)

    def answer(extra: float | None):
        i = f.readline().split()[0].decode()
        time.sleep(0.02)                       # the host's answer arrives >= 20 ms after it asked
        t = time.time() + 5.0                  # the guest's clock runs 5 s ahead
        guest.sendall(f"SYNC {i} {t:.6f}{'' if extra is None else f' {t + extra:.6f}'}\n".encode())

    for extra in (0.015, None):
        th = threading.Thread(target=answer, args=(extra,))
        th.start()
        t_send, t_guest, t_recv = link.sync_sample()
        th.join()
        assert t_send + 5.0 <= t_guest                       # stamped on arrival, after the request left
        wall = time.time()
        if extra is None:
            assert t_recv <= wall and t_recv - t_send >= 0.02     # the old one-stamp answer: the round trip
        else:
            assert t_recv <= wall - 0.0149                         # 15 ms of the guest's own taken out
    guest.close()
    host.close()


def test_qemu_nvme_qemu_runs_ahead_with_short_slices_when_allowed():
    """QEMU stands in for the drive host: the preexec gives it 0.1 ms slices (a kernel with EEVDF
    custom slices) and, when asked, a nice ahead of its parent (root); not allowed leaves it as it
    was, and 0 turns each off."""
    def run(nice, slice_us):
        p = subprocess.Popen(["sleep", "5"], preexec_fn=priority.ahead(lambda: None, nice, slice_us))
        try:
            time.sleep(0.2)
            sched = Path(f"/proc/{p.pid}/sched").read_text() if Path(f"/proc/{p.pid}/sched").exists() else ""
            slc = next((int(line.split(":")[1]) for line in sched.splitlines() if line.startswith("se.slice")), None)
            return os.getpriority(os.PRIO_PROCESS, p.pid) - os.getpriority(os.PRIO_PROCESS, 0), slc
        finally:
            p.kill()
            p.wait()

    off_nice, off_slice = run(0, 0)
    assert off_nice == 0
    nice, slc = run(-10, priority.SLICE_US)
    if os.geteuid() != 0:
        assert nice == 0                        # not allowed: as it was
        return
    assert nice == -10
    if slc is not None and off_slice is not None and off_slice != priority.SLICE_US * 1000:
        assert slc == priority.SLICE_US * 1000  # the kernel took the short slice
