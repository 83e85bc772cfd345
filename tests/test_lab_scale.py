"""Many virtual rigs on one host (docs/scale.md, benchmarks/bench_lab.py): what each one costs.

16 virtual rigs on 2 cores failed with nvme-cli timeouts: every idle rig synthesized 250 kS/s that
nobody read (26% of a core each), and every impersonated nvme-cli or fio call was a Python start
importing ~100 modules. These tests pin the causes by counts, not by times.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from powerrig.dut import _run
from powerrig.dut.nvme import NvmeCli
from powerrig.core.errors import ToolError
from powerrig.sim.rig import tool_command, tool_launcher

# What the impersonated tools may import at all: the standard library's basics and their own modules.
# Before: -m under `site` (the venv's .pth files) with dataclasses (inspect, ast, dis, tokenize) and,
# for fio, statistics (decimal, fractions, random): 99 and 109 modules; now 59 and 58.
MAX_MODULES = 62
NEVER = {"site", "numpy", "dataclasses", "inspect", "ast", "statistics", "decimal", "random", "pathlib",
         "typing", "logging", "argparse", "sqlalchemy"}


def _imports(argv: list[str]) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules a tool's start imports, from `python -X importtime` (one line per module)."""
    p = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, timeout=60)
    mods = {ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
    mods.discard("imported package")             # the header line
    return mods, p


@pytest.mark.parametrize("tool,args,says", [("nvme", ["version"], "nvme version 2.3"),
                                            ("fio", ["--version"], "fio-3.33")])
def test_impersonated_tools_import_only_what_they_need(tool, args, says, tmp_path):
    mods, p = _imports(tool_command(tool, str(tmp_path / "ssd.sock")) + args)
    assert p.returncode == 0 and says in p.stdout, p.stderr[-500:]
    assert not mods & NEVER, sorted(mods & NEVER)
    assert "powerrig.sim.ssd.client" in mods
    assert len(mods) <= MAX_MODULES, (len(mods), sorted(mods))


def test_tools_run_by_path_talk_to_the_drive(tmp_path):
    """The path launch (no site, -P) still finds powerrig and reaches the endpoint."""
    from powerrig.sim.ssd.drive import VirtualSSD
    from powerrig.sim.ssd.server import SsdServer

    sock = str(tmp_path / "ssd.sock")
    with SsdServer(VirtualSSD("d5-p5336"), sock):
        ident = NvmeCli(tool_launcher("nvme", sock, tmp_path)).id_ctrl("/dev/nvme0")   # a prefix is one program
        assert ident.sn.strip() and ident.power_states
        p = subprocess.run(tool_command("nvme", sock) + ["smart-log", "/dev/nvme9"], capture_output=True, text=True)
        assert p.returncode == 1 and "/dev/nvme9: No such file or directory" in p.stderr


def _poll(sim, n: int) -> None:
    for _ in range(n):
        time.sleep(0.002)                # a few hundred samples come due between passes
        sim.device.poll()


def test_an_idle_virtual_interposer_synthesizes_no_samples(tmp_path):
    """No stream, burst, self-test or timed action: the samples are skipped, not made and dropped;
    a stream gets every sample from its start."""
    from powerrig.sim.interposer.board import VirtualInterposer

    sim = VirtualInterposer(state_dir=str(tmp_path / "board"))
    made = []
    real = sim.frontend.sample
    sim.frontend.sample = lambda t: (made.append(len(t)), real(t))[1]
    try:
        _poll(sim, 10)
        assert made == [] and sim.board.samples_skipped > 0
        start = sim.device.cmd_start({"interval_us": 1000, "rails": ["12V"]})
        _poll(sim, 10)
        assert sum(made) > 0
        # every sample from the stream's start was made, or counted lost (a pass late by more than the
        # ring on a busy host); none went missing silently
        assert sim.board.gen_index - start["first_index"] == sum(made) + sim.device.lost_samples
        sim.device.cmd_stop({})
        skipped, n = sim.board.samples_skipped, len(made)
        _poll(sim, 10)
        assert len(made) == n and sim.board.samples_skipped > skipped
    finally:
        sim.stop()


def _sleeper(folder) -> list[str]:
    """An nvme-cli that never answers, as the one program a prefix may be (commands.check_program)."""
    p = folder / "sleeper"
    p.write_text(f"#!{sys.executable}\nimport time; time.sleep(30)\n")
    p.chmod(0o755)
    return [str(p)]


def test_a_timeout_on_an_overloaded_host_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(_run.os, "getloadavg", lambda: (49.0, 30.0, 12.0))
    monkeypatch.setattr(_run.os, "cpu_count", lambda: 2)
    with pytest.raises(ToolError) as e:
        NvmeCli(_sleeper(tmp_path), timeout=0.5).id_ctrl("/dev/nvme0")
    msg = str(e.value)
    assert "\n" not in msg and "did not finish within 0.5 s" in msg
    assert "overloaded: load average 49.0 on 2 cores" in msg


def test_a_timeout_on_a_quiet_host_suspects_the_device(monkeypatch, tmp_path):
    monkeypatch.setattr(_run.os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    with pytest.raises(ToolError) as e:
        NvmeCli(_sleeper(tmp_path), timeout=0.5).id_ctrl("/dev/nvme0")
    assert "is the device hung?" in str(e.value) and "overloaded" not in str(e.value)


def test_a_streaming_pass_waits_for_the_block_that_completes_a_frame_at_most_max_pass_s(tmp_path, monkeypatch):
    """Each pass has a fixed cost however few samples it takes: a stream is served once per DATA frame,
    in the pass of the DMA block that completes it (a 10 ms stream's one record a frame every 10 ms, a
    1 ms stream's (the default) ten every 10 ms, not every 1 ms block: issue 39; issue 42: it was every
    MIN_PASS_S), never later than MAX_PASS_S; timed power actions every block, and MIN_PASS_S when not
    streaming (burst, self-test). On a board clock held at the stream's first sample."""
    from powerrig.sim.interposer import board as interposer

    sim = interposer.VirtualInterposer(state_dir=str(tmp_path / "board"))
    b = sim.board
    monkeypatch.setattr(b, "device_us", lambda: b.gen_index * b.period_us)
    try:
        assert sim._pass_s() == interposer.MIN_PASS_S                  # not streaming (burst, self-test)
        block_s = interposer.DMA_BLOCK * b.period_us * 1e-6
        assert block_s == pytest.approx(0.001)
        for interval_us, blocks in ((10000, 10), (1000, 10), (2000, 10), (500, 10)):
            st = sim.device.cmd_start({"interval_us": interval_us, "rails": ["12V"]})
            assert st["per_frame"] * interval_us == 10000                  # (about 100 frames a second)
            assert sim._pass_s() == pytest.approx(blocks * block_s / b.scale, rel=1e-9), interval_us
        sim.device.cmd_start({"interval_us": 1000, "rails": ["12V"], "per_frame": 20})     # a frame every 20 ms
        assert sim._pass_s() == pytest.approx(interposer.MAX_PASS_S)
        sim.device.cmd_start({"interval_us": 1000, "rails": ["12V"]})
        sim.device.framer.n = 7        # three records of a 1 ms stream's frame to go: three blocks
        assert sim._pass_s() == pytest.approx(3 * block_s / b.scale, rel=1e-9)
        sim.device.actions.queue.append(object())                     # a timed power action waits
        assert sim._pass_s() == pytest.approx(block_s)
    finally:
        sim.device.actions.queue.clear()
        sim.stop()


def test_the_sampling_thread_alone_runs_nicer(tmp_path, monkeypatch):
    """POWERRIG_SIM_SAMPLER_PRIORITY (bench_lab.py): the sampling thread yields the CPU; the process's
    other threads (the drive endpoint nvme-cli and fio wait on) keep their priority."""
    import os
    from powerrig.sim.interposer import board as interposer

    monkeypatch.setenv(interposer.SAMPLER_PRIORITY_ENV, "3")
    base = os.getpriority(os.PRIO_PROCESS, 0)
    sim = interposer.VirtualInterposer(state_dir=str(tmp_path / "board")).start()
    try:
        deadline = time.monotonic() + 10
        while os.getpriority(os.PRIO_PROCESS, sim._thread.native_id) == base and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.getpriority(os.PRIO_PROCESS, sim._thread.native_id) == min(19, base + 3)
        assert os.getpriority(os.PRIO_PROCESS, 0) == base
    finally:
        sim.stop()


def test_the_sampling_thread_can_take_only_idle_cpu(tmp_path, monkeypatch):
    import os
    from powerrig.sim.interposer import board as interposer

    monkeypatch.setenv(interposer.SAMPLER_PRIORITY_ENV, "idle")
    sim = interposer.VirtualInterposer(state_dir=str(tmp_path / "board")).start()
    try:
        deadline = time.monotonic() + 10
        while os.sched_getscheduler(sim._thread.native_id) != os.SCHED_IDLE and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.sched_getscheduler(sim._thread.native_id) == os.SCHED_IDLE
        assert os.sched_getscheduler(0) != os.SCHED_IDLE
    finally:
        sim.stop()
