"""Power-loss records honest at the edges (issue 41 items 4, 5, 6, 9): the virtual drive's verify
arithmetic exact, a cut anywhere in a burst found on its sample or a reason recorded, hold-up
measured whenever the decay is inside the burst, a redone step's fresh seeds, and a label of their
own for losses of writes a completed flush had covered. In-process, on the model: no real time."""
from __future__ import annotations

import io as _io
import json
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from powerrig.dut import commands, verify
from powerrig.sim.tools import fio_cli
from powerrig.sim.ssd.power_io import PatternMedia

CAP = 61_440_000_000_000           # the d5-p5336 profile's capacity (one namespace)
BS, QD = 131072, 8


class _Endpoint:
    """The virtual SSD's endpoint as the impersonated fio asks it, in-process: identify and verify."""

    def __init__(self, media: PatternMedia):
        self.media = media

    def __call__(self, ep, req, timeout=None):
        if req["op"] == "identify":
            return {"ok": True, "capacity_bytes": CAP, "namespaces": 1, "fdp": False,
                    "states": [{"read_MiBps": 7000.0}]}
        if req["op"] == "verify":
            return {"ok": True, "bad": self.media.bad_blocks(1, int(req["offset"]), int(req["size"]),
                                                             int(req["bs"]), str(req["pattern"]))}
        raise AssertionError(req)


def _fio_verify(media, monkeypatch, n: int, seed: int, state_load=True) -> set[int]:
    """The verify pass the sweep runs (commands.fio_verify_argv), through the impersonated fio."""
    monkeypatch.setattr(fio_cli, "request", _Endpoint(media))
    argv = list(commands.fio_verify_argv("fio", "seq", "/dev/nvme0n1", BS, QD, n * BS, "libaio", state_load, seed))
    err, out = _io.StringIO(), _io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        fio_cli.main(argv[1:] + ["--output-format=json"])
    return verify.bad_blocks(err.getvalue())


def test_a_healthy_drive_s_verify_finds_no_false_loss_in_1000_cycles(monkeypatch):
    """Item 4: each cycle's drive holds exactly the n writes it acknowledged (a healthy drive); the
    old arithmetic (size / capacity x capacity in floats, truncated) predicts the cycles whose last
    acknowledged block read back short; none may be reported lost."""
    from powerrig.sweep.power_loss import cycle_seed

    predicted, false_loss = set(), {}
    for k in range(1000):
        seed = cycle_seed(29, "power-loss/seq-128k/r1", k)
        n = int(np.random.default_rng(seed).integers(1, 20000))
        media = PatternMedia()
        media.write(1, 0, n * BS, str(seed))
        old_size = int(n * BS / CAP * CAP)               # what the old code asked the drive to verify
        if old_size < n * BS:
            predicted.add(k)
            assert media.bad_blocks(1, 0, old_size, BS, str(seed)) == [(n - 1) * BS]   # the old false loss
        bad = _fio_verify(media, monkeypatch, n, seed)
        if bad:
            false_loss[k] = sorted(bad)
    assert 20 <= len(predicted) <= 80          # the float round trip the old code took: ~3-5 % of cycles
    assert false_loss == {}, (f"{len(false_loss)} cycles report a healthy drive's write lost; predicted "
                              f"{len(predicted)}, of them observed {len(predicted & set(false_loss))}")


def test_the_in_flight_pass_still_finds_the_writes_never_made(monkeypatch):
    media = PatternMedia()
    media.write(1, 0, 1000 * BS, "5")
    assert _fio_verify(media, monkeypatch, 1000 + QD, 5, state_load=False) == {(1000 + j) * BS for j in range(QD)}


# -- item 5: a cut anywhere in a burst ----------------------------------------------------------------
def _stepped(off_us: int, defect_rate: float = 0.0):
    from powerrig.sim.ssd.power import PowerSpec
    from powerrig.sim.power_loop import SteppedRig

    rig = SteppedRig(PowerSpec(defect_rate=defect_rate), seed=3)
    rig.command({"op": "enable", "watchdog_ms": 1000})
    edges = rig.run([{"output": "12V", "level": 0, "after_us": 3000},
                     {"output": "12V", "level": 1, "after_us": off_us}])
    cut = [t for t in rig.drive.truth if t["output"] == "12V"][-2]
    rig.wait_ready()
    return rig, edges, cut


def _figures(b, edges):
    """The sweep's record of one burst (sweep/power_loss.burst_figures), as it has it: the burst and the
    executed edges the interposer reported."""
    import threading

    from powerrig.sweep.power_loss import burst_figures

    th = threading.Thread(target=lambda: None)
    th.start()
    return burst_figures((th, {"burst": b}), True, 9.0, edges=edges)


def _honest(rec, truth_index, truth_holdup_s):
    """Found on its sample or a reason; a hold-up within 1 % or a reason."""
    if rec.get("cut_found_at") is None:
        assert rec.get("cut_reason"), rec
    else:
        assert rec["cut_found_at"] == truth_index, rec
    if rec.get("holdup_s") is None:
        assert rec.get("holdup_reason"), rec
    else:
        assert rec["holdup_s"] == pytest.approx(truth_holdup_s, rel=0.01), rec


@pytest.mark.parametrize("weak", [False, True])
def test_a_cut_at_every_sample_of_a_burst_s_first_and_last_64_is_found_on_it_or_has_a_reason(weak):
    rig, edges, truth = _stepped(20000, defect_rate=1.0 if weak else 0.0)
    at = edges[0]["index"]
    n = 2250
    placed = {}
    for p in [*range(64), *range(n - 64, n)]:
        rec = _figures(rig.burst(at - p, n), edges)
        _honest(rec, at, truth["holdup_s"])
        placed[p] = rec
    # the issue's: sample 0 and 1 had no record of why, 30 and 34 were placed 80 / 64 us late
    for p in (1, 30, 34, 63):
        assert placed[p]["cut_found_at"] == at and placed[p]["holdup_s"] == pytest.approx(truth["holdup_s"], rel=0.01)
    assert placed[0]["cut_found_at"] is None and "first sample" in placed[0]["cut_reason"]
    assert placed[0]["holdup_s"] == pytest.approx(truth["holdup_s"], rel=0.01)     # the decay is in the burst
    assert placed[n - 1]["cut_found_at"] == at and "burst's end" in placed[n - 1]["holdup_reason"]
    assert sum(1 for r in placed.values() if r["cut_found_at"] == at) >= 127


@pytest.mark.parametrize("off_ms", [57.0, 61.4, 61.6, 62.5, 70.0, 200.0])
def test_a_long_off_time_still_gets_a_holdup_or_a_reason(off_ms):
    """The sweep's burst ends BURST_POST after the restore and holds burst_pre(off) before it: past
    ~61.5 ms the cut precedes the burst; the hold-up comes from the reported cut while the decay is in it."""
    from powerrig.sweep.power_loss import BURST_POST, burst_pre

    off_us = int(off_ms * 1000)
    rig, edges, truth = _stepped(off_us)
    pre = burst_pre(off_us)
    on = edges[1]["index"]
    rec = _figures(rig.burst(on - pre, pre + BURST_POST), edges)
    _honest(rec, edges[0]["index"], truth["holdup_s"])
    before = (on - pre) - edges[0]["index"]          # samples the cut precedes the burst by
    if before > 0:
        assert rec["cut_found_at"] is None and "before the burst" in rec["cut_reason"]
    if before * 4e-6 < truth["holdup_s"] - 8e-6:
        assert rec["holdup_s"] is not None
    assert rec["on_found_at"] == on


# -- item 6: a redone step draws fresh seeds -------------------------------------------------------------
def _step(attempt):
    from types import SimpleNamespace

    from powerrig.sweep.power_loss import PowerLossStep

    pl = SimpleNamespace(seed=29, cycles=100000)
    return PowerLossStep(pl, SimpleNamespace(key="power-loss/seq-128k/r1", name="seq-128k"), None, None, None,
                         "/dev/nvme0", "/dev/nvme0n1", "SN", "/tmp/unused", None, attempt=attempt)


def test_a_redone_step_never_reuses_a_seed_of_an_earlier_attempt():
    first = [_step(1).seed(k) for k in range(100000)]
    assert len(set(first)) == 100000
    from powerrig.sweep.power_loss import cycle_seed
    assert first[:3] == [cycle_seed(29, "power-loss/seq-128k/r1", k) for k in range(3)]   # attempt 1 as before
    for a in (2, 3):
        again = [_step(a).seed(k) for k in range(100000)]
        assert not set(again) & set(first) and len(set(again)) == 100000


def test_a_rerun_s_first_cycle_sees_its_writes_in_flight(monkeypatch):
    """The issue's stall: the first attempt's cycle 1 wrote 5000 blocks; the rerun's cycle 1 is cut
    after 1000. With the first attempt's seed the blocks past the cut read back good (0 in flight, and
    a loss there would be masked); with a fresh one the in-flight pass finds the queue depth."""
    media = PatternMedia()
    s1, s2 = _step(1).seed(0), _step(2).seed(0)
    media.write(1, 0, 5000 * BS, str(s1))                       # attempt 1, cycle 1 (then the stall)
    media.write(1, 0, 1000 * BS, str(s2))                       # attempt 2, cycle 1: cut after 1000
    lost = _fio_verify(media, monkeypatch, 1000, s2)
    around = _fio_verify(media, monkeypatch, 1000 + QD, s2, state_load=False)
    assert lost == set() and len(around - lost) == QD
    assert s1 != s2 and _fio_verify(media, monkeypatch, 1000 + QD, s1, state_load=False) != set()
    same = PatternMedia()                                       # what reusing the seed did
    same.write(1, 0, 5000 * BS, str(s1))
    same.write(1, 0, 1000 * BS, str(s1))
    assert _fio_verify(same, monkeypatch, 1000 + QD, s1, state_load=False) == set()


def test_the_sweep_hands_the_attempt_to_the_power_loss_step(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from powerrig.sweep import power_loss
    from powerrig.sweep.steps import REGISTRY, StepRun

    seen = {}
    monkeypatch.setattr(power_loss.PowerLossStep, "run", lambda self: seen.setdefault("attempt", self.attempt) and [])
    sweep = SimpleNamespace(_rig=SimpleNamespace(controller="/dev/nvme0", namespaces=["/dev/nvme0n1"]),
                            _emit=lambda *a, **k: None)
    plan = SimpleNamespace(rig=SimpleNamespace(source="interposer"), drive=SimpleNamespace(serial="SN"))
    step = SimpleNamespace(power_loss=SimpleNamespace(), name="s", key="power-loss/s/r1")
    run = StepRun(sweep, step, plan, None, None, None, tmp_path, SimpleNamespace(power_sequence=None), attempt=2)
    REGISTRY["power_loss"].after(run)           # the kind's run hook (sweep/steps/power_loss.py)
    assert seen["attempt"] == 2


# -- item 9: losses of writes a completed flush covered have a label of their own ---------------------------
def test_losses_after_a_completed_flush_are_labelled_apart(monkeypatch):
    from types import SimpleNamespace

    from powerrig.sweep.power_loss import measurements

    bad = {True: [0, 5 * BS, 900 * BS], False: [0, 5 * BS, 900 * BS, 1000 * BS]}

    def run_tool(argv, *a, **k):
        state_load = "--verify_state_load=1" in list(argv)
        text = "".join(f"verify: bad header at file x offset {o}, length {BS}\n" for o in bad[state_load])
        return SimpleNamespace(stdout="", stderr=text, event=None, returncode=1)

    monkeypatch.setattr(verify, "run_tool", run_tool)
    fio = SimpleNamespace(program="fio", timeline=SimpleNamespace(end=lambda *a, **k: None), env=None, remote=None)
    c = verify.classify(fio, "seq", "/dev/nvme0n1", BS, QD, 1000, randseed=7, flushed=100)
    assert c.lost == (0, 5 * BS, 900 * BS) and c.lost_after_flush == (0, 5 * BS) and c.in_flight == (1000 * BS,)
    # fio's JSON of the cut run: 3 completed flushes, one every 64 writes, QD 8: at least 3 x 64 - 7 covered
    assert verify.flushed_writes({"sync": {"total_ios": 3}}, 64, QD) == 3 * 64 - (QD - 1)
    assert verify.flushed_writes({"sync": {"total_ios": 3}}, 0, QD) == 0 and verify.flushed_writes({}, 64, QD) == 0

    cyc = {"cycle": 1, "seed": 5, "attempt": 1, "acknowledged": 1000, "lost": 3, "lost_after_flush": 2,
           "in_flight": 1, "cut_during_writes": True, "ready_s": 0.2, "ready_lo_s": 0.1, "first_io_s": 0.3}
    ms = {m["name"]: m for m in measurements([cyc], "power-loss:seq")}
    assert ms["power_loss.lost_after_flush_writes"]["value"] == 2
    assert ms["power_loss.lost_after_flush_writes"]["outcome"] == "fail"
    assert "flush" in json.loads(ms["power_loss.lost_after_flush_writes"]["notes"])["label"]
    assert ms["power_loss.lost_writes"]["value"] == 3          # every acknowledged write lost, flushed or not
    assert json.loads(ms["power_loss.lost_writes"]["notes"])["after_flush"] == 2


def test_a_fall_away_from_the_reported_cut_is_kept_and_said():
    from powerrig.analysis import power_events

    amps = np.r_[np.full(100, 0.8), np.zeros(500)]
    volts = np.r_[np.full(100, 12.0), 12.0 * np.exp(-np.arange(500) * 4e-6 / 5e-3)]
    r = power_events.cut_holdup(volts, amps, 9.0, 4e-6, reported=97)
    assert r["cut"] == 100 and "+3 samples" in r["cut_reason"] and r["holdup_from"] == "found cut"
    assert power_events.cut_holdup(volts, amps, 9.0, 4e-6, reported=100)["cut_reason"] is None
