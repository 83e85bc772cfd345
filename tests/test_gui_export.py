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
from powerrig.gui.services import Services  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402
from conftest import missing  # noqa: E402


@pytest.fixture
def streaming(qapp, qtbot, sim, tmp_path):
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp_path / "settings"))
    board = sim()
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    svc.errors, svc.said = [], []
    svc.core.error.connect(svc.errors.append)
    svc.core.status.connect(svc.said.append)
    win.connect_panel.set_port(board.port)
    win.connect_panel.connect_button.click()
    qtbot.waitUntil(lambda: svc.recording.live is not None and svc.recording.live.duration_s > 3.5, timeout=60_000)
    yield win, svc
    win.close()


def _said(svc, start):
    return lambda: any(m.startswith(start) for m in svc.said) or bool(svc.errors)


def test_markers_range_to_csv_full_rate_and_decimated(qtbot, streaming, tmp_path):
    win, svc = streaming
    with qtbot.waitSignal(svc.markers.updated, timeout=30_000):
        win.live_view.place_markers(1.0, 2.0)
    svc.captures.export_selection(tmp_path / "sel.csv", svc.markers.times)
    qtbot.waitUntil(_said(svc, "exported"), timeout=60_000)
    assert not svc.errors, svc.errors
    assert svc.recording.recorder is not None                       # the recording went on
    with open(tmp_path / "sel.csv") as f:
        rows = list(csv.DictReader(f))
    with CaptureReader(svc.recording.capture_path) as cap:
        dt = cap.interval_s
        p = cap.samples("p_total", int(round(1.0 / dt)), int(round(2.0 / dt)))
    assert len(rows) == len(p) == int(round(1.0 / dt))        # full rate: one row per interval
    assert float(rows[0]["time_s"]) == pytest.approx(1.0)
    got = np.array([float(r["p_total_W"]) if r["p_total_W"] else np.nan for r in rows])
    np.testing.assert_allclose(got, p, rtol=1e-6)

    win.decimation.setCurrentIndex(win.decimation.findData(10))
    svc.said.clear()
    svc.captures.export_selection(tmp_path / "sel10.csv", svc.markers.times, int(win.decimation.currentData()))
    qtbot.waitUntil(_said(svc, "exported"), timeout=60_000)
    assert "1 row per 10 intervals" in svc.said[-1]
    with open(tmp_path / "sel10.csv") as f:
        rows10 = list(csv.DictReader(f))
    assert len(rows10) == len(p) // 10
    # a group's mean is over its samples that arrived; a group the live stream lost whole is empty (a
    # loaded host can lose some: the full-rate check above allows them too)
    got10 = np.array([float(r["p_total_W"]) if r["p_total_W"] else np.nan for r in rows10])
    groups = p.reshape(-1, 10)
    seen = ~np.isnan(groups)
    want10 = np.where(seen.any(axis=1), np.where(seen, groups, 0).sum(axis=1) / np.maximum(seen.sum(axis=1), 1),
                      np.nan)
    np.testing.assert_allclose(got10, want10, rtol=1e-5)
    assert float(rows10[1]["time_s"]) == pytest.approx(1.0 + 10 * dt)


def test_markers_range_to_a_sigrok_session(qtbot, streaming, tmp_path):
    from sigrok_helpers import SIGROK_CLI, sigrok
    win, svc = streaming
    with qtbot.waitSignal(svc.markers.updated, timeout=30_000):
        win.live_view.place_markers(0.5, 1.5)
    svc.captures.export_selection(tmp_path / "sel.sr", svc.markers.times)
    qtbot.waitUntil(_said(svc, "exported"), timeout=60_000)
    assert not svc.errors, svc.errors
    with CaptureReader(svc.recording.capture_path) as cap:
        n = int(round(1.0 / cap.interval_s))
    assert f"exported {n} intervals" in svc.said[-1]
    if SIGROK_CLI is None:
        missing("sigrok-cli is not installed (apt install sigrok-cli)")
    shown = sigrok("-i", str(tmp_path / "sel.sr"), "--show")
    assert "PTOTAL_W" in shown


def test_save_the_buffer_while_streaming(qtbot, streaming, tmp_path):
    win, svc = streaming
    rows_before = svc.recording.live.length
    svc.captures.save_buffer(tmp_path / "buffer.jls")
    qtbot.waitUntil(_said(svc, "saved the buffer"), timeout=60_000)
    assert not svc.errors, svc.errors
    with CaptureReader(tmp_path / "buffer.jls") as cap:
        assert cap.duration_s >= 2.0                         # flushed about every second
        assert cap.length <= svc.recording.live.length
    qtbot.waitUntil(lambda: svc.recording.live.length > rows_before + 2000, timeout=30_000)
    assert svc.recording.recorder is not None
    svc.captures.save_buffer(svc.recording.capture_path)                      # over the live capture: refused
    qtbot.waitUntil(lambda: bool(svc.errors), timeout=30_000)
    assert "is the capture being recorded" in svc.errors[-1]
