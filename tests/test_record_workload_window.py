"""`powerrig record ... -- COMMAND` marks idle, the workload and idle as phases of the capture, and
`powerrig report CAPTURE --from/--to/--phase` reports a stretch of any capture alone (issue 40 item 10):
the window's figures are the capture's samples over that stretch, read back independently."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from conftest import run_cli
from powerrig.capture import CaptureReader


def phases_csv(folder) -> dict[str, dict]:
    with open(folder / "phases.csv") as f:
        return {row["phase"]: row for row in csv.DictReader(f)}


def test_a_recorded_workload_has_its_phases_and_a_window_reports_alone(tmp_path, simdir):
    cap = tmp_path / "run.jls"
    r = run_cli("record", "--port", "sim", "--out", str(cap), "--idle-s", "1", "--", "sleep", "1.5", timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ended 1 s after the workload" in r.stdout
    whole = run_cli("report", str(cap), "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    ph = phases_csv(tmp_path / "whole")
    assert {"idle before", "workload: sleep 1.5", "idle after"} <= set(ph), list(ph)
    assert float(ph["workload: sleep 1.5"]["duration_s"]) == pytest.approx(1.5, abs=0.3)
    assert float(ph["idle after"]["start_s"]) > float(ph["workload: sleep 1.5"]["start_s"])

    # seconds: the window's whole-capture energy is the samples' over [0.5 s, 2.0 s)
    win = run_cli("report", str(cap), "--from", "0.5", "--to", "2.0", "--out", str(tmp_path / "win"))
    assert win.returncode == 0, win.stderr
    w = phases_csv(tmp_path / "win")["capture"]
    with CaptureReader(cap) as c:
        a, b = int(round(0.5 / c.interval_s)), int(round(2.0 / c.interval_s))
        want_j = float(np.nansum(c.samples("p_total", a, b))) * c.interval_s
    assert float(w["duration_s"]) == pytest.approx(1.5, abs=1e-6)
    total_j = sum(float(v) for k, v in w.items() if k.endswith("_energy_j") and not k.startswith("total"))
    assert total_j == pytest.approx(want_j, rel=1e-4)
    assert "window 0.500" in (tmp_path / "win" / "report.html").read_text()

    # a phase by name: the window is that phase
    one = run_cli("report", str(cap), "--phase", "idle after", "--out", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    got = phases_csv(tmp_path / "one")["capture"]
    assert float(got["duration_s"]) == pytest.approx(float(ph["idle after"]["duration_s"]), abs=2e-3)

    bad = run_cli("report", str(cap), "--from", "no such phase")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "'idle before'" in bad.stderr                       # it lists the names the capture has


def test_a_workload_typed_after_the_dashes_passes_the_drive_guard_first(tmp_path, simdir):
    """`record -- COMMAND` runs what the user typed: a fio write to the drive needs --serial (and the
    guard's checks), another program --allow-unguarded; a refusal is one line and records nothing."""
    assert run_cli("sim", "start", "--json").returncode == 0
    job = tmp_path / "w.fio"
    job.write_text("[w]\nfilename=/dev/nvme0n1\nrw=write\nbs=128k\nsize=1m\n")
    cap = tmp_path / "w.jls"
    r = run_cli("record", "--port", "sim", "--out", str(cap), "--", "fio", str(job), timeout=120)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "refusing a fio write on /dev/nvme0n1" in r.stderr and "--serial" in r.stderr
    assert not cap.exists()
    wrong = run_cli("record", "--port", "sim", "--out", str(cap), "--serial", "NOT-THIS-DRIVE", "--", "fio", str(job),
                    timeout=120)
    assert wrong.returncode != 0 and "serial" in wrong.stderr.lower() and not cap.exists(), wrong.stderr
    dd = run_cli("record", "--port", "sim", "--out", str(cap), "--", "dd", "if=/dev/zero", "of=/dev/nvme0n1",
                 timeout=120)
    assert dd.returncode != 0 and "--allow-unguarded" in dd.stderr and not cap.exists(), dd.stderr


def test_a_drive_workload_on_sim_without_a_rig_says_to_start_one(tmp_path, simdir):
    """With no rig of yours, `--port sim` is a bare interposer with no drive behind it: a fio or nvme
    workload would reach this host's own /dev/nvme*, so it is one line saying to start a rig."""
    cap = tmp_path / "r.jls"
    r = run_cli("record", "--port", "sim", "--out", str(cap), "--", "fio", "--name=r", "--rw=read", timeout=60)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "powerrig sim start" in r.stderr and not cap.exists()
