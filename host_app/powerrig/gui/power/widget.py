"""Power: cut and restore the drive's 12 V for a set time (with the inrush and hold-up of the raw burst
around it), pulse PERST#, restore everything. The drive's serial is typed or confirmed here (Read drive
fills it in); the guard checks it with nvme-cli before anything switches. Each executed edge shows on
the plot's time axis."""
from __future__ import annotations

from PySide6.QtWidgets import (QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton,
                               QVBoxLayout, QWidget)


def _ms_box(value: float, top: float) -> QDoubleSpinBox:
    b = QDoubleSpinBox()
    b.setRange(0.1, top)
    b.setDecimals(1)
    b.setValue(value)
    b.setSuffix(" ms")
    return b


class PowerPanel(QWidget):
    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.core, self.power, self.drive = svc.core, svc.power, svc.drive
        self.serial = QLineEdit()
        self.serial.setPlaceholderText("the serial of the drive in the slot")
        self.serial.setToolTip("checked with nvme-cli before any power action: a wrong serial switches nothing")
        self.off_ms = _ms_box(100.0, 60000.0)
        self.perst_ms = _ms_box(50.0, 60000.0)
        self.cycle_button = QPushButton("Cycle")
        self.cycle_button.setToolTip("cut 12 V for the off time, then restore it; inrush and hold-up from the raw burst")
        self.perst_button = QPushButton("PERST# pulse")
        self.perst_button.setToolTip("assert PERST# for this long (the drive keeps power)")
        self.restore_button = QPushButton("Restore all")
        self.restore_button.setToolTip("every rail on, PERST# and PWRDIS released, power actions off")
        self.result = QLabel("no power action yet")
        self.result.setWordWrap(True)
        form = QFormLayout()
        form.addRow("drive serial", self.serial)
        cyc = QHBoxLayout()
        cyc.addWidget(self.off_ms, 1)
        cyc.addWidget(self.cycle_button)
        form.addRow("12 V off", cyc)
        pr = QHBoxLayout()
        pr.addWidget(self.perst_ms, 1)
        pr.addWidget(self.perst_button)
        form.addRow("PERST#", pr)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.restore_button)
        lay.addWidget(self.result)
        lay.addStretch(1)
        self._prefilled = ""
        self.cycle_button.clicked.connect(lambda: self.power.cycle(self.serial.text(), self.off_ms.value()))
        self.perst_button.clicked.connect(lambda: self.power.perst(self.serial.text(), self.perst_ms.value()))
        self.restore_button.clicked.connect(self.power.restore)
        self.power.updated.connect(self.show_power)
        self.drive.updated.connect(self.prefill)

    def prefill(self, d: dict) -> None:
        """The serial the drive reported, unless the user typed another."""
        if "identity" not in d:
            return
        sn = d["identity"].sn.strip()
        if self.serial.text() in ("", self._prefilled):
            self.serial.setText(sn)
        self._prefilled = sn

    def show_power(self, d: dict) -> None:
        state = d.get("state")
        running = state == "running"
        self.cycle_button.setEnabled(not running)
        self.perst_button.setEnabled(not running)
        if running:
            self.result.setText(f"{d['action']} ...")
        elif state == "restored":
            rails = d.get("rails") or {}
            self.result.setText("restored: " + ", ".join(f"{k} {v}" for k, v in rails.items()))
        elif state == "failed":
            self.result.setText(f"{d['action'] or 'power'} refused: {d['error']}" if d["action"]
                                else d["error"])
        elif state == "done":
            self.result.setText(self.describe(d))

    @staticmethod
    def why_no_holdup(d: dict) -> str:
        """Never a bare "hold-up —": the burst's reason, or why there was no burst to measure."""
        if d.get("burst_error"):
            return f"no burst: {d['burst_error']}"
        return d.get("holdup_reason") or "not measured: no raw burst was taken for this action"

    @staticmethod
    def describe(d: dict) -> str:
        """The executed edges (output, level, the sample they landed on against the one asked) and the
        burst's figures."""
        lines = [f"{d['action']}: edges executed"]
        for e in d["edges"]:
            late = e["index"] - e["requested"]
            lines.append(f"  {e['name']} at +{e['at_ms']:.3f} ms"
                         + (f" ({late} samples late)" if late else ""))
        if "holdup_s" in d:
            h, pk, q = d.get("holdup_s"), d.get("inrush_peak_a"), d.get("inrush_charge_c")
            lines.append("hold-up " + (f"{h * 1e3:.3f} ms" if h is not None else f"— ({PowerPanel.why_no_holdup(d)})"))
            lines.append("inrush " + ("—" if pk is None else f"{pk:.2f} A peak, {q * 1e3:.3f} mC")
                         + (f" (no burst: {d['burst_error']})" if pk is None and d.get("burst_error") else ""))
        return "\n".join(lines)
