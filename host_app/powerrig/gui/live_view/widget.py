"""The plot: mean line and min/max band per signal, one summary per pixel asked of the core's source
on a worker; scrolls with the live stream, pause/zoom/pan over the whole capture, back to live in one
click, gaps shaded, fio phases and nvme-cli commands on the time axis, two markers."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QPushButton,
                               QVBoxLayout, QWidget)

from powerrig.gui.source.base import unit_of

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
QUANTITIES = {"Power (W)": "p", "Voltage (V)": "v", "Current (A)": "i"}
EVENT_KINDS = {"phase": "#2ca02c", "fio": None, "nvme": "#ff7f0e", "power_state": "#9467bd"}


class LiveView(QWidget):
    WINDOW_S = 10.0          # the live window

    def __init__(self, core, parent=None):
        super().__init__(parent)
        self.core = core
        self.source = None
        self.following = True
        self.window_s = self.WINDOW_S
        self._in_flight = False
        self._dirty = False
        self._setting_range = False
        self.last_summary = None           # what was painted last (tests and the benchmark read it)
        self.paints = 0
        self._curves: dict = {}
        self.colours = list(COLOURS)       # the curves' colours (the window keeps the user's in its settings)
        self._event_items: list = []

        self.plot = pg.PlotWidget()
        self.plot.setBackground(None)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        for ax in ("left", "bottom"):       # grid at major ticks only: minor grid lines tripled the paint time
            self.plot.getAxis(ax).setStyle(maxTickLevel=0)
        self.plot.setLabel("bottom", "time", units="s")
        self.plot.setLabel("left", "power", units="W")
        self.plot.addLegend(offset=(10, 10))
        self.plot.setDownsampling(auto=False)
        self.plot.setClipToView(False)
        vb = self.plot.getViewBox()
        vb.sigRangeChangedManually.connect(self._user_moved)
        vb.sigXRangeChanged.connect(self._range_changed)
        vb.setMouseEnabled(x=True, y=True)

        self.quantity = QComboBox()
        self.quantity.addItems(list(QUANTITIES))
        self.quantity.currentIndexChanged.connect(self._rebuild)
        self.total_box = QCheckBox("total")
        self.total_box.setChecked(True)
        self.total_box.toggled.connect(self._rebuild)
        self.rail_boxes: dict[str, QCheckBox] = {}
        self.rail_row = QHBoxLayout()
        self.live_button = QPushButton("Pause")
        self.live_button.setCheckable(False)
        self.live_button.clicked.connect(self._toggle_live)
        self.auto_y = QCheckBox("auto Y")
        self.auto_y.setChecked(True)
        self.auto_y.toggled.connect(self._apply_y)
        self.y_min = QDoubleSpinBox()
        self.y_max = QDoubleSpinBox()
        for s, v in ((self.y_min, 0.0), (self.y_max, 25.0)):
            s.setRange(-1000, 1000)
            s.setDecimals(2)
            s.setValue(v)
            s.valueChanged.connect(self._apply_y)
        self.markers_button = QPushButton("Markers")
        self.markers_button.setCheckable(True)
        self.markers_button.toggled.connect(self.show_markers)
        self.zoom_all = QPushButton("Whole capture")
        self.zoom_all.clicked.connect(self.show_all)

        bar = QHBoxLayout()
        bar.addWidget(self.quantity)
        bar.addWidget(self.total_box)
        bar.addLayout(self.rail_row)
        bar.addStretch(1)
        bar.addWidget(self.auto_y)
        bar.addWidget(QLabel("Y"))
        bar.addWidget(self.y_min)
        bar.addWidget(QLabel("to"))
        bar.addWidget(self.y_max)
        bar.addWidget(self.markers_button)
        bar.addWidget(self.zoom_all)
        bar.addWidget(self.live_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        lay.addWidget(self.plot, 1)

        self.marker_a = pg.InfiniteLine(movable=True, pen=pg.mkPen("#e377c2", width=2), label="A",
                                        labelOpts={"position": 0.95, "color": "#e377c2"})
        self.marker_b = pg.InfiniteLine(movable=True, pen=pg.mkPen("#17becf", width=2), label="B",
                                        labelOpts={"position": 0.95, "color": "#17becf"})
        for m in (self.marker_a, self.marker_b):
            m.sigPositionChangeFinished.connect(self._markers_moved)

        self.gap_item = pg.BarGraphItem(x0=[0.0], x1=[0.0], y0=[0.0], y1=[0.0], brush=pg.mkBrush(128, 128, 128, 90),
                                        pen=pg.mkPen(None))
        self.gap_item.setZValue(-10)
        self.gap_item.setVisible(False)
        self.plot.addItem(self.gap_item)
        core.source_changed.connect(self.set_source)
        core.data.connect(self._on_data)
        core.events.connect(self._draw_events)

    # ---- what is plotted ----------------------------------------------------------------------------
    def set_source(self, src) -> None:
        self.source = src
        self.following = not hasattr(src, "reader")       # a live source scrolls; a file is browsed
        self.live_button.setText("Pause" if self.following else "Live")
        self.live_button.setEnabled(src is not None)
        while self.rail_row.count():
            w = self.rail_row.takeAt(0).widget()
            if w is not None:
                w.deleteLater()
        self.rail_boxes = {}
        for r in src.rails:
            b = QCheckBox(r)
            b.setChecked(False)
            b.toggled.connect(self._rebuild)
            self.rail_boxes[r] = b
            self.rail_row.addWidget(b)
        self._rebuild()
        if self.following:
            self._follow()
        else:
            self.show_all()
        self._draw_events()

    def signals(self) -> list[str]:
        q = QUANTITIES[self.quantity.currentText()]
        out = [f"{q}_{r}" for r, b in self.rail_boxes.items() if b.isChecked()]
        if q == "p" and self.total_box.isChecked():
            out.append("p_total")
        if not out and self.source is not None:
            out = [f"{q}_{self.source.rails[0]}"] if q != "p" else ["p_total"]
        return out

    def _rebuild(self) -> None:
        for mean, lo, hi, band in self._curves.values():
            for it in (mean, lo, hi, band):
                self.plot.removeItem(it)
        self._curves = {}
        legend = self.plot.plotItem.legend
        if legend is not None:
            legend.clear()
        sigs = self.signals()
        for k, s in enumerate(sigs):
            c = pg.mkColor(self.colours[k % len(self.colours)])
            mean = self.plot.plot([], [], pen=pg.mkPen(c, width=1.5), name=s, connect="finite")
            lo = pg.PlotDataItem([], [], pen=None, connect="finite")
            hi = pg.PlotDataItem([], [], pen=None, connect="finite")
            fill = pg.mkColor(c)
            fill.setAlpha(60)
            band = pg.FillBetweenItem(lo, hi, brush=pg.mkBrush(fill))
            self.plot.addItem(band)
            self._curves[s] = (mean, lo, hi, band)
        unit = unit_of(sigs[0]) if sigs else "W"
        self.plot.setLabel("left", {"W": "power", "V": "voltage", "A": "current"}[unit], units=unit)
        self.request()

    # ---- live / paused -----------------------------------------------------------------------------
    def _toggle_live(self) -> None:
        if self.following:
            self.pause()
        else:
            self.go_live()

    def pause(self) -> None:
        self.following = False
        self.live_button.setText("Live")

    def go_live(self) -> None:
        if self.source is not None and hasattr(self.source, "reader"):
            self.core.show_live()
            return
        self.following = True
        self.live_button.setText("Pause")
        self._follow()

    def _user_moved(self, *_) -> None:
        if self.following:
            self.pause()

    def _follow(self) -> None:
        if self.source is None:
            return
        end = self.source.duration_s
        self._set_x(max(0.0, end - self.window_s), max(end, self.window_s))

    def show_all(self) -> None:
        if self.source is None:
            return
        if self.following:
            self.pause()
        t0, t1 = self.source.extent()
        self._set_x(t0, max(t1, t0 + 1e-3))

    def zoom_to(self, t0: float, t1: float) -> None:
        if self.following:
            self.pause()
        pad = 0.05 * (t1 - t0)
        self._set_x(t0 - pad, t1 + pad)

    def _set_x(self, t0: float, t1: float) -> None:
        self._setting_range = True
        try:
            self.plot.setXRange(t0, t1, padding=0)
        finally:
            self._setting_range = False
        self.request()

    def _range_changed(self, *_) -> None:
        if not self._setting_range:
            self.request()

    def _on_data(self) -> None:
        if self.following:
            self._follow()

    # ---- asking the source (on a worker) and painting (here) ------------------------------------------
    def request(self) -> None:
        """Ask for one summary per pixel of the visible range; one request in flight at a time."""
        if self.source is None or not self._curves:
            return
        if self._in_flight:
            self._dirty = True
            return
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        x0 = max(0.0, x0)
        if x1 <= x0:
            return
        n = max(50, int(self.plot.getViewBox().width()) or 800)
        src, sigs = self.source, list(self._curves)
        self._in_flight = True
        self.core.run(src.summaries, x0, x1, n, sigs, done=lambda s: self._paint(src, s), failed=self._failed)

    def _failed(self, msg: str) -> None:
        self._in_flight = False
        self.core.error.emit(msg)

    def _paint(self, src, summary) -> None:
        self._in_flight = False
        if src is self.source:
            t = summary.t + summary.step_s / 2
            for s, (mean, lo, hi, _band) in self._curves.items():
                if s not in summary.mean:
                    continue
                mean.setData(t, summary.mean[s])
                lo.setData(t, np.where(np.isnan(summary.min[s]), summary.mean[s], summary.min[s]))
                hi.setData(t, np.where(np.isnan(summary.max[s]), summary.mean[s], summary.max[s]))
            self.last_summary = summary
            self.paints += 1
            self._apply_y()
            self._shade_gaps(float(summary.t[0]), float(summary.t[-1] + summary.step_s))
        if self._dirty:
            self._dirty = False
            self.request()

    def _apply_y(self) -> None:
        vb = self.plot.getViewBox()
        if self.auto_y.isChecked():
            s = self.last_summary
            if s is None:
                return
            lo = [np.nanmin(v) for v in s.min.values() if np.isfinite(v).any()]
            hi = [np.nanmax(v) for v in s.max.values() if np.isfinite(v).any()]
            if lo and hi:
                a, b = float(min(lo)), float(max(hi))
                pad = 0.08 * (b - a) if b > a else max(0.05, abs(a) * 0.05)
                vb.setYRange(a - pad, b + pad, padding=0)
        else:
            vb.setYRange(self.y_min.value(), self.y_max.value(), padding=0)

    def _shade_gaps(self, t0: float, t1: float) -> None:
        """Every gap in view as one bar item (one graphics item however many gaps: items are costly)."""
        if self.source is None:
            return
        gaps = self.source.gaps(t0, t1)
        (_x0, _x1), (y0, y1) = self.plot.getViewBox().viewRange()
        if gaps:
            a = np.array(gaps, dtype=float)
            self.gap_item.setOpts(x0=a[:, 0], x1=np.maximum(a[:, 1], a[:, 0] + 1e-9), y0=np.full(len(a), y0),
                                  y1=np.full(len(a), y1))
            self.gap_item.setVisible(True)
        else:
            self.gap_item.setVisible(False)

    # ---- events on the time axis ---------------------------------------------------------------------
    def _draw_events(self) -> None:
        for it in self._event_items:
            self.plot.removeItem(it)
        self._event_items = []
        if self.source is None:
            return
        evs = self.core.events_s(self.source)
        for k, e in enumerate(evs[-300:]):
            colour = EVENT_KINDS.get(e["kind"], "#7f7f7f")
            if colour is None:
                continue
            if e["kind"] == "phase" and e["t1"] is not None:
                c = pg.mkColor(colour)
                c.setAlpha(35)
                r = pg.LinearRegionItem((e["t0"], e["t1"]), movable=False, brush=pg.mkBrush(c), pen=pg.mkPen(None))
                r.setZValue(-20)
                self.plot.addItem(r)
                lab = pg.InfLineLabel(r.lines[0], text=e["name"], position=0.88, anchors=[(0, 0), (0, 0)],
                                      color=colour)
                self._event_items += [r, lab]
            else:
                line = pg.InfiniteLine(e["t0"], movable=False, pen=pg.mkPen(colour, width=1, style=Qt.DashLine),
                                       label=e["name"], labelOpts={"position": (0.06, 0.3, 0.55)[k % 3], "color": colour,
                                                                   "rotateAxis": (1, 0)})
                self.plot.addItem(line)
                self._event_items.append(line)

    # ---- markers -------------------------------------------------------------------------------------
    def show_markers(self, on: bool = True) -> None:
        if on:
            (x0, x1), _ = self.plot.getViewBox().viewRange()
            self.place_markers(x0 + 0.3 * (x1 - x0), x0 + 0.7 * (x1 - x0))
        else:
            for m in (self.marker_a, self.marker_b):
                self.plot.removeItem(m)
            self.core.set_markers(None)

    def place_markers(self, t_a: float, t_b: float) -> None:
        for m, t in ((self.marker_a, t_a), (self.marker_b, t_b)):
            if m.scene() is None:
                self.plot.addItem(m)
            m.setValue(t)
        if not self.markers_button.isChecked():
            self.markers_button.blockSignals(True)
            self.markers_button.setChecked(True)
            self.markers_button.blockSignals(False)
        self._markers_moved()

    def _markers_moved(self, *_) -> None:
        a, b = float(self.marker_a.value()), float(self.marker_b.value())
        if math.isfinite(a) and math.isfinite(b):
            self.core.set_markers(a, b)
