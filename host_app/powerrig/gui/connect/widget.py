"""Connect: pick an interposer (found ports, a typed port or rfc2217:// URL, or the simulator) and see
its description, firmware and calibration. Errors show here, in one line."""
from __future__ import annotations

from PySide6.QtWidgets import (QComboBox, QFormLayout, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget)


class ConnectPanel(QWidget):
    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.core, self.connection, self.runner = svc.core, svc.connection, svc.sweeps.runner
        core, conn = svc.core, svc.connection
        self.port = QComboBox()
        self.port.setEditable(True)
        self.port.setMinimumContentsLength(22)
        self.port.lineEdit().setPlaceholderText("/dev/ttyACM0 or rfc2217://host:port")
        self.scan_button = QPushButton("Scan")
        self.connect_button = QPushButton("Connect")
        self.sim_button = QPushButton("Simulator")
        self.disconnect_button = QPushButton("Disconnect")
        self.disconnect_button.setEnabled(False)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #c62828; font-weight: bold")
        self.note = QLabel("")
        self.note.setWordWrap(True)
        self.info = QFormLayout()
        self.fields = {}
        for k in ("port", "board", "serial", "firmware", "rails", "interval", "calibration"):
            self.fields[k] = QLabel("—")
            self.fields[k].setWordWrap(True)
            self.info.addRow(k, self.fields[k])
        row = QHBoxLayout()
        row.addWidget(self.port, 1)
        row.addWidget(self.scan_button)
        row2 = QHBoxLayout()
        for b in (self.connect_button, self.sim_button, self.disconnect_button):
            row2.addWidget(b)
        lay = QVBoxLayout(self)
        lay.addLayout(row)
        lay.addLayout(row2)
        lay.addWidget(self.message)
        lay.addWidget(self.note)
        lay.addLayout(self.info)
        lay.addStretch(1)
        self.scan_button.clicked.connect(self.scan)
        self.connect_button.clicked.connect(lambda: conn.connect_port(self.port.currentText()))
        self.sim_button.clicked.connect(lambda: conn.connect_sim())
        self.disconnect_button.clicked.connect(lambda: conn.disconnect("disconnected by the user"))
        conn.connected.connect(self._connected)
        conn.disconnected.connect(self._disconnected)
        core.error.connect(self.show_error)
        conn.reconnected.connect(self._back)
        core.busy.connect(lambda b: [w.setEnabled(not b) for w in (self.connect_button, self.sim_button)])
        self.runner.progress.connect(self._sweep_progress)
        self.runner.finished.connect(lambda _d: self.note.setText(""))

    def set_port(self, port: str) -> None:
        self.port.setEditText(port)

    def scan(self) -> None:
        self.message.setText("")
        self.scan_button.setEnabled(False)

        def found(devs):
            self.scan_button.setEnabled(True)
            self.port.clear()
            for d in devs:
                self.port.addItem(f"{d['port']}", d)
            if not devs:
                self.show_error("no interposer answered; plug one in, type its port, or use the simulator")
        self.connection.scan(done=found, failed=lambda m: (self.scan_button.setEnabled(True), self.show_error(m)))

    def show_error(self, msg: str) -> None:
        self.message.setText(msg)
        self.note.setText("")

    def _back(self, msg: str) -> None:
        """The interposer came back: the loss message gives way to a note (the capture went on)."""
        self.message.setText("")
        self.note.setText(msg)

    def _sweep_progress(self, d: dict) -> None:
        """A running sweep records through the interposer its plan names, not this panel's: say so, or
        the fields here (often all "—") read as if nothing were measuring while the plot moves."""
        sweep = self.runner.sweep
        if d.get("kind") == "start" and sweep is not None:
            self.note.setText(f"a sweep is running on its plan's interposer ({sweep.plan.rig.port}): the plot and "
                              "the multimeter show its steps; this window's own stream comes back when it ends")

    def _connected(self, d: dict) -> None:
        self.message.setText("")
        self.disconnect_button.setEnabled(True)
        cal = d.get("calibration") or {}
        iv = d.get("interval_us", {})
        # an optional rail (U.2's legacy 5 V) is streamed only when asked for: the plot and the multimeter
        # show the others, so say which it is rather than list a rail they never offer
        rails = [f"{r['name']} (optional: not streamed unless asked for)" if isinstance(r, dict) and r.get("optional")
                 else r["name"] if isinstance(r, dict) else str(r) for r in d.get("rails", [])]
        when = cal.get("date") or cal.get("when") or cal.get("time")
        calib = cal.get("source") or ("calibrated" if cal.get("rails") else "none")
        if when:
            calib += f", {when}"
        if cal.get("rails"):
            calib += f" ({len(cal['rails'])} rails)"
        vals = {"port": d.get("port"), "board": d.get("board"), "serial": d.get("serial"),
                "firmware": d.get("firmware"), "rails": ", ".join(rails),
                "interval": f"{iv.get('default', '?')} us (min {iv.get('min', '?')})" if isinstance(iv, dict) else str(iv),
                "calibration": calib}
        for k, v in vals.items():
            self.fields[k].setText(str(v if v not in (None, "") else "—"))

    def _disconnected(self, why: str) -> None:
        self.disconnect_button.setEnabled(False)
        self.fields["port"].setText(f"— ({why})")
