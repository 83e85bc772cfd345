"""The application core: the workers that keep the GUI thread free, and the few signals every part of
the app shares (an error line, a status line, busy, a tick). It knows no domain: no interposer, drive,
capture or sweep (those are the services in ``gui/services/``, each with its own signals).

Everything slow runs on a worker (``Core.run``): opening a port, nvme-cli and fio, the analysis,
capture file reads. The GUI thread only paints. After pyjoulescope_ui's core, which is a bus, not the
application.
"""
from __future__ import annotations

import gc
import itertools
import logging
import traceback

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal

from powerrig.core.errors import PowerrigError

logger = logging.getLogger(__name__)


class _Results(QObject):
    """Carries every job's outcome from the worker threads to the GUI thread, keyed by job. One for the
    core's life, connected once: a QObject with its own connections per job cost a construction every
    live frame, and under PySide6 6.11 each per-job connection to a bound method (a signal's ``emit``,
    the default failure handler) stayed behind after its sender was gone, ~60 bytes each
    (benchmarks/bench_gui_jobs.py: ~135 bytes a job)."""
    done = Signal(object, object)      # key, result
    failed = Signal(object, str)       # key, one-line message


class _Job:
    """One call on a worker thread; the pool runs ``run`` (a plain callable: a QRunnable subclass handed
    to a pool is owned by C++ and its Python side was never freed, one leaked per live frame)."""

    def __init__(self, key, fn, args, kwargs, results: _Results):
        self.key, self.fn, self.args, self.kwargs, self.results = key, fn, args, kwargs, results

    def run(self) -> None:
        try:
            out = self.fn(*self.args, **self.kwargs)
        except PowerrigError as e:
            self._send("failed", str(e))
        except Exception as e:  # noqa: BLE001 - shown in the window, logged with its traceback
            logger.error("worker %s failed:\n%s", getattr(self.fn, "__name__", self.fn), traceback.format_exc())
            self._send("failed", f"{e.__class__.__name__}: {e}")
        else:
            self._send("done", out)

    def _send(self, outcome: str, value) -> None:
        try:
            getattr(self.results, outcome).emit(self.key, value)
        except RuntimeError:        # the core was deleted while this job ran (a shutdown that timed out)
            logger.debug("worker %s finished after its window closed; outcome dropped",
                         getattr(self.fn, "__name__", self.fn))


class Core(QObject):
    """Workers, the shared signals and the order things stop in."""
    error = Signal(str)               # a one-line message for the window
    status = Signal(str)              # progress text (the status bar)
    busy = Signal(bool)               # a connection is being made
    tick = Signal()                   # every TICK_MS on the GUI thread: the services announce new data here

    TICK_MS = 50

    def __init__(self, parent=None):
        super().__init__(parent)
        from pyqtgraph.util.garbage_collector import GarbageCollector

        # Python's cyclic GC may otherwise run in a worker thread and free Qt objects there (plot items
        # removed on the GUI thread): Qt's connection mutex and the GIL then deadlock the two threads.
        # Collect on the GUI thread only, on a timer (pyqtgraph's recipe for exactly this).
        self._gc = GarbageCollector(interval=1.0)
        self.pool = QThreadPool.globalInstance()
        self.pool.setMaxThreadCount(max(4, self.pool.maxThreadCount()))
        self._serial_pools: list[QThreadPool] = []
        self._jobs: dict = {}                  # key -> a job's (done, failed, doing) until its outcome arrives
        self._job_ids = itertools.count()
        self._closed = False
        self._results = _Results(self)         # lives on the GUI thread: outcomes arrive there, queued
        self._results.done.connect(self._job_done)
        self._results.failed.connect(self._job_failed)
        self._stoppers: list = []
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.tick.emit)
        self._timer.start(self.TICK_MS)

    def run(self, fn, *args, done=None, failed=None, pool=None, doing: str | None = None, **kwargs) -> None:
        """Run fn on the worker pool (or ``pool``); ``done(result)`` / ``failed(message)`` are called on
        the GUI thread (default for failures: the ``error`` signal). ``doing`` ("opening x.jls"): the
        status bar says it while the job runs and says it failed if it fails, so a failure never leaves
        "opening ..." behind (``done`` says what came of it)."""
        if self._closed:                   # a widget's timer after shutdown: nothing may start
            return
        key = next(self._job_ids)
        self._jobs[key] = (done, failed, doing)
        if doing:
            self.status.emit(f"{doing} ...")
        (pool or self.pool).start(_Job(key, fn, args, kwargs, self._results).run)

    def _job_done(self, key, out) -> None:
        done, _failed, _doing = self._jobs.pop(key, (None, None, None))
        if done is not None:
            done(out)

    def _job_failed(self, key, msg: str) -> None:
        _done, failed, doing = self._jobs.pop(key, (None, None, None))
        if doing:
            self.status.emit(f"{doing} failed: {msg}")
        (failed or self.error.emit)(msg)

    def serial_pool(self) -> QThreadPool:
        """A pool of one thread: its jobs run one at a time, in the order asked (a drive's commands)."""
        p = QThreadPool(self)
        p.setMaxThreadCount(1)
        self._serial_pools.append(p)
        return p

    @property
    def pending(self) -> int:
        return len(self._jobs)

    def on_shutdown(self, fn) -> None:
        """``fn()`` runs at shutdown; the last registered runs first (what was built on a thing stops
        before it)."""
        self._stoppers.append(fn)

    def shutdown(self) -> None:
        """Leave nothing running: every service's own stop (the recording, the device, the virtual rig),
        then the workers."""
        self._timer.stop()
        self._gc.timer.stop()
        gc.enable()                       # automatic collection again once no Qt object is left to race
        for fn in reversed(self._stoppers):
            try:
                fn()
            except Exception:  # noqa: BLE001 - the others still stop
                logger.exception("stopping %s", getattr(fn, "__qualname__", fn))
        self._stoppers.clear()
        for p in self._serial_pools:
            p.waitForDone(30_000)
        self.pool.waitForDone(10_000)
        self._jobs.clear()                # a job still running on a widget's own pool reports to no one:
        self._closed = True               # its widget may be deleted by the time the result is queued
