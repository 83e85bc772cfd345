"""The plot: mean line and min/max band per signal, one summary per pixel asked of the shown source
on a worker; scrolls with the live stream, pause/zoom/pan over the whole capture, back to live in one
click, gaps shaded, fio phases and nvme-cli commands on the time axis, two markers."""
from __future__ import annotations

import math
import sys
import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QThreadPool, QTimer, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QCheckBox, QGraphicsItem, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QPushButton,
                               QVBoxLayout, QWidget)

from powerrig.gui.band import BandCurve, view_background
from powerrig.gui.flow_layout import FlowLayout, flow_group
from powerrig.gui.source.base import unit_of
from powerrig.gui.theme import show_numbers

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
QUANTITIES = {"Power (W)": "p", "Voltage (V)": "v", "Current (A)": "i"}
EVENT_KINDS = {"phase": "#2ca02c", "fio": None, "nvme": "#8c564b", "power_state": "#9467bd"}
# phases shaded as the report shades them (report.KIND_COLOURS: idle tab:green, workload tab:orange)
PHASE_COLOURS = {"idle": "#2ca02c", "workload": "#ff7f0e"}


# The recording thread (link parsing, file writing, the live source) holds the GIL in slices of the
# switch interval (5 ms by default); the GUI thread re-takes the GIL for every Python paint() of a
# frame, so each item could wait a whole slice. 1 ms bounds that wait (not measured apart from the
# rest of the paint work; bench_gui reports the paint's CPU time next to its wall time).
GIL_SWITCH_S = 0.001


class LiveView(QWidget):
    WINDOW_S = 10.0          # the live window
    FRAME_MS = 30            # the live frame rate: one summary + one paint per frame at most
    EVENTS_EVERY_MS = 250    # events drawn follow a moving view at most this often
    EVENTS_LAST = 300        # the newest events considered (a stream polls the drive every 5 s)
    SPARE_EVENT_ITEMS = 8    # hidden event items kept for reuse, per kind: a scrolling stream needs 2 or 3
                             # (more are deleted: a hidden item still follows every view change)

    PLOT_MIN_H = 170         # px: the plot with its axes, their labels and a readable trace

    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.core, self.captures, self.markers = svc.core, svc.captures, svc.markers
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
        self._event_drawn: dict = {}       # (kind, name, utc start, utc end) -> (its item, the t0 (s) drawn at)
        self._spare: dict = {"line": [], "phase": []}   # hidden event items, reused by the next events
        self._band_background = None
        self._layout_key = None            # the view and items the event labels were last laid out for

        self.plot = pg.PlotWidget()
        self.plot.setBackground(None)
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        for ax in ("left", "bottom"):       # grid at major ticks only: minor grid lines tripled the paint time
            self.plot.getAxis(ax).setStyle(maxTickLevel=0)
        self.plot.setLabel("bottom", "time", units="s")
        self.plot.setLabel("left", "power", units="W")
        self.plot.addLegend(offset=(-10, -24))     # bottom right, above the quiet track: phase names take the top
        # one point per pixel arrives already summarised: pyqtgraph's own downsampling and clipping off
        self.plot.setDownsampling(auto=False)
        self.plot.setClipToView(False)
        for ax in ("left", "bottom"):       # the axes (with the grid) as cached pixmaps: repainted only
            self.plot.getAxis(ax).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)  # when they change
        show_numbers(self.plot, False)     # until it has a source: no -400...400 mW of nothing
        if sys.getswitchinterval() > GIL_SWITCH_S:
            sys.setswitchinterval(GIL_SWITCH_S)
        # live summaries on their own thread: never queued behind a slow analysis or file job
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(1)
        self._frame = QTimer(self)
        self._frame.timeout.connect(self._on_frame)
        self._frame.start(self.FRAME_MS)
        self._seen_length = -1
        self._events_timer = QTimer(self)
        self._events_timer.setSingleShot(True)
        self._events_timer.setInterval(self.EVENTS_EVERY_MS)
        self._events_timer.timeout.connect(self._draw_events)
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
        self.float_button = QPushButton("Float")
        self.float_button.setCheckable(True)
        self.float_button.setToolTip("markers keep their distance from the newest data while live")
        self.float_button.toggled.connect(self.float_markers)
        self.zoom_all = QPushButton("Whole capture")
        self.zoom_all.clicked.connect(self.show_all)

        # the tool bar reflows (three groups that wrap onto a second line) instead of widening the window
        self.bar = QWidget()
        bar = FlowLayout(self.bar)
        bar.addWidget(flow_group(self.quantity, self.total_box, self.rail_row))
        bar.addWidget(flow_group(self.auto_y, QLabel("Y"), self.y_min, QLabel("to"), self.y_max))
        bar.addWidget(flow_group(self.markers_button, self.float_button, self.zoom_all, self.live_button))
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.bar)
        lay.addWidget(self.plot, 1)
        # never squeezed by an enlarged bottom dock: the plot keeps room for its axes and their labels,
        # the tool bar the height its wrapped rows need (a box layout ignores a flow's height-for-width:
        # squeezed, the plot was drawn over Markers, Float, Whole capture and Pause)
        self.plot.setMinimumHeight(self.PLOT_MIN_H)
        self.bar.installEventFilter(self)

        self.marker_a = pg.InfiniteLine(movable=True, pen=pg.mkPen("#e377c2", width=2), label="A",
                                        labelOpts={"position": 0.95, "color": "#e377c2"})
        self.marker_b = pg.InfiniteLine(movable=True, pen=pg.mkPen("#17becf", width=2), label="B",
                                        labelOpts={"position": 0.95, "color": "#17becf"})
        for m in (self.marker_a, self.marker_b):
            m.sigPositionChangeFinished.connect(self._markers_moved)
            m.sigPositionChanged.connect(self._marker_dragging)
        self._float_offsets: tuple[float, float] | None = None    # (end - A, end - B) while floating
        self._float_sent = 0.0

        self.gap_item = pg.BarGraphItem(x0=[0.0], x1=[0.0], y0=[0.0], y1=[0.0], brush=pg.mkBrush(128, 128, 128, 90),
                                        pen=pg.mkPen(None))
        self.gap_item.setZValue(-10)
        self.gap_item.setVisible(False)
        self.plot.addItem(self.gap_item)
        self.quiet_item = pg.BarGraphItem(x0=[0.0], x1=[0.0], y0=[0.0], y1=[0.0], brush=pg.mkBrush(127, 127, 127, 150),
                                          pen=pg.mkPen(None))
        self.quiet_item.setZValue(-5)
        self.quiet_item.setVisible(False)
        self.quiet_item.setToolTip("background drive polls (temperature smart-log, get/set-feature)")
        self.plot.addItem(self.quiet_item, ignoreBounds=True)
        self._quiet = np.empty((0, 2))
        vb.sigResized.connect(self._range_changed)
        svc.captures.source_changed.connect(self.set_source)
        svc.captures.events.connect(self._draw_events)

    def resizeEvent(self, e) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(e)
        self._fit_bar()

    def eventFilter(self, obj, e) -> bool:  # noqa: N802 - Qt's name
        if obj is self.bar and e.type() == QEvent.LayoutRequest:
            QTimer.singleShot(0, self._fit_bar)      # a control changed size (rail boxes, Pause/Live)
        return super().eventFilter(obj, e)

    def _fit_bar(self) -> None:
        """The tool bar's minimum height is what its rows need at the width it has (it wraps): the
        window's layout then never gives the plot the bar's room."""
        m = self.layout().contentsMargins()
        h = self.bar.layout().heightForWidth(max(1, self.width() - m.left() - m.right()))
        if h != self.bar.minimumHeight():
            self.bar.setMinimumHeight(h)

    # ---- what is plotted ----------------------------------------------------------------------------
    def set_source(self, src) -> None:
        if self.markers_button.isChecked() or self.marker_a.scene() is not None:
            self.markers_button.setChecked(False)          # markers belong to the old source: removed
            self.show_markers(False)
        self.source = src
        show_numbers(self.plot, src is not None)
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
        QTimer.singleShot(0, self._fit_bar)          # once the new boxes have their sizes
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
        for item, _proxy in self._curves.values():
            self.plot.removeItem(item)
            self.plot.removeItem(item.line)
        self._curves = {}
        legend = self.plot.plotItem.legend
        if legend is not None:
            legend.clear()
        sigs = self.signals()
        for k, s in enumerate(sigs):
            colour = self.colours[k % len(self.colours)]
            item = BandCurve(colour, self._background())
            self.plot.addItem(item)
            self.plot.addItem(item.line)
            proxy = pg.PlotDataItem(pen=item.pen)          # the legend's sample only, never plotted
            if legend is not None:
                legend.addItem(proxy, s)
            self._curves[s] = (item, proxy)
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
            self.captures.show_live()
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
        if not self._events_timer.isActive():        # events follow the view, a few times a second at most
            self._events_timer.start()

    def _on_frame(self) -> None:
        """The fixed frame rate: follow the live stream when it grew (updates between frames coalesce)."""
        bg = self._background()
        if bg != self._band_background:              # the theme changed: bands are opaque mixes
            self._band_background = bg
            for item, _proxy in self._curves.values():
                item.set_background(bg)
        src = self.source
        if src is None or not self.following or hasattr(src, "reader"):
            return
        n = src.length
        if n != self._seen_length:
            self._seen_length = n
            self._follow()
            self._float_step()

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
        pool = self._pool if not hasattr(src, "reader") else None
        self.core.run(src.summaries, x0, x1, n, sigs, done=lambda s: self._paint(src, s),
                      failed=lambda m: self._failed(src, m),
                      pool=pool)

    def _failed(self, src, msg: str) -> None:
        self._in_flight = False
        if src is self.source:              # a source replaced meanwhile (and closed) is no news
            self.core.error.emit(msg)

    def _paint(self, src, summary) -> None:
        self._in_flight = False
        if src is self.source:
            t = summary.t + summary.step_s / 2
            for s, (item, _proxy) in self._curves.items():
                if s in summary.mean:
                    item.set_summary(t, summary.mean[s], summary.min[s], summary.max[s], summary.step_s)
            self.last_summary = summary
            self.paints += 1
            self._apply_y()
            self._shade_gaps(float(summary.t[0]), float(summary.t[-1] + summary.step_s))
            self._quiet_track()
            self._layout_labels()
        if self._dirty:
            self._dirty = False
            self.request()

    def _background(self):
        return view_background(self.plot)

    def plotted_end_s(self) -> float | None:
        """Sample time (s) of the end of the newest plotted point with data (None before any)."""
        s = self.last_summary
        if s is None:
            return None
        finite = np.zeros(len(s), bool)
        for v in s.mean.values():
            finite |= np.isfinite(v)
        idx = np.flatnonzero(finite)
        return float(s.t[idx[-1]] + s.step_s) if len(idx) else None

    def _apply_y(self) -> None:
        vb = self.plot.getViewBox()
        auto = self.auto_y.isChecked()
        for f in (self.y_min, self.y_max):          # typed only when auto Y is off; else they show its range
            f.setEnabled(not auto)
        if auto:
            s = self.last_summary
            if s is None:
                return
            lo = [np.nanmin(v) for v in s.min.values() if np.isfinite(v).any()]
            hi = [np.nanmax(v) for v in s.max.values() if np.isfinite(v).any()]
            if lo and hi:
                a, b = float(min(lo)), float(max(hi))
                (_x0, _x1), (c, d) = vb.viewRange()
                span = d - c
                # hysteresis: keep the range while the data fills at least half of it and stays inside;
                # a range that moves every frame repaints the axis, its labels and the grid every frame
                if not (a >= c and b <= d and (b - a) >= 0.5 * span):
                    pad = 0.08 * (b - a) if b > a else max(0.05, abs(a) * 0.05)
                    vb.setYRange(a - pad, b + pad, padding=0)
                self._show_y_range()
        else:
            vb.setYRange(self.y_min.value(), self.y_max.value(), padding=0)

    def _show_y_range(self) -> None:
        """The Y fields follow auto Y: they show the range plotted (so unticking auto Y keeps it, and
        the fields never show a stale range)."""
        (_x0, _x1), (c, d) = self.plot.getViewBox().viewRange()
        # enough decimals for about three digits of the range (a 5 mW range at 5.5 W is not "5.50 to 5.50")
        decimals = max(2, min(6, 2 - math.floor(math.log10(max(d - c, 1e-9)))))
        for f, v in ((self.y_min, c), (self.y_max, d)):
            if f.decimals() != decimals:
                f.setDecimals(decimals)
            if abs(f.value() - v) >= 0.5 * 10 ** -f.decimals():
                f.blockSignals(True)
                f.setValue(v)
                f.blockSignals(False)

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
        """Phases and commands on the time axis, only those in or near the view. Incremental: an event
        already drawn keeps its items (a redraw of all of them on every new event churned hundreds of Qt
        items every few seconds, and the process grew with it during an overnight stream). Only near
        the view: a labelled line costs ~50 KB of Qt memory, so the last 300 events of a stream drawn
        whether seen or not grew the window by 15 MB over its first 25 minutes (a drive poll every 5 s).
        Background polls (``background``: the temperature poll, get/set-feature) are no labels: one
        item draws them all as ticks on a quiet track along the bottom."""
        evs = self.captures.events_s(self.source, last=self.EVENTS_LAST) if self.source is not None else []
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        lo, hi = x0 - (x1 - x0), x1 + (x1 - x0)       # the view and one view's width either side
        wanted, quiet = {}, []
        for k, e in enumerate(evs):
            if e["t0"] > hi or (e["t1"] if e["t1"] is not None else e["t0"]) < lo:
                continue                              # off screen: no items (a labelled line is ~50 KB of Qt)
            if e.get("background"):
                quiet.append((e["t0"], e["t1"] if e["t1"] is not None else e["t0"]))
            elif EVENT_KINDS.get(e["kind"], "#7f7f7f") is not None:
                # keyed by the event's own UTC times: the live clock model is refitted every second and
                # moves the placed t0 by microseconds, which must not redraw it
                t1 = e["utc1"] if e["kind"] == "phase" else None
                wanted[(e["kind"], e["name"], e["utc0"], t1)] = (k, e)
        for key, (item, t0) in list(self._event_drawn.items()):
            if key not in wanted or abs(t0 - wanted[key][1]["t0"]) > 1e-3:    # gone, or moved (re-based)
                self._release(item)
                del self._event_drawn[key]
        for key, (k, e) in wanted.items():
            if key not in self._event_drawn:
                self._event_drawn[key] = (self._event_item(k, e), e["t0"])
        self._event_items = [item for item, _ in self._event_drawn.values()]
        self._layout_key = None                 # items may have new names: lay them out again
        self._quiet = np.array(quiet, dtype=float).reshape(-1, 2)
        self._quiet_track()
        self._layout_labels()

    QUIET_TRACK = 0.035        # the quiet track's height, a fraction of the plot's
    QUIET_MIN_PX = 2.0         # a poll's tick is at least this wide

    def _quiet_track(self) -> None:
        """Background polls as thin grey ticks along the bottom of the plot: one graphics item for all
        (they come every 5 s: a label each made "Whole capture" a forest of names)."""
        vb = self.plot.getViewBox()
        q = getattr(self, "_quiet", None)
        if q is None or not len(q):
            self.quiet_item.setVisible(False)
            return
        (x0, x1), (y0, y1) = vb.viewRange()
        min_w = self.QUIET_MIN_PX * (x1 - x0) / max(1.0, vb.width())
        h = self.QUIET_TRACK * (y1 - y0)
        self.quiet_item.setOpts(x0=q[:, 0], x1=np.maximum(q[:, 1], q[:, 0] + min_w), y0=np.full(len(q), y0),
                                y1=np.full(len(q), y0 + h))
        self.quiet_item.setVisible(True)

    LABEL_LANES = 3            # phase names stack in up to this many rows at the top of the plot
    LINE_SLOTS = (0.06, 0.3, 0.55)      # heights (fraction of the plot) of a command line's label
    LABEL_GAP_PX = 6
    LABEL_MIN_PX = 56          # a phase name cut shorter than this is not shown (its shading stays)

    def _layout_labels(self) -> None:
        """Labels that never overlap, in pixels of the plot as it is now: phase names in lanes at the
        top (a name with no free lane is cut (elided) to the room it has, or left out), command labels
        at one of three heights clear of every label already placed (or left out: the line stays)."""
        vb = self.plot.getViewBox()
        (x0, x1), (y0, y1) = vb.viewRange()
        w, h = vb.width(), vb.height()
        if w <= 1 or h <= 1 or x1 <= x0 or y1 <= y0:
            return
        key = (x0, x1, y0, y1, w, h, tuple(id(it) for it in self._event_items))
        if key == self._layout_key:
            return                              # nothing moved since the last layout
        self._layout_key = key
        px = w / (x1 - x0)
        dy = (y1 - y0) / h
        regions = sorted((it for it in self._event_items if isinstance(it, pg.LinearRegionItem)),
                         key=lambda r: r.getRegion()[0])
        lines = sorted((it for it in self._event_items if isinstance(it, pg.InfiniteLine)), key=lambda m: m.value())
        placed: list = []                       # scene rectangles of the labels shown
        lanes: list = [None] * self.LABEL_LANES   # per lane: [label, its start px, its end px]
        for r in regions:
            lab = r.name_label
            a, b = r.getRegion()
            if b < x0 or a > x1:
                lab.setVisible(False)
                continue
            start = (max(a, x0) - x0) * px + 2
            lab.setVisible(True)
            self._label_text(lab, w - start)                          # never past the plot's right edge
            size = lab.textItem.boundingRect()
            lane = next((k for k, ln in enumerate(lanes) if ln is None or ln[2] + self.LABEL_GAP_PX <= start), None)
            if lane is None:                    # every lane taken here: cut the name that started earliest
                lane = min(range(len(lanes)), key=lambda k: lanes[k][1])
                prev, p0, _p1 = lanes[lane]
                room = start - self.LABEL_GAP_PX - p0
                if room < self.LABEL_MIN_PX:
                    lab.setVisible(False)
                    continue
                self._label_text(prev, room)
            lab.setPos(x0 + (start - 2) / px, y1 - (2 + lane * (size.height() + 1)) * dy)
            lanes[lane] = [lab, start, start + size.width()]
        for ln in lanes:
            if ln is not None:
                ln[0].updateTransform(force=True)
                placed.append(ln[0].sceneBoundingRect())
        area = vb.mapRectToScene(vb.boundingRect())
        for m in lines:
            lab = m.label
            shown = False
            if x0 <= m.value() <= x1:
                lab.setVisible(True)
                for f in self.LINE_SLOTS:
                    lab.orthoPos = f
                    lab.updatePosition()
                    lab.updateTransform(force=True)
                    rect = lab.sceneBoundingRect()
                    if area.contains(rect) and not any(rect.intersects(o) for o in placed):
                        placed.append(rect)
                        shown = True
                        break
            lab.setVisible(shown)

    @staticmethod
    def _label_text(lab, room_px: float) -> None:
        """A phase label showing its event's name, cut with an ellipsis to ``room_px`` pixels."""
        fm = QFontMetrics(lab.textItem.font())
        margin = 2 * lab.textItem.document().documentMargin() + 2
        lab.setText(fm.elidedText(lab.event_name, Qt.ElideRight, max(0, int(room_px - margin))))

    def _event_item(self, k: int, e: dict):
        """A labelled line (a command, a state change) or a shaded region (a phase) for one event,
        reusing a hidden one when there is one: a stream polls the drive every 5 s, and creating and
        deleting the Qt items of every event left ~3 KB a poll behind in the GUI thread's heap."""
        colour = EVENT_KINDS.get(e["kind"], "#7f7f7f")
        if e["kind"] == "phase" and e["t1"] is not None:
            colour = PHASE_COLOURS["idle" if e.get("idle") else "workload"]
            r = self._spare["phase"].pop() if self._spare["phase"] else self._new_region()
            c = pg.mkColor(colour)
            c.setAlpha(35)
            r.setRegion((e["t0"], e["t1"]))
            r.setBrush(pg.mkBrush(c))
            r.setVisible(True)
            r.event_name = r.name_label.event_name = e["name"]
            r.name_label.setColor(colour)
            r.name_label.setText(e["name"])
            r.name_label.setVisible(False)       # placed by _layout_labels
            return r
        text = e["name"].replace("{", "{{").replace("}", "}}")     # a label is a format string to pyqtgraph
        line = self._spare["line"].pop() if self._spare["line"] else self._new_line()
        line.setPos(e["t0"])
        line.setPen(pg.mkPen(colour, width=1, style=Qt.DashLine))
        line.setVisible(True)
        line.label.setVisible(True)            # first: a hidden label ignores its new text
        line.label.setColor(colour)
        line.label.orthoPos = self.LINE_SLOTS[k % len(self.LINE_SLOTS)]
        line.label.setFormat(text)
        line.event_name = e["name"]
        return line

    def _new_line(self) -> pg.InfiniteLine:
        line = pg.InfiniteLine(movable=False, label="", labelOpts={"rotateAxis": (1, 0)})
        self.plot.addItem(line)
        return line

    def _new_region(self) -> pg.LinearRegionItem:
        r = pg.LinearRegionItem(movable=False, pen=pg.mkPen(None))
        r.setZValue(-20)
        self.plot.addItem(r)
        r.name_label = pg.TextItem(anchor=(0, 0))
        r.name_label.setZValue(5)
        self.plot.addItem(r.name_label, ignoreBounds=True)
        return r

    def _release(self, item) -> None:
        """An event item no longer drawn: hidden and kept for the next event, or deleted when enough are
        kept (with its label: left to the garbage collector, the C++ label outlived its line)."""
        region = isinstance(item, pg.LinearRegionItem)
        spare = self._spare["phase" if region else "line"]
        if len(spare) < self.SPARE_EVENT_ITEMS:
            item.setVisible(False)
            if region:
                item.name_label.setVisible(False)
            spare.append(item)
            return
        self.plot.removeItem(item)
        item.deleteLater()
        if region:
            self.plot.removeItem(item.name_label)
            item.name_label.deleteLater()

    # ---- markers -------------------------------------------------------------------------------------
    def show_markers(self, on: bool = True) -> None:
        """Markers on: A and B at 30 % and 70 % of the part of the view the markers can measure (after
        "Whole capture" of a long stream, not before the data the live view holds)."""
        if on:
            (x0, x1), _ = self.plot.getViewBox().viewRange()
            span = self.markers.measurable(self.source)
            if span is not None:
                m0, m1 = span
                if min(x1, m1) > max(x0, m0):
                    x0, x1 = max(x0, m0), min(x1, m1)
                elif m1 > m0:
                    x0, x1 = m0, m1                 # nothing measurable in view: the measurable range
            self.place_markers(x0 + 0.3 * (x1 - x0), x0 + 0.7 * (x1 - x0))
        else:
            self.float_markers(False)
            for m in (self.marker_a, self.marker_b):
                self.plot.removeItem(m)
            self.markers.set(None)

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
            if self._float_offsets is not None and self.source is not None:
                end = self.source.duration_s
                self._float_offsets = (end - a, end - b)      # a drag while floating sets new distances
            self.markers.set(a, b)

    EDGE = 0.02               # a marker dragged within this fraction of the view's edge pans the view

    def _marker_dragging(self, m) -> None:
        """A marker dragged to an edge of the view pans the view with it, so it stays on the data
        (the plot stops following the live stream)."""
        if not getattr(m, "moving", False):
            return
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        margin = self.EDGE * (x1 - x0)
        t = float(m.value())
        shift = 0.0
        if t > x1 - margin:
            shift = t - (x1 - margin)
        elif t < x0 + margin:
            shift = t - (x0 + margin)
        if shift:
            if self.following:
                self.pause()
            self._set_x(x0 + shift, x1 + shift)

    def float_markers(self, on: bool = True) -> None:
        """Markers that float with the live stream: each keeps its distance from the newest data."""
        if on and self.source is not None and not hasattr(self.source, "reader"):
            if self.marker_a.scene() is None:
                self.show_markers(True)
            end = self.source.duration_s
            self._float_offsets = (end - float(self.marker_a.value()), end - float(self.marker_b.value()))
        else:
            self._float_offsets = None
        if self.float_button.isChecked() != (self._float_offsets is not None):
            self.float_button.blockSignals(True)
            self.float_button.setChecked(self._float_offsets is not None)
            self.float_button.blockSignals(False)

    FLOAT_FIGURES_S = 0.5     # floating markers' figures are recomputed at most this often

    def _float_step(self) -> None:
        off = self._float_offsets
        if off is None or self.source is None or any(getattr(m, "moving", False) for m in (self.marker_a, self.marker_b)):
            return
        end = self.source.duration_s
        for m, o in zip((self.marker_a, self.marker_b), off):
            m.blockSignals(True)
            m.setValue(end - o)
            m.blockSignals(False)
        now = time.monotonic()
        if now - self._float_sent >= self.FLOAT_FIGURES_S:
            self._float_sent = now
            self.markers.set(end - off[0], end - off[1])
