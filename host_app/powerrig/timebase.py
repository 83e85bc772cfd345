"""One clock: device sample index <-> host UTC, fitted continuously from timestamped pings.

Each ping gives (host send time, device sample index when the device answered, host receive time).
The device stamp is placed at the midpoint of the round trip; pings with slow round trips (USB
scheduling, a busy host) carry more uncertainty and are rejected. A least-squares line over the
recent accepted pings gives offset and drift; the residual says how well the line fits.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class ClockModel:
    """utc = utc_ref + (index - index_ref) * period_s / (1 + drift_ppm * 1e-6)

    drift_ppm is how fast the device's crystal runs against the host clock (positive: fast).
    """
    index_ref: int
    utc_ref: float
    period_s: float = 4e-6
    drift_ppm: float = 0.0
    residual_us: float = float("nan")
    pings: int = 0

    def utc(self, index):
        """Host UTC (s) of a sample index (scalar or array)."""
        d = np.asarray(index, dtype=np.float64) - self.index_ref
        return self.utc_ref + d * self.period_s / (1.0 + self.drift_ppm * 1e-6)

    def index(self, utc):
        """Sample index (float) at a host UTC time (scalar or array)."""
        d = np.asarray(utc, dtype=np.float64) - self.utc_ref
        return self.index_ref + d * (1.0 + self.drift_ppm * 1e-6) / self.period_s

    @property
    def offset_s(self) -> float:
        """UTC of sample index 0 (the device's boot, as seen from the host)."""
        return float(self.utc(0))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["offset_s"] = self.offset_s
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ClockModel":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


class ClockFit:
    """Accumulates pings and refits the model; safe to feed from one thread and read from others."""

    def __init__(self, period_s: float = 4e-6, window: int = 400, rtt_quantile: float = 0.5):
        self.period_s = period_s
        self.window = window
        self.rtt_quantile = rtt_quantile
        self._pings: deque[tuple[float, float, float]] = deque(maxlen=window)
        self._lock = threading.Lock()
        self._model: ClockModel | None = None
        self.rejected = 0

    def add(self, t_send: float, index: float, t_recv: float) -> None:
        if t_recv < t_send:
            self.rejected += 1
            return
        with self._lock:
            self._pings.append((t_send, float(index), t_recv))
            self._model = None

    @property
    def count(self) -> int:
        return len(self._pings)

    def model(self) -> ClockModel | None:
        """The current fit, or None before the first ping."""
        with self._lock:
            if self._model is None and self._pings:
                self._model = self._fit(np.array(self._pings, dtype=np.float64))
            return self._model

    def _fit(self, a: np.ndarray) -> ClockModel:
        t_send, idx, t_recv = a[:, 0], a[:, 1], a[:, 2]
        rtt = t_recv - t_send
        if len(a) >= 8:
            keep = rtt <= np.quantile(rtt, self.rtt_quantile)
        else:
            keep = rtt <= rtt.min() * 2 + 1e-3
        t_mid = (t_send + t_recv)[keep] / 2
        idx = idx[keep]
        i_ref = int(idx[-1])
        t_ref = float(t_mid[-1])
        x = (idx - i_ref) * self.period_s
        y = t_mid - t_ref
        if len(x) >= 3 and np.ptp(x) > 0.5:
            slope, icpt = np.polyfit(x, y, 1)
        else:
            slope, icpt = 1.0, float(np.mean(y - x))
        resid = y - (icpt + slope * x)
        return ClockModel(index_ref=i_ref, utc_ref=t_ref + icpt, period_s=self.period_s,
                          drift_ppm=(1.0 / slope - 1.0) * 1e6, residual_us=float(np.sqrt(np.mean(resid ** 2)) * 1e6),
                          pings=int(keep.sum()))
