"""The whole virtual rig, the way a bench is used: `powerrig sim start`, the interposer streaming
over its pty, nvme-cli and fio runners driving the virtual SSD through the impersonated tools, and
every event placed on the sample clock.

Must show (issue 3): in PS2, 128 KiB sequential writes; the interposer's power and fio's bandwidth
match the profile within 5%; the power change appears on the rails within ENLAT+EXLAT of the
set-feature event on the capture's clock.
"""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from conftest import run_cli
from powerrig.dut.fio import Fio, FioJob, FioPlan
from powerrig.dut.guard import HostView
from powerrig.dut.nvme import NvmeCli
from powerrig.core.timeline import NVME, PHASE, POWER_STATE, Timeline
from powerrig.interposer.client import Interposer
from powerrig.core.blocks import IntervalBlock
from powerrig.sim.ssd.model import expected_point


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    import os

    root = tmp_path_factory.mktemp("rigs")
    os.environ["POWERRIG_SIM_DIR"] = str(root)
    r = run_cli("sim", "start", "--json", "--profile", "d5-p5336")
    assert r.returncode == 0, r.stderr
    state = json.loads(r.stdout)
    yield state
    run_cli("sim", "stop", "--all")
    os.environ.pop("POWERRIG_SIM_DIR", None)


def _wait_for_writes(blocks: list, watts: float, hold_s: float, timeout: float = 30.0) -> None:
    """Until the interposer has seen more than ``watts`` for ``hold_s``: the PS0 writes are under way.
    Judged on 1 ms means: between the drive's program pulses a 100 us interval dips well under its mean."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recent = [b for b in blocks[-200:]]
        if recent:
            p = np.concatenate([b.total_power() for b in recent])
            k = max(1, int(round(1e-3 / recent[-1].interval_s)))
            n = int(hold_s / recent[-1].interval_s) // k * k
            if len(p) >= n and np.all(p[len(p) - n:].reshape(-1, k).mean(axis=1) > watts):
                return
        time.sleep(0.1)
    raise AssertionError(f"the PS0 writes never showed above {watts} W for {hold_s} s")


@pytest.fixture(scope="module")
def session(rig, tmp_path_factory):
    """Stream at 100 us while: PS0 writes, a switch to PS2 mid-run, then a PS2 write phase."""
    out = tmp_path_factory.mktemp("fio")
    tl = Timeline()
    nvme = NvmeCli(rig["nvme"], tl, host=HostView(**rig["host"]))
    fio = Fio(rig["fio"], tl, nvme=nvme)
    ctrl, ns = rig["controller"], rig["namespaces"][0]
    ident = nvme.id_ctrl(ctrl)
    blocks: list[IntervalBlock] = []
    with Interposer.open(rig["port"]) as dev:
        with dev.stream(interval_us=100) as st:
            done = threading.Event()

            def collect():
                for b in st.blocks():
                    blocks.append(b)
                    if done.is_set():
                        return

            reader = threading.Thread(target=collect, daemon=True)
            reader.start()
            time.sleep(1.0)
            nvme.set_power_state(ctrl, 0)
            job = FioJob("ps0-then-ps2", rw="write", bs="128k", iodepth=128, runtime=4, time_based=True, filename=ns)
            bg = threading.Thread(target=fio.run, args=(FioPlan([job]), out / "a"),
                                  kwargs={"serial": rig["serial"]}, daemon=True)
            bg.start()
            _wait_for_writes(blocks, watts=15.0, hold_s=1.2)      # fio has started (after its guard check)
            switch = nvme.set_power_state(ctrl, 2)
            bg.join()
            time.sleep(0.5)
            result = fio.run(FioPlan([FioJob("ps2-seqwrite", rw="write", bs="128k", iodepth=128, runtime=4,
                                             time_based=True, filename=ns)]), out / "b", serial=rig["serial"])
            time.sleep(0.5)
            done.set()
            reader.join(timeout=10)
        summary = st.summary()
        model = dev.clock.model()
    return {"tl": tl, "ident": ident, "blocks": IntervalBlock.concat(blocks), "summary": summary, "model": model,
            "switch": switch, "result": result}


def test_no_data_lost(session):
    s = session["summary"]
    assert (s["dropped_frames"], s["gaps"], s["crc_errors"]) == (0, 0, 0)
    assert session["blocks"].valid.all()


def test_ps2_seq_write_power_and_bandwidth_match_the_profile(session):
    want = expected_point("d5-p5336", 2, rw="write", bs=131072, iodepth=128)
    job = session["result"].jobs[0]
    bw_mib = job.directions["write"].bw_bytes / 2**20
    assert bw_mib == pytest.approx(want["MiBps"], rel=0.05), (bw_mib, want)
    # the interposer's total power over the job's own start/end, placed on the sample clock
    b, m = session["blocks"], session["model"]
    i0, i1 = m.index(job.start_utc), m.index(job.end_utc)
    rows = (b.index >= i0 + 0.5 / 4e-6) & (b.index + b.interval_samples <= i1 - 0.2 / 4e-6)  # settled part
    assert rows.sum() > 20_000
    watts = b.total_power()[rows].mean()
    assert watts == pytest.approx(want["watts"], rel=0.05), (watts, want)


def test_power_change_lands_within_entry_plus_exit_latency(session):
    ps_ev = session["tl"].events(kind=POWER_STATE)[-1]
    assert ps_ev.ok and ps_ev.meta["requested_ps"] == 2 and ps_ev.result["confirmed"] == 2
    # the set-feature command itself (the POWER_STATE event also spans the confirming get-feature)
    ev = [e for e in session["tl"].events(kind=NVME) if e.name == "set-feature power" and e.t_start >= ps_ev.t_start][0]
    assert ev.ok and ev.t_end <= ps_ev.t_end
    d = session["ident"]
    lat_s = (d.power_states[0].exit_latency_us + d.power_states[2].entry_latency_us) * 1e-6
    b, m = session["blocks"], session["model"]
    t = m.utc(b.index + b.interval_samples / 2)
    p = b.total_power()
    before = np.median(p[(t > ev.t_start - 1.0) & (t < ev.t_start - 0.1)])
    after = np.median(p[(t > ev.t_end + 0.5) & (t < ev.t_end + 1.5)])
    assert before - after > 5.0, (before, after)            # PS0 writes ~25 W -> PS2 10 W
    # the first interval after the call whose power has crossed halfway down and stays there
    half = (before + after) / 2
    k0 = np.searchsorted(t, ev.t_start - 0.05)
    below = p[k0:] < half
    settle = np.flatnonzero(np.convolve(below, np.ones(50), "valid") == 50)[0]   # 5 ms below
    t_change = t[k0 + settle]
    assert ev.t_start - 200e-6 <= t_change <= ev.t_end + lat_s + 200e-6, (
        t_change - ev.t_start, ev.t_end - ev.t_start, lat_s)


def test_every_phase_is_on_the_timeline(session):
    phases = session["tl"].events(kind=PHASE)
    names = [e.name for e in phases]
    assert any("ps2-seqwrite" in n for n in names), names
    for e in phases:
        assert e.t_end is not None and e.t_end > e.t_start
        # everything efficiency needs travels with the phase
        assert (e.meta["rw"], e.meta["bs"], e.meta["iodepth"]) == ("write", 131072, 128), e.meta
        assert e.meta["bw_bytes"] > 0 and e.meta["iops"] == pytest.approx(e.meta["bw_bytes"] / 131072, rel=0.01)


def test_several_rigs_at_once_and_clean_errors(rig):
    """A second rig (another profile) runs beside the first; devices finds both; stop ends only it."""
    r = run_cli("sim", "start", "--json", "--profile", "micron-fdp")
    assert r.returncode == 0, r.stderr
    second = json.loads(r.stdout)
    assert second["port"] != rig["port"] and second["endpoint"] != rig["endpoint"]
    listed = [json.loads(line)["id"] for line in run_cli("sim", "list", "--json").stdout.splitlines()]
    assert {rig["id"], second["id"]} <= set(listed)
    found = {d["port"] for d in json.loads(run_cli("devices", "--json").stdout)}
    assert {rig["port"], second["port"]} <= found
    nvme = NvmeCli(second["nvme"], Timeline())
    assert "MICRON" in nvme.id_ctrl(second["controller"]).mn.upper()
    r = run_cli("sim", "stop", second["id"])
    assert r.returncode == 0 and second["id"] in r.stdout
    listed = [json.loads(line)["id"] for line in run_cli("sim", "list", "--json").stdout.splitlines()]
    assert second["id"] not in listed and rig["id"] in listed
    bad = run_cli("sim", "start", "--json", "--profile", "no-such-drive")
    assert bad.returncode == 2
    from powerrig.sim.ssd import profile as profiles
    shipped = profiles.available()
    assert {"client-apst", "d5-p5336", "micron-fdp"} <= set(shipped)
    assert bad.stderr.strip().splitlines() == [
        f"powerrig: error: unknown drive profile 'no-such-drive'; available: {', '.join(shipped)}"
        " (or 'qemu': the real NVMe stack in a QEMU guest)"]


def test_a_rig_started_by_a_killed_process_stops_itself(tmp_path, monkeypatch):
    """A sweep, the GUI or a test session starts its rig ``owned``: killed with SIGKILL it cannot stop
    the rig, so the rig notices and goes (it used to burn a core until someone found it). A rig from
    `powerrig sim start` (the fixture above) is not owned and lives until `powerrig sim stop`."""
    import os
    import signal
    import subprocess
    import sys

    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path))
    owner = subprocess.Popen([sys.executable, "-c", "import json, time\n"
                              "from powerrig.sim import rig\n"
                              "print(json.dumps(rig.start('client-apst', owned=True)), flush=True)\n"
                              "time.sleep(600)\n"], stdout=subprocess.PIPE, text=True)
    state = json.loads(owner.stdout.readline())
    assert [json.loads(line)["id"] for line in run_cli("sim", "list", "--json").stdout.splitlines()] == [state["id"]]
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=10)
    deadline = time.monotonic() + 15
    while os.path.exists(f"/proc/{state['pid']}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not os.path.exists(f"/proc/{state['pid']}") or open(f"/proc/{state['pid']}/stat").read().split()[2] == "Z"
    assert run_cli("sim", "list", "--json").stdout.strip() == ""
