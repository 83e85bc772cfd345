"""The one recorder (powerrig.capture.recorder): every way a recording ends leaves a capture that is
closed cleanly and says what was asked for, what was covered, what was lost and why it ended."""
from __future__ import annotations

import time

import pytest

from powerrig.capture import CaptureReader
from powerrig.capture.recorder import Progress, Recorder
from powerrig.core.errors import DeviceError
from powerrig.interposer.client import Interposer
from scripted_board import lost_end, scripted_interposer


def read(path):
    with CaptureReader(path) as cap:
        return cap.closed_cleanly, cap.length, cap.metadata, cap.gaps


def test_a_timed_recording_on_the_virtual_rig(sim, tmp_path):
    s = sim()
    seen: list[Progress] = []
    with Interposer.open(s.port) as dev:
        res = Recorder(dev, tmp_path / "r.jls", seconds=2.5, on_progress=seen.append, progress_every_s=0.5).run()
    assert (res.end_reason, res.error, res.requested_s) == ("duration", None, 2.5)
    # a loaded machine may make the virtual board overrun: whatever was lost is accounted for
    assert res.covered_s == pytest.approx(2.5)
    assert res.lost_s == pytest.approx(res.summary["gap_intervals"] * 1e-3)
    assert seen and [p.covered_s for p in seen] == sorted(p.covered_s for p in seen)   # the last one at the end
    assert seen[-1].covered_s == pytest.approx(2.5) and seen[-1].requested_s == 2.5
    assert set(seen[-1].watts) == {"12V", "3V3", "total"} and 0 < seen[-1].watts["total"] < 50
    clean, length, meta, gaps = read(res.path)
    assert clean and length == 2500
    assert meta["recording"] == {"requested_s": 2.5, "covered_s": pytest.approx(2.5),
                                 "lost_s": pytest.approx(res.lost_s), "end_reason": "duration", "error": None}
    assert sum(g["intervals"] for g in gaps) == res.summary["gap_intervals"]
    assert meta["stream"]["samples"] + meta["stream"]["gap_intervals"] == 2500 and meta["stream"] == res.summary
    assert meta["device"]["device"] == "powerrig-interposer"


def test_a_background_recording_ends_on_stop(sim, tmp_path):
    s = sim()
    import threading

    going = threading.Event()
    with Interposer.open(s.port) as dev:
        with Recorder(dev, tmp_path / "bg.jls", progress_every_s=0.2,
                      on_progress=lambda p: p.covered_s >= 0.5 and going.set()) as rec:
            assert going.wait(60), "no data within 60 s"
        res = rec.wait(1)
    assert res.end_reason == "stopped" and res.requested_s is None and res.covered_s > 0.5
    clean, length, meta, _ = read(res.path)
    assert clean and length == round(res.covered_s * 1000)
    assert meta["recording"]["end_reason"] == "stopped"


@pytest.mark.parametrize("every_s", [0.1, 1.0])
def test_a_caller_that_asks_for_progress_ten_times_a_second_gets_it_without_a_live_view(sim, tmp_path, every_s):
    """A sweep step asks for progress every 0.1 s and waits on it (its level before the set-feature,
    its catch-up at the end): its blocks come that often. A recording that reports once a second
    (the CLI's) is fed to the writer WRITE_EVERY_S at a time, after its first block."""
    s = sim()
    seen: list[float] = []
    with Interposer.open(s.port) as dev:
        res = Recorder(dev, tmp_path / "p.jls", seconds=4.5, on_progress=lambda p: seen.append(p.covered_s),
                       progress_every_s=every_s).run()
    assert res.end_reason == "duration" and seen[-1] == pytest.approx(4.5)
    steps = [b - a for a, b in zip([0.0] + seen, seen)]
    if every_s < 1:
        assert steps[0] < 0.5 and len(seen) >= 10 and sorted(steps)[len(steps) // 2] < 0.5, steps
    else:
        assert max(steps) >= 1.5 and len(seen) <= 5, steps


def test_wait_for_index_returns_when_the_capture_holds_it_and_when_the_recording_ends(sim, tmp_path):
    """A sweep's step waits at its end until the capture holds its last command's samples (a stream runs
    behind the wall clock on a loaded host); the wait ends when they are in, at its timeout, or at once
    when the recording has ended."""
    s = sim()
    with Interposer.open(s.port) as dev:
        rec = Recorder(dev, tmp_path / "w.jls", on_block=lambda b: None).start()
        try:
            assert rec.wait_for_index(0, 60) and rec.next_index is not None
            first = rec.next_index
            want = first + 300 * 250                       # 300 ms of 4 us samples later
            assert rec.wait_for_index(want, 60) and rec.next_index >= want
            far = rec.next_index + 3600 * 250_000          # an hour ahead: not there within 0.3 s
            assert not rec.wait_for_index(far, 0.3)
        finally:
            rec.stop()
        res = rec.wait(30)
    t0 = time.monotonic()
    assert not rec.wait_for_index(far, 30) and time.monotonic() - t0 < 5   # ended: answered at once, not after 30 s
    clean, length, _, _ = read(res.path)
    assert clean and first + length * 250 >= want


@pytest.mark.parametrize("how", ["drop", "crc", "stall", "overrun"])
def test_a_recording_ends_on_time_when_the_data_before_its_end_is_lost(tmp_path, how):
    dev = scripted_interposer(lost_end(how))
    res = Recorder(dev, tmp_path / f"{how}.jls", seconds=1).run()
    assert res.end_reason == "duration"
    assert res.covered_s == pytest.approx(1.0) and res.lost_s == pytest.approx(0.030)
    clean, length, meta, gaps = read(res.path)
    assert clean and length == 1000
    assert [(g["sample_id"], g["intervals"]) for g in gaps] == [(970, 30)]
    assert meta["recording"]["lost_s"] == pytest.approx(0.030)


def test_a_lost_link_is_recorded_and_the_capture_closed(tmp_path):
    """The board goes quiet mid-recording: the capture says it ended early, and why."""
    dev = scripted_interposer(lost_end("drop", after=0))
    res = Recorder(dev, tmp_path / "lost.jls", seconds=5).run()
    assert res.end_reason == "link-lost" and "stalled" in res.error
    clean, length, meta, _ = read(res.path)
    assert clean and length == 970
    assert meta["recording"]["end_reason"] == "link-lost" and meta["recording"]["requested_s"] == 5
    assert meta["recording"]["covered_s"] == pytest.approx(0.97)


def test_a_bug_in_a_progress_callback_still_closes_the_capture(tmp_path):
    def broken(_p):
        raise ZeroDivisionError("display bug")

    dev = scripted_interposer(lost_end("drop", after=500))
    rec = Recorder(dev, tmp_path / "bug.jls", seconds=3, on_progress=broken, progress_every_s=0.0)
    with pytest.raises(ZeroDivisionError):
        rec.run()
    clean, _length, meta, _ = read(tmp_path / "bug.jls")
    assert clean and meta["recording"]["end_reason"] == "error"
    assert "ZeroDivisionError: display bug" in meta["recording"]["error"]


def test_a_refused_stream_leaves_no_file(sim, tmp_path):
    s = sim()
    with Interposer.open(s.port) as dev:
        with pytest.raises(DeviceError):
            Recorder(dev, tmp_path / "no.jls", rails=["12V", "48V"]).run()
    assert not (tmp_path / "no.jls").exists()


def test_a_rail_listed_twice_is_refused_on_the_host(tmp_path):
    """Refused before the device is asked (an older firmware would accept it and double the total)."""
    dev = scripted_interposer(lost_end("drop"))
    with pytest.raises(DeviceError, match="rail 12V listed more than once"):
        Recorder(dev, tmp_path / "twice.jls", rails=["12V", "3V3", "12V"], seconds=1).run()
    assert not (tmp_path / "twice.jls").exists() and dev.link._thread is None   # never started
