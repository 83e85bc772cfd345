"""APST-driven power-state changes timed from the rails (analysis/apst.py, stored by
sweep/command_trace.py): on the virtual client drive with APST kept on, each move the drive made on
its own (the virtual SSD's truth, its `apst_truth` op) is found from the traced I/O and the APST
table, timed from when it was due and held to the truth; I/O that resumes before ITPT expects none."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest

from powerrig.analysis.apst import apst_moves, idle_stretches
from powerrig.capture import CaptureReader
from powerrig.dut.nvme import NvmeCli
from powerrig.results import command_report
from powerrig.results.step_trace import plot_step, plot_strip
from powerrig.results.sweep_report import write_sweep_report
from powerrig.sim.ssd.profile import load
from powerrig.web.app import create_app

from apst_helpers import sweep_on_client_apst, told_itpt

# the stated tolerance: 5 sample intervals (100 us each, the 0.5 ms tests/test_command_trace_sweep.py
# holds a Set Features' switch to) for where the move was due and where the rails moved. The first move
# counts from the Set Features' measured onset (seen 0.19-0.21 ms early), the one after the workload from
# the last traced completion (seen within 0.12 ms); the truth is the drive's own idle clock
TOL_INTERVALS = 5


def test_apst_moves_in_a_sweep_match_the_virtual_ssd(tmp_path, simdir):
    store, run, truth = sweep_on_client_apst(tmp_path, "apst kept on", [0])
    [step] = store.steps(run)
    assert step["status"] == "done"
    ms = store.measurements(run)
    lat = [m for m in ms if m["name"] == "apst.entry_latency_s"]
    settle = [m for m in ms if m["name"] == "apst.rails_settle_s"]
    prof = load("client-apst")
    with CaptureReader(step["capture"]) as cap:
        dt = cap.interval_s
        t0, t1 = cap.utc(0), cap.utc(cap.length - 1)
        # the capture's seconds of each true move inside the step's capture, after its Set Features
        sf = [e for e in cap.events if e.kind == "nvme" and e.name == "set-feature power"][-1]
        measure = next(e for e in cap.events if e.kind == "phase" and e.name.startswith("measure:"))
        to_s = lambda u: float(cap.sample_id(u)) * dt   # noqa: E731
        inside = [t for t in truth if sf.t_start < t["t_due"] < t1 - 0.05]
        during_io = [t for t in truth if measure.t_start < t["t_due"] < measure.t_end]
        io_span = (to_s(measure.t_start), to_s(measure.t_end))
    assert t0 < sf.t_start
    # the drive moved on its own twice in the step (after the Set Features, after the workload), never
    # while I/O ran: each found, nothing else reported
    assert [(t["from_ps"], t["to_ps"]) for t in inside] == [(0, 3), (0, 3)] and not during_io, truth
    assert len(lat) == len(settle) == len(inside)
    for t, la, se in zip(inside, lat, settle):
        n = json.loads(se["notes"])
        assert (n["from_ps"], n["to_ps"]) == (t["from_ps"], t["to_ps"]) and n["itpt_ms"] == t["itpt_ms"]
        assert n["expected_s"] == pytest.approx(to_s(t["t_due"]), abs=TOL_INTERVALS * dt)
        # the rails left the old level when the drive switched (half of EXLAT(0) + ENLAT(3) after due)
        assert n["expected_s"] + la["value"] == pytest.approx(to_s(t["t_switch"]), abs=TOL_INTERVALS * dt)
        assert not io_span[0] < n["expected_s"] < io_span[1]
        # settled and stored, not judged: EXLAT(0) is 0, not reported (libnvme struct nvme_id_psd), so
        # EXLAT(0) + ENLAT(3) bounds nothing (it was held to ENLAT(3) alone, 0.21 ms, before)
        assert prof.state(0).exlat_us == 0 < prof.state(3).enlat_us
        assert se["upper"] is None and se["outcome"] == "n/a" and se["requirement_met"] is None
        assert n["why"].startswith("no limit: the drive does not report EXLAT of PS0 (") and "nvme_id_psd" in n["why"]
        assert la["value"] <= se["value"] < 0.003
        assert n["before_w"] > 0.5 > 0.2 > n["after_w"]       # 1.1 W idle in PS0 -> 70 mW in PS3
    assert not [m for m in ms if m["name"] == "apst.unpredicted_s"]     # every move the table's: none flagged
    html = command_report.tables(ms)
    assert "APST moves timed from the rails" in html and html.count("<td>PS0</td><td>PS3</td>") == len(inside)
    assert "class=unpredicted" not in html
    # the step's trace draws each move where the rails left the old level, as a commanded change is drawn
    marks = command_report.apst_marks(ms, step["key"])
    assert [(round(t, 4), label, ok) for t, label, ok in marks] == [
        (round(n["expected_s"] + la["value"], 4), "APST PS0->PS3", True)
        for n, la in zip((json.loads(x["notes"]) for x in settle), lat)]
    buf = io.BytesIO()
    assert plot_step(step["capture"], store.phases(run), buf, fmt="svg", apst=marks)
    assert buf.getvalue().decode().count("APST PS0-&gt;PS3") == len(inside)


def test_moves_the_table_does_not_give_are_flagged_in_the_sweep_report_and_on_the_web_page(tmp_path, simdir,
                                                                                             monkeypatch):
    """The sweep reads an APST table whose PS0 entry says 300 ms; the virtual drive moves after its own
    100 ms: both moves are flagged (marginal, why: before the table's ITPT; a move due in the capture's
    last 50 ms may be too short to be found, and then need not be), each where the drive truly switched,
    none taken for the table's move (nor the Set Features' change read as ending after the first); the
    sweep report and the web step page show them as rows, and the step's trace draws them."""
    monkeypatch.setattr(NvmeCli, "get_apst", told_itpt(NvmeCli.get_apst, 0, 300))
    store, run, truth = sweep_on_client_apst(tmp_path, "apst kept on", [0])
    [step] = store.steps(run)
    assert step["status"] == "done"
    ms = store.measurements(run)
    flagged = [m for m in ms if m["name"] == "apst.unpredicted_s"]
    assert not [m for m in ms if m["name"] in ("apst.rails_settle_s", "apst.entry_latency_s")]
    # the Set Features' own change (PS4 before the sweep -> PS0) ends before the drive's first move
    sf_settle = next(m for m in ms if m["name"] == "transition.rails_settle_s")
    assert json.loads(sf_settle["notes"])["after_w"] > 0.5 and sf_settle["value"] < 0.05
    # nor judged from the host's view: its settle window reached the drive's first move (100 ms later)
    after = next(m for m in ms if m["name"] == "transition.after_completion_s")
    assert after["outcome"] == "n/a" and "an APST move began 0.1" in json.loads(after["notes"])["why"], after
    with CaptureReader(step["capture"]) as cap:
        dt = cap.interval_s
        sf = [e for e in cap.events if e.kind == "nvme" and e.name == "set-feature power"][-1]
        end = cap.utc(cap.length - 1)
        # a move due in the capture's last 50 ms may or may not show enough of its new level to be
        # found (where the step's end falls after the last I/O is the sweep's timing): it may be flagged
        sure = [t for t in truth if sf.t_start < t["t_due"] < end - 0.05]
        edge = [t for t in truth if end - 0.05 <= t["t_due"] < end]
        inside = [float(cap.sample_id(t["t_switch"])) * dt for t in sure + edge]
    assert len(sure) >= 1 and len(sure) <= len(flagged) <= len(sure) + len(edge), (truth, flagged, end)
    for t_switch, m in zip(inside, flagged):
        n = json.loads(m["notes"])
        # the state named by the level the rails settled at: the profile's PS3 idle power, stated as IDLP
        assert m["outcome"] == "marginal" and n["predicted"] is False and (n["from_ps"], n["to_ps"]) == (0, 3)
        assert n["expected_s"] == pytest.approx(t_switch, abs=TOL_INTERVALS * dt)      # where the drive switched
        assert m["value"] == pytest.approx(0.1, abs=0.005)          # the drive's own 100 ms of idle before it
        assert "before the table's ITPT of 300 ms (to PS3)" in n["why"] and "\n" not in n["why"]
    report = (write_sweep_report(store, run, tmp_path / "report")).read_text()
    n = len(flagged)
    assert report.count("<tr class=unpredicted>") == n and "not as the table predicts</b>: left PS0 after" in report
    page = create_app(store).test_client().get(f"/run/{run}/step/1")
    text = page.get_data(as_text=True)
    assert page.status_code == 200 and text.count("<tr class=unpredicted>") == n
    assert text.count("APST PS0-&gt;PS3 not in table") == n          # drawn on the step's trace (inline SVG)
    assert text.count("apst.unpredicted_s") >= n                     # and in the measurements table
    # the report's strip of every step draws them too (the same PNG without the marks differs)
    marks, with_marks, without = command_report.apst_marks(ms, step["key"]), io.BytesIO(), io.BytesIO()
    assert len(marks) == n and plot_strip([("s", step["capture"], [], marks)], with_marks)
    assert plot_strip([("s", step["capture"], [])], without) and with_marks.getvalue() != without.getvalue()


def test_io_resuming_before_itpt_expects_no_move():
    """Idle stretches shorter than ITPT expect nothing; a longer one expects the move ITPT after its
    start and, in it, the next entry's from the measured entry (synthetic rails: 1 W -> 0.1 W)."""
    dt = 1e-4
    n = 40000                                               # 4 s
    p = np.full(n, 1.0)
    table = [(3, 100)] + [(0, 0)] * 2 + [(4, 1000)] + [(0, 0)] * 28
    # I/O every 90 ms (ITPT 100 ms) until 1.0 s, then idle: PS0 -> PS3 at 1.1 s, PS3 -> PS4 at 2.1 s
    busy = np.array([(k * 900.0, k * 900.0 + 5) for k in range(12)])
    last = busy[-1, 1]
    p[int(last + 1000):] = 0.1
    p[int(last + 1000 + 10000):] = 0.01
    assert idle_stretches(busy[:3], 0, 2000) == [(5.0, 900.0), (905.0, 1800.0), (1805.0, 2000)]
    moves = apst_moves(lambda a, b: p[max(0, a):min(n, b)], dt, busy, 0.0, float(n), 0, table,
                       lambda old, new: 1e-3)
    assert [(m.tr.from_ps, m.tr.to_ps) for m in moves] == [(0, 3), (3, 4)]
    assert moves[0].expected_s == pytest.approx((last + 1000) * dt)
    assert moves[0].tr.latency_s == pytest.approx(0, abs=2 * dt)
    assert moves[1].expected_s == pytest.approx((last + 11000) * dt, abs=2 * dt)
    # the same I/O to the end: every gap 90 ms, no move expected, none reported
    assert apst_moves(lambda a, b: p[a:b], dt, busy[:-1], 0.0, float(busy[-1, 0]), 0, table, lambda o, n_: None) == []
