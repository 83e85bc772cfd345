"""The window: the plot in the middle, panels in docks (their layout persists), File > Open, themes.
Built on the app's services (``gui/services``); the panels never import each other."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QColor, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (QColorDialog, QComboBox, QDockWidget, QFileDialog, QFrame, QLabel, QMainWindow,
                               QScrollArea, QTabBar, QVBoxLayout, QWidget)

from powerrig.gui import theme
from powerrig.gui.capture_browser.widget import AnalysisTable
from powerrig.gui.connect.widget import ConnectPanel
from powerrig.gui.drive.widget import DrivePanel
from powerrig.gui.live_view.widget import LiveView
from powerrig.gui.minimap.widget import Minimap
from powerrig.gui.multimeter.widget import Multimeter
from powerrig.gui.power.widget import PowerPanel
from powerrig.gui.sweep_panel.widget import SweepPanel
from powerrig.gui.workload.widget import WorkloadPanel

from powerrig.gui.prefs import settings

DECIMATIONS = (1, 10, 100, 1000)
BOTTOM_DOCK_H = 250       # the Analysis/Sweep dock's starting height: the sweep's charts whole at 1366x768


class PanelScroll(QScrollArea):
    """A panel in a scroll area: a dock shorter than the panel scrolls instead of cutting it off (or
    forcing the window taller than the screen). Never narrower than the panel: it scrolls up and
    down, it is never cut at the side (its minimum follows the panel's as the panel fills)."""

    def __init__(self, panel: QWidget):
        super().__init__()
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        self.setWidget(panel)
        panel.installEventFilter(self)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name
        hint = super().minimumSizeHint()
        w = self.widget().minimumSizeHint().width() + self.verticalScrollBar().sizeHint().width()
        return QSize(w + 2 * self.frameWidth(), hint.height())

    def eventFilter(self, obj, e) -> bool:  # noqa: N802
        if obj is self.widget() and e.type() == QEvent.LayoutRequest:
            self.updateGeometry()           # the panel's minimum changed: the dock follows
        return super().eventFilter(obj, e)


class MainWindow(QMainWindow):
    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.svc, self.core = svc, svc.core
        core = svc.core
        self.setWindowTitle("powerrig")
        self.resize(self.fitted(QSize(1400, 860)))
        self.live_view = LiveView(svc)
        self.minimap = Minimap(svc, self.live_view.plot)
        centre = QWidget()
        lay = QVBoxLayout(centre)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.live_view, 1)
        lay.addWidget(self.minimap)
        self.setCentralWidget(centre)
        self.connect_panel = ConnectPanel(svc)
        self.multimeter = Multimeter(svc)
        self.drive_panel = DrivePanel(svc)
        self.workload_panel = WorkloadPanel(svc)
        self.power_panel = PowerPanel(svc)
        self.analysis_table = AnalysisTable(svc)
        self.sweep_panel = SweepPanel(svc)
        self.analysis_table.zoom.connect(self.live_view.zoom_to)
        self.docks = {}
        for name, w, area in (("Connect", self.connect_panel, Qt.LeftDockWidgetArea),
                              ("Drive", self.drive_panel, Qt.LeftDockWidgetArea),
                              ("Workload", self.workload_panel, Qt.LeftDockWidgetArea),
                              ("Power", self.power_panel, Qt.LeftDockWidgetArea),
                              ("Multimeter", self.multimeter, Qt.RightDockWidgetArea),
                              ("Analysis", self.analysis_table, Qt.BottomDockWidgetArea),
                              ("Sweep", self.sweep_panel, Qt.BottomDockWidgetArea)):
            d = QDockWidget(name, self)
            d.setObjectName(f"dock-{name}")
            d.setWidget(PanelScroll(w))
            self.addDockWidget(area, d)
            self.docks[name] = d
        self.tabifyDockWidget(self.docks["Connect"], self.docks["Drive"])
        self.tabifyDockWidget(self.docks["Drive"], self.docks["Workload"])
        self.tabifyDockWidget(self.docks["Workload"], self.docks["Power"])
        self.tabifyDockWidget(self.docks["Analysis"], self.docks["Sweep"])
        QTimer.singleShot(0, self.docks["Connect"].raise_)
        QTimer.singleShot(0, self.docks["Analysis"].raise_)      # a tab raised before show() is not kept
        # every panel scrolls when its dock is shorter than it (fixed minimum widths made the window
        # 1686 px wide, wider than a 1366x768 screen); the side docks' starting widths follow the window
        self.resizeDocks([self.docks["Analysis"]], [BOTTOM_DOCK_H], Qt.Vertical)
        self.status_label = QLabel("")
        self.statusBar().addWidget(self.status_label, 1)
        core.status.connect(self.status_label.setText)
        core.error.connect(lambda m: self.statusBar().showMessage(m, 15000))
        self._menus()
        self._restored = self.restore()

    def showEvent(self, e) -> None:  # noqa: N802 - Qt's name
        super().showEvent(e)
        if not getattr(self, "_sized", False):
            self._sized = True                   # docks take sizes only once the window has its own
            QTimer.singleShot(0, self.size_docks)

    def size_docks(self) -> None:
        """The side panels' starting widths (unless a saved layout was restored): about a quarter of the
        window each, the plot the rest."""
        if not self._restored:
            w = self.width()
            self.resizeDocks([self.docks["Connect"], self.docks["Multimeter"]],
                             [min(470, int(0.3 * w)), min(420, int(0.26 * w))], Qt.Horizontal)
        QTimer.singleShot(0, self._drop_stale_tab_bars)     # once the layout has placed its bars

    def _drop_stale_tab_bars(self) -> None:
        """Qt 6 leaves a second, unused tab bar of the second group of tabbed docks shown (tabifying
        Analysis and Sweep makes two; QMainWindow lays out one), which was drawn over the status bar.
        The layout's own bar sits against a dock of its group; a copy elsewhere is hidden."""
        groups: dict = {}
        for tb in self.findChildren(QTabBar):
            if tb.parentWidget() is self and tb.isVisible():
                groups.setdefault(tuple(tb.tabText(i) for i in range(tb.count())), []).append(tb)
        for titles, bars in groups.items():
            if len(bars) < 2:
                continue
            docks = [d.geometry().adjusted(-2, -2, 2, 2) for d in self.docks.values()
                     if d.windowTitle() in titles and d.isVisible()]
            placed = [tb for tb in bars if any(g.intersects(tb.geometry()) for g in docks)]
            for tb in bars:
                if tb not in placed[:1]:
                    tb.hide()

    def fitted(self, size: QSize) -> QSize:
        """``size``, no larger than the screen's free area (less the window frame)."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return size
        free = screen.availableGeometry().size() - QSize(16, 40)
        return size.boundedTo(free).expandedTo(QSize(640, 480))

    def _menus(self) -> None:
        m = self.menuBar().addMenu("&File")
        a = QAction("&Open capture...", self)
        a.setShortcut(QKeySequence.Open)
        a.triggered.connect(self.open_dialog)
        m.addAction(a)
        self.export_action = QAction("&Export selection...", self)
        self.export_action.setShortcut(QKeySequence("Ctrl+E"))
        self.export_action.triggered.connect(self.export_dialog)
        m.addAction(self.export_action)
        self.save_buffer_action = QAction("&Save the buffer...", self)
        self.save_buffer_action.setShortcut(QKeySequence.Save)
        self.save_buffer_action.triggered.connect(self.save_buffer_dialog)
        m.addAction(self.save_buffer_action)
        tb = self.addToolBar("Export")
        tb.setObjectName("toolbar-export")
        tb.addAction(self.save_buffer_action)
        tb.addAction(self.export_action)
        self.decimation = QComboBox()
        for n in DECIMATIONS:
            self.decimation.addItem("full rate" if n == 1 else f"1 row per {n} intervals", n)
        self.decimation.setToolTip("rows of a CSV export: full rate, or one (mean, min, max) row per N intervals")
        tb.addWidget(self.decimation)
        live = QAction("Back to &live", self)
        live.triggered.connect(self.live_view.go_live)
        m.addAction(live)
        m.addSeparator()
        q = QAction("&Quit", self)
        q.setShortcut(QKeySequence.Quit)
        q.triggered.connect(self.close)
        m.addAction(q)
        v = self.menuBar().addMenu("&View")
        for name in ("light", "dark"):
            t = QAction(f"{name.title()} theme", self)
            t.triggered.connect(lambda _=False, n=name: self.set_theme(n))
            v.addAction(t)
        colours = v.addMenu("Curve colours")
        for k in range(len(self.live_view.colours)):
            a = QAction(f"Curve {k + 1}...", self)
            a.triggered.connect(lambda _=False, k=k: self.pick_colour(k))
            colours.addAction(a)
        v.addSeparator()
        for d in self.docks.values():
            v.addAction(d.toggleViewAction())

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open capture", str(self.svc.capture_dir), "Captures (*.jls)")
        if path:
            self.svc.captures.open(path)

    def export_dialog(self) -> None:
        what = "between the markers" if self.svc.markers.times else "the whole capture"
        path, _ = QFileDialog.getSaveFileName(self, f"Export {what}", str(self.svc.capture_dir),
                                              "CSV table (*.csv);;sigrok session (*.sr)")
        if path:
            self.svc.captures.export_selection(path, self.svc.markers.times, int(self.decimation.currentData()))

    def save_buffer_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the buffer", str(self.svc.capture_dir / "buffer.jls"),
                                              "Captures (*.jls)")
        if path:
            self.svc.captures.save_buffer(path)

    def set_theme(self, name: str) -> None:
        theme.apply(name)
        self.theme = name
        for w in (self.live_view.plot, self.sweep_panel.charts.efficiency, self.sweep_panel.charts.power):
            theme.restyle_plot(w, name)
        settings().setValue("theme", name)

    def set_colour(self, k: int, colour: str) -> None:
        """The k-th curve's colour (View > Curve colours), kept in the settings."""
        self.live_view.colours[k] = colour
        self.live_view._rebuild()
        theme.restyle_plot(self.live_view.plot, self.theme)
        settings().setValue("colours", list(self.live_view.colours))

    def pick_colour(self, k: int) -> None:
        c = QColorDialog.getColor(QColor(self.live_view.colours[k]), self, f"Colour of curve {k + 1}")
        if c.isValid():
            self.set_colour(k, c.name())

    def restore(self) -> bool:
        """The saved settings; True when a panel layout was restored."""
        s = settings()
        geo, state = s.value("geometry"), s.value("window_state")
        if geo is not None:
            self.restoreGeometry(geo)
            self.resize(self.fitted(self.size()))       # saved on a larger screen
        if state is not None:
            self.restoreState(state)
        port = s.value("last_port")
        if port:
            self.connect_panel.set_port(str(port))
        colours = s.value("colours")
        if isinstance(colours, list) and len(colours) == len(self.live_view.colours):
            self.live_view.colours[:] = [str(c) for c in colours]
        lv = self.live_view
        lv.quantity.setCurrentText(str(s.value("units", lv.quantity.currentText())))
        lv.auto_y.setChecked(str(s.value("auto_y", "true")).lower() == "true")
        lv.y_min.setValue(float(s.value("y_min", lv.y_min.value())))
        lv.y_max.setValue(float(s.value("y_max", lv.y_max.value())))
        lv._rebuild()
        self.set_theme(str(s.value("theme", "light")))
        k = self.decimation.findData(int(s.value("export_decimation", 1)))
        self.decimation.setCurrentIndex(max(0, k))
        return state is not None

    def save(self) -> None:
        s = settings()
        s.setValue("geometry", self.saveGeometry())
        s.setValue("window_state", self.saveState())
        if self.svc.connection.port:
            s.setValue("last_port", self.svc.connection.port)
        s.setValue("export_decimation", int(self.decimation.currentData()))
        lv = self.live_view
        s.setValue("units", lv.quantity.currentText())
        s.setValue("auto_y", "true" if lv.auto_y.isChecked() else "false")
        s.setValue("y_min", lv.y_min.value())
        s.setValue("y_max", lv.y_max.value())
        s.setValue("colours", list(lv.colours))
        s.sync()

    def closeEvent(self, e) -> None:  # noqa: N802 - Qt's name
        self.save()
        self.svc.shutdown()
        super().closeEvent(e)
