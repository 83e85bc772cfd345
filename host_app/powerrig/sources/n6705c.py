"""A Keysight N6705C-class DC power analyzer as a measurement source: SMU modules supply the drive's
12 V and 3.3 V through a riser, and the mainframe's data logger (SENS:ELOG) reports each channel's
mean V and I every period, 20.48 us at best. powerrig logs at the capture's interval (1 ms by
default: one record per interval, so every period is one row) and stamps the logger's trigger with
the host clock.

What it cannot give: instantaneous (4 us) samples, so no 100 us window peak (OCP PCM-2/PCM-3): those
checks say the sampling requirement was not met. Its accuracy is the modules' (N6781A class), declared
in ``sampling`` and stated in every capture.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np

from powerrig.core.errors import InstrumentError
from powerrig.core.names import GapReason
from powerrig.core.sampling import Accuracy, Sampling
from powerrig.instruments import open_analyzer
from powerrig.instruments.power_analyzer import MIN_TINT_S, PowerAnalyzer
from powerrig.instruments.scpi import NOT_A_NUMBER, OVERLOAD, reading_faults
from powerrig.sources.base import ClosingSource, HostClock, SourceStats, means_block

# N6781A two-quadrant SMU, data sheet: V 0.025 % + 1.8 mV (20 V range), I 0.025 % + 250 uA (3 A range)
SMU_ACCURACY = Accuracy(0.025, 1.8e-3, 0.025, 250e-6)
DEFAULT_CHANNELS = {"12V": 1, "3V3": 2}
FETCH_EVERY_S = 0.1


class N6705CSource(ClosingSource):
    """An open analyzer and the channel of each rail (``{"12V": 1, "3V3": 2}``)."""

    def __init__(self, analyzer: PowerAnalyzer, channels: dict[str, int] | None = None,
                 accuracy: Accuracy = SMU_ACCURACY):
        self.analyzer = analyzer
        self.channels = dict(channels or DEFAULT_CHANNELS)
        self.accuracy = accuracy
        ident = analyzer.identity
        self.description = {"device": ident.model, "serial": ident.serial, "firmware": ident.firmware,
                            "vendor": ident.manufacturer, "source": "n6705c", "resource": analyzer.resource,
                            "rails": list(self.channels), "channels": dict(self.channels)}
        self.clock = HostClock()
        self.sampling = self._sampling(1e-3)

    @classmethod
    def open(cls, resource: str, channels: dict[str, int] | None = None, backend: str | None = None) -> "N6705CSource":
        return cls(open_analyzer(resource, backend, "a power analyzer source"), channels)

    def _sampling(self, period_s: float) -> Sampling:
        return Sampling(f"{self.description['device']} data logger", period_s, False,
                        {r: self.accuracy for r in self.channels},
                        "mean V and I per logger period from SMU modules; no instantaneous samples")

    def stream(self, interval_us: int | None = None, rails: list[str] | None = None) -> "ElogStream":
        interval_us = int(interval_us or 1000)
        if interval_us * 1e-6 < MIN_TINT_S:
            raise InstrumentError(f"the {self.description['device']} logs every {MIN_TINT_S * 1e6:g} us at best; "
                                  f"choose an interval of at least {math.ceil(MIN_TINT_S * 1e6)} us")
        rails = list(rails or self.channels)
        unknown = [r for r in rails if r not in self.channels]
        if unknown:
            raise InstrumentError(f"rail {', '.join(unknown)} has no analyzer channel; map it, e.g. "
                                  f"n6705c:RESOURCE,{unknown[0]}=3")
        self.sampling = self._sampling(interval_us * 1e-6)
        return ElogStream(self, interval_us, tuple(rails))

    def calibration(self) -> dict:
        return {"reference": str(self.analyzer.identity), "accuracy": self.sampling.to_dict()["accuracy"]}

    def close(self) -> None:
        self.analyzer.close()


class ElogStream:
    """The data logger running on the rails' channels; blocks of the records fetched so far."""

    def __init__(self, src: N6705CSource, interval_us: int, rails: tuple):
        self.src = src
        self.interval_us = interval_us
        self.rails = rails
        self.period_s = interval_us * 1e-6
        self.stats = SourceStats()
        self.clock = src.clock
        self._chs = [src.channels[r] for r in rails]
        self._v = {c: [] for c in self._chs}
        self._i = {c: [] for c in self._chs}
        self._next = 0
        self._sums = np.zeros(len(rails))
        self._valid = 0
        self.invalid = {r: {q: {"overload": 0, "not_a_number": 0} for q in ("voltage", "current")} for r in rails}

    def start(self) -> None:
        t0 = self.src.analyzer.elog_start(self._chs, self.period_s)
        self.clock.set(t0, self.period_s)

    def stop(self) -> None:
        try:
            self.src.analyzer.elog_stop(self._chs)
        except InstrumentError as e:
            self.stop_error = str(e)

    def _fetch(self) -> None:
        for c in self._chs:
            v, i = self.src.analyzer.elog_fetch(c, 100_000)
            self._v[c].extend(v.tolist())
            self._i[c].extend(i.tolist())

    def blocks(self, seconds: float | None = None, stop: threading.Event | None = None, **_):
        """Blocks of whole records (every channel's) until ``seconds`` of logger time are covered."""
        end = None if seconds is None else int(round(seconds / self.period_s))
        while end is None or self._next < end:
            if stop is not None and stop.is_set():
                break
            time.sleep(FETCH_EVERY_S)
            self._fetch()
            n = min(len(self._v[c]) for c in self._chs)
            if end is not None:
                n = min(n, end - self._next)
            if n <= 0:
                continue
            v = np.column_stack([self._v[c][:n] for c in self._chs])
            a = np.column_stack([self._i[c][:n] for c in self._chs])
            for c in self._chs:
                del self._v[c][:n], self._i[c][:n]
            v, a = self._mark_invalid(v, "voltage"), self._mark_invalid(a, "current")
            b = means_block(self._next, self.rails, v, a, self.period_s)
            self._count_gaps(b)
            self._next += n
            self.stats.intervals += int(b.valid.sum())        # as the interposer counts: gap rows apart
            self._sums += np.where(b.valid[:, None], b.p, 0.0).sum(axis=0)
            self._valid += int(b.valid.sum())
            yield b

    def _mark_invalid(self, x: np.ndarray, quantity: str) -> np.ndarray:
        """Records with no reading (the logger's overload 9.9E37 or not-a-number 9.91E37) -> NaN, counted."""
        f = reading_faults(x)
        if not f.any():
            return x
        for k, r in enumerate(self.rails):
            self.invalid[r][quantity]["overload"] += int((f[:, k] == OVERLOAD).sum())
            self.invalid[r][quantity]["not_a_number"] += int((f[:, k] == NOT_A_NUMBER).sum())
        return np.where(f > 0, np.nan, x)

    def _count_gaps(self, b) -> None:
        """Rows without a valid reading are a gap, as the interposer's lost intervals are: NaN, a gap record
        and annotation ("invalid") from the writer, counted in the stream's stats."""
        if b.valid.all():
            return
        b.flags["gap"] = GapReason.INVALID
        bad = ~b.valid
        edges = np.flatnonzero(np.diff(np.concatenate(([0], bad.view(np.int8), [0]))))
        for s, e in zip(edges[::2], edges[1::2]):
            self.stats.gaps += 1
            self.stats.gap_intervals += int(e - s)
            self.stats.gap_positions.append((b.first_index + int(s), int(e - s), GapReason.INVALID.value))

    def mean_power(self) -> dict:
        m = self._sums / max(1, self._valid)
        return {r: float(x) for r, x in zip(self.rails, m)} | {"total": float(m.sum())}

    def summary(self) -> dict:
        return {"source": "n6705c", "resource": self.src.analyzer.resource, "interval_us": self.interval_us,
                "rails": list(self.rails), "channels": {r: c for r, c in zip(self.rails, self._chs)},
                "first_index": 0, "end_index": self._next, "samples": self._valid, "gaps": self.stats.gaps,
                "gap_intervals": self.stats.gap_intervals, "invalid_readings": self.invalid,
                "dropped_frames": 0, "crc_errors": 0, "mean_power_w": self.mean_power(),
                "sampling": self.src.sampling.to_dict()}
