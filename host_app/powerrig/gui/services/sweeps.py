"""Sweeps from the window: a plan read and checked, the results store, the sweep engine on a thread of
its own (pause and stop at step boundaries), the live view following its steps, the per-step table
and the HTML report.

The engine (powerrig.sweep.engine.Sweep) knows nothing of Qt: it calls back with progress dicts. This
runner turns them into a Qt signal and uses the callback's "step" event (sent before each step
starts) as the place to pause and to stop. A stop raises SweepStopped there; because it is a
KeyboardInterrupt the engine records the run as "interrupted", which is exactly what ``resume``
continues (the stored steps are skipped). A step is never cut in the middle: one capture per step,
and a step cut short would only be redone on resume.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from powerrig.core.errors import PowerrigError

logger = logging.getLogger(__name__)


class SweepStopped(KeyboardInterrupt):
    """The user pressed Stop: the engine marks the run interrupted (resumable)."""


class SweepRunner(QObject):
    """One sweep at a time. ``progress`` carries the engine's dicts plus {"kind": "paused"|"resumed"};
    ``finished`` carries {"state": "done"|"stopped"|"failed", "run": id or None, "error": str}."""
    progress = Signal(dict)
    finished = Signal(dict)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._thread: threading.Thread | None = None
        self._active = False        # cleared before ``finished`` is sent: the thread is still alive then
        self._go = threading.Event()
        self._go.set()
        self._stop = threading.Event()
        self.sweep = None
        self.run_id: int | None = None

    @property
    def running(self) -> bool:
        """True from start until ``finished`` is sent (not until the thread exits: a slot of ``finished``
        that asks must already see the sweep as over, or it leaves the panel's buttons disabled)."""
        return self._active

    @property
    def paused(self) -> bool:
        return not self._go.is_set()

    def start(self, plan, store, out_root: str | Path, resume: bool = False, on_block=None) -> None:
        """on_block: handed to the engine, which gives it every block its steps record (the live view)."""
        from powerrig.sweep.engine import Sweep
        if self.running:
            raise PowerrigError("a sweep is already running; stop it first")
        self._go.set()
        self._stop.clear()
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", plan.name).strip("-") or "sweep"
        out = Path(out_root) / f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.sweep = Sweep(plan, store, out, on_progress=self._on_progress, resume=resume, on_block=on_block)
        self._thread = threading.Thread(target=self._run, name="sweep", daemon=True)
        self._active = True
        self._thread.start()

    def pause(self) -> None:
        """Hold before the next step (the one running finishes and is stored)."""
        self._go.clear()

    def unpause(self) -> None:
        self._go.set()
        self.progress.emit({"kind": "resumed"})

    def stop(self) -> None:
        """End the sweep before its next step; the run stays resumable."""
        self._stop.set()
        self._go.set()

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    # -- the sweep thread -----------------------------------------------------------------------------
    def _on_progress(self, d: dict) -> None:
        if d.get("kind") == "start":
            self.run_id = d.get("run")
        if d.get("kind") == "step":
            if self._stop.is_set():
                raise SweepStopped(f"stopped before step {d['n']} of {d['m']}")
            if not self._go.is_set():
                self.progress.emit({"kind": "paused", "n": d["n"], "m": d["m"], "name": d["name"], "run": d["run"]})
                self._go.wait()
                if self._stop.is_set():
                    raise SweepStopped(f"stopped before step {d['n']} of {d['m']}")
        self.progress.emit(dict(d))

    def _run(self) -> None:
        try:
            run_id = self.sweep.run()
        except SweepStopped as e:
            end = {"state": "stopped", "run": self.sweep.run_id, "error": str(e)}
        except PowerrigError as e:
            end = {"state": "failed", "run": self.sweep.run_id, "error": str(e)}
        except Exception as e:  # noqa: BLE001 - shown in the panel, logged with its traceback
            logger.exception("the sweep failed")
            end = {"state": "failed", "run": self.sweep.run_id, "error": f"{e.__class__.__name__}: {e}"}
        else:
            self.run_id = run_id
            end = {"state": "done", "run": run_id, "error": ""}
        self._active = False
        self.finished.emit(end)


PLANS = Path(__file__).resolve().parents[4] / "fixtures" / "plans"


def hms(s) -> str:
    from powerrig.sweep.display import hms as _hms
    return _hms(s)


class Sweeps(QObject):
    """One sweep at a time for the window (``runner``: its thread, signals and pause/stop)."""

    def __init__(self, core, connection, recording, parent=None):
        super().__init__(parent)
        self.core, self.connection, self.recording = core, connection, recording
        self.runner = SweepRunner(self)
        self.runner.finished.connect(lambda _d: recording.sweep_ended())
        core.on_shutdown(self._stop)

    @staticmethod
    def load_plan(path):
        """The plan at ``path``, checked (PowerrigError: one line saying what and where)."""
        from powerrig.sweep.plan import load
        return load(path)

    @staticmethod
    def describe(plan) -> str:
        return (f"{plan.name}: {len(plan.steps())} steps (PS {', '.join(map(str, plan.power_states))}; "
                f"{len(plan.workloads)} workloads), about {hms(plan.estimate_s())}; rig {plan.rig.port}")

    @staticmethod
    def open_store(db: str):
        from powerrig.results import ResultStore
        if "://" not in db:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        return ResultStore(db)

    def start(self, plan, store, out_root: str | Path, resume: bool = False) -> bool:
        """Run (or resume) ``plan``; the window lets go of the plan's interposer first, and the live view
        follows the sweep's steps. False (with the error said) when it cannot start."""
        if self.connection.port and self.connection.port == plan.rig.port:
            self.connection.disconnect("the sweep uses this interposer")
        if self.runner.running:
            self.core.error.emit("a sweep is already running; stop it first")
            return False
        try:
            on_block = self.recording.follow_sweep(lambda: self.runner.sweep)
            self.runner.start(plan, store, out_root, resume=resume, on_block=on_block)
        except PowerrigError as e:
            self.recording.sweep_ended()
            self.core.error.emit(str(e))
            return False
        return True

    def step_summary(self, store, run_id: int, done) -> None:
        """The run's per-step summary from the store, on a worker."""
        from powerrig.results.tables import step_summary
        self.core.run(lambda: step_summary(store, run_id), done=done)

    def write_report(self, store, run_id: int, done) -> None:
        from powerrig.results.sweep_report import write_sweep_report
        self.core.run(lambda: write_sweep_report(store, run_id), done=done, doing=f"writing the report of run {run_id}")

    def _stop(self) -> None:
        if self.runner.running:
            self.runner.stop()
            self.runner.wait(60)
