"""The interposer's mean V and I per rail over a host-clock window, from a stream running in the
background: how reference readings and interposer readings meet on one clock."""
from __future__ import annotations

import collections
import threading
import time

import numpy as np

from powerrig.core.errors import InstrumentError, PowerrigError



class WindowError(PowerrigError):
    """The interposer did not cover a reference window (frames lost, or it fell behind)."""


MIN_PINGS = 10      # a clock model from fewer round trips can be off by milliseconds


class StreamWindows:
    """Streams in a thread and answers ``mean(t0, t1)``: the interposer's (V, I) per rail over the
    intervals whose centre falls in [t0, t1] host UTC, mapped with the connection's clock model."""

    def __init__(self, dev, interval_us: int = 1000, keep_s: float = 30.0):
        self.dev = dev
        self.stream = dev.stream(interval_us=interval_us)
        self.stream.start()
        self.rails = list(self.stream.rails)
        self._rows: collections.deque = collections.deque(maxlen=max(4, int(keep_s / (interval_us * 1e-6) / 500)))
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="calibration-stream", daemon=True)
        self._thread.start()
        self._wait_for_data(timeout=5.0)

    def _wait_for_data(self, timeout: float) -> None:
        """A reference window must not start before the interposer's data does: the two means would
        then cover different spans."""
        deadline = time.time() + timeout
        while not (self._rows and (m := self.dev.clock.model()) is not None and m.pings >= MIN_PINGS):
            if self.error is not None or time.time() > deadline:
                self.close()
                raise InstrumentError(f"the interposer sent no data within {timeout:g} s of starting its stream"
                                      + (f": {self.error}" if self.error else ""))
            time.sleep(0.02)

    def _run(self) -> None:
        try:
            for b in self.stream.blocks(max_rows=500):
                centre = b.index + b.interval_samples / 2
                self._rows.append((centre, b.v.copy(), b.i.copy(), b.p.copy(), b.valid.copy()))
                if self._stop.is_set():
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the caller of mean()
            self.error = e

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.stream.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def mean(self, t0: float, t1: float, timeout: float = 5.0,
             min_coverage: float = 0.97) -> dict[str, tuple[float, float, float]]:
        """(mean V, mean I, mean of instantaneous V*I) per rail over the window."""
        model = None
        deadline = time.time() + timeout
        while True:
            if self.error is not None:
                raise InstrumentError(f"the interposer stream failed during calibration: {self.error}")
            model = self.dev.clock.model()
            if model is not None and self._rows and model.utc(self._rows[-1][0][-1]) >= t1:
                break
            if time.time() > deadline:
                raise WindowError(f"the interposer did not cover the window ending {t1:.3f} within {timeout:g} s")
            time.sleep(0.02)
        rows = list(self._rows)
        idx = np.concatenate([r[0] for r in rows])
        v = np.concatenate([r[1] for r in rows])
        i = np.concatenate([r[2] for r in rows])
        p = np.concatenate([r[3] for r in rows])
        ok = np.concatenate([r[4] for r in rows])
        utc = model.utc(idx)
        sel = (utc >= t0) & (utc <= t1)
        good = sel & ok
        want = (t1 - t0) / (self.stream.interval_us * 1e-6)
        if good.sum() < min_coverage * want:
            raise WindowError(f"the interposer covered {good.sum()} of {want:.0f} intervals of a reference window "
                                "(lost frames); the point is not used")
        return {r: (float(v[good, k].mean()), float(i[good, k].mean()), float(p[good, k].mean()))
                for k, r in enumerate(self.rails)}
