"""A running sweep's live state in the results store (which step, W now, when it should end), so the web
page of a lab shows every rig at once. Fed by the engine's own progress events; written on a thread of
its own, at most once a second and only the newest state, so a slow or locked database never holds up
the capture that produced the figure."""
from __future__ import annotations

import logging
import threading
import time

from powerrig.core.errors import PowerrigError
from powerrig.results.store import ATTEMPT_S

logger = logging.getLogger(__name__)
EVERY_S = 1.0
IDLE_EXIT_S = 30.0         # the writer thread ends after this long without an event (a sweep that died)


class LiveState:
    def __init__(self, store):
        self.store = store
        self._state: dict = {}
        self._run: int | None = None
        self._dirty = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._finished = False
        self._stop = threading.Event()      # the sweep has ended: the writer stops, end() clears the row

    def __call__(self, d: dict) -> None:
        """One progress event of the engine (kinds start, step, live, step-done, done)."""
        kind, now = d.get("kind"), time.time()
        with self._lock:
            if d.get("run") is not None:
                self._run = d["run"]
            st = self._state
            if kind in ("start", "step", "step-done") and d.get("eta_s") is not None:
                st["ends_utc"] = now + d["eta_s"]
            if kind == "start":
                st.update(station=d.get("station"), n=d.get("done", 0), m=d.get("steps"))
            elif kind == "step":
                st.update(n=d["n"], m=d["m"], step_key=d["key"], step_name=d["name"], watts=None, mib_s=None)
            elif kind == "live":
                st.update(watts=d.get("watts"), mib_s=d.get("mib_s"))
            elif kind == "done":
                self._finished = True
            else:
                return
        if self._stop.is_set():
            return
        self._dirty.set()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._writer, name="powerrig-live-state", daemon=True)
            self._thread.start()

    def end(self) -> None:
        """The sweep has ended (done, failed or interrupted): the writer thread is stopped and waited for,
        then the run's live row is removed here, on the sweep's own thread, before the process can exit (a
        daemon thread dies with the process, and a sweep that failed never sends "done")."""
        self._stop.set()
        self._dirty.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(ATTEMPT_S + 1.0)           # a write in flight waits one attempt at most (record_live)
        with self._lock:
            run = self._run
        if run is None:
            return
        try:
            self.store.clear_live(run)
        except Exception as e:  # noqa: BLE001 - the live view is a convenience: never the sweep's error
            logger.info("live state of run %s not removed: %s", run, e)

    def _writer(self) -> None:
        while self._dirty.wait(IDLE_EXIT_S):
            if self._stop.is_set():
                return
            self._dirty.clear()
            with self._lock:
                run, state, finished = self._run, dict(self._state), self._finished
            if run is None:
                continue
            try:
                if finished:
                    self.store.clear_live(run)
                    return
                self.store.record_live(run, **state)
            except PowerrigError as e:          # the live view is a convenience: never the sweep's end
                logger.info("live state of run %s not recorded: %s", run, e)
            if self._stop.wait(EVERY_S):
                return
