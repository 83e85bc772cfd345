"""Streaming statistics of one series over one phase: exact energy, moments, extremes, percentiles.

Fed chunk by chunk so memory does not grow with capture length: moments use compensated sums,
percentiles keep the values while a phase is short and switch to a fine histogram (``BINS`` bins
across the phase's known range) when it is long, so their resolution is (max - min) / BINS.
"""
from __future__ import annotations

import math

import numpy as np

BINS = 1 << 16
EXACT_LIMIT = 1 << 18          # values kept for exact percentiles (about 4 minutes at 1 ms)
PERCENTILES = (1, 5, 50, 95, 99)


class KahanSum:
    """Neumaier-compensated sum of float partial sums: 10 hours of 1 ms energies without drift."""

    __slots__ = ("s", "c")

    def __init__(self):
        self.s = 0.0
        self.c = 0.0

    def add(self, x: float) -> None:
        t = self.s + x
        if abs(self.s) >= abs(x):
            self.c += (self.s - t) + x
        else:
            self.c += (x - t) + self.s
        self.s = t

    @property
    def value(self) -> float:
        return self.s + self.c


class SeriesStats:
    """Feed values (NaN = lost) and edge weights; read mean, std, min, max, percentiles, energy."""

    def __init__(self, interval_s: float, value_range: tuple[float, float] | None = None):
        self.interval_s = interval_s
        self.n = 0                  # valid full intervals
        self.lost = 0               # NaN intervals
        self._sum = KahanSum()
        self._sumsq = KahanSum()
        self._energy_intervals = KahanSum()   # sum of weight * value (in interval units)
        self.min = math.inf
        self.max = -math.inf
        self._values: list[np.ndarray] | None = []
        self._kept = 0
        self._hist: np.ndarray | None = None
        self._range = value_range
        self._shift = None          # first value: moments are summed about it (no cancellation)

    def feed(self, x: np.ndarray) -> None:
        """Values of intervals wholly inside the phase (float32 or float64; NaN = lost)."""
        if not len(x):
            return
        x = np.asarray(x)
        total = float(np.sum(x, dtype=np.float64))
        v = x
        if math.isnan(total):                      # only gappy chunks pay for the mask
            v = x[~np.isnan(x)]
            self.lost += len(x) - len(v)
            if not len(v):
                return
            total = float(np.sum(v, dtype=np.float64))
        n = len(v)
        if self._shift is None:
            self._shift = float(v[0])
        d = np.subtract(v, self._shift, dtype=np.float64)
        self._sum.add(total - n * self._shift)
        self._sumsq.add(float(np.dot(d, d)))
        self._energy_intervals.add(total)
        self.n += n
        self.min = min(self.min, float(v.min()))
        self.max = max(self.max, float(v.max()))
        self._keep(v)

    def feed_edge(self, value: float, weight: float) -> None:
        """A partly covered edge interval: counts toward energy only, by the covered fraction."""
        if weight > 0 and not math.isnan(value):
            self._energy_intervals.add(value * weight)

    def _keep(self, v: np.ndarray) -> None:
        if self._values is not None:
            self._values.append(v.copy())
            self._kept += len(v)
            if self._kept <= EXACT_LIMIT:
                return
            allv = np.concatenate(self._values)
            self._values = None
            lo, hi = self._range or (float(allv.min()), float(allv.max()))
            if not hi > lo:
                hi = lo + 1e-9
            pad = (hi - lo) * (0.0 if self._range else 0.5)
            self._edges = (lo - pad, hi + pad)
            self._hist = np.zeros(BINS, np.int64)
            self._bin(allv)
            return
        self._bin(v)

    def _bin(self, v: np.ndarray) -> None:
        lo, hi = self._edges
        k = ((v - lo) * (BINS / (hi - lo))).astype(np.int64)
        np.clip(k, 0, BINS - 1, out=k)
        self._hist += np.bincount(k, minlength=BINS)

    # ---- results ------------------------------------------------------------------------------------
    @property
    def mean(self) -> float:
        return self._shift + self._sum.value / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        if self.n < 2:
            return math.nan if self.n == 0 else 0.0
        m = self._sum.value / self.n
        return math.sqrt(max(0.0, self._sumsq.value / self.n - m * m))

    @property
    def energy_j(self) -> float:
        """Energy of the valid data (J): sum of mean power x time, edge intervals by their fraction."""
        return self._energy_intervals.value * self.interval_s

    def percentiles(self, qs=PERCENTILES) -> dict[str, float]:
        if self.n == 0:
            return {f"p{q:g}": math.nan for q in qs}
        if self._values is not None:
            v = np.concatenate(self._values)
            return {f"p{q:g}": float(x) for q, x in zip(qs, np.percentile(v, qs))}
        c = np.cumsum(self._hist)
        lo, hi = self._edges
        w = (hi - lo) / BINS
        out = {}
        for q in qs:
            target = q / 100.0 * (self.n - 1)
            k = int(np.searchsorted(c, target, side="right"))
            below = c[k - 1] if k else 0
            frac = (target - below + 0.5) / max(1, self._hist[k]) if k < BINS else 1.0
            out[f"p{q:g}"] = float(min(self.max, max(self.min, lo + (k + min(1.0, frac)) * w)))
        return out

    def to_dict(self) -> dict:
        d = {"mean_w": self.mean, "std_w": self.std, "min_w": self.min if self.n else math.nan,
             "max_w": self.max if self.n else math.nan, "energy_j": self.energy_j, "intervals": self.n,
             "lost_intervals": self.lost}
        d.update({f"{k}_w": v for k, v in self.percentiles().items()})
        return d
