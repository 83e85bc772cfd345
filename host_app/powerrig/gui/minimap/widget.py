"""The minimap: the whole capture's total power in a strip under the plot, with the plot's visible
range drawn as a region; drag the region (or click in the strip) to move the plot there.

The overview is one summary per pixel of [0, duration] asked of the same source as the plot (the
capture file's summary levels, or the live source's coarsest reduction levels), on a worker, at most
once a second while recording: its cost does not grow with the capture's length.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QVBoxLayout, QWidget

from powerrig.gui.band import BandCurve, view_background
from powerrig.gui.theme import show_numbers


class Minimap(QWidget):
    REFRESH_MS = 1000
    HEIGHT = 70

    def __init__(self, svc, plot: pg.PlotWidget, parent=None):
        """``plot``: the main plot whose x range the minimap shows and moves."""
        super().__init__(parent)
        self.core, self.main = svc.core, plot
        self.source = None
        self.signal = "p_total"
        self.overview = None            # the last summary drawn (tests read it)
        self._in_flight = False
        self._syncing = False
        self.view = pg.PlotWidget()
        self.view.setFixedHeight(self.HEIGHT)
        self.view.hideAxis("left")
        self.view.getAxis("bottom").setStyle(maxTickLevel=0)
        show_numbers(self.view, False, ("bottom",))     # no source: no numbers (it read -0.4 ... 0.4 of nothing)
        self.view.setMouseEnabled(x=False, y=False)
        self.view.setMenuEnabled(False)
        self.view.hideButtons()
        self._bg = view_background(plot)
        self.view.setBackground(self._bg)
        self.curve = BandCurve("#1f77b4", self._bg)
        self.view.addItem(self.curve)
        self.view.addItem(self.curve.line)
        self.region = pg.LinearRegionItem((0.0, 1.0), brush=pg.mkBrush(255, 165, 0, 60),
                                          pen=pg.mkPen("#ff8c00", width=1))
        self.region.setZValue(10)
        self.view.addItem(self.region)
        self.region.sigRegionChanged.connect(self._region_moved)
        self.view.scene().sigMouseClicked.connect(self._clicked)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 0, 2, 2)
        lay.addWidget(self.view)
        plot.getViewBox().sigXRangeChanged.connect(self._main_moved)
        svc.captures.source_changed.connect(self.set_source)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.refresh)
        self._timer.start(self.REFRESH_MS)

    def set_source(self, src) -> None:
        self.source = src
        show_numbers(self.view, src is not None, ("bottom",))
        self.signal = "p_total" if src is not None and "p_total" in src.signals else (src.signals[0] if src else None)
        self.refresh()

    def refresh(self) -> None:
        """Ask the source for the whole capture at one point per pixel (skipped while one is pending)."""
        bg = view_background(self.main)
        if bg != self._bg:                      # the theme changed: the main plot's background, and the
            self._bg = bg                       # band is an opaque mix with it
            self.view.setBackground(bg)
            self.curve.set_background(bg)
        src = self.source
        if src is None or self._in_flight or self.signal is None or not self.isVisible():
            return
        t0, t1 = src.extent()
        if t1 <= t0:
            return
        n = max(50, int(self.view.getViewBox().width()) or 600)
        self._in_flight = True
        self.core.run(src.summaries, t0, t1, n, [self.signal], done=lambda s: self._draw(src, s, t0, t1),
                      failed=lambda m: self._failed(src, m))

    def _failed(self, src, msg: str) -> None:
        self._in_flight = False
        if src is self.source:              # a source replaced meanwhile (and closed) is no news
            self.core.error.emit(msg)

    def _draw(self, src, s, t0: float, t1: float) -> None:
        self._in_flight = False
        if src is not self.source:
            return
        self.overview = s
        self.curve.set_summary(s.t + s.step_s / 2, s.mean[self.signal], s.min[self.signal], s.max[self.signal],
                               s.step_s)
        lo, hi = np.nanmin(s.min[self.signal]) if np.isfinite(s.min[self.signal]).any() else 0.0, \
            np.nanmax(s.max[self.signal]) if np.isfinite(s.max[self.signal]).any() else 1.0
        vb = self.view.getViewBox()
        vb.setXRange(t0, t1, padding=0)
        vb.setYRange(float(lo), float(hi) + 1e-9, padding=0.05)
        self._main_moved()

    # ---- the visible range, both ways -----------------------------------------------------------------
    def _main_moved(self, *_) -> None:
        (x0, x1), _ = self.main.getViewBox().viewRange()
        self._syncing = True
        try:
            self.region.setRegion((x0, x1))
        finally:
            self._syncing = False

    def _region_moved(self, *_) -> None:
        if self._syncing:
            return
        a, b = self.region.getRegion()
        self.show_range(a, b)

    def _clicked(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        t = self.view.getViewBox().mapSceneToView(ev.scenePos()).x()
        a, b = self.region.getRegion()
        self.show_range(t - (b - a) / 2, t + (b - a) / 2)

    def show_range(self, a: float, b: float) -> None:
        """Move the main plot to [a, b] as a user pan would (a live plot stops following)."""
        vb = self.main.getViewBox()
        vb.setXRange(a, b, padding=0)
        vb.sigRangeChangedManually.emit(vb.state["mouseEnabled"])
