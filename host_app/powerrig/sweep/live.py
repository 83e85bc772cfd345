"""A running sweep's live state in the results store (which step, W now, when it should end), so the web
page of a lab shows every rig at once. Fed by the engine's own progress events; written on a thread of
its own, at most once a second and only the newest state, so a slow or locked database never holds up
the capture that produced the figure."""
from __future__ import annotations

import logging
import threading
import time

from powerrig.core.errors import PowerrigError

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
        self._dirty.set()
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._writer, name="powerrig-live-state", daemon=True)
            self._thread.start()

    def _writer(self) -> None:
        while self._dirty.wait(IDLE_EXIT_S):
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
            time.sleep(EVERY_S)
