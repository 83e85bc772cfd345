"""The sweep's two charts from the per-step summary rows (results.tables.step_summary): throughput per
watt of each workload step, and power per power state (one line per workload, idle included)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QWidget

from powerrig.gui.theme import show_numbers

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f")


class SweepCharts(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.efficiency = pg.PlotWidget()
        self.efficiency.setTitle("throughput per watt")
        self.efficiency.setLabel("left", "MiB/s per W")
        self.efficiency.setLabel("bottom", "power state")
        self.efficiency.showGrid(y=True, alpha=0.3)
        self.power = pg.PlotWidget()
        self.power.setTitle("power per state")
        self.power.setLabel("left", "power", units="W")
        self.power.setLabel("bottom", "power state")
        self.power.showGrid(x=True, y=True, alpha=0.3)
        self.legend = self.power.addLegend(offset=(-5, 5))
        self.bar_legend = self.efficiency.addLegend(offset=(-5, 5))
        self._spans: dict = {}               # plot -> (x0, x1) of its data, before the legend's room
        for p in (self.efficiency, self.power):
            p.setMinimumHeight(190)         # the bars, their axes and both axis labels
            p.setMouseEnabled(x=False, y=False)
            p.getViewBox().sigResized.connect(lambda _vb, p=p: self._fit_x(p))
        lay = QHBoxLayout(self)
        lay.setSpacing(4)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.efficiency, 1)
        lay.addWidget(self.power, 1)
        self.bars: list[tuple[str, float]] = []           # (step, MiB/s/W) as drawn
        self.lines: dict[str, list[tuple[int, float]]] = {}  # workload -> [(PS, W)] as drawn
        self._blank(True)

    def _blank(self, blank: bool) -> None:
        """Charts with nothing drawn show no numbers: no "power state 0.2" or "0.8 W" before a step is stored."""
        for p in (self.efficiency, self.power):     # (the bottom's PS ticks are show_rows' own)
            show_numbers(p, not blank, ("left", "bottom") if blank else ("left",))

    def show_rows(self, rows: list[dict]) -> None:
        """Bars grouped by power state, one colour per workload (the legend names them); lines of W over
        the power states, one per workload."""
        self.bars = [(r["name"], r["MiB/s/W"]) for r in rows if r["MiB/s/W"] is not None]
        workloads = sorted({r["workload"] for r in rows})
        colour = {w: COLOURS[k % len(COLOURS)] for k, w in enumerate(workloads)}
        self.efficiency.clear()
        self.bar_legend.clear()
        busy = [w for w in workloads if any(r["workload"] == w and r["MiB/s/W"] is not None for r in rows)]
        states = sorted({r["power_state"] for r in rows})
        width = 0.8 / max(1, len(busy))
        for j, w in enumerate(busy):
            pts = [(r["power_state"], r["MiB/s/W"]) for r in rows if r["workload"] == w and r["MiB/s/W"] is not None]
            xs = [states.index(ps) - 0.4 + width * (j + 0.5) for ps, _ in pts]
            bar = pg.BarGraphItem(x=xs, height=[v for _, v in pts], width=width * 0.9, brush=colour[w],
                                  pen=pg.mkPen(None))
            self.efficiency.addItem(bar)
            self.bar_legend.addItem(bar, w)
        self.efficiency.getAxis("bottom").setTicks([[(k, f"PS{ps}") for k, ps in enumerate(states)]])
        if states:
            self._spans[self.efficiency] = (-0.6, len(states) - 0.4)
            self._fit_x(self.efficiency)
        self.lines = {}
        for r in rows:
            if r["W"] is not None:
                self.lines.setdefault(r["workload"], []).append((r["power_state"], r["W"]))
        self.power.clear()
        self.legend.clear()
        for wl, pts in sorted(self.lines.items()):
            pts.sort()
            c = colour[wl]
            self.power.plot([p[0] for p in pts], [p[1] for p in pts], pen=pg.mkPen(c, width=2), symbol="o",
                            symbolBrush=c, symbolSize=8, name=wl)
        self.power.getAxis("bottom").setTicks([[(s, f"PS{s}") for s in states]])
        if states:
            self._spans[self.power] = (min(states) - 0.3, max(states) + 0.3)
            self._fit_x(self.power)
        self._blank(not self.bars and not self.lines)

    def _fit_x(self, plot) -> None:
        """The x range: the data, then room on the right as wide as the legend (in pixels of the chart
        as it is now), so the legend never covers a bar or a point however narrow the chart."""
        span = self._spans.get(plot)
        if span is None:
            return
        legend = self.bar_legend if plot is self.efficiency else self.legend
        vb = plot.getViewBox()
        w = vb.width()
        need = legend.boundingRect().width() + 12 if legend is not None and legend.items else 0.0
        x0, x1 = span
        room = (x1 - x0) * need / max(w - need, 0.25 * w) if w > 0 else 0.9
        plot.setXRange(x0, x1 + room, padding=0)
