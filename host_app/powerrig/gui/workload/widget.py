"""Workload: fio presets with block size, queue depth, jobs and runtime editable; run (writes pass the
drive guard in fio's runner) and stop. While fio runs, its MiB/s and IOPS of the last second (fio's own
status reports); then the phase's figures beside its power. The phase lands on the plot's time axis
from the timeline."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox,
                               QVBoxLayout, QWidget)

from powerrig.gui.services.workload import PRESETS, preset_writes


class WorkloadPanel(QWidget):
    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.core, self.workload = svc.core, svc.workload
        self.preset = QComboBox()
        for name in PRESETS:
            self.preset.addItem(name)
            if preset_writes(name):
                self.preset.setItemData(self.preset.count() - 1, "writes to the drive: the drive guard checks its "
                                        "serial and that nothing on it is mounted first", Qt.ToolTipRole)
        self.bs = QLineEdit()
        self.iodepth = QSpinBox()
        self.iodepth.setRange(1, 1024)
        self.jobs = QSpinBox()
        self.jobs.setRange(1, 64)
        self.runtime = QSpinBox()
        self.runtime.setRange(1, 24 * 3600)
        self.runtime.setSuffix(" s")
        self.run_button = QPushButton("Run")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.result = QLabel("")
        self.result.setWordWrap(True)
        form = QFormLayout()
        form.addRow("preset", self.preset)
        form.addRow("block size", self.bs)
        form.addRow("queue depth", self.iodepth)
        form.addRow("jobs", self.jobs)
        form.addRow("runtime", self.runtime)
        row = QHBoxLayout()
        row.addWidget(self.run_button)
        row.addWidget(self.stop_button)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addLayout(row)
        lay.addWidget(self.result)
        lay.addStretch(1)
        self.preset.currentTextChanged.connect(self.load_preset)
        self.run_button.clicked.connect(self.run)
        self.stop_button.clicked.connect(self.workload.stop)
        self.workload.updated.connect(self.show_workload)
        self.load_preset(self.preset.currentText())

    def load_preset(self, name: str) -> None:
        p = PRESETS[name]
        self.bs.setText(str(p["bs"]))
        self.iodepth.setValue(p["iodepth"])
        self.jobs.setValue(p["numjobs"])
        self.runtime.setValue(int(p["runtime"]))

    def options(self) -> dict:
        o = dict(PRESETS[self.preset.currentText()])
        o.update(bs=self.bs.text().strip(), iodepth=self.iodepth.value(), numjobs=self.jobs.value(),
                 runtime=self.runtime.value())
        return o

    def run(self) -> None:
        self.workload.run(self.preset.currentText(), self.options())

    def show_workload(self, d: dict) -> None:
        if d.get("state") == "live":
            if self.stop_button.isEnabled():      # a late report after the phase ended is not shown
                self.result.setText(f"running {d['name']}: {d['mib_s']:.1f} MiB/s, {d['iops']:.0f} IOPS "
                                    f"(fio's last second)")
            return
        running = d.get("state") == "running"
        self.run_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        if running:
            self.result.setText(f"running {d['name']} for {d.get('runtime', 0):.0f} s ...")
        elif d.get("state") == "done":
            text = f"{d['name']}: {d['mib_s']:.1f} MiB/s, {d['iops']:.0f} IOPS"
            if d.get("mean_w") is not None:
                text += f"\nat {d['mean_w']:.3f} W mean, {d['energy_j']:.2f} J over {d['t1'] - d['t0']:.1f} s"
                if d.get("mib_s_per_w"):
                    text += f": {d['mib_s_per_w']:.1f} MiB/s per W"
            self.result.setText(text)
        else:
            self.result.setText(f"{d['name']} failed: {d.get('error', '')}")
