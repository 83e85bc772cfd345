"""Joulescopes as a measurement source: one unit per rail (a JS220 in series with the riser's 12 V,
another with its 3.3 V), through the official driver's v1 API (pyjoulescope_driver: ``Driver``,
``device_paths``, ``open``, ``publish``, ``subscribe`` to ``s/i/!data`` and ``s/v/!data``).

Synchronized: each unit's samples carry its own time map (device counter -> UTC, kept by the
driver); every interval's edges are placed in UTC once and mapped into each unit's counter, so
crystals that drift apart never shift one rail against another by more than a sample. The intervals
are reduced on the host the way the interposer reduces on the device: mean V, I and V*I, min/max of
instantaneous power and the highest 100 us window mean, so the OCP peak checks hold at 1 us sampling.
"""
from __future__ import annotations

import queue
import threading
import time

import numpy as np

from powerrig.core.blocks import IntervalBlock
from powerrig.core.errors import InstrumentError
from powerrig.core.names import GapReason
from powerrig.core.reduce import reduce_intervals
from powerrig.core.sampling import Accuracy, Sampling
from powerrig.sources.base import ClosingSource, HostClock, SourceStats

TIME64_SECOND = 1 << 30          # pyjoulescope_driver.time64: UTC in 2**-30 s since 2018-01-01
TIME64_EPOCH_UNIX = 1514764800   # 2018-01-01T00:00:00Z
SAMPLE_RATE = 1_000_000          # h/fs: 1 us samples
PEAK_WINDOW_S = 100e-6
# JS220 data sheet: current +-(0.1 % + 1.5 uA .. on the 10 A range, +-(0.1 % + 1 mV) voltage (15 V range)
JS220_ACCURACY = Accuracy(0.1, 1e-3, 0.1, 150e-6)


def unix_of_time64(t64) -> float:
    return t64 / TIME64_SECOND + TIME64_EPOCH_UNIX


def time64_of_unix(t: float) -> int:
    return int(round((t - TIME64_EPOCH_UNIX) * TIME64_SECOND))


class _Unit:
    """One Joulescope's samples and time map (counter at the output rate -> UTC)."""

    def __init__(self, rail: str, path: str):
        self.rail, self.path = rail, path
        self.q: queue.Queue = queue.Queue()
        self.i = np.empty(0, np.float32)
        self.v = np.empty(0, np.float32)
        self.first: int | None = None       # sample id (output rate) of i[0]
        self.pending_v: dict[int, np.ndarray] = {}
        self.pending_i: dict[int, np.ndarray] = {}
        self.tmap: dict | None = None

    def on_data(self, topic: str, value: dict) -> None:   # driver thread: hand over, nothing else
        self.q.put((topic, value))

    def drain(self) -> None:
        while True:
            try:
                topic, value = self.q.get_nowait()
            except queue.Empty:
                return
            dec = int(value.get("decimate_factor", 1))
            sid = int(value["sample_id"]) // dec
            tm = value.get("time_map")
            if tm:
                self.tmap = {"t": int(tm["offset_time"]), "c": int(tm["offset_counter"]) / dec,
                             "rate": float(tm["counter_rate"]) / dec}
            (self.pending_i if topic.endswith("s/i/!data") else self.pending_v)[sid] = np.asarray(value["data"], np.float32)
            for s in sorted(set(self.pending_i) & set(self.pending_v)):
                ci, cv = self.pending_i.pop(s), self.pending_v.pop(s)
                n = min(len(ci), len(cv))
                if self.first is None:
                    self.first = s
                end = self.first + len(self.i)
                if s > end:          # samples the driver lost: NaN, so the intervals touching them are gaps
                    fill = np.full(s - end, np.nan, np.float32)
                    self.i, self.v = np.concatenate([self.i, fill]), np.concatenate([self.v, fill])
                elif s < end:
                    continue
                self.i, self.v = np.concatenate([self.i, ci[:n]]), np.concatenate([self.v, cv[:n]])

    def sample_at(self, utc_unix: np.ndarray) -> np.ndarray:
        """Fractional sample id at host UTC (unix seconds), from the unit's time map."""
        tm = self.tmap
        return tm["c"] + (np.asarray(utc_unix) - unix_of_time64(tm["t"])) * tm["rate"]

    def utc_of(self, sample_id: float) -> float:
        tm = self.tmap
        return unix_of_time64(tm["t"]) + (sample_id - tm["c"]) / tm["rate"]

    def drop_before(self, sid: int) -> None:
        k = sid - self.first
        if k > 0:
            self.i, self.v, self.first = self.i[k:], self.v[k:], sid


class JoulescopeSource(ClosingSource):
    """One unit per rail: ``units`` maps rail -> the driver's device path (u/js220/003512)."""

    def __init__(self, driver, units: dict[str, str], accuracy: Accuracy = JS220_ACCURACY):
        self.driver = driver
        self.units = dict(units)
        self.description = {"device": "Joulescope", "source": "joulescope", "serial": ",".join(
            p.rsplit("/", 1)[-1] for p in units.values()), "units": dict(units), "rails": list(units)}
        self.clock = HostClock()
        self.sampling = Sampling("Joulescope JS220 (one per rail)", 1.0 / SAMPLE_RATE, True,
                                 {r: accuracy for r in units},
                                 "1 us V and I per unit; intervals and 100 us peaks reduced on the host")

    @classmethod
    def open(cls, serials: dict[str, str], driver=None) -> "JoulescopeSource":
        """Find each rail's unit by serial number among the connected Joulescopes and open it."""
        if driver is None:
            try:
                from pyjoulescope_driver import Driver
            except ImportError:
                raise InstrumentError("the Joulescope source needs pyjoulescope_driver; install it with "
                                      "`pip install pyjoulescope_driver`") from None
            driver = Driver()
        paths = list(driver.device_paths())
        units = {}
        for rail, serial in serials.items():
            match = [p for p in paths if p.rsplit("/", 1)[-1].lstrip("0") == serial.lstrip("0")]
            if not match:
                raise InstrumentError(f"no Joulescope with serial {serial} for rail {rail}; connected: "
                                      f"{', '.join(paths) or 'none'}")
            units[rail] = match[0]
        for path in units.values():
            driver.open(path, "restore")
        return cls(driver, units)

    def stream(self, interval_us: int | None = None, rails: list[str] | None = None) -> "JoulescopeStream":
        interval_us = int(interval_us or 1000)
        rails = list(rails or self.units)
        unknown = [r for r in rails if r not in self.units]
        if unknown:
            raise InstrumentError(f"rail {', '.join(unknown)} has no Joulescope; name one, e.g. joulescope:{unknown[0]}=SERIAL")
        return JoulescopeStream(self, interval_us, tuple(rails))

    def calibration(self) -> dict:
        return {"accuracy": self.sampling.to_dict()["accuracy"]}

    def close(self) -> None:
        for path in self.units.values():
            try:
                self.driver.close(path)
            except Exception:  # noqa: BLE001 - an unplugged unit is closed already
                pass


class JoulescopeStream:
    """Every unit streaming current and voltage; blocks of intervals placed on one UTC grid."""

    def __init__(self, src: JoulescopeSource, interval_us: int, rails: tuple):
        self.src, self.interval_us, self.rails = src, interval_us, rails
        self.interval_s = interval_us * 1e-6
        self.n = int(round(self.interval_s * SAMPLE_RATE))
        self.window = int(round(PEAK_WINDOW_S * SAMPLE_RATE))
        self.stats = SourceStats()
        self.clock = src.clock
        self.units = [_Unit(r, src.units[r]) for r in rails]
        self._t0: float | None = None
        self._row = 0

    def start(self) -> None:
        d = self.src.driver
        for u in self.units:
            d.publish(f"{u.path}/h/fs", SAMPLE_RATE)
            for sig in ("i", "v"):
                d.subscribe(f"{u.path}/s/{sig}/!data", "pub", u.on_data)
                d.publish(f"{u.path}/s/{sig}/ctrl", 1)

    def stop(self) -> None:
        d = self.src.driver
        for u in self.units:
            for sig in ("i", "v"):
                try:
                    d.publish(f"{u.path}/s/{sig}/ctrl", 0)
                    d.unsubscribe(f"{u.path}/s/{sig}/!data", u.on_data)
                except Exception:  # noqa: BLE001 - a unit that vanished has stopped
                    pass

    def _ready_rows(self) -> int:
        """Rows every unit has all samples for (their edges mapped through each unit's time map)."""
        for u in self.units:
            u.drain()
        if any(u.first is None or u.tmap is None or len(u.i) == 0 for u in self.units):
            return 0
        if self._t0 is None:         # the grid starts where every unit has data
            self._t0 = max(u.utc_of(u.first) for u in self.units) + 1.0 / SAMPLE_RATE
            self.clock.set(self._t0, self.interval_s)
        rows = []
        for u in self.units:
            last = u.first + len(u.i)
            rows.append(int((u.utc_of(last) - self._t0) / self.interval_s) - self._row)
        return max(0, min(rows))

    def _reduce(self, u: _Unit, m: int) -> dict:
        """The next ``m`` rows of one unit: edges placed in UTC, mapped into its counter."""
        edges_utc = self._t0 + (self._row + np.arange(m + 1)) * self.interval_s
        edges = np.round(u.sample_at(edges_utc)).astype(np.int64) - u.first
        lo = max(0, int(edges[0]) - self.window + 1)          # history for the first row's peak windows
        cols = reduce_intervals(u.v[lo:edges[-1]], u.i[lo:edges[-1]], edges - lo, self.window)
        u.drop_before(u.first + int(edges[-1]) - self.window)
        return cols

    def blocks(self, seconds: float | None = None, stop: threading.Event | None = None, **_):
        end = None if seconds is None else int(round(seconds / self.interval_s))
        while end is None or self._row < end:
            if stop is not None and stop.is_set():
                break
            m = self._ready_rows()
            if end is not None:
                m = min(m, end - self._row)
            if m <= 0:
                time.sleep(0.02)
                continue
            cols = [self._reduce(u, m) for u in self.units]
            v, i, p, pmin, pmax, peak = (np.column_stack([c[k] for c in cols])
                                         for k in ("v", "i", "p", "p_min", "p_max", "p_peak"))
            b = IntervalBlock(self._row, 1, self.interval_s, self.rails, v, i, p, pmin, pmax, peak,
                              np.zeros(m, np.uint8), np.zeros(m, np.uint8), np.isfinite(p).all(axis=1))
            self._count_gaps(b)
            self._row += m
            self.stats.intervals += int(b.valid.sum())
            yield b

    def _count_gaps(self, b: IntervalBlock) -> None:
        """Intervals holding a sample the unit marked invalid (NaN) or the driver lost are a gap, as the
        interposer's lost intervals are: NaN rows, a gap record and annotation, counted in the stats."""
        bad = ~b.valid
        if not bad.any():
            return
        b.flags["gap"] = GapReason.INVALID
        edges = np.flatnonzero(np.diff(np.concatenate(([0], bad.view(np.int8), [0]))))
        for s, e in zip(edges[::2], edges[1::2]):
            self.stats.gaps += 1
            self.stats.gap_intervals += int(e - s)
            self.stats.gap_positions.append((b.first_index + int(s), int(e - s), GapReason.INVALID.value))
        for name in ("v", "i", "p", "p_min", "p_max", "p_peak"):       # a gap row is NaN on every rail
            getattr(b, name)[bad] = np.nan

    def summary(self) -> dict:
        return {"source": "joulescope", "units": {u.rail: u.path for u in self.units}, "interval_us": self.interval_us,
                "rails": list(self.rails), "first_index": 0, "end_index": self._row, "samples": self._row,
                "gaps": self.stats.gaps, "gap_intervals": self.stats.gap_intervals, "dropped_frames": 0, "crc_errors": 0,
                "sampling": self.src.sampling.to_dict()}
