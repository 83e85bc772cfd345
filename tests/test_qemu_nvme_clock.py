"""A drive host's clock stepped by an hour (issue 37): in a QEMU guest, `date -s` an hour ahead between
a first clock map and a fio run. The map follows the clock as it is now (the phase lands within 5 ms of
QEMU's own trace of its I/O), the step's clock check sees the move and gives the reason a sweep stores
the step invalid with, and a command trace across the step refuses its markers. QEMU's trace is truth
only. The unit half (a fake drive host's clock) runs without a guest."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from powerrig.core.timeline import PHASE, Timeline
from powerrig.dut import nvmetrace, runners
from powerrig.dut.agent import GuestClock
from powerrig.dut.commands import helper_argv
from powerrig.dut.fio import FioJob, FioPlan
from powerrig.dut.remote import drive_host
from powerrig.sweep import clock_check

NS = "/dev/nvme0n1"
STEP = 'date -s "$(date -d @$(( $(date +%s) + 3600 )) "+%Y-%m-%d %H:%M:%S")" > /dev/null'


def _an_hours_step(reason: str) -> bool:
    """The move a check's reason quotes is STEP's: STEP reads whole seconds, then sets them plus 3600 a
    moment later, so the step is 3600 s less the fraction of a second `date +%s` dropped and the time its
    shell took, which can pass a second boundary on a loaded TCG guest (3598.98 and 3598.99 s seen in CI)."""
    return 3598.0 < float(reason.split("moved ")[1].split(" s ")[0]) <= 3600.1


@dataclass
class _Rig:
    drive_host: str | None


class _Clock:
    def __init__(self, offsets):
        self.offsets = list(offsets)

    def clock(self, fresh=False):
        return GuestClock(self.offsets.pop(0), 0.0004, 0.0)


def test_clock_check_gives_a_reason_only_when_the_clock_moved(monkeypatch):
    for offsets, moved in (([-0.25, -0.25 + 0.003], False), ([-0.25, 3599.75], True), ([1.0, 0.97], True)):
        monkeypatch.setattr(clock_check, "drive_host", lambda url, o=offsets: _Clock(o))
        why = clock_check.ClockCheck(_Rig("agent:///x.sock")).before().after()
        assert (why is not None) == moved
        if moved:
            assert why.startswith("the drive host's clock moved") and "run the step again" in why and "\n" not in why
    # a rig whose tools run on this host: nothing to check
    assert clock_check.ClockCheck(_Rig(None)).before().after() is None


@pytest.fixture
def qrig(qemu_drive):
    """The session's QEMU rig (conftest.py: shared with test_qemu_nvme.py), its guest's clock stepped
    back after the test by as much as the test moved it (to within the second STEP's shell truncates),
    so the session's other tests find the guest's clock as it booted."""
    remote = drive_host(qemu_drive["drive_host"])
    before = remote.clock(fresh=True).offset_s
    yield qemu_drive
    moved = remote.clock(fresh=True).offset_s - before
    if abs(moved) >= 0.5:
        remote.run(helper_argv("sh", "-c", STEP.replace("+ 3600", f"- {round(moved)}")), timeout=30)
        back = remote.clock(fresh=True).offset_s - before
        assert abs(back) < 2.0, f"the guest's clock is {back:+.2f} s off where it was before the test"


def test_qemu_nvme_clock_stepped_an_hour_is_remapped_or_refused(qrig, tmp_path):
    from powerrig.sim.qemu.trace import read_all
    import time

    st = qrig
    remote = drive_host(st["drive_host"])
    tl = Timeline()
    nvme, fio = runners({"nvme": st["nvme"], "fio": st["fio"], "drive_host": st["drive_host"]}, tl)
    before = remote.clock(fresh=True)
    check = clock_check.ClockCheck(_Rig(st["drive_host"])).before()
    trace = nvmetrace.KernelTrace(remote, "/dev/nvme0", "clock").start()
    assert trace.started, trace.reason
    remote.run(helper_argv("sh", "-c", STEP), timeout=30)
    # the step's check sees the hour and says why the step cannot stand
    why = check.after()
    assert why is not None and _an_hours_step(why)
    # a command trace across the step refuses its markers: the host intervals stand, said why
    got, note = nvmetrace.load(trace)
    assert got is None and "stepped" in note
    # the map follows the clock as it is now: a fio run after the step lands on QEMU's trace of its I/O
    after = remote.clock()
    assert 3598.0 < after.offset_s - before.offset_s <= 3600.1
    plan = FioPlan([FioJob("r", rw="read", bs="128k", iodepth=8, runtime=0.6, time_based=True, filename=NS,
                           direct=True)], io_log=True, block_trace=True)
    res = fio.run(plan, tmp_path / "r")
    job = res.jobs[0]
    nvme.smart_log("/dev/nvme0")              # a command after the run: QEMU's trace has the run once it has this
    deadline = time.time() + 30               # (its file is written late on a loaded host)
    while True:
        q = read_all(st["trace"])
        if any(c.kind == "admin" and c.t_submit >= res.t_return for c in q) or time.time() > deadline:
            break
        time.sleep(0.5)
    io = [c for c in q if c.kind == "read" and c.t_complete is not None and res.t_call - 1 <= c.t_submit <= res.t_return + 1]
    assert io, "QEMU traced no read of the run"
    assert abs(job.start_utc - min(c.t_submit for c in io)) < 0.005
    assert abs(job.end_utc - max(c.t_complete for c in io)) < 0.005
    ph = [e for e in tl.events(kind=PHASE) if e.name.startswith("fio:")]
    assert ph and abs(ph[-1].t_start - job.start_utc) < 1e-6


SWEEP = """
name = "qemu clock stepped mid-step"
power_states = [0]
idle_steps = false
[rig]
port = "rig:{rig}"
interval_us = 1000
[drive]
controller = "/dev/nvme0"
namespace = "/dev/nvme0n1"
serial = "{serial}"
[timing]
settle_s = 0.2
measure_s = 3.0
block_trace = true     # fio's edges from the guest kernel's first and last block I/O (ms placement)
[[workload]]
name = "read-4k"
rw = "randread"
bs = "4k"
iodepth = 8
[[workload]]
name = "read-128k"
rw = "read"
bs = "128k"
iodepth = 8
"""


def test_qemu_nvme_sweep_with_the_clock_stepped_inside_a_step(qrig, tmp_path, monkeypatch):
    """A real sweep on the QEMU drive host whose guest clock is stepped an hour ahead while its first
    step's fio runs: that step is stored invalid with the reason (its phases were placed by a clock that
    changed under them), the run goes on, and the next step is done with its fio phase starting within
    5 ms of QEMU's own trace of its reads (the map follows the clock as it is after the step)."""
    import threading
    import time

    from powerrig.capture import CaptureReader
    from powerrig.results import ResultStore
    from powerrig.sim.qemu.trace import read_all
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.plan import parse

    remote = drive_host(qrig["drive_host"])
    stepped = threading.Event()
    real_before = clock_check.ClockCheck.before

    def before(self):
        out = real_before(self)
        if not stepped.is_set() and not getattr(before, "armed", False):
            before.armed = True                      # the first step: step the guest's clock 1 s into its fio

            def step_clock():
                time.sleep(1.0)
                remote.run(helper_argv("sh", "-c", STEP), timeout=30)
                stepped.set()
            threading.Thread(target=step_clock, daemon=True).start()
        return out
    monkeypatch.setattr(clock_check.ClockCheck, "before", before)
    plan = parse(SWEEP.format(rig=qrig["id"], serial=qrig["serial"]), str(tmp_path / "plan.toml"))
    store = ResultStore(tmp_path / "r.sqlite")
    run_id = Sweep(plan, store, tmp_path / "out").run()
    assert stepped.is_set()
    first, second = store.steps(run_id)
    assert first["status"] == "invalid", first
    assert "clock moved" in first["invalid_reason"] and "run the step again" in first["invalid_reason"]
    assert _an_hours_step(first["invalid_reason"]), first["invalid_reason"]
    assert second["status"] == "done", second
    assert store.run(run_id)["status"] == "done"
    # the second step's fio phase against QEMU's trace of its reads
    with CaptureReader(second["capture"]) as r:
        ph = [e for e in r.events_in(kind=PHASE) if e.name.startswith("fio:")]
    assert ph, "the second step's capture has no fio phase"
    deadline = time.time() + 30                   # QEMU's trace file is written late on a loaded host
    while True:
        q = read_all(qrig["trace"])
        io = [c for c in q if c.kind == "read" and c.t_complete is not None
              and ph[-1].t_start - 1 <= c.t_submit <= ph[-1].t_end + 1]
        if (io and max(c.t_complete for c in io) >= ph[-1].t_end - 0.005) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert io, "QEMU traced no read of the second step"
    d0, d1 = ph[-1].t_start - min(c.t_submit for c in io), ph[-1].t_end - max(c.t_complete for c in io)
    assert ph[-1].meta["time_source"] == "block_trace", ph[-1].meta
    # the map: the phase starts where QEMU saw its first read. Its end is the guest kernel's last block
    # completion, which comes after QEMU's by the time the halted vCPU takes to wake for the interrupt:
    # microseconds on hardware, 6-7.5 ms in about one run in seven under TCG on a busy 2-core host. Its
    # start is the kernel's first issue, which QEMU traces once its main loop runs the doorbell's work:
    # 6.7 ms later once in a make test run (30 Nov 13:04, one vCPU). Both tails are the host's scheduling
    # and point one way each (the guest issues before QEMU sees; QEMU completes before the guest
    # wakes), so each may lag by 10 ms; the other way, where a map's error would show, stays 5 ms
    assert -0.010 < d0 < 0.005 and -0.005 < d1 < 0.010, (d0, d1)

