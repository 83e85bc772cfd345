"""The multimeter: live mean, min, max, peak 100 us and energy per rail and total since the recording
began, and the two markers' delta-t, mean power and energy (figures from the analysis code)."""
from __future__ import annotations

import math

from PySide6.QtWidgets import QGroupBox, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

COLUMNS = ["mean W", "min W", "max W", "peak\n100 us W", "energy J"]   # two lines: narrow enough for a 1366 px screen


def _fmt(v, digits=3) -> str:
    return "—" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.{digits}f}"


def _fit_columns(table: QTableWidget) -> None:
    """Columns share the table's width, and the table is never narrower than its headers and a
    "-12.3456" need: every column stays in view (the panel scrolls up and down, never sideways)."""
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.Stretch)
    digits = table.fontMetrics().horizontalAdvance("-12.3456") + 12
    need = sum(max(header.sectionSizeHint(k), digits) for k in range(table.columnCount()))
    table.setMinimumWidth(need + 60 + 2 * table.frameWidth())     # + the rail names' column


def _fit_rows(table: QTableWidget, at_least: int = 3) -> None:
    """The table exactly as tall as its rows (at least ``at_least``): no empty space taking the height
    a short screen needs for the markers' table below it."""
    rows = max(table.rowCount(), at_least)
    h = table.horizontalHeader().sizeHint().height() + rows * table.verticalHeader().defaultSectionSize()
    table.setFixedHeight(h + 2 * table.frameWidth())


class Multimeter(QWidget):
    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.recording = svc.recording
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(True)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        _fit_columns(self.table)
        self.marker_box = QGroupBox("Markers A-B")
        self.marker_label = QLabel("press Markers on the plot and drag A and B")
        self.marker_label.setWordWrap(True)
        self.marker_table = QTableWidget(0, 3)
        self.marker_table.setHorizontalHeaderLabels(["mean W", "energy J", "max W"])
        self.marker_table.setEditTriggers(QTableWidget.NoEditTriggers)
        _fit_columns(self.marker_table)
        mb = QVBoxLayout(self.marker_box)
        mb.addWidget(self.marker_label)
        mb.addWidget(self.marker_table)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(QLabel("Since the recording began"))
        lay.addWidget(self.table)
        lay.addWidget(self.marker_box)
        lay.addStretch(1)
        _fit_rows(self.table)
        _fit_rows(self.marker_table)
        self.figures = None
        svc.recording.data.connect(self.refresh)
        svc.markers.updated.connect(self.show_markers)

    def refresh(self) -> None:
        live = self.recording.live
        if live is None:
            return
        rows = list(live.rails) + ["total"]
        if self.table.rowCount() != len(rows):
            self.table.setRowCount(len(rows))
            self.table.setVerticalHeaderLabels(rows)
            _fit_rows(self.table)
        dt = live.interval_s
        with live._lock:
            s, c = live.total_sum.copy(), live.total_cnt.copy()
            mn, mx, peak = live.total_min.copy(), live.total_max.copy(), dict(live.peak)
        for k, r in enumerate(rows):
            col = live.col["p_total" if r == "total" else f"p_{r}"]
            n = int(c[col])
            vals = [s[col] / n if n else math.nan, mn[col] if n else math.nan, mx[col] if n else math.nan,
                    peak.get(r, math.nan) if r != "total" else None, s[col] * dt]
            for j, v in enumerate(vals):
                self.table.setItem(k, j, QTableWidgetItem(_fmt(v, 4 if j < 4 else 3)))

    def show_markers(self, fig) -> None:
        """The markers' figures (always over the plot's current source); None: no markers; a str:
        why the markers have no figures on this source."""
        if fig is None or isinstance(fig, str):
            self.figures = None
            self.marker_label.setText(fig or "press Markers on the plot and drag A and B")
            self.marker_table.setRowCount(0)
            _fit_rows(self.marker_table)
            return
        self.figures = fig
        lost = f", {fig.lost_s:.3f} s lost in gaps" if fig.lost_s else ""
        self.marker_label.setText(f"A {fig.t_a:.4f} s   B {fig.t_b:.4f} s\nΔt {fig.dt_s:.4f} s{lost}")
        rows = [k for k in fig.mean_w if k != "total"] + ["total"]
        self.marker_table.setRowCount(len(rows))
        self.marker_table.setVerticalHeaderLabels(rows)
        _fit_rows(self.marker_table)
        for k, r in enumerate(rows):
            for j, v in enumerate((fig.mean_w[r], fig.energy_j[r], fig.max_w[r])):
                self.marker_table.setItem(k, j, QTableWidgetItem(_fmt(v, 4)))
