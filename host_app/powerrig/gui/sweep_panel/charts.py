"""The sweep's two charts from the per-step summary rows (results.tables.step_summary): throughput per
watt of each workload step, and power per power state (one line per workload, idle included)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QHBoxLayout, QWidget

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f")


class SweepCharts(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.efficiency = pg.PlotWidget()
        self.efficiency.setTitle("throughput per watt")
        self.efficiency.setLabel("left", "MiB/s per W")
        self.efficiency.setLabel("bottom", "step")
        self.efficiency.showGrid(y=True, alpha=0.3)
        self.power = pg.PlotWidget()
        self.power.setTitle("power per state")
        self.power.setLabel("left", "power", units="W")
        self.power.setLabel("bottom", "power state (PS)")
        self.power.showGrid(x=True, y=True, alpha=0.3)
        self.legend = self.power.addLegend(offset=(-10, 10))
        for p in (self.efficiency, self.power):
            p.setMinimumHeight(160)
            p.setMouseEnabled(x=False, y=False)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.efficiency, 1)
        lay.addWidget(self.power, 1)
        self.bars: list[tuple[str, float]] = []           # (step, MiB/s/W) as drawn
        self.lines: dict[str, list[tuple[int, float]]] = {}  # workload -> [(PS, W)] as drawn

    def show_rows(self, rows: list[dict]) -> None:
        self.bars = [(r["name"], r["MiB/s/W"]) for r in rows if r["MiB/s/W"] is not None]
        self.efficiency.clear()
        if self.bars:
            xs = list(range(len(self.bars)))
            self.efficiency.addItem(pg.BarGraphItem(x=xs, height=[b[1] for b in self.bars], width=0.6,
                                                    brush=COLOURS[0]))
            self.efficiency.getAxis("bottom").setTicks([[(x, b[0]) for x, b in zip(xs, self.bars)]])
        self.lines = {}
        for r in rows:
            if r["W"] is not None:
                self.lines.setdefault(r["workload"], []).append((r["power_state"], r["W"]))
        self.power.clear()
        self.legend.clear()
        for k, (wl, pts) in enumerate(sorted(self.lines.items())):
            pts.sort()
            c = COLOURS[k % len(COLOURS)]
            self.power.plot([p[0] for p in pts], [p[1] for p in pts], pen=pg.mkPen(c, width=2), symbol="o",
                            symbolBrush=c, symbolSize=8, name=wl)
        states = sorted({p[0] for pts in self.lines.values() for p in pts})
        self.power.getAxis("bottom").setTicks([[(s, f"PS{s}") for s in states]])
