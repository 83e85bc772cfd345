"""Sweep panel: open a plan (the shipped fixtures/plans or a file), run it through the sweep engine
(off the GUI thread), see step n of m and the ETA, pause, stop and resume; the results table fills
from the results store as steps finish; throughput-per-watt and power-per-state charts; the sweep's
HTML report.

If the plan's interposer is the one the window is connected to, the window lets go of it first (one
port, one reader): the sweep records its own captures, one per step, and the live view shows their
stream (the engine hands each recorded block to the core) until the sweep ends.
"""
from __future__ import annotations

import math
from pathlib import Path

from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QProgressBar,
                               QPushButton, QScrollArea, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from powerrig.core import paths
from powerrig.core.errors import PowerrigError
from powerrig.gui.prefs import settings
from powerrig.gui.services.sweeps import PLANS, hms
from powerrig.gui.sweep_panel.charts import SweepCharts

COLUMNS = ["step", "PS", "workload", "status", "W", "MiB/s", "MiB/s/W"]


def _column(*parts) -> QWidget:
    """A widget of ``parts`` one above the other, no margins: layouts, widgets, or (widget, stretch)."""
    col = QWidget()
    lay = QVBoxLayout(col)
    lay.setContentsMargins(0, 0, 0, 0)
    for p in parts:
        if isinstance(p, tuple):
            lay.addWidget(*p)
        elif isinstance(p, QWidget):
            lay.addWidget(p)
        else:
            lay.addLayout(p)
    return col


class SweepPanel(QWidget):
    def __init__(self, svc, parent=None):
        super().__init__(parent)
        self.core, self.sweeps = svc.core, svc.sweeps
        self.runner = svc.sweeps.runner
        self.plan = None
        self.store = None
        self.run_id: int | None = None
        self._resumable: bool | None = None   # did the last run here leave steps to do (None: not known)
        self.rows: list[dict] = []
        self._mib_seen = self._mib_before = None
        self.open_url = QDesktopServices.openUrl           # the desktop's browser (tests watch the call)
        s = settings()
        self.plan_box = QComboBox()
        self.plan_box.setMinimumContentsLength(18)
        for p in sorted(PLANS.glob("*.toml")) if PLANS.is_dir() else []:
            self.plan_box.addItem(p.stem, str(p))
        self.browse = QPushButton("Open plan...")
        self.db = QLineEdit(str(s.value("sweep/results_db", paths.results_db())))     # the store every command shares
        self.out_root = QLineEdit(str(s.value("sweep/out_dir", paths.sweeps_dir())))
        self.about = QLabel("")
        self.about.setWordWrap(True)
        self.run_button = QPushButton("Run")
        self.pause_button = QPushButton("Pause")
        self.stop_button = QPushButton("Stop")
        self.resume_button = QPushButton("Resume")
        self.report_button = QPushButton("Open report")
        self.progress_bar = QProgressBar()
        self.progress_bar.setFormat("%v of %m steps")
        self.state = QLabel("no sweep running")
        self.state.setWordWrap(True)
        self.live = QLabel("")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.charts = SweepCharts()
        pick = QHBoxLayout()
        pick.addWidget(self.plan_box, 1)
        pick.addWidget(self.browse)
        form = QFormLayout()
        form.addRow("plan", pick)
        form.addRow("results", self.db)
        form.addRow("output", self.out_root)
        buttons = QHBoxLayout()
        for b in (self.run_button, self.pause_button, self.stop_button, self.resume_button, self.report_button):
            buttons.addWidget(b)
        controls = _column(form, self.about, self.live, (self.table, 1))
        split = QSplitter(Qt.Horizontal)          # controls and results left, the charts right
        # the plan and the results scroll on their own: a short dock (1366x768) shows the charts whole
        # beside them, not their top third in a panel scrolled as tall as the controls
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        scroll.setWidget(controls)
        scroll.setMinimumWidth(controls.minimumSizeHint().width() + scroll.verticalScrollBar().sizeHint().width())
        # ... while the buttons, the progress and the state stay above them: scrolled down to the results
        # table, Stop and Open report had been half hidden (docs/img/sweep-done.png, 30 Nov)
        split.addWidget(_column(buttons, self.progress_bar, self.state, (scroll, 1)))
        split.addWidget(self.charts)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([600, 900])                # the table's seven columns fit beside the charts
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(split)
        self.plan_box.currentIndexChanged.connect(lambda _i: self.load_plan(self.plan_box.currentData()))
        self.browse.clicked.connect(self._browse)
        self.run_button.clicked.connect(lambda: self.start(resume=False))
        self.resume_button.clicked.connect(self._resume_clicked)
        self.pause_button.clicked.connect(self.runner.pause)
        self.pause_button.clicked.connect(lambda: self.state.setText("pausing after this step ..."))
        self.stop_button.clicked.connect(self.runner.stop)
        self.stop_button.clicked.connect(lambda: self.state.setText("stopping after this step ..."))
        self.report_button.clicked.connect(self.open_report)
        self.runner.progress.connect(self._progress)
        self.runner.finished.connect(self._finished)
        self._buttons()
        last = s.value("sweep/plan")
        if last and Path(str(last)).is_file():
            self.load_plan(str(last))
        elif self.plan_box.count():
            self.load_plan(self.plan_box.currentData())

    # -- the plan -------------------------------------------------------------------------------------
    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open sweep plan", str(PLANS), "Sweep plans (*.toml)")
        if path:
            self.load_plan(path)

    def load_plan(self, path) -> bool:
        """Read and check a plan (a short TOML read); a bad plan is one line in the panel, nothing runs."""
        if not path:
            return False
        try:
            plan = self.sweeps.load_plan(path)
        except PowerrigError as e:
            self.plan = None
            self.about.setText(f"this plan cannot run: {e}")
            self.core.error.emit(str(e))
            self._buttons()
            return False
        self.plan = plan
        self._resumable = None                # the store may hold an unfinished run of it: Resume says
        n = len(plan.steps())
        if self.plan_box.findData(str(path)) < 0:
            self.plan_box.blockSignals(True)
            self.plan_box.addItem(Path(path).stem, str(path))
            self.plan_box.blockSignals(False)
        self.plan_box.blockSignals(True)
        self.plan_box.setCurrentIndex(self.plan_box.findData(str(path)))
        self.plan_box.blockSignals(False)
        self.about.setText(self.sweeps.describe(plan))
        self.progress_bar.setRange(0, n)
        self.progress_bar.setValue(0)
        settings().setValue("sweep/plan", str(path))
        self._buttons()
        return True

    # -- running --------------------------------------------------------------------------------------
    def _open_store(self):
        db = self.db.text().strip() or str(paths.results_db())
        self.store = self.sweeps.open_store(db)
        s = settings()
        s.setValue("sweep/results_db", db)
        s.setValue("sweep/out_dir", self.out_root.text().strip())
        return self.store

    def start(self, resume: bool = False) -> None:
        if self.plan is None:
            self.core.error.emit("open a plan first (the list, or Open plan...)")
            return
        try:
            store = self._open_store()
        except PowerrigError as e:
            self.core.error.emit(str(e))
            return
        if not self.sweeps.start(self.plan, store, self.out_root.text().strip() or str(paths.sweeps_dir()), resume=resume):
            return
        if not resume:
            self.rows = []
            self._fill([])
        self.state.setText("resuming ..." if resume else "starting the rig ...")
        self._buttons()

    def _resume_clicked(self) -> None:
        if self.runner.running and self.runner.paused:
            self.runner.unpause()
        else:
            self.start(resume=True)

    def _progress(self, d: dict) -> None:
        k = d["kind"]
        if k == "live":
            self._mib_seen = d.get("mib_s")
        if d.get("run") is not None:
            self.run_id = d["run"]
        if k == "start":
            self.progress_bar.setRange(0, d["steps"])
            self.progress_bar.setValue(d["done"])
            self.state.setText(f"run {d['run']}: {d['steps']} steps, {d['done']} already done, ETA {hms(d['eta_s'])}")
            self.refresh_results()
        elif k == "step":
            self._mib_before = self._mib_seen
            self.progress_bar.setValue(d["n"] - 1)
            self.state.setText(f"step {d['n']} of {d['m']}: {d['name']}; elapsed {hms(d['elapsed_s'])}, "
                               f"ETA {hms(d['eta_s'])}")
        elif k == "live":
            w, m = d.get("watts"), d.get("mib_s")
            if m == self._mib_before:
                m = None                          # the engine's figure of an earlier step: none yet in this one
            self.live.setText(f"{d['name']}: {w or 0:.2f} W" + (f", {m:.0f} MiB/s" if m else "")
                              + (f", frames lost: {d['lost_frames']}" if d.get("lost_frames") else ""))
        elif k == "step-done":
            self.progress_bar.setValue(d["n"])
            self.state.setText(f"step {d['n']} of {d['m']} {d['name']}: {d['status']}; ETA {hms(d['eta_s'])}")
            self.refresh_results()
        elif k == "paused":
            self.state.setText(f"paused before step {d['n']} of {d['m']} ({d['name']}); Resume goes on")
        elif k == "resumed":
            self.state.setText("going on ...")
        elif k == "note":
            self.live.setText(d["text"])
        elif k == "done":
            self.progress_bar.setValue(self.progress_bar.maximum())
            self._verdict_line = (d.get("verdicts") or {}).get("line")     # the engine's summary (analysis/verdicts.py)
        self._buttons()

    def _finished(self, d: dict) -> None:
        if d.get("run") is not None:
            self.run_id = d["run"]
        self._resumable = d["state"] != "done"    # a finished run has nothing left to resume
        if d["state"] == "done":
            line = getattr(self, "_verdict_line", None)
            self.state.setText(f"run {self.run_id} done in {self.progress_bar.maximum()} steps"
                               + (f"; verdicts: {line}" if line else ""))
        elif d["state"] == "stopped":
            self.state.setText(f"run {self.run_id} stopped ({d['error']}); Resume continues it")
        else:
            self.state.setText(f"the sweep failed: {d['error']}")
            self.core.error.emit(f"the sweep failed: {d['error']}")
        self.live.setText("")
        self.refresh_results()
        self._buttons()

    def _buttons(self) -> None:
        running = self.runner.running
        self.run_button.setEnabled(self.plan is not None and not running)
        self.pause_button.setEnabled(running and not self.runner.paused)
        self.stop_button.setEnabled(running)
        self.resume_button.setEnabled(self.plan is not None and (self.runner.paused if running
                                                                 else self._resumable is not False))
        self.report_button.setEnabled(self.run_id is not None and not running)
        for w in (self.plan_box, self.browse, self.db, self.out_root):
            w.setEnabled(not running)

    # -- results ----------------------------------------------------------------------------------------
    def refresh_results(self) -> None:
        """Read the per-step summary from the store (a worker) and show it in the table and charts."""
        if self.store is None or self.run_id is None:
            return
        self.sweeps.step_summary(self.store, self.run_id, done=self._fill)

    def _fill(self, rows: list[dict]) -> None:
        self.rows = rows
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            vals = [r["name"], f"PS{r['power_state']}", r["workload"], r["status"], _f(r["W"], 3),
                    _f(r["MiB/s"], 1), _f(r["MiB/s/W"], 1)]
            for j, v in enumerate(vals):
                self.table.setItem(i, j, QTableWidgetItem(v))
        self.table.resizeColumnsToContents()
        self.charts.show_rows(rows)

    def open_report(self) -> None:
        """Write the sweep's HTML report (a worker) and open it in the desktop's browser."""
        if self.store is None or self.run_id is None:
            self.core.error.emit("run a sweep first; its report is written from the results store")
            return
        store, run_id = self.store, self.run_id

        def opened(path):
            self.report_path = Path(path)
            self.core.status.emit(f"report: {path}")
            self.open_url(QUrl.fromLocalFile(str(path)))
        self.sweeps.write_report(store, run_id, done=opened)


def _f(v, digits: int) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"
