"""The multimeter: mean, min, max, peak 100 us and energy per rail and total of what the plot shows
(the live stream since the recording began, or the whole of an opened capture), and the two markers'
delta-t, mean power and energy (figures from the analysis code)."""
from __future__ import annotations

import functools
import math

from PySide6.QtWidgets import QGroupBox, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

COLUMNS = ["mean W", "min W", "max W", "peak\n100 us W", "energy J"]   # two lines: narrow enough for a 1366 px screen


def _fmt(v, digits=3, resolution: float = 0.0) -> str:
    """``v`` to ``digits`` decimals; a power within ``resolution`` (the meter's step) of zero is 0: a
    load rail's power is never negative, so -0.0005 W on an idle rail is noise around zero, not a
    reading (a value further below zero than one step is shown: a wiring fault should show)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    if abs(v) < resolution:
        v = 0.0
    out = f"{v:.{digits}f}"
    return out[1:] if out.startswith("-") and float(out) == 0 else out       # never "-0.0000"


@functools.lru_cache(maxsize=1)
def _rail_steps() -> dict:
    """Each rail's power step (W): its nominal voltage times the ADC's current LSB (rails.toml)."""
    from powerrig.core.rails import load_rails
    try:
        return {r.name: r.nominal_v * r.i_lsb for r in load_rails().rails}
    except Exception:  # noqa: BLE001 - no rails file: figures unrounded
        return {}


def resolution_w(row: str, rails) -> float:
    """The meter's power step of a row: its rail's, or for "total" the sum of the rails' steps."""
    steps = _rail_steps()
    if row == "total":
        return sum(steps.get(r, 0.0) for r in rails)
    return steps.get(row, 0.0)


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
        self.recording, self.captures = svc.recording, svc.captures
        self.title = QLabel("Since the recording began")
        self.title.setWordWrap(True)
        self.file_rows: dict | None = None       # an opened capture's whole figures (None: the live stream)
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
        lay.addWidget(self.title)
        lay.addWidget(self.table)
        lay.addWidget(self.marker_box)
        lay.addStretch(1)
        _fit_rows(self.table)
        _fit_rows(self.marker_table)
        self.figures = None
        svc.recording.data.connect(self.refresh)
        svc.markers.updated.connect(self.show_markers)
        svc.captures.source_changed.connect(self.follow_source)
        svc.captures.file_figures.connect(self.show_file)

    def _shows_live(self) -> bool:
        src = self.captures.source
        return src is None or not hasattr(src, "reader")

    def follow_source(self, src) -> None:
        """The meter shows what the plot shows: a capture opened (File > Open) replaces the live figures
        with the capture's own; back to live, the live stream's again."""
        self.table.setRowCount(0)
        _fit_rows(self.table)
        if src is not None and hasattr(src, "reader"):
            self.file_rows = None
            self.title.setText(f"Whole capture {src.path.name} (reading ...)")
        else:
            self.file_rows = None
            self.title.setText("Since the recording began")
            self.refresh()

    def show_file(self, src, rows: dict) -> None:
        """An opened capture's whole figures (computed on a worker with its analysis)."""
        if src is not self.captures.source:
            return
        self.file_rows = rows
        self.title.setText(f"Whole capture {src.path.name} ({src.duration_s:.1f} s)"
                           + ("" if rows else ": no data to measure"))
        names = [k for k in rows if k != "total"] + (["total"] if "total" in rows else [])
        self._fill(names, [rows[k] for k in names], src.rails)

    def _fill(self, names: list, values: list, rails) -> None:
        if self.table.rowCount() != len(names):
            self.table.setRowCount(len(names))
            self.table.setVerticalHeaderLabels(names)
            _fit_rows(self.table)
        for k, (r, vals) in enumerate(zip(names, values)):
            res = resolution_w(r, rails)
            for j, v in enumerate(vals):
                self.table.setItem(k, j, QTableWidgetItem(_fmt(v, 4 if j < 4 else 3, res if j < 4 else 0.0)))

    def refresh(self) -> None:
        live = self.recording.live
        if live is None or not self._shows_live():
            return
        rows = list(live.rails) + ["total"]
        dt = live.interval_s
        with live._lock:
            s, c = live.total_sum.copy(), live.total_cnt.copy()
            mn, mx, peak = live.total_min.copy(), live.total_max.copy(), dict(live.peak)
        values = []
        for r in rows:
            col = live.col["p_total" if r == "total" else f"p_{r}"]
            n = int(c[col])
            values.append([s[col] / n if n else math.nan, mn[col] if n else math.nan, mx[col] if n else math.nan,
                           peak.get(r, math.nan), s[col] * dt])
        self._fill(rows, values, live.rails)

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
        rails = [r for r in rows if r != "total"]
        for k, r in enumerate(rows):
            res = resolution_w(r, rails)
            for j, v in enumerate((fig.mean_w[r], fig.energy_j[r], fig.max_w[r])):
                self.marker_table.setItem(k, j, QTableWidgetItem(_fmt(v, 4, res if j != 1 else 0.0)))
