"""The interposer link end to end: the real firmware logic on a pseudo-terminal, real pyserial, the
host decoder, the stream assembler and the clock fit, measured against the simulator's ground truth.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import POWERRIG, REPO, SimProcess, run_cli
from powerrig.core.errors import DeviceError, LinkError
from powerrig.interposer.client import Interposer, Stream
from powerrig.sim.interposer.board import ADC_RING_S


def truth_utc(clock: dict, idx):
    return clock["utc_at_index0"] + np.asarray(idx, np.float64) * clock["period_s"] / (1 + clock["drift_ppm"] * 1e-6)


def truth_power(truth_path, first, end):
    z = np.load(str(truth_path) + ".npz")
    sel = (z["bin_index"] >= first) & (z["bin_index"] + 250 <= end)
    assert sel.sum() > 0
    return dict(zip(z["rails"], z["power_w"][sel].mean(axis=0)))


@pytest.fixture(scope="module")
def long_runs(tmp_path_factory):
    """Two 60 s streams run side by side: 1 ms (the default) and 100 us intervals."""
    tmp = tmp_path_factory.mktemp("long")
    runs = {}
    for name, interval in (("1ms", 1000), ("100us", 100)):
        sim = SimProcess(tmp / name)
        proc = subprocess.Popen([*POWERRIG, "stream", "--port", sim.port, "--seconds", "60", "--interval-us",
                                 str(interval), "--json", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        runs[name] = (sim, proc)
    out = {}
    for name, (sim, proc) in runs.items():
        stdout, stderr = proc.communicate(timeout=180)
        truth = sim.stop()
        assert proc.returncode == 0, stderr
        out[name] = (json.loads(stdout), truth, sim.truth_path)
    return out


@pytest.mark.parametrize("name,interval_us", [("1ms", 1000), ("100us", 100)])
def test_60s_stream_without_loss(long_runs, name, interval_us):
    s, truth, _ = long_runs[name]
    expect = 60_000_000 // interval_us
    assert s["interval_us"] == interval_us
    assert s["samples"] == expect, s
    assert s["end_index"] - s["first_index"] == expect * interval_us // 4
    assert (s["dropped_frames"], s["gaps"], s["crc_errors"], s["overruns"]) == (0, 0, 0, 0), s
    assert truth["injected"]["lost_frames"] == 0


@pytest.mark.parametrize("name", ["1ms", "100us"])
def test_mean_power_matches_truth(long_runs, name):
    s, _truth, path = long_runs[name]
    want = truth_power(path, s["first_index"], s["end_index"])
    for rail in ("12V", "3V3"):
        assert s["mean_power_w"][rail] == pytest.approx(want[rail], rel=2e-3), (rail, s["mean_power_w"], want)


@pytest.mark.parametrize("name", ["1ms", "100us"])
def test_clock_maps_device_time_to_utc_within_100us(long_runs, name):
    """The promise of issue 12, checked against the simulator's true clock with two streams and two
    simulators sharing the machine: p99 error under 100 us (measured 8-19 us on 23 Nov 2026), the drift
    within 1.5 ppm after 60 s (measured within 0.6 ppm; benchmarks/bench_link.py shows 1 ppm at 30 s
    on a quiet machine, this test runs beside a second stream and simulator), or within what the fit's
    own bounds allow when the host's latency floor is wide: the true line lies in the band of half-width
    residual_us about the model, so its slope can differ by 2 * residual / span (CI, 30 Nov: residual
    76 us, drift 1.58 ppm off, the bound 2.5 ppm; p99 error still under 100 us)."""
    s, truth, _ = long_runs[name]
    c = s["clock"]
    assert c["pings"] >= 100
    idx = np.linspace(s["first_index"], s["end_index"], 2000)
    m = c["model"]
    fitted = m["utc_ref"] + (idx - m["index_ref"]) * m["period_s"] / (1 + m["drift_ppm"] * 1e-6)
    err_us = np.abs(fitted - truth_utc(truth["clock"], idx)) * 1e6
    assert np.percentile(err_us, 99) < 100, np.percentile(err_us, 99)
    span_s = (s["end_index"] - s["first_index"]) * m["period_s"]
    assert abs(c["drift_ppm"] - truth["clock"]["drift_ppm"]) < max(1.5, 2 * c["residual_us"] / span_s), \
        (c, truth["clock"])


def test_injected_corruption_and_drops_are_all_counted(sim):
    s = sim("--corrupt", "2e-5", "--drop", "0.01", "--seed", "3")
    with Interposer.open(s.port) as dev:
        with dev.stream() as st:
            blocks = list(st.blocks(seconds=20))
            seen_last = (st._next_seq - 1) & 0xFFFF
        summary = st.summary()
    truth = s.stop()
    lost_in_range = [q for q in truth["dropped_seqs"] + truth["corrupted_seqs"] if q <= seen_last]
    assert len(lost_in_range) >= 10, truth["injected"]          # the faults really happened
    assert summary["dropped_frames"] == len(lost_in_range), (summary, truth["injected"])
    # a corrupted frame fails its CRC, or (when the damage hits its header) is counted as a bad header;
    # one whose sync bytes were hit is never seen as a frame: its bytes count as skipped
    corrupted = [q for q in truth["corrupted_seqs"] if q <= seen_last]
    unseen = [q for q in truth["sync_corrupted_seqs"] if q <= seen_last]
    assert summary["crc_errors"] + summary["bad_headers"] >= len(corrupted) - len(unseen), (summary, corrupted, unseen)
    assert summary["bad_bytes"] > 0
    # the stream went on: every interval of the 20 s is present, lost ones as NaN rows
    rows = sum(len(b) for b in blocks)
    assert rows == 20_000
    invalid = sum(int((~b.valid).sum()) for b in blocks)
    assert invalid == summary["gap_intervals"] == summary["dropped_frames"] * 10
    gap_blocks = [b for b in blocks if b.flags.get("gap")]
    assert all(np.isnan(b.p).all() for b in gap_blocks) and all(b.flags["gap"] == "link" for b in gap_blocks)
    idx = [b.first_index for b in blocks]
    assert all(b.first_index == a.end_index for a, b in zip(blocks, blocks[1:])), "time axis must stay uniform"
    assert idx == sorted(idx)


def test_short_stall_becomes_a_recorded_gap(sim):
    """A stall 1 s longer than the simulated DMA ring: the board overruns once, the stream goes on."""
    s = sim("--stall-in-stream", "1.0", "--stall-for", str(ADC_RING_S + 1.0))
    with Interposer.open(s.port) as dev:
        with dev.stream(stall_timeout=ADC_RING_S + 10) as st:
            blocks = list(st.blocks(seconds=5))
        summary = st.summary()
    s.stop()
    assert sum(len(b) for b in blocks) == 5000
    assert summary["overruns"] == 1 and summary["dropped_frames"] == 0
    # about 1 s lost: the stall less what the simulated DMA ring holds
    lost = 1.0 * 1000
    assert lost - 150 <= summary["gap_intervals"] <= lost + 100, summary
    assert [b.flags["gap"] for b in blocks if b.flags.get("gap")] == ["overrun"]


def test_long_stall_is_a_clear_error_not_a_hang(sim):
    s = sim("--stall-in-stream", "0.5", "--stall-for", "30")     # in the command's stream, however late it starts
    t0 = time.monotonic()
    r = run_cli("stream", "--port", s.port, "--seconds", "20", "--quiet", timeout=60)
    assert time.monotonic() - t0 < 15
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "stalled" in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_missing_port_is_one_line():
    r = run_cli("stream", "--port", "/dev/ttyNOPE0", "--seconds", "1")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["powerrig: error: port /dev/ttyNOPE0 does not exist; "
                                             "list interposers with `powerrig devices`"]


@pytest.fixture
def foreign_pty():
    """A serial device that is not an interposer: it prints a banner and random bytes."""
    master, slave = os.openpty()
    stop = threading.Event()

    def babble():
        rnd = random.Random(1)
        while not stop.wait(0.01):
            try:
                os.write(master, b"OK\r\n" + bytes(rnd.randrange(256) for _ in range(64)))
            except OSError:
                return

    t = threading.Thread(target=babble, daemon=True)
    t.start()
    yield os.ttyname(slave)
    stop.set()
    t.join()
    os.close(master)
    os.close(slave)


def test_wrong_device_is_one_line(foreign_pty):
    r = run_cli("stream", "--port", foreign_pty, "--seconds", "1")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no reply to 'describe'" in lines[0] and "is this an interposer?" in lines[0], r.stderr


def test_devices_lists_interposers_only(sim, foreign_pty):
    s = sim()
    r = run_cli("devices", "--json", "--port", s.port, "--port", foreign_pty)
    # a port named with --port that is no interposer is said, not dropped (issue 25); the others are listed
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(f"powerrig: error: --port {foreign_pty}: no interposer answers there (")
    found = json.loads(r.stdout)
    assert [d["port"] for d in found if d["port"] in (s.port, foreign_pty)] == [s.port]
    assert found[[d["port"] for d in found].index(s.port)]["board"] == "sim"


def test_link_budget_refusal_is_clear_and_its_advice_works(sim):
    import re

    s = sim()
    three = ["12V", "3V3", "5V"]
    with Interposer.open(s.port) as dev:
        with pytest.raises(DeviceError, match="over the link budget of 500000 B/s; use fewer rails") as e:
            dev.stream(interval_us=100, rails=three).start()
        suggested = int(re.search(r"interval_us >= (\d+)", str(e.value)).group(1))
        assert suggested > 100 and suggested % 4 == 0
        with pytest.raises(DeviceError, match="link budget"):
            dev.stream(interval_us=suggested - 4, rails=three).start()
        with dev.stream(interval_us=suggested, rails=three) as st:
            rows = sum(len(b) for b in st.blocks(seconds=2))
        assert rows == -(-2_000_000 // suggested)
        assert st.summary()["dropped_frames"] == 0 and st.summary()["rails"] == three


def test_burst_captures_raw_samples_around_a_threshold(sim):
    s = sim()
    with Interposer.open(s.port) as dev:
        b = dev.burst(pre=1000, post=2000, trigger="threshold", rail="12V", above_w=16.0, timeout=10)
        now = dev.burst(pre=0, post=500, trigger="now")
    s.stop()
    assert b.codes.shape == (3000, 7)
    _v, _i, p = b.rail("12V")
    assert p[:1000].max() < 16.5 and p[1000] > 16.0          # the crossing sits exactly at 'pre'
    assert 19.0 < np.median(p[1000:1040]) < 21.0              # the scripted 20 W, 200 us spike
    assert now.codes.shape == (500, 7) and now.first_index > b.first_index


def test_calibration_round_trip_changes_scaling(sim):
    s = sim()
    with Interposer.open(s.port) as dev:
        base = dev.calibration()
        with pytest.raises(DeviceError, match="v_gain must be a number within 0.8..1.2"):
            dev.set_calibration({"rails": {"12V": {"v_gain": 5}}})
        assert dev.calibration() == base                     # a refused change changes nothing
        with dev.stream() as st:
            v0 = np.nanmean(np.concatenate([b.v[:, 0] for b in st.blocks(seconds=1)]))
        g = base["rails"]["12V"]["v_gain"]
        dev.set_calibration({"rails": {"12V": {"v_gain": g * 1.05}}}, save=False)
        with dev.stream() as st:
            v1 = np.nanmean(np.concatenate([b.v[:, 0] for b in st.blocks(seconds=1)]))
    assert v1 / v0 == pytest.approx(1.05, rel=2e-3)


def test_successive_blocks_calls_continue_exactly(sim):
    """A frame split at the end of blocks(seconds) is finished by the next call: no loss, no false drop."""
    s = sim()
    with Interposer.open(s.port) as dev:
        with dev.stream(interval_us=np.int64(300)) as st:        # numpy values from a sweep are fine
            parts = [list(st.blocks(seconds=1.0)), list(st.blocks(seconds=1.0)), list(st.blocks(seconds=0.5))]
        summary = st.summary()
    blocks = [b for p in parts for b in p]
    assert all(b.first_index == a.end_index for a, b in zip(blocks, blocks[1:]))
    assert [sum(len(b) for b in p) for p in parts] == [3334, 3334, 1667]
    assert (summary["dropped_frames"], summary["gaps"]) == (0, 0)
    assert summary["end_index"] - summary["first_index"] == 8335 * 75


def test_burst_during_a_stream_and_a_cancelled_burst(sim):
    s = sim()
    with Interposer.open(s.port) as dev:
        with dev.stream() as st:
            it = st.blocks()
            next(it)
            b = dev.burst(pre=100, post=400, trigger="now")
            with pytest.raises(LinkError, match="did not trigger .* cancelled on the device"):
                dev.burst(pre=0, post=100, trigger="threshold", rail="12V", above_w=500.0, timeout=1.0)
            again = dev.burst(pre=0, post=250, trigger="now")
            rows = sum(len(blk) for blk in st.blocks(seconds=2))
        summary = st.summary()
    assert b.codes.shape == (500, 7) and again.codes.shape == (250, 7)
    assert again.first_index > b.first_index
    assert rows == 2000 and summary["dropped_frames"] == 0 and summary["gaps"] == 0


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_sim_interposer_ends_cleanly_on_signals(sim, sig):
    import signal as signals

    s = sim()
    time.sleep(0.5)
    s.proc.send_signal(getattr(signals, sig))
    assert s.proc.wait(timeout=10) == 0
    assert "Traceback" not in s.proc.stderr.read()
    truth = json.loads(s.truth_path.read_text())
    assert truth["port"] == s.port and truth["frames_sent"] == 0


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def test_a_killed_sim_leaves_no_usb_process_behind(sim):
    """The sim's USB OUT endpoint is its own process (sim/interposer/usb_rx.py); killed with SIGKILL, the sim
    cannot stop it, so it must notice and go, or every killed test or sweep would leave one behind."""
    import signal as signals

    s = sim()
    kids = _children(s.proc.pid)
    assert len(kids) == 1 and "usb_rx.py" in Path(f"/proc/{kids[0]}/cmdline").read_text()
    s.proc.send_signal(signals.SIGKILL)
    s.proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{kids[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{kids[0]}").exists() or "Z" in Path(f"/proc/{kids[0]}/stat").read_text().split()[2]


def test_the_usb_process_goes_as_soon_as_the_sims_end_of_its_pipe_closes():
    """A killed sim's end of the pipe closes at once; usb_rx, holding the pty's master, must go at once
    too, not at its next timeout or byte: while it lingers the dead board's port still exists, and a
    host reconnecting in that moment opens it (a GUI test counted a second, 0.135 s reconnect so). Here
    its parent (this process) stays alive and no byte comes: only the pipe's closing can end it."""
    master, slave = os.openpty()
    r, w = os.pipe()
    rx = subprocess.Popen([sys.executable, "-S", str(REPO / "host_app/powerrig/sim/interposer/usb_rx.py"),
                           str(master), str(w), str(os.getpid())], pass_fds=(master, w), stdin=subprocess.DEVNULL)
    os.close(w)
    try:
        time.sleep(0.3)                                 # it is waiting on the pty and the pipe
        assert rx.poll() is None
        os.close(r)
        assert rx.wait(timeout=5) == 0
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
        for fd in (master, slave):
            os.close(fd)


# ---- the end of a timed stream, whatever happens around it (issue 13) ---------------------------------
from scripted_board import PER_FRAME, frame, lost_end, scripted_interposer  # noqa: E402


@pytest.mark.parametrize("how", ["drop", "crc", "stall", "overrun"])
def test_timed_stream_ends_when_the_data_before_its_end_is_lost(how):
    """The frames just before the end never arrive: the run still ends at its end, with the loss as a gap,
    and the next call carries on exactly (the rest of an overrun gap keeps its reason)."""
    dev = scripted_interposer(lost_end(how))
    with dev.stream(stall_timeout=2.0) as st:
        first = list(st.blocks(seconds=1))
        second = list(st.blocks(seconds=0.5))
    s = st.summary()
    blocks = first + second
    assert [sum(len(b) for b in first), sum(len(b) for b in second)] == [1000, 500]
    assert all(b.first_index == a.end_index for a, b in zip(blocks, blocks[1:]))
    reason = "link" if how in ("drop", "crc") else "overrun"
    assert first[-1].flags.get("gap") == reason and len(first[-1]) == 30      # frames 97..99, cut at the end
    assert int((~first[-1].valid).sum()) == 30
    if reason == "link":
        assert (s["dropped_frames"], s["gaps"], s["gap_intervals"], s["overruns"]) == (3, 1, 30, 0)
        assert all(b.valid.all() for b in second)
    else:
        # the device skipped 40 frames' worth of samples: 30 intervals before the end, 370 after it
        assert second[0].flags.get("gap") == "overrun" and len(second[0]) == 370
        assert (s["dropped_frames"], s["gaps"], s["gap_intervals"], s["overruns"]) == (0, 2, 400, 1)
    if how == "crc":
        assert s["crc_errors"] == 3


@pytest.mark.parametrize("how", ["none", "drop", "crc", "overrun"])
def test_frames_in_order_are_assembled_as_the_loop_would(how, monkeypatch):
    """A hand-over whose frames all follow on is decoded at once (Stream._in_order); the blocks, their
    flags and the summary are those of the frame-by-frame loop, gaps and a cut end included."""
    real, at_once = Stream._in_order, []

    def run(in_order):
        def spy(self, frames, end_index):
            ok = in_order and real(self, frames, end_index)
            at_once.append(ok)
            return ok
        monkeypatch.setattr(Stream, "_in_order", spy)
        dev = scripted_interposer([frame(k) for k in range(160)] if how == "none" else lost_end(how))
        with dev.stream(stall_timeout=2.0) as st:
            blocks = list(st.blocks(seconds=1)) + list(st.blocks(seconds=0.5))
        monkeypatch.undo()
        s = st.summary()
        s.pop("clock")
        # what the two calls hand over, whatever the cut into blocks (that follows how the reader's
        # hand-overs fell in time: 930 + 70 or 970 + 30 intervals, both right)
        assert all(b.first_index == a.end_index for a, b in zip(blocks, blocks[1:]))
        gaps = [(b.first_index, b.flags.get("gap")) for b in blocks if b.flags.get("gap")]
        return (blocks[0].first_index, sum(len(b) for b in blocks), np.concatenate([b.p for b in blocks]).tobytes(),
                np.concatenate([b.valid for b in blocks]).tobytes(), sorted({g for _i, g in gaps}), s)
    fast = run(True)
    assert any(at_once)                     # the frames before a loss took the one-step path
    assert fast == run(False)
    assert fast[1] == 1500


def test_pending_frames_stay_bounded_past_a_lost_end():
    """10,000 frames wait past an end whose last frames were lost: the run ends, few frames are kept."""
    dev = scripted_interposer(lost_end("drop", after=10_000))
    with dev.stream(stall_timeout=2.0) as st:
        dev.link._thread.join(timeout=30)                  # every frame is already waiting
        assert dev.link.data.qsize() >= 10_000
        rows = sum(len(b) for b in st.blocks(seconds=1))
        kept = len(st._pending)
    assert rows == 1000
    assert kept <= 5000 // PER_FRAME + 1, kept
