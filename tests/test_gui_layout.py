"""The window on a small screen and what it says after a failure (pytest-qt, offscreen): at 1366x768 the
window is no wider than the screen and no panel is cut off (panels scroll, the plot's tool bar
reflows); the Y range fields show the range auto Y plots; a failed File > Open or connection does not
leave "opening ..." in the status bar."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("pytestqt")
from PySide6.QtCore import QPoint, QRect  # noqa: E402
from PySide6.QtWidgets import QScrollArea  # noqa: E402

from gui_helpers import private_settings, show_synthetic  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402


@pytest.fixture
def window(qtbot, tmp_path):
    private_settings(tmp_path)
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    qtbot.addWidget(win)
    svc.errors, svc.said = [], []
    svc.core.error.connect(svc.errors.append)
    svc.core.status.connect(svc.said.append)
    yield win, svc
    win.close()


def _inside(child, ancestor) -> bool:
    """The child's whole rectangle lies inside the ancestor's."""
    top_left = child.mapTo(ancestor, QPoint(0, 0))
    return ancestor.rect().contains(QRect(top_left, child.size()))


def test_the_window_fits_1366x768_with_nothing_cut_off(qtbot, window):
    win, svc = window
    show_synthetic(svc)
    win.resize(1366, 768)
    win.show()
    qtbot.waitExposed(win)
    qtbot.wait(200)                                   # the docks take their starting sizes after show
    # the window is as small as asked: no minimum width pushes it past the screen (it was 1686 px)
    assert win.width() == 1366 and win.height() == 768, win.size()
    assert win.minimumSizeHint().width() <= 1366 and win.minimumSizeHint().height() <= 740
    # every panel showing is whole across (it scrolls up and down when its dock is short), inside the window
    shown = [d for d in win.docks.values() if not d.visibleRegion().isEmpty()]
    assert {d.windowTitle() for d in shown} >= {"Connect", "Multimeter", "Analysis"}, [d.windowTitle() for d in shown]
    for d in shown:
        assert _inside(d, win), d.windowTitle()
        area = d.widget()
        assert isinstance(area, QScrollArea), d.windowTitle()
        assert area.widget().width() >= area.widget().minimumSizeHint().width(), d.windowTitle()
        assert not area.horizontalScrollBar().isVisible(), d.windowTitle()
    # the multimeter: its table's columns all in view, and the markers' box on screen
    mm = win.multimeter
    assert not mm.table.horizontalScrollBar().isVisible()
    header = mm.table.horizontalHeader()
    assert header.length() <= mm.table.viewport().width(), (header.length(), mm.table.viewport().width())
    assert mm.marker_box.height() >= mm.marker_box.minimumSizeHint().height()
    assert not mm.marker_box.visibleRegion().isEmpty()
    # the plot's tool bar reflows: every control inside the plot's panel (none past its right edge)
    lv = win.live_view
    for w in (lv.quantity, lv.auto_y, lv.y_min, lv.y_max, lv.markers_button, lv.float_button, lv.zoom_all,
              lv.live_button):
        assert _inside(w, lv), w
    assert lv.plot.height() > 150
    # one tab bar per group of tabbed panels (Qt left a stale second one shown over the status bar)
    from PySide6.QtWidgets import QTabBar
    bars = [tuple(tb.tabText(i) for i in range(tb.count())) for tb in win.findChildren(QTabBar)
            if tb.parentWidget() is win and tb.isVisible()]
    assert sorted(bars) == sorted(set(bars)), bars


def test_a_narrow_plot_wraps_its_tool_bar(qtbot, window):
    from powerrig.gui.live_view.widget import LiveView
    _win, svc = window
    lv = LiveView(svc)
    qtbot.addWidget(lv)
    lv.resize(400, 300)
    lv.show()
    qtbot.wait(50)
    assert _inside(lv.live_button, lv) and _inside(lv.y_max, lv)
    assert lv.live_button.mapTo(lv, QPoint(0, 0)).y() > lv.quantity.mapTo(lv, QPoint(0, 0)).y()


def test_a_saved_window_larger_than_the_screen_is_fitted(qtbot, window):
    win, _core = window
    screen = win.screen().availableGeometry()
    fitted = win.fitted(screen.size() * 2)
    assert fitted.width() <= screen.width() and fitted.height() <= screen.height()


def test_y_range_fields_follow_auto_y(qtbot, window):
    win, svc = window
    lv = win.live_view
    win.show()
    assert lv.auto_y.isChecked()
    show_synthetic(svc)
    qtbot.waitUntil(lambda: lv.last_summary is not None, timeout=10_000)
    qtbot.wait(100)
    (_x0, _x1), (lo, hi) = lv.plot.getViewBox().viewRange()
    # the fields show the range plotted, not the stale 0..25 they started with
    assert lv.y_min.value() == pytest.approx(lo, abs=0.01) and lv.y_max.value() == pytest.approx(hi, abs=0.01)
    assert (lv.y_min.value(), lv.y_max.value()) != (0.0, 25.0)
    assert lv.y_min.text() != lv.y_max.text()                        # a narrow range still reads as a range
    assert not lv.y_min.isEnabled() and not lv.y_max.isEnabled()     # auto Y sets them
    # unticking auto Y keeps the range plotted (it does not jump to old numbers) and lets them be typed
    lv.auto_y.setChecked(False)
    assert lv.y_min.isEnabled()
    (_x0, _x1), (lo2, hi2) = lv.plot.getViewBox().viewRange()
    assert lo2 == pytest.approx(lo, abs=0.01) and hi2 == pytest.approx(hi, abs=0.01)
    lv.y_max.setValue(40.0)
    assert lv.plot.getViewBox().viewRange()[1][1] == pytest.approx(40.0)


def test_a_failed_open_does_not_leave_opening_in_the_status_bar(qtbot, window, tmp_path):
    win, svc = window
    bad = tmp_path / "not-a-capture.jls"
    bad.write_text("this is not a capture\n")
    svc.captures.open(bad)
    qtbot.waitUntil(lambda: bool(svc.errors), timeout=30_000)
    qtbot.wait(50)
    text = win.status_label.text()
    assert "opening" not in text or "failed" in text, text
    assert str(bad) in text and "failed" in text, text


def test_a_failed_connection_does_not_leave_connecting_in_the_status_bar(qtbot, window):
    win, svc = window
    svc.connection.connect_port("/dev/ttyNOPE0")
    qtbot.waitUntil(lambda: bool(svc.errors), timeout=30_000)
    qtbot.wait(50)
    assert "failed" in win.status_label.text() and "does not exist" in win.status_label.text()
    assert win.connect_panel.connect_button.isEnabled()


def _rect_in(w, top):
    return QRect(w.mapTo(top, QPoint(0, 0)), w.size())


@pytest.mark.parametrize("screen", [(1366, 768), (1920, 1080)])
def test_an_enlarged_bottom_dock_never_covers_the_plots_controls(qtbot, window, screen):
    """Dragging the Analysis/Sweep dock up as far as it goes: the plot keeps its tool bar (Markers,
    Float, Whole capture, Pause) clear of it, every control inside the bar, and room for its axes and
    their labels; the dock stops there."""
    from PySide6.QtCore import Qt
    win, svc = window
    win.resize(*screen)
    win.show()
    qtbot.waitExposed(win)
    qtbot.wait(200)
    lv = win.live_view
    win.resizeDocks([win.docks["Analysis"]], [1000], Qt.Vertical)     # enlarged before any data ...
    qtbot.wait(50)
    show_synthetic(svc)              # ... then a stream's rail boxes widen the tool bar (it wraps to a new row)
    for h in (None, 190, 350, 500, 700, 1000):
        if h is not None:
            win.resizeDocks([win.docks["Analysis"]], [h], Qt.Vertical)
        qtbot.wait(50)
        plot, bar = _rect_in(lv.plot, win), _rect_in(lv.bar, win)
        for b in (lv.markers_button, lv.float_button, lv.zoom_all, lv.live_button, lv.quantity, lv.y_max):
            r = _rect_in(b, win)
            assert bar.contains(r) and not r.intersects(plot), (h, b.text() if hasattr(b, "text") else b, r, plot)
        assert lv.plot.height() >= lv.PLOT_MIN_H, h
        # the axis labels are drawn inside the plot widget, whole
        for ax in ("bottom", "left"):
            label = lv.plot.getAxis(ax).label
            m = label.document().documentMargin()          # the text item's blank margin around the text
            r = lv.plot.mapFromScene(label.sceneBoundingRect().adjusted(m, m, -m, -m)).boundingRect()
            assert lv.plot.rect().contains(r), (h, ax, r, lv.plot.rect())
    assert win.docks["Analysis"].height() > 250        # the dock did grow, up to the plot's minimum


def test_the_sweep_panels_charts_show_whole_at_1366x768_and_no_legend_covers_a_bar(qtbot, window):
    import pyqtgraph as pg
    win, svc = window
    win.resize(1366, 768)
    win.show()
    qtbot.waitExposed(win)
    qtbot.wait(200)
    win.docks["Sweep"].raise_()
    qtbot.wait(100)
    charts = win.sweep_panel.charts
    rows = [{"name": f"PS{ps} {wl}", "workload": wl, "power_state": ps, "W": w, "MiB/s/W": e}
            for ps in (0, 1, 2) for wl, w, e in (("idle", 5.5, None), ("seq-read-128k", 9.2 - ps / 5, 466.0 - 40 * ps),
                                                ("seq-write-128k", 21.0 - 4 * ps, 154.0 - 40 * ps))]
    charts.show_rows(rows)
    qtbot.wait(100)
    viewport = win.docks["Sweep"].widget().viewport()           # what the dock shows of its panel
    for plot in (charts.efficiency, charts.power):
        r = QRect(plot.mapTo(viewport, QPoint(0, 0)), plot.size())
        assert viewport.rect().contains(r), (r, viewport.rect())   # the whole chart in view, not a third
        assert plot.height() >= 160
        label = plot.getAxis("bottom").label                         # "power state" under the bars, whole
        m = label.document().documentMargin()
        lr = plot.mapFromScene(label.sceneBoundingRect().adjusted(m, m, -m, -m)).boundingRect()
        assert plot.rect().contains(lr), (lr, plot.rect())
    vb = charts.efficiency.getViewBox()
    legend = charts.bar_legend.sceneBoundingRect()
    bars = [it for it in vb.addedItems if isinstance(it, pg.BarGraphItem)]
    assert bars
    for bar in bars:
        o = bar.opts
        for x, hgt in zip(o["x"], o["height"]):
            r = vb.mapViewToScene(pg.QtCore.QRectF(x - o["width"] / 2, 0, o["width"], hgt)).boundingRect()
            assert not r.intersects(legend), (x, hgt, r, legend)
    pvb = charts.power.getViewBox()
    plegend = charts.legend.sceneBoundingRect()
    for wl, pts in charts.lines.items():
        for ps, w in pts:
            pt = pvb.mapViewToScene(pg.QtCore.QPointF(ps, w))
            assert not plegend.contains(pt), (wl, ps, w)


def _tick_texts(plot, side: str) -> list[str]:
    """The tick labels the axis would draw now."""
    from PySide6.QtGui import QImage, QPainter
    img = QImage(8, 8, QImage.Format_ARGB32)
    painter = QPainter(img)
    try:
        specs = plot.getAxis(side).generateDrawSpecs(painter)
    finally:
        painter.end()
    return [t[2] for t in specs[2]] if specs else []


def _sweep_dock_shown(qtbot, window):
    """The window at 1366x768, shown, its Sweep dock raised."""
    win, _svc = window
    win.resize(1366, 768)
    win.show()
    qtbot.waitExposed(win)
    win.docks["Sweep"].raise_()
    qtbot.wait(100)
    return win


def test_the_sweep_charts_show_no_numbers_before_a_step_is_stored(qtbot, window):
    """An empty chart said "power state 0.2 ... 0.8" and "0.8 W": numbers of nothing. Once a step is
    stored its power states and the values' scale appear; a new plan's empty rows blank them again."""
    win = _sweep_dock_shown(qtbot, window)
    charts = win.sweep_panel.charts
    for plot in (charts.efficiency, charts.power):
        assert _tick_texts(plot, "bottom") == [] and _tick_texts(plot, "left") == []
    charts.show_rows([{"name": "PS0 seq-read-128k", "workload": "seq-read-128k", "power_state": 0, "W": 9.2,
                       "MiB/s/W": 466.0}])
    qtbot.wait(50)
    for plot in (charts.efficiency, charts.power):
        assert "PS0" in _tick_texts(plot, "bottom") and _tick_texts(plot, "left")
    charts.show_rows([])
    assert _tick_texts(charts.power, "left") == [] and _tick_texts(charts.power, "bottom") == []


def test_the_live_plot_shows_no_numbers_until_it_has_a_source(qtbot, window):
    """Before anything is connected or opened the plot read -400...400 mW and 0...1 s of nothing, the
    overview under it -0.4 ... 0.4; a source brings their scales back."""
    win, svc = window
    win.resize(1366, 768)
    win.show()
    qtbot.waitExposed(win)
    plot, overview = win.live_view.plot, win.minimap.view
    assert _tick_texts(plot, "left") == [] and _tick_texts(plot, "bottom") == []
    assert _tick_texts(overview, "bottom") == []
    show_synthetic(svc, 3.0)
    qtbot.waitUntil(lambda: win.live_view.last_summary is not None, timeout=10_000)
    # (the left axis, narrow while blank, widens for its labels at the next layout)
    qtbot.waitUntil(lambda: bool(_tick_texts(plot, "left") and _tick_texts(plot, "bottom")), timeout=5_000)
    assert plot.getAxis("left").geometry().width() > 30
    qtbot.waitUntil(lambda: bool(_tick_texts(overview, "bottom")), timeout=5_000)


def test_the_sweep_buttons_and_progress_stay_in_view_when_the_results_table_is_scrolled_to(qtbot, window):
    """At 1366x768 the sweep panel's plan and results scroll; scrolled down to the table (as a user
    does to read it, and docs/img/sweep-done.png shows), Run ... Open report and the progress had been
    half hidden. They stay whole above the scrolled part."""
    from PySide6.QtWidgets import QScrollArea
    win = _sweep_dock_shown(qtbot, window)
    panel = win.sweep_panel
    area = next(a for a in panel.findChildren(QScrollArea) if a.widget().isAncestorOf(panel.table))
    area.verticalScrollBar().setValue(area.verticalScrollBar().maximum())
    qtbot.wait(100)
    viewport = win.docks["Sweep"].widget().viewport()
    for w in (panel.run_button, panel.stop_button, panel.report_button, panel.progress_bar, panel.state):
        assert not area.widget().isAncestorOf(w), w          # not in the part that scrolls
        r = QRect(w.mapTo(viewport, QPoint(0, 0)), w.size())
        assert w.isVisible() and viewport.rect().contains(r), (w, r, viewport.rect())
    assert panel.table.isVisible() and panel.table.height() >= 100
