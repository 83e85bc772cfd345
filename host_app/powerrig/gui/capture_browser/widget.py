"""The analysis table of an opened capture (per-phase W, J, verdicts); a click zooms the plot to the
phase (through the core's ``zoom`` request, so this widget does not know the plot)."""
from __future__ import annotations

import math

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

COLUMNS = ["phase", "kind", "start s", "duration s", "mean W", "energy J", "max 1 s W", "max 100 ms W", "peak 100 us W",
           "verdicts"]


class AnalysisTable(QWidget):
    zoom = Signal(float, float)

    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.title = QLabel("Open a capture (File > Open) to see its analysis")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectRows)
        self.table.cellClicked.connect(self._clicked)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.title)
        lay.addWidget(self.table, 1)
        self.spans: list[tuple[float, float]] = []
        svc.captures.analysis_ready.connect(self.show_analysis)

    def show_analysis(self, an) -> None:
        if an is None:
            self.title.setText("this capture could not be analysed (see the status bar)")
            self.table.setRowCount(0)
            return
        verdicts: dict[str, list[str]] = {}
        for c in an.checks:
            verdicts.setdefault(c.phase, []).append(f"{c.check} {c.status}")
        rows = [r for r in an.phases if r.kind not in ("idle_window", "waf_interval")]
        self.title.setText(f"{len(rows)} phases, {len(an.checks)} checks" +
                           (f"; {len(an.warnings)} warnings" if an.warnings else ""))
        self.title.setToolTip("\n".join(an.warnings))
        self.table.setRowCount(len(rows))
        self.spans = []
        for k, r in enumerate(rows):
            s = r.rails["total"]
            low = " (lower bound)" if getattr(r, "lower_bound", False) else ""    # a channel was at full scale
            vals = [r.name, str(r.kind), f"{r.start_s:.3f}", f"{r.duration_s:.3f}", _f(s["mean_w"]) + low,
                    _f(s["energy_j"]) + low, _f(r.max_1s.value_w), _f(r.max_100ms.value_w), _f(r.peak_100us.value_w),
                    ", ".join(verdicts.get(r.name, []))]
            for j, v in enumerate(vals):
                item = QTableWidgetItem(v)
                if r.invalid:
                    item.setToolTip(r.invalid)          # why the phase's verdicts are invalid
                self.table.setItem(k, j, item)
            self.spans.append((r.start_s, r.stop_s))
        self.table.resizeColumnsToContents()

    def _clicked(self, row: int, _col: int) -> None:
        if 0 <= row < len(self.spans):
            self.zoom.emit(*self.spans[row])


def _f(v) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.3f}"
