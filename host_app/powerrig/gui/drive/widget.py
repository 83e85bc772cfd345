"""Drive: identity and power states from id-ctrl, one-click power state (the step shows on the plot as
an event), APST on/off, temperature. nvme-cli runs on a worker, recorded on the core's timeline."""
from __future__ import annotations

import time

from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

APST_TEXT = "APST (autonomous power state transitions)"
# Set first: never scrolled away; two-line headers keep the table narrow enough to show whole beside
# the plot on a 1366 px screen
COLUMNS = ["", "PS", "max\nW", "ENLAT\nus", "EXLAT\nus", "non-\nop", "idle\nW", "active\nW"]


class DrivePanel(QWidget):
    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.core, self.drive = svc.core, svc.drive
        core = svc.core
        self.identity = QLabel("no drive read yet")
        self.identity.setWordWrap(True)
        self.state = QLabel("power state: —    temperature: —")
        self.thermal = QLabel("throttling: —")
        self.thermal.setWordWrap(True)
        self.refresh_button = QPushButton("Read drive")
        self.apst = QCheckBox(APST_TEXT)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        top = QHBoxLayout()
        top.addWidget(self.refresh_button)
        top.addWidget(self.apst)
        top.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.identity)
        lay.addWidget(self.state)
        lay.addWidget(self.thermal)
        lay.addWidget(self.table, 1)
        self.refresh_button.clicked.connect(self.drive.refresh)
        self.apst.clicked.connect(self._apst_clicked)
        self.drive.updated.connect(self.show_drive)
        core.error.connect(self._apst_failed)
        self._ps = None
        self._temp = None
        self._apst_pending = False                     # a set was asked; a read meanwhile is not shown
        self._apst_supported: bool | None = None       # unknown until a read

    def _apst_clicked(self, on: bool) -> None:
        self._apst_pending = True
        self.apst.setEnabled(False)                    # until the drive answers (or the call fails)
        self.drive.set_apst(bool(on))

    def _apst_failed(self, _msg: str) -> None:
        self._apst_pending = False
        self.apst.setEnabled(self._apst_supported is not False)

    def show_states(self, ident) -> None:
        states = ident.power_states
        self.table.setRowCount(len(states))
        for k, s in enumerate(states):
            vals = [f"PS{s.ps}", f"{s.max_power_w:g}", str(s.entry_latency_us), str(s.exit_latency_us),
                    "yes" if s.non_operational else "no",
                    "—" if s.idle_power_w is None else f"{s.idle_power_w:g}",
                    "—" if s.active_power_w is None else f"{s.active_power_w:g}"]
            for j, v in enumerate(vals):
                self.table.setItem(k, j + 1, QTableWidgetItem(v))
            b = QPushButton("Set")                     # short: the row names the state; a long label was clipped
            b.setToolTip(f"Set PS{s.ps}")
            b.clicked.connect(lambda _=False, ps=s.ps: self.drive.set_power_state(ps))
            self.table.setCellWidget(k, 0, b)
        self.table.resizeColumnsToContents()
        # the panel is as wide as the table's columns: all of them show (the panel scrolls up and down)
        cols = sum(self.table.columnWidth(k) for k in range(self.table.columnCount()))
        self.table.setMinimumWidth(cols + 2 * self.table.frameWidth() + self.table.verticalScrollBar().sizeHint().width())

    def show_drive(self, d: dict) -> None:
        if "identity" in d:
            i = d["identity"]
            self.identity.setText(f"{i.mn.strip()}   serial {i.sn.strip()}   firmware {i.fr.strip()}   "
                                  f"{i.npss + 1} power states" + (", APST supported" if i.apsta else ""))
            self.show_states(i)
        if "power_state" in d:
            self._ps = d["power_state"]
        if "temperature_c" in d:
            self._temp = d["temperature_c"]
        if "apst" in d and d["apst"] is None:         # the drive has no APST: said, not an error
            self._apst_supported = False
            self.apst.setChecked(False)
            self.apst.setEnabled(False)
            self.apst.setText("APST: not supported by this drive")
        elif "apst" in d and (not self._apst_pending or d.get("apst_set")):
            self._apst_supported, self._apst_pending = True, False
            self.apst.setChecked(bool(d["apst"]))
            self.apst.setEnabled(True)
            self.apst.setText(APST_TEXT)
        if "throttle" in d:
            self.thermal.setText(f"throttling: {d['throttle']}    (read {time.strftime('%H:%M:%S')})")
        elif d.get("thermal_skipped"):
            self.thermal.setText(f"temperature {d['thermal']}")
        ps = "—" if self._ps is None else f"PS{self._ps}"
        t = "—" if self._temp is None else f"{self._temp:.0f} °C"
        self.state.setText(f"power state: {ps}    temperature: {t}")
