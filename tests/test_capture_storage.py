"""Storage faults on the capture side, for real: a full disk (a small tmpfs mounted for the test) stops
`powerrig record` at the first failed write with one line (none of the JLS library's ~1,100 log lines,
no traceback), and the capture keeps what reached the disk, readable as a capture cut short; a
read-only `--out` is refused in one line and creates nothing. A sweep whose output fills up ends its
run "failed" in one line and frees the output folder."""
from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import pytest

from conftest import run_cli
from powerrig.capture import CaptureReader


def _mount(path, *options):
    """A tmpfs of its own (root only: CI runs as root, so there it must work)."""
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs for the disk-full test: {r.stderr.strip()}")
        pytest.skip(f"mounting a tmpfs needs root: {r.stderr.strip()}")
    return path


@pytest.fixture
def small_disk(tmp_path):
    made = []

    def make(size="300k", *more):
        made.append(_mount(tmp_path / f"disk{len(made)}", f"size={size}", *more))
        return made[-1]

    yield make
    for p in made:
        subprocess.run(["umount", "-l", str(p)], check=False)


def test_disk_full_stops_record_at_the_first_error_with_one_line_and_keeps_the_data(small_disk):
    disk = small_disk("300k")
    out = disk / "full.jls"
    t0 = time.monotonic()
    r = run_cli("record", "--port", "sim", "--out", str(out), "--seconds", "60", timeout=90)
    wall = time.monotonic() - t0
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("recording ")   # the live line
             and not ln.startswith("powerrig: --port sim: ")]                                     # which port sim is
    assert len(lines) == 1, r.stderr[-3000:]
    assert lines[0].startswith(f"powerrig: error: capture {out}: recording stopped at the first failed write "
                               f"(no space left on the disk holding {disk} ("), lines[0]
    assert lines[0].endswith("); what was written before it is kept")
    for noise in ("Traceback", "jls_", "write mismatch", "pyjls"):
        assert noise not in r.stderr + r.stdout
    assert wall < 40, wall                       # it stopped there, not after the 60 s asked
    assert "(failed)" in r.stdout
    with CaptureReader(out) as cap:
        assert not cap.closed_cleanly and "was not closed" in cap.recovery_note
        assert cap.intact["p_total"] >= 1000      # at least a second of 1 ms intervals reached the disk whole
        p = cap.samples("p_total", 0, cap.intact["p_total"])
        good = np.isfinite(p)                      # (a loaded host may lose frames: gap rows, NaN)
        assert good.sum() >= 500
        assert np.all((p[good] > 1) & (p[good] < 30))       # watts of the virtual drive, not garbage


def test_read_only_out_is_refused_in_one_line_and_creates_nothing(small_disk):
    disk = small_disk("1m", "ro")
    out = disk / "ro.jls"
    r = run_cli("record", "--port", "sim", "--out", str(out), "--seconds", "5")
    assert r.returncode == 2
    # refused before anything starts: no virtual interposer, so no line about one either
    assert r.stderr == f"powerrig: error: cannot create capture {out}: {disk} is on a read-only filesystem; " \
                       "choose another --out\n"
    assert not out.exists()


def test_a_sweep_whose_output_fills_up_fails_in_one_line_and_frees_its_folder(small_disk, tmp_path, simdir):
    disk = small_disk("400k")
    plan = tmp_path / "p.toml"
    plan.write_text('name = "full"\npower_states = [0]\n[rig]\nport = "sim:d5-p5336"\n'
                    "[timing]\nsettle_s = 0.3\nidle_s = 10\n")
    db = tmp_path / "r.sqlite"
    r = run_cli("sweep", str(plan), "--results", str(db), "--out", str(disk / "out"), timeout=120)
    assert r.returncode == 2
    err = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and "recording stopped at the first failed write (no space left" in err[0], r.stderr[-3000:]
    assert "Traceback" not in r.stdout + r.stderr and "jls_" not in r.stderr
    from powerrig.results import ResultStore
    from powerrig.sweep.ownership import RunLock
    store = ResultStore(db)
    assert store.run(1)["status"] == "failed"
    RunLock(disk / "out").acquire(1).release()      # the folder is free again


def test_a_sweep_into_a_read_only_out_is_refused_in_one_line_and_records_no_run(small_disk, tmp_path, simdir):
    disk = small_disk("1m", "ro")
    plan = tmp_path / "p.toml"
    plan.write_text('name = "ro"\npower_states = [0]\n[rig]\nport = "sim:d5-p5336"\n[timing]\nidle_s = 1\n')
    db = tmp_path / "r.sqlite"
    r = run_cli("sweep", str(plan), "--results", str(db), "--out", str(disk / "out"), timeout=120)
    assert r.returncode == 2
    assert r.stderr == f"powerrig: error: cannot use the output folder {disk / 'out'}: Read-only file system; " \
                       "choose another --out\n"
    from powerrig.results import ResultStore
    assert ResultStore(db).runs() == []
