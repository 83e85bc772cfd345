"""The sample Joulescope recording that ships in fixtures/joulescope (issue 40 item 13): two JS220 units
on a drive's 12 V and 3.3 V rails and the fio JSON of the workload, written with pyjls as the Joulescope
UI writes them (fixtures/joulescope/make_sample.py). `powerrig import joulescope` makes a capture of them
whose workload phase holds the power the files hold over fio's window, and whose report writes."""
from __future__ import annotations

import json

import numpy as np
import pyjls
import pytest

from conftest import REPO, run_cli
from powerrig.analysis import analyse
from powerrig.capture import CaptureReader

HERE = REPO / "fixtures" / "joulescope"


def power_over(path, t0_s: float, t1_s: float) -> float:
    """Mean of the file's own power signal over [t0, t1) seconds from its first sample, read with pyjls."""
    r = pyjls.Reader(str(path))
    try:
        sig = next(s for s in r.signals.values() if s.name == "power")
        fs = sig.sample_rate
        a, b = int(round(t0_s * fs)), int(round(t1_s * fs))
        return float(np.mean(r.fsr(sig.signal_id, a, b - a)))
    finally:
        r.close()


def test_the_sample_recording_imports_with_its_workload(tmp_path):
    files = {"12V": HERE / "js220-12v.jls", "3V3": HERE / "js220-3v3.jls"}
    fio = HERE / "fio-seq-write.json"
    assert all(p.stat().st_size < 500_000 for p in files.values())        # small enough to ship
    out = tmp_path / "sample.jls"
    r = run_cli("import", "joulescope", *(f"{k}={v}" for k, v in files.items()), "--events", str(fio),
                "--out", str(out))
    assert r.returncode == 0, r.stderr
    job = json.loads(fio.read_text())["jobs"][0]
    with CaptureReader(out) as cap:
        assert cap.rails == ("12V", "3V3")
        an = analyse(cap, cap.events, cap.metadata)
        start = cap.utc(0)
    ph = next(p for p in an.phases if p.name == job["jobname"])
    assert ph.duration_s == pytest.approx(job["job_runtime"] / 1000, abs=0.01)
    # fio's window from its end time and runtime, placed in each file by its own samples
    end = json.loads(fio.read_text())["timestamp_ms"] / 1000 - start
    t0 = end - job["job_runtime"] / 1000
    want = sum(power_over(p, t0 + 0.002, end - 0.002) for p in files.values())
    assert ph.mean_w == pytest.approx(want, rel=0.01)
    idle = [p for p in an.phases if p.kind == "idle"]
    assert idle and all(p.mean_w < ph.mean_w / 2 for p in idle)
    assert ph.peak_100us.value_w > ph.mean_w * 1.2            # the write bursts, caught at 100 us sampling
    rep = run_cli("report", str(out), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr
    assert job["jobname"] in (tmp_path / "rep" / "report.html").read_text()
