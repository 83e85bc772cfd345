"""Settings persist (QSettings): last port, units (the plotted quantity and the Y range), curve colours,
the export decimation and the panel layout come back in a new window; the dark theme's legend and axes
are light on dark (readable), also after switching themes at run time."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("pytestqt")
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QColor  # noqa: E402

from gui_helpers import private_settings, show_synthetic  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402


@pytest.fixture
def settings_dir(qapp, tmp_path):
    private_settings(tmp_path)
    return tmp_path


def _luminance(c) -> float:
    c = QColor(c)

    def ch(v):
        v = v / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    return 0.2126 * ch(c.red()) + 0.7152 * ch(c.green()) + 0.0722 * ch(c.blue())


def _contrast(a, b) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_settings_come_back_in_a_new_window(qtbot, settings_dir):
    svc = Services(capture_dir=settings_dir / "c")
    win = MainWindow(svc)
    qtbot.addWidget(win)
    svc.connection.port = "/dev/serial/by-id/usb-powerrig-interposer-if00"
    win.live_view.quantity.setCurrentText("Current (A)")
    win.live_view.auto_y.setChecked(False)
    win.live_view.y_min.setValue(0.5)
    win.live_view.y_max.setValue(3.5)
    win.set_colour(0, "#123456")
    win.decimation.setCurrentIndex(win.decimation.findData(100))
    win.set_theme("dark")
    win.removeDockWidget(win.docks["Multimeter"])
    win.addDockWidget(Qt.LeftDockWidgetArea, win.docks["Multimeter"])
    win.docks["Multimeter"].show()
    win.close()

    svc2 = Services(capture_dir=settings_dir / "c")
    win2 = MainWindow(svc2)
    qtbot.addWidget(win2)
    try:
        assert win2.connect_panel.port.currentText() == "/dev/serial/by-id/usb-powerrig-interposer-if00"
        lv = win2.live_view
        assert lv.quantity.currentText() == "Current (A)"
        assert not lv.auto_y.isChecked() and (lv.y_min.value(), lv.y_max.value()) == (0.5, 3.5)
        assert lv.colours[0] == "#123456"
        assert win2.decimation.currentData() == 100
        assert win2.theme == "dark"
        assert win2.dockWidgetArea(win2.docks["Multimeter"]) == Qt.LeftDockWidgetArea
    finally:
        win2.close()


def test_dark_theme_legend_and_axes_are_readable(qtbot, settings_dir):
    svc = Services(capture_dir=settings_dir / "c")
    win = MainWindow(svc)
    qtbot.addWidget(win)
    try:
        win.set_theme("light")
        show_synthetic(svc)                                 # curves and legend made under the light theme
        win.set_theme("dark")                               # ... then switched
        plot = win.live_view.plot
        bg = QColor(plot.backgroundBrush().color())
        legend = plot.getPlotItem().legend
        assert legend.items, "the live view has a legend"
        for _sample, label in legend.items:
            assert _contrast(label.opts["color"], bg) >= 4.5, label.text
        legend_bg = legend.opts["brush"].color()
        for _sample, label in legend.items:
            assert _contrast(label.opts["color"], legend_bg) >= 4.5
        for ax in ("left", "bottom"):
            assert _contrast(plot.getAxis(ax).textPen().color(), bg) >= 4.5
        # curves rebuilt later (another quantity) get readable labels too
        win.live_view.quantity.setCurrentText("Voltage (V)")
        for _sample, label in legend.items:
            assert _contrast(label.opts["color"], bg) >= 4.5
    finally:
        win.close()
