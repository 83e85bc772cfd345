"""A lost interposer in the window (pytest-qt, offscreen): killed mid-stream, the window says so and
waits; started again behind the same port (a stable name, as /dev/serial/by-id gives a real board),
the same capture goes on, the time away shaded in the live view and stored as gap rows in the file."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402

from powerrig.capture.reader import CaptureReader  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402


def _point(link, port):
    tmp = f"{link}.new"
    os.symlink(port, tmp)
    os.replace(tmp, link)                 # atomically, as udev re-creates a by-id link


def test_interposer_killed_and_restarted_the_same_capture_goes_on_with_the_gap_shaded(qtbot, qapp, sim, tmp_path):
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp_path / "settings"))
    link = tmp_path / "by-id-interposer"
    first = sim()
    _point(link, first.port)
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    win.show()
    try:
        win.connect_panel.set_port(str(link))
        win.connect_panel.connect_button.click()
        qtbot.waitUntil(lambda: svc.recording.live is not None and svc.recording.live.length > 3000, timeout=60_000)
        path = svc.recording.capture_path
        before = svc.recording.live.length
        first.proc.kill()                                   # the board goes away mid-stream
        first.proc.wait()
        qtbot.waitUntil(lambda: "lost" in win.connect_panel.message.text(), timeout=60_000)
        msg = win.connect_panel.message.text()
        assert "waiting" in msg and str(path) in msg and str(link) in msg
        qtbot.wait(1000)                                    # it stays away a while: the gap has a size
        assert svc.recording.recorder is not None                    # the recording waits; it did not end
        second = sim()
        _point(link, second.port)
        qtbot.waitUntil(lambda: "is back" in win.connect_panel.note.text(), timeout=60_000)
        assert win.connect_panel.message.text() == ""
        dt = svc.recording.live.interval_s

        def gaps_after_loss():
            return [(a, b) for a, b in svc.recording.live.gaps(0, svc.recording.live.duration_s) if a >= before * dt - 1e-9]
        # the live view: a gap of at least the second it was away, after the samples before the loss
        qtbot.waitUntil(lambda: any(b - a >= 1.0 for a, b in gaps_after_loss()), timeout=60_000)
        g0, g1 = max(gaps_after_loss(), key=lambda g: g[1] - g[0])
        qtbot.waitUntil(lambda: svc.recording.live.length * dt > g1 + 3000 * dt, timeout=60_000)
        assert svc.recording.capture_path == path
        assert g0 >= before * dt - 1e-9
        win.live_view.zoom_to(0.0, svc.recording.live.duration_s)
        qtbot.waitUntil(lambda: win.live_view.gap_item.isVisible(), timeout=30_000)
        x0 = np.asarray(win.live_view.gap_item.opts["x0"])
        assert np.any(np.abs(x0 - g0) < 0.01)
        # samples resume after it: finite power
        after = svc.recording.live.summaries(g1 + 0.1, g1 + 0.2, 10, ["p_total"]).mean["p_total"]
        assert np.isfinite(after).all()

        res = svc.recording.stop()
        assert res.path == path and res.end_reason == "stopped"
        with CaptureReader(path) as cap:
            rec = cap.recording
            assert rec["end_reason"] == "stopped" and len(rec["reconnects"]) == 1
            away = rec["reconnects"][0]
            assert away["gap_rows"] * cap.interval_s >= 1.0
            assert cap.length >= before + away["gap_rows"] + 3000
            p = cap.samples("p_total") if cap.has("p_total") else None
            assert p is not None
            # the longest run of lost rows after the loss point is the time away; data goes on after it
            # (a loaded machine may drop frames elsewhere too: gaps, counted as lost like this one)
            lost = np.concatenate([[0], np.isnan(p).astype(np.int8), [0]])
            starts, ends = np.flatnonzero(np.diff(lost) == 1), np.flatnonzero(np.diff(lost) == -1)
            late = starts >= before - 1000                      # (the loss came after `before` rows)
            starts, ends = starts[late], ends[late]
            k = int(np.argmax(ends - starts))
            assert ends[k] - starts[k] >= away["gap_rows"]
            assert starts[k] <= before + 2000
            assert np.isfinite(p[ends[k]:]).sum() >= 2000
    finally:
        win.close()
