"""The small lies of issue 25 item 8, each now told: `results --db <typo>` creates nothing and says so;
`devices --port DEAD` says the port is dead; `export` of a capture cut short (or a recording that got
less than asked) warns instead of passing it off as whole."""
from __future__ import annotations

import numpy as np

from conftest import run_cli
from powerrig.capture import CaptureWriter
from powerrig.cli import main
from powerrig.testing import synthetic as S


def test_results_with_a_mistyped_db_creates_nothing(tmp_path):
    db = tmp_path / "no" / "such" / "typo.sqlite"
    for action in (["list"], ["steps", "1"], ["export", "1", str(tmp_path / "x.csv")]):
        r = run_cli("results", "--db", str(db), *action)
        assert r.returncode == 2
        assert r.stderr == f"powerrig: error: no results database at {db}: check --db, or run `powerrig sweep PLAN " \
                           f"--results {db}` first\n"
    r = run_cli("report", "1", "--db", str(db))
    assert r.returncode == 2 and "no results database" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "no").exists()


def test_devices_says_a_named_port_is_dead(tmp_path):
    dead = tmp_path / "ttyDEAD"
    r = run_cli("devices", "--port", str(dead))
    assert r.returncode == 1
    assert r.stderr.startswith(f"powerrig: error: --port {dead}: no interposer answers there (")
    assert r.stderr.count("\n") == 1, r.stderr
    r = run_cli("devices", "--port", str(dead), "--json")
    assert r.returncode == 1 and r.stdout.strip() == "[]" and f"--port {dead}" in r.stderr


def _capture(path, requested_s=None):
    meta = {"device": {"device": "t"},
            "recording": {"requested_s": requested_s, "covered_s": 3.0, "lost_s": 0.0,
                          "end_reason": "interrupted" if requested_s else "stopped", "error": None}}
    with CaptureWriter(path, metadata=meta, clock=S.clock(0)) as w:
        for b in S.interval_blocks(3.0, rows_per_block=250):
            w.write(b)
    return path


def test_export_of_a_cut_capture_warns(tmp_path, capsys):
    whole = _capture(tmp_path / "whole.jls")
    cut = tmp_path / "cut.jls"
    cut.write_bytes(whole.read_bytes()[:whole.stat().st_size // 2])
    for fmt, out in (("--csv", "c.csv"), ("--sigrok", "c.sr")):
        assert main(["export", fmt, str(whole), "--out", str(tmp_path / f"w{out}")]) == 0
        assert "warning" not in capsys.readouterr().err
        assert main(["export", fmt, str(cut), "--out", str(tmp_path / out)]) == 0
        err = capsys.readouterr().err.splitlines()
        warn = [ln for ln in err if "warning" in ln]
        assert len(warn) == 1 and warn[0].startswith(f"powerrig: warning: {cut}: not closed cleanly: capture cut.jls "
                                                     "was cut short ("), err
    short = _capture(tmp_path / "short.jls", requested_s=60.0)
    assert main(["export", "--csv", str(short), "--out", str(tmp_path / "s.csv")]) == 0
    err = capsys.readouterr().err
    assert f"powerrig: warning: {short}: recording ended by interrupted, 60.000 s asked, 3.000 s covered" in err
    assert np.isfinite(np.loadtxt(tmp_path / "s.csv", delimiter=",", skiprows=1, usecols=1, max_rows=5)).all()
