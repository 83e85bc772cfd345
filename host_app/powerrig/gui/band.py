"""One plotted signal as ONE graphics item: the min/max band (one pixel-aligned rectangle per point)
and the mean line, from a per-pixel summary, painted with two QPainter calls.

Why not pyqtgraph's PlotDataItem x3 + FillBetweenItem: that is four items (each with its own Python
paint, bounds and finite checks under the GIL) and a band polygon rebuilt in Python every frame,
whose scanline fill costs 20-100 ms when the band is jagged (every pixel column adds edges). Here the
data is already one point per pixel, so no downsampling, clipping or finite check is needed; the band
is integer device rectangles handed to Qt in one call from a preallocated numpy buffer (no per-frame
Qt objects), without antialiasing, OPAQUE (the colour mixed with the view's background beforehand):
the raster engine fills a 1-px column as one span per row, and alpha-blending those spans cost 285 ms
for a 600-px tall band against 12 ms opaque. Bands therefore sit below every mean line (``line``, a
separate item drawn above all bands) and a later band hides an earlier one where they overlap. The
mean is a 1-px cosmetic pen (Qt's fast raster path; wider pens go through the stroker). NaN (no data,
gaps) leaves a hole in the band and breaks the line.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from pyqtgraph.Qt import compat
from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPalette

_LIMIT = 1 << 24          # device coordinates are clipped to this (int32 rectangles, far-off points)


class MeanLine(pg.GraphicsObject):
    """The mean line of a BandCurve, a separate item so that every line is drawn above every band."""

    def __init__(self, pen):
        super().__init__()
        self.pen = pen
        self.path = QPainterPath()
        self.bounds = QRectF()
        self.setZValue(1)

    def boundingRect(self) -> QRectF:
        return QRectF(self.bounds)

    def paint(self, p: QPainter, *_):
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        p.setPen(self.pen)
        p.drawPath(self.path)


def view_background(plot) -> "pg.QtGui.QColor":
    """A PlotWidget's background colour (its own brush, or the palette's when it is transparent)."""
    b = plot.backgroundBrush()
    if b.style() == Qt.BrushStyle.NoBrush or b.color().alpha() == 0:
        return plot.palette().color(QPalette.ColorRole.Base)
    return b.color()


def mix(colour, background, alpha: float):
    """``colour`` at ``alpha`` over ``background``, as one opaque colour."""
    c, b = pg.mkColor(colour), pg.mkColor(background)
    return pg.mkColor(*(round(alpha * x + (1 - alpha) * y) for x, y in
                        ((c.red(), b.red()), (c.green(), b.green()), (c.blue(), b.blue()))))


class BandCurve(pg.GraphicsObject):
    """The min/max band of one signal (and its ``line``, the mean); ``set_summary`` replaces the data.
    Add both ``self`` and ``self.line`` to the plot."""

    def __init__(self, colour, background="w", band_alpha: float = 0.25):
        super().__init__()
        c = pg.mkColor(colour)
        self.colour, self.band_alpha = c, band_alpha
        self.pen = pg.mkPen(c, width=1)
        self.pen.setCosmetic(True)
        self.line = MeanLine(self.pen)
        self.brush = pg.mkBrush(mix(c, background, band_alpha))
        self._bounds = QRectF()
        self._t = self._lo = self._hi = np.empty(0)
        self._half = 0.0
        self._rects = np.empty((0, 4), np.int32)        # grows, never shrinks: no per-frame allocation
        self.points = 0

    def set_summary(self, t: np.ndarray, mean: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                    step: float | None = None) -> None:
        """``t`` point centres, ``step`` their width; ``lo``/``hi`` NaN where the point has no min/max
        (the mean is used)."""
        lo = np.where(np.isnan(lo), mean, lo)
        hi = np.where(np.isnan(hi), mean, hi)
        fin = np.isfinite(lo) & np.isfinite(hi)
        if step is None:
            step = float(t[1] - t[0]) if len(t) > 1 else 0.0
        self._t, self._lo, self._hi = t[fin], lo[fin], hi[fin]
        self._half = step / 2
        if len(self._rects) < len(self._t):
            self._rects = np.empty((max(len(self._t), 2 * len(self._rects)), 4), np.int32)
        self.line.path = pg.arrayToQPath(t, mean, connect="finite") if len(t) else QPainterPath()
        self.points = int(len(t))
        if fin.any():
            y0, y1 = float(self._lo.min()), float(self._hi.max())
            pad = 0.02 * (y1 - y0) + 1e-3 * max(abs(y0), abs(y1)) + 1e-12    # the pen's width, roughly
            new = QRectF(float(t[0]) - self._half, y0 - pad, float(t[-1] - t[0]) + step or 1e-12,
                         y1 - y0 + 2 * pad)
        else:
            new = QRectF()
        if new != self._bounds:
            self.prepareGeometryChange()
            self.line.prepareGeometryChange()
            self._bounds = self.line.bounds = new
        self.update()
        self.line.update()

    def set_background(self, background) -> None:
        """The theme's plot background changed: re-mix the band's opaque colour."""
        self.brush = pg.mkBrush(mix(self.colour, background, self.band_alpha))
        self.update()

    def clear(self) -> None:
        self.set_summary(np.empty(0), np.empty(0), np.empty(0), np.empty(0))

    def boundingRect(self) -> QRectF:
        return QRectF(self._bounds)

    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        r = self._bounds
        if r.isNull():
            return None, None
        return (r.left(), r.right()) if ax == 0 else (r.top(), r.bottom())

    def _device_rects(self, tr) -> int:
        """Fill the rectangle buffer (QRect layout: left, top, right, bottom, inclusive) in device pixels."""
        n = len(self._t)
        if not n:
            return 0
        sx, dx, sy, dy = tr.m11(), tr.m31(), tr.m22(), tr.m32()
        r = self._rects[:n]
        xa = np.clip(np.floor((self._t - self._half) * sx + dx), -_LIMIT, _LIMIT)
        xb = np.clip(np.floor((self._t + self._half) * sx + dx) - 1, -_LIMIT, _LIMIT)
        ya = np.clip(np.floor(self._hi * sy + dy), -_LIMIT, _LIMIT)
        yb = np.clip(np.floor(self._lo * sy + dy), -_LIMIT, _LIMIT)
        r[:, 0] = np.minimum(xa, xb)
        r[:, 2] = np.maximum(xa, xb)
        r[:, 1] = np.minimum(ya, yb)
        r[:, 3] = np.maximum(ya, yb)
        return n

    def paint(self, p: QPainter, *_):
        p.setRenderHint(QPainter.RenderHint.Antialiasing, False)
        tr = p.transform()
        if tr.m12() == 0 and tr.m21() == 0:
            n = self._device_rects(tr)
            if n:
                p.save()
                p.resetTransform()
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(self.brush)
                p.drawRects(compat.wrapinstance(self._rects.ctypes.data, QRect), n)
                p.restore()
