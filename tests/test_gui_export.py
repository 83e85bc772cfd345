"""Export from the window while it records (pytest-qt, offscreen): the markers' range to CSV at full
rate (the capture's own values, row for row) and decimated, to a sigrok session sigrok-cli reads, and
one-click "save the buffer" that leaves the recording running."""
from __future__ import annotations

import csv
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402

from powerrig.capture.reader import CaptureReader  # noqa: E402
from powerrig.gui.core import Core  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402


@pytest.fixture
def streaming(qapp, qtbot, sim, tmp_path):
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp_path / "settings"))
    board = sim()
    core = Core(capture_dir=tmp_path / "captures")
    win = MainWindow(core)
    core.errors, core.said = [], []
    core.error.connect(core.errors.append)
    core.status.connect(core.said.append)
    win.connect_panel.set_port(board.port)
    win.connect_panel.connect_button.click()
    qtbot.waitUntil(lambda: core.live is not None and core.live.duration_s > 3.5, timeout=60_000)
    yield win, core
    win.close()


def _said(core, start):
    return lambda: any(m.startswith(start) for m in core.said) or bool(core.errors)


def test_markers_range_to_csv_full_rate_and_decimated(qtbot, streaming, tmp_path):
    win, core = streaming
    with qtbot.waitSignal(core.markers, timeout=30_000):
        win.live_view.place_markers(1.0, 2.0)
    core.export_selection(tmp_path / "sel.csv")
    qtbot.waitUntil(_said(core, "exported"), timeout=60_000)
    assert not core.errors, core.errors
    assert core.recorder is not None                       # the recording went on
    with open(tmp_path / "sel.csv") as f:
        rows = list(csv.DictReader(f))
    with CaptureReader(core.capture_path) as cap:
        dt = cap.interval_s
        p = cap.samples("p_total", int(round(1.0 / dt)), int(round(2.0 / dt)))
    assert len(rows) == len(p) == int(round(1.0 / dt))        # full rate: one row per interval
    assert float(rows[0]["time_s"]) == pytest.approx(1.0)
    got = np.array([float(r["p_total_W"]) if r["p_total_W"] else np.nan for r in rows])
    np.testing.assert_allclose(got, p, rtol=1e-6)

    win.decimation.setCurrentIndex(win.decimation.findData(10))
    core.said.clear()
    core.export_selection(tmp_path / "sel10.csv", int(win.decimation.currentData()))
    qtbot.waitUntil(_said(core, "exported"), timeout=60_000)
    assert "1 row per 10 intervals" in core.said[-1]
    with open(tmp_path / "sel10.csv") as f:
        rows10 = list(csv.DictReader(f))
    assert len(rows10) == len(p) // 10
    np.testing.assert_allclose([float(r["p_total_W"]) for r in rows10], p.reshape(-1, 10).mean(axis=1), rtol=1e-5)
    assert float(rows10[1]["time_s"]) == pytest.approx(1.0 + 10 * dt)


def test_markers_range_to_a_sigrok_session(qtbot, streaming, tmp_path):
    from sigrok_helpers import SIGROK_CLI, sigrok
    win, core = streaming
    with qtbot.waitSignal(core.markers, timeout=30_000):
        win.live_view.place_markers(0.5, 1.5)
    core.export_selection(tmp_path / "sel.sr")
    qtbot.waitUntil(_said(core, "exported"), timeout=60_000)
    assert not core.errors, core.errors
    with CaptureReader(core.capture_path) as cap:
        n = int(round(1.0 / cap.interval_s))
    assert f"exported {n} intervals" in core.said[-1]
    if SIGROK_CLI is None:
        pytest.skip("sigrok-cli is not installed (apt install sigrok-cli)")
    shown = sigrok("-i", str(tmp_path / "sel.sr"), "--show")
    assert "PTOTAL_W" in shown


def test_save_the_buffer_while_streaming(qtbot, streaming, tmp_path):
    win, core = streaming
    rows_before = core.live.length
    core.save_buffer(tmp_path / "buffer.jls")
    qtbot.waitUntil(_said(core, "saved the buffer"), timeout=60_000)
    assert not core.errors, core.errors
    with CaptureReader(tmp_path / "buffer.jls") as cap:
        assert cap.duration_s >= 2.0                         # flushed about every second
        assert cap.length <= core.live.length
    qtbot.waitUntil(lambda: core.live.length > rows_before + 2000, timeout=30_000)
    assert core.recorder is not None
    core.save_buffer(core.capture_path)                      # over the live capture: refused
    qtbot.waitUntil(lambda: bool(core.errors), timeout=30_000)
    assert "is the capture being recorded" in core.errors[-1]
