"""Captures cut short or not closed: every signal read as far as it is intact, the rest a gap, one line
that says what was recovered and lost, and the user's file never changed by reading it."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from powerrig.testing import synthetic as S
from powerrig.capture import CaptureReader, CaptureWriter
from powerrig.cli import main

SECONDS = 7.77
INTERVALS = 7770


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """A capture closed cleanly: 7.77 s at 1 ms, two rails, a clock."""
    return S.interval_capture(tmp_path_factory.mktemp("whole") / "whole.jls", SECONDS, "cut-test", rows_per_block=250)


def _cut(src, dst, size):
    dst.write_bytes(src.read_bytes()[:size])
    return dst


def _fingerprint(path):
    st = os.stat(path)
    return path.read_bytes(), st.st_mtime_ns, st.st_size


def test_half_a_capture_reads_every_signal_as_far_as_it_is_intact(whole, tmp_path):
    cut = _cut(whole, tmp_path / "half.jls", whole.stat().st_size // 2)
    with CaptureReader(cut) as cap:
        assert not cap.closed_cleanly
        # before: the shortest signal's length (4 intervals) was taken as the capture's
        assert cap.length == max(cap.intact.values()) >= 3000
        assert cap.intact["p_total"] >= 3000
        # signals are written a chunk (1024 intervals) at a time in turn: none is more than one behind
        assert cap.complete_length >= cap.length - 1024 and cap.pointers_cleared > 0
        p = cap.samples("p_total")
        assert len(p) == cap.length
        assert not np.isnan(p[:cap.intact["p_total"]]).any() and np.isnan(p[cap.intact["p_total"]:]).all()
        # what a signal lacks up to the capture's length is one gap record, and the analysis counts it
        g = cap.gaps[-1]
        assert g["reason"] == "truncated" and g["sample_id"] == cap.complete_length
        assert g["sample_id"] + g["intervals"] == cap.length
        # reads past a signal's intact end give NaN, not an error; summaries too
        s = cap.summaries("p_total", 0, cap.length, 100)
        assert np.isnan(s["mean"][-1]) and not np.isnan(s["mean"][0])
        assert np.isnan(cap.range_stats("p_total")["mean"])
        note = cap.recovery_note
        assert "cut short" in note and f"recovered {cap.length / 1000:.3f} s" in note and "lost" in note
        assert "\n" not in note


@pytest.mark.parametrize("fraction", [0.2, 0.27, 0.34, 0.41, 0.48, 0.55, 0.62, 0.69, 0.76, 0.83])
def test_no_signal_comes_back_almost_empty_wherever_the_cut(whole, tmp_path, fraction):
    """pyjls's repair alone gives the signal whose next-chunk pointer dangles past the cut as many
    samples as it had chunks (2, 3, 4 ...); the pointers are cleared in the copy first."""
    cut = _cut(whole, tmp_path / "c.jls", int(whole.stat().st_size * fraction))
    with CaptureReader(cut) as cap:
        assert cap.complete_length >= cap.length - 1024 and cap.complete_length >= 1024
        assert not np.isnan(cap.samples("p_total", 0, cap.intact["p_total"])).any()


def test_reading_never_changes_the_file(whole, tmp_path, capsys):
    cut = _cut(whole, tmp_path / "cut.jls", whole.stat().st_size * 9 // 10)
    before = _fingerprint(cut)
    with CaptureReader(cut) as cap:
        assert cap.read_from_copy and "file is unchanged" in cap.recovery_note
    assert _fingerprint(cut) == before
    assert main(["report", str(cut), "--out", str(tmp_path / "r")]) == 0
    assert _fingerprint(cut) == before          # before: pyjls repaired it in place (it grew)
    err = capsys.readouterr().err
    assert "powerrig: warning: capture cut.jls was cut short" in err
    html = (tmp_path / "r" / "report.html").read_text()
    assert "class='alert'" in html and "0.602 s lost" in html


def test_temporary_copy_is_removed_on_close(whole, tmp_path):
    cut = _cut(whole, tmp_path / "c.jls", whole.stat().st_size - 100)
    cap = CaptureReader(cut)
    tmp = cap._tmpdir
    assert tmp and os.path.isdir(tmp)
    cap.close()
    assert not os.path.exists(tmp)


@pytest.mark.parametrize("fraction", [0.90, 0.93, 0.96, 0.99, 1.0])
def test_a_cut_in_the_last_tenth_is_not_closed_cleanly(whole, tmp_path, fraction):
    size = whole.stat().st_size
    at = min(size - 1, int(size * fraction))
    cut = _cut(whole, tmp_path / "end.jls", at)
    with CaptureReader(cut) as cap:
        # before: the close record was found, so the file read as closed cleanly with 7.168 s of 7.77
        assert not cap.closed_cleanly
        assert cap.length == INTERVALS                      # the close record's length, NaN where lost
        lost = INTERVALS - cap.complete_length
        note = cap.recovery_note
        assert f"of the {size:,} bytes" in note
        if lost:
            assert f"{lost / 1000:.3f} s lost" in note
            assert cap.gaps[-1]["intervals"] == lost
            short = [n for n, k in cap.intact.items() if k < INTERVALS]
            assert short and all(np.isnan(cap.samples(n)[cap.intact[n]:]).all() for n in short
                                 if not n.startswith("dig"))
        else:
            assert "nothing of its data lost" in note
        assert "NOT closed cleanly" in cap.info()


def test_a_whole_capture_is_closed_cleanly_and_read_in_place(whole):
    with CaptureReader(whole) as cap:
        assert cap.closed_cleanly and cap.recovery_note is None and not cap.read_from_copy
        assert cap.length == cap.complete_length == INTERVALS
        assert all(g["reason"] != "truncated" for g in cap.gaps)


KILLED = textwrap.dedent("""
    import sys, time
    from powerrig.testing import synthetic as S
    from powerrig.capture import CaptureWriter
    with CaptureWriter(sys.argv[1], clock=S.clock(0), flush_every_s=0.1) as w:
        for n, b in enumerate(S.interval_blocks(600, rows_per_block=250)):
            w.write(b)
            if n == 40:
                print("ready", flush=True)
            time.sleep(0.005)
""")


def test_ninety_percent_of_a_killed_capture(tmp_path):
    """kill -9 leaves a capture never closed; 90% of it is a kill plus a cut copy."""
    path, script = tmp_path / "killed.jls", tmp_path / "rec.py"
    script.write_text(KILLED)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    with CaptureReader(path) as cap:
        assert not cap.closed_cleanly and "was not closed" in cap.recovery_note
        whole = cap.length
    assert whole >= 8192
    cut = _cut(path, tmp_path / "cut90.jls", path.stat().st_size * 9 // 10)
    before = _fingerprint(cut)
    with CaptureReader(cut) as cap:
        assert not cap.closed_cleanly and "no close record" in cap.recovery_note
        assert cap.length == max(cap.intact.values()) >= whole * 0.75
        for name, n in cap.intact.items():
            x = cap.samples(name)
            if not name.startswith("dig"):
                assert not np.isnan(x[:n]).any() and np.isnan(x[n:]).all()
    assert _fingerprint(cut) == before


def test_killed_before_its_first_chunk_reports_one_line(tmp_path, capsys):
    """A recording killed before its first data chunk reached the file has metadata but no intervals."""
    live = tmp_path / "live.jls"
    w = CaptureWriter(live, clock=S.clock(0))
    for b in S.interval_blocks(0.5, rows_per_block=250):
        w.write(b)
    w._w.flush()
    early = tmp_path / "early.jls"
    shutil.copyfile(live, early)            # what a kill -9 leaves on disk
    w.close()
    with CaptureReader(early) as cap:
        assert cap.length == 0 and "was not closed" in cap.recovery_note
    assert main(["report", str(early), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("powerrig: error:") and "no intervals" in err[-1]    # before: ValueError traceback


def test_report_on_a_folder_is_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a folder" in err[0]      # before: IsADirectoryError traceback


RECORDINGS = [
    ({"requested_s": 30.0, "covered_s": 7.65, "lost_s": 0.0, "end_reason": "link-lost",
      "error": "the interposer stopped answering"}, ["link-lost", "30.000 s asked", "7.650 s covered",
                                                     "stopped answering"]),
    ({"requested_s": 10.0, "covered_s": 9.0, "lost_s": 1.0, "end_reason": "duration", "error": None},
     ["ended by duration", "9.000 s covered", "1.000 s lost"]),
    ({"requested_s": None, "covered_s": 5.0, "lost_s": 0.0, "end_reason": "error", "error": "disk full"},
     ["until stopped", "disk full"]),
]


@pytest.mark.parametrize("rec,needles", RECORDINGS)
def test_a_recording_that_fell_short_is_shown_prominently(tmp_path, capsys, rec, needles):
    path = tmp_path / "short.jls"
    with CaptureWriter(path, clock=S.clock(0)) as w:
        for b in S.interval_blocks(2.0, rows_per_block=500):
            w.write(b)
        w.update_metadata(recording=rec)
    with CaptureReader(path) as cap:
        assert cap.closed_cleanly and cap.recording == rec
        assert all(n in cap.recording_note for n in needles) and cap.recording_note in cap.info()
    assert main(["report", str(path), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert "powerrig: warning: recording ended by" in err
    html = (tmp_path / "r" / "report.html").read_text()
    box = html[html.index("class='alert'"):html.index("</div>", html.index("class='alert'"))]
    assert all(n in box for n in needles)
    assert html.index("class='alert'") < html.index("duration ")       # above everything else


def test_a_recording_that_got_what_it_asked_shows_no_alert(tmp_path):
    path = tmp_path / "ok.jls"
    with CaptureWriter(path, clock=S.clock(0)) as w:
        for b in S.interval_blocks(2.0, rows_per_block=500):
            w.write(b)
        w.update_metadata(recording={"requested_s": 2.0, "covered_s": 2.0, "lost_s": 0.0,
                                     "end_reason": "duration", "error": None},
                          stream={"dropped_frames": 3, "crc_errors": 1, "rails": ["12V", "3V3"]})
    with CaptureReader(path) as cap:
        assert cap.recording_note is None
    assert main(["report", str(path), "--out", str(tmp_path / "r")]) == 0
    html = (tmp_path / "r" / "report.html").read_text()
    assert "class='alert'" not in html and "asked 2.000 s" in html and "ended by duration" in html
    section = html[html.index("<h2>Recording</h2>"):]
    assert "<td>stream dropped_frames</td><td>3</td>" in section and "<td>end_reason</td><td>duration</td>" in section

