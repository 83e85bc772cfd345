"""The virtual drive host's nvme tracepoints (sim/ssd/drive_trace.py): the text the endpoint writes is
read by the same parser as a real kernel's (dut/nvmetrace.py) and says what the virtual SSD did."""
from __future__ import annotations

import time

import pytest

from powerrig.dut import nvmetrace
from powerrig.sim.ssd.drive_trace import LBA_BYTES, SimTrace
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.client import request
from powerrig.sim.ssd.server import SsdServer


@pytest.fixture
def endpoint(tmp_path):
    ssd = VirtualSSD("d5-p5336")
    srv = SsdServer({"/dev/nvme0": ssd}, tmp_path / "s.sock").start()
    yield str(tmp_path / "s.sock"), ssd
    srv.stop()


def test_sim_drive_trace_places_admin_commands_and_lays_out_the_io_moved(endpoint):
    ep, ssd = endpoint
    st = SimTrace(ep, "/dev/nvme0", "t1").start()
    assert st.reason is None and st.lba == {"nvme0n1": LBA_BYTES}
    t0 = time.time()
    eff = request(ep, {"op": "set_power_state", "dev": "/dev/nvme0", "ps": 2, "workload_hint": 1})["effective_at"]
    t1 = time.time()
    jobs = [{"name": "r", "rw": "randread", "bs": 4096, "iodepth": 8, "rate_iops": 3000},
            {"name": "w", "rw": "write", "bs": 131072, "iodepth": 4, "rate_iops": 500}]
    run = request(ep, {"op": "start_io", "dev": "/dev/nvme0n1", "jobs": jobs, "runtime_s": 0.4})["run_id"]
    time.sleep(0.4)
    res = request(ep, {"op": "stop_io", "dev": "/dev/nvme0n1", "run_id": run})
    request(ep, {"op": "smart_log", "dev": "/dev/nvme0"})
    tr, note = nvmetrace.load(st)
    assert tr is not None, note
    sf, log = tr.admin()
    # Set Features FID 02h, cdw11 = PS | WH << 5, stamped where the virtual controller took it
    assert sf.opcode == "nvme_admin_set_features" and sf.args["fid"] == 2 and sf.args["cdw11"] == 2 | (1 << 5)
    assert t0 - 1e-4 <= sf.t_submit <= sf.t_complete <= t1 + 1e-4
    delay = 0.5 * (ssd.profile.state(0).exlat_us + ssd.profile.state(2).enlat_us) * 1e-6
    assert eff - delay == pytest.approx(sf.t_submit, abs=0.002)
    assert nvmetrace.dword(log.args, 0) & 0xFF == 0x02
    io = tr.io_arrays()
    reads = io["bytes"][~io["write"]]
    writes = io["bytes"][io["write"]]
    # the traced I/O is the bytes the drive moved, block by block
    assert set(reads) == {4096.0} and set(writes) == {131072.0}
    assert reads.sum() == pytest.approx(sum(res["read_bytes"]), abs=4096)
    assert writes.sum() == pytest.approx(sum(res["write_bytes"]), abs=131072)
    assert (io["complete"] > io["submit"]).all()
    assert res["t_start"] - 0.001 <= io["submit"].min() and io["submit"].max() <= res["t_end"] + 0.001


def test_sim_drive_trace_instance_gone_is_a_reason(endpoint):
    ep, _ = endpoint
    st = SimTrace(ep, "/dev/nvme0", "t2").start()
    request(ep, {"op": "trace_stop", "dev": "/dev/nvme0", "instance": st.instance})
    tr, why = nvmetrace.load(st)
    assert tr is None and "is gone" in why and why.startswith("nvme_trace:")
    bad = SimTrace(ep + ".missing", "/dev/nvme0", "t3").start()
    assert not bad.started and "not available on the virtual drive host" in bad.reason


def test_sim_drive_trace_places_a_format_from_its_real_start(endpoint):
    """A format (and so its energy window) starts where the controller took it, not where nvme-cli was called."""
    from powerrig.core.timeline import NVME, Event

    ep, _ = endpoint
    st = SimTrace(ep, "/dev/nvme0", "t4").start()
    t_call = time.time()
    time.sleep(0.05)                       # nvme-cli's start: the host interval begins before the command
    request(ep, {"op": "format", "dev": "/dev/nvme0n1"})
    t_ret = time.time() + 0.05
    tr, note = nvmetrace.load(st)
    ev = Event(NVME, "format", t_call, t_ret, meta={"device": "/dev/nvme0n1"})
    assert nvmetrace.place([ev], tr) == {"placed": 1, "unplaced": 0}
    assert ev.meta["opcode"] == "nvme_admin_format_nvm" and ev.meta["host_t_start"] == t_call
    assert ev.t_start >= t_call + 0.05 and ev.t_end <= t_ret - 0.05


def test_sim_drive_trace_more_io_than_a_buffer_holds_is_an_overflow_said_in_one_line(endpoint, monkeypatch):
    from powerrig.sim.ssd import drive_trace

    monkeypatch.setattr(drive_trace, "MAX_EVENTS", 500)
    ep, _ = endpoint
    st = SimTrace(ep, "/dev/nvme0", "t5").start()
    run = request(ep, {"op": "start_io", "dev": "/dev/nvme0n1", "runtime_s": 0.3,
                       "jobs": [{"name": "r", "rw": "randread", "bs": 4096, "iodepth": 8, "rate_iops": 5000}]})["run_id"]
    time.sleep(0.3)
    request(ep, {"op": "stop_io", "dev": "/dev/nvme0n1", "run_id": run})
    tr, why = nvmetrace.load(st)
    assert tr is None and "overflowed" in why and why.startswith("nvme_trace: the trace buffer overflowed")


def test_sim_drive_trace_io_rows_are_the_kernels_lines():
    """The I/O built as byte rows (sim/ssd/trace_lines.py) is, line for line, what trace.h's TP_printk
    writes: the per-line f-strings it replaced, cmdid wrapping at 16 bits and slba carried per job."""
    from powerrig.sim.ssd import drive_trace

    inst = drive_trace.Instance("x", 0, skew=1000.0, cid=65534)
    segs = [(1000.5, 1000.6, [("a", "read", 131072, False, 1, 40 * 131072, 0.0)]),
            (1000.6, 1000.7, [("a", "read", 131072, False, 1, 40 * 131072, 20 * 131072.0)])]
    text = inst.text(drive_trace.io_lines(inst, segs, {"read": 80.0, "write": 20.0}, 2e9, 1000.0, 1001.0)).decode()
    io = [line for line in text.splitlines() if "qid=1" in line]
    n_reads = 8
    assert len(io) == 2 * (n_reads + 2)
    first = ("           fio-1 [000] .....      0.525000: nvme_setup_cmd: nvme0: disk=nvme0n1, qid=1, cmdid=65535, "
             "nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_read slba=0, len=31, ctrl=0x0, dsmgmt=0, reftag=0)")
    assert io[0] == first
    done = ("        <idle>-0 [000] .....      0.525146: nvme_complete_rq: nvme0: disk=nvme0n1, qid=1, cmdid=65535, "
            "res=0x0, retries=0, flags=0x0, status=0x0")
    assert done in io                          # 80 us + 128 KiB at 2 GB/s later
    assert "cmdid=0, nsid=1" in io[2] and "slba=32, len=31" in io[2]
    _, rw, _, _ = nvmetrace.read(text)
    assert rw["write"].sum() == 2 and rw["slba"][~rw["write"]].tolist() == [32.0 * k for k in range(n_reads)]
