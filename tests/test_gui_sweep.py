"""The sweep panel driven as a user drives it (pytest-qt, offscreen): open a two-step plan, run it on
a virtual rig through the sweep engine, pause before the second step, stop there, resume the run to
its end; the results table and the charts show both steps, read back from the results store, and the
HTML report opens. A plan that cannot run says why in the panel and runs nothing."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings, Qt  # noqa: E402

from conftest import run_cli  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402
from powerrig.results import ResultStore  # noqa: E402

TWO_STEPS = """name = "gui two steps"
power_states = [2]
[rig]
port = "sim:d5-p5336"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.3
idle_s = 2.0
measure_s = 2.0
[[workload]]
name = "seq-read-128k"
rw = "read"
bs = "128k"
iodepth = 32
"""


@pytest.fixture
def window(qapp, qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path / "sim"))
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp_path / "settings"))
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    win.show()
    svc.errors = []
    svc.core.error.connect(svc.errors.append)
    panel = win.sweep_panel
    panel.db.setText(str(tmp_path / "results.sqlite"))
    panel.out_root.setText(str(tmp_path / "sweeps"))
    opened = []
    panel.open_url = opened.append
    yield win, svc, panel, opened
    panel.runner.stop()
    panel.runner.wait(60)
    win.close()
    run_cli("sim", "stop", "--all")


def test_two_step_plan_runs_pauses_stops_and_resumes_to_the_end(qtbot, window, tmp_path):
    win, svc, panel, opened = window
    plan = tmp_path / "two.toml"
    plan.write_text(TWO_STEPS)
    assert panel.load_plan(str(plan))
    assert "2 steps" in panel.about.text()
    panel.run_button.click()
    qtbot.waitUntil(lambda: "step 1 of 2" in panel.state.text() or not panel.runner.running, timeout=120_000)
    assert panel.runner.running, (panel.state.text(), svc.errors)
    assert "ETA" in panel.state.text()
    panel.pause_button.click()                          # the idle step (2 s) finishes, then the sweep holds
    # the live view draws the running sweep's stream: the engine's recorder hands it each block
    lv = win.live_view
    qtbot.waitUntil(lambda: svc.recording.live is not None and svc.recording.live.duration_s > 1.0 and lv.source is svc.recording.live
                    and (lv.plotted_end_s() or 0) > 1.0, timeout=60_000)
    assert svc.recording.sweeping and svc.recording.recorder is None       # the engine records, the window only shows
    assert "follows the running sweep" in win.status_label.text()
    # the Connect panel, whose fields say nothing of the sweep's rig, says whose data the plot shows
    assert "sweep is running" in win.connect_panel.note.text() and "sim:d5-p5336" in win.connect_panel.note.text()
    assert np.nanmean(lv.last_summary.mean["p_total"]) > 0.1     # the drive's watts, not an empty plot
    # the sweep's own events on that stream: its source's clock places its steps' commands and phases
    qtbot.waitUntil(lambda: svc.recording.live.clock is not None, timeout=30_000)
    qtbot.waitUntil(lambda: any(e["kind"] == "phase" for e in svc.captures.events_s(svc.recording.live)),
                    timeout=60_000)
    placed = svc.captures.events_s(svc.recording.live)
    assert all(-1.0 <= e["t0"] <= svc.recording.live.duration_s + 1.0 for e in placed), placed
    assert lv._event_drawn, "the live view drew none of the sweep's events"
    qtbot.waitUntil(lambda: "paused before step 2 of 2" in panel.state.text(), timeout=120_000)
    assert panel.progress_bar.value() == 1
    qtbot.waitUntil(lambda: panel.table.rowCount() == 1, timeout=30_000)
    assert panel.table.item(0, 0).text() == "PS2 idle"
    assert panel.resume_button.isEnabled() and not panel.pause_button.isEnabled()

    panel.stop_button.click()                           # stop while held: the run stays resumable
    qtbot.waitUntil(lambda: not panel.runner.running and "stopped" in panel.state.text(), timeout=120_000)
    store = ResultStore(tmp_path / "results.sqlite")
    run_id = panel.run_id
    assert store.run(run_id)["status"] == "interrupted"
    assert [s["key"] for s in store.steps(run_id)] == ["ps2/idle/r1"]

    panel.resume_button.click()                         # the same run goes on with the step not stored
    # "done in" is the finished run's line ("step 2 of 2 ...: done" comes before the runner's end is seen)
    qtbot.waitUntil(lambda: not panel.runner.running and "done in" in panel.state.text()
                    or "failed" in panel.state.text(), timeout=180_000)
    assert "done in" in panel.state.text(), (panel.state.text(), svc.errors)
    assert not svc.recording.sweeping
    assert panel.run_id == run_id
    # the run is done: nothing is left to resume (the engine would only say so), Run starts a new one
    assert not panel.resume_button.isEnabled() and panel.run_button.isEnabled()
    assert win.connect_panel.note.text() == ""
    assert store.run(run_id)["status"] == "done"
    qtbot.waitUntil(lambda: panel.table.rowCount() == 2, timeout=30_000)
    names = [panel.table.item(i, 0).text() for i in range(2)]
    assert names == ["PS2 idle", "PS2 seq-read-128k"]
    assert panel.progress_bar.value() == 2
    # the table shows the store's figures: watts in both steps, MiB/s/W of the read
    rows = {s["name"]: s for s in panel.rows}
    assert rows["PS2 idle"]["W"] > 0 and rows["PS2 seq-read-128k"]["MiB/s"] > 100
    assert panel.table.item(1, 6).text() == f"{rows['PS2 seq-read-128k']['MiB/s/W']:.1f}"
    # the charts draw the same rows: one bar (the read), power per state for idle and the read
    assert [b[0] for b in panel.charts.bars] == ["PS2 seq-read-128k"]
    assert set(panel.charts.lines) == {"idle", "seq-read-128k"}
    assert panel.charts.lines["seq-read-128k"][0][1] > panel.charts.lines["idle"][0][1]

    assert panel.report_button.isEnabled()              # the end of the run enabled it (no race with the thread)
    panel.report_button.click()
    qtbot.waitUntil(lambda: bool(opened), timeout=60_000)
    report = opened[0].toLocalFile()
    assert report.endswith("index.html") and os.path.exists(report)
    assert "PS2 seq-read-128k" in open(report).read() or "ps2/seq-read-128k" in open(report).read()


def test_the_runner_is_over_for_every_slot_of_its_finished_signal(qtbot, monkeypatch, tmp_path):
    """A slot of ``finished`` (the panel's, which enables Open report) must see the sweep as over, even
    though the sweep thread is still alive while it sends the signal: CI once left the button disabled."""
    import threading

    import powerrig.sweep.engine as engine
    from powerrig.gui.services.sweeps import SweepRunner

    class OneRunSweep:
        run_id = None

        def __init__(self, *a, **k):
            """Takes the engine's arguments; its one run needs none of them."""

        def run(self):
            return 7

    monkeypatch.setattr(engine, "Sweep", OneRunSweep)
    runner = SweepRunner()
    seen = []
    # a direct connection runs the slot on the sweep thread, while that thread is certainly alive
    runner.finished.connect(lambda d: seen.append((runner.running, threading.current_thread().name, d["run"])),
                            Qt.DirectConnection)
    plan = type("Plan", (), {"name": "one run"})()
    runner.start(plan, store=None, out_root=tmp_path)
    assert runner.wait(10)
    assert seen == [(False, "sweep", 7)]


def test_a_plan_that_cannot_run_says_why_and_runs_nothing(qtbot, window, tmp_path):
    win, svc, panel, _ = window
    bad = tmp_path / "bad.toml"
    bad.write_text(TWO_STEPS.replace("power_states = [2]", "power_states = [2]\nsettle = 3"))
    assert not panel.load_plan(str(bad))
    assert "this plan cannot run" in panel.about.text() and "settle" in panel.about.text()
    assert not panel.run_button.isEnabled()
    assert svc.errors and "\n" not in svc.errors[-1]
    assert not (tmp_path / "results.sqlite").exists()
