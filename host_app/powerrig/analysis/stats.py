"""Streaming statistics of one series over one phase: exact energy, moments, extremes, percentiles.

Fed chunk by chunk so memory does not grow with capture length: moments use compensated sums,
percentiles keep the values while a phase is short and switch to a fine histogram (``BINS`` bins
across the phase's known range) when it is long, so their resolution is (max - min) / BINS.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from powerrig.analysis.kernels import bin_counts, piece_summaries
from powerrig.core.sums import KahanSum

BINS = 1 << 16
EXACT_LIMIT = 1 << 18          # values kept for exact percentiles (about 4 minutes at 1 ms)
PERCENTILES = (1, 5, 50, 95, 99)


@functools.lru_cache(maxsize=256)
def _order_stats(n: int, qs: tuple) -> list[tuple[int, int, float]]:
    """(lower index, upper index, fraction) of each percentile among n sorted values (linear method)."""
    out = []
    for q in qs:
        virtual = (n - 1) * (float(q) / 100)
        prev = math.floor(virtual)
        gamma = virtual - prev
        if virtual >= n - 1:
            prev = nxt = n - 1
        else:
            nxt = prev + 1
        out.append((prev, nxt, gamma))
    return out


def _interpolate(at, n: int, qs) -> np.ndarray:
    """np.percentile's linear interpolation, the same arithmetic, from ``at(k)``: the k-th smallest."""
    out = np.empty(len(qs))
    for i, (prev, nxt, gamma) in enumerate(_order_stats(n, tuple(qs))):   # scalar steps, as numpy rounds them
        a, b = at(prev), at(nxt)
        diff = float(b - a)                         # in the values' dtype, then float64 like the rest
        out[i] = float(b) - diff * (1 - gamma) if gamma >= 0.5 else float(a) + diff * gamma
    return out


def sorted_percentiles(v: np.ndarray, qs) -> np.ndarray:
    """np.percentile(v, qs) (linear method, the same arithmetic) of a sorted array without NaN."""
    return _interpolate(v.__getitem__, len(v), qs)


def percentiles_of(v: np.ndarray, qs) -> np.ndarray:
    """np.percentile(v, qs) of an unsorted array without NaN, bit for bit, partitioning ``v`` in place.

    Only a few order statistics are read (the lower one of each pair by selection, nested so each
    selection works on the part between the previous ones, the upper one as the smallest value
    after it), which costs about half a full sort: the 1,800 phases of a 10-hour capture spent a
    quarter of the analysis sorting their values."""
    n = len(v)
    return _interpolate(dict(zip(*_select(v, n, qs))).__getitem__, n, qs)


@functools.lru_cache(maxsize=64)
def _nested_order(pos: tuple) -> tuple[tuple[int, int, int], ...]:
    """The nested partitions that select every inner point of ``pos`` (sorted positions: the array's
    start, the ranks, its end; as percentiles, 0 and 100 around the fractions, or as the ranks
    themselves), each inside the part between the ones made before it, in the order that
    partitions the fewest values (for p1..p99 of n values: p50 over n, p5 and p95 over n/2, p1 and p99
    over 0.05 n: 2.1 n, where p50, p99, p95 takes 2.5 n): (left bound, right bound, rank) as indices
    into ``pos``, in the order to run them."""
    @functools.lru_cache(maxsize=None)
    def best(a: int, b: int) -> tuple[float, tuple]:
        """(values partitioned, partitions) to select the points strictly between a and b."""
        if b - a < 2:
            return 0, ()
        options = []
        for m in range(a + 1, b):
            cl, pl = best(a, m)
            cr, pr = best(m, b)
            options.append((pos[b] - pos[a] + cl + cr, ((a, b, m),) + pl + pr))
        return min(options)
    return best(0, len(pos) - 1)[1]


@functools.lru_cache(maxsize=256)
def _selection_plan(n: int, qs: tuple):
    """How to read the order statistics of n values: (the in-place partitions (lo, hi, k) in order,
    every rank read, the selected ones of them as an index array, and the bounds of the ranges whose
    smallest value is an upper neighbour as an index array for minimum.reduceat, or None).

    The order of the partitions (_nested_order) depends on where the ranks lie, not on n: it is found
    once per set of percentiles from their fractions (a search per n took 61 us, and a capture whose
    phases all differ in length paid it for every phase and series), and from the ranks themselves
    only where two percentiles share a rank (a few values); any order gives the same values."""
    stats = _order_stats(n, qs)
    ks = sorted({prev for prev, _, _ in stats})
    fractions = sorted({float(q) for q in qs})
    pos = (0.0, *fractions, 100.0) if len(fractions) == len(ks) else (0, *ks, n)
    parts = tuple((0 if a == 0 else ks[a - 1] + 1, n if b == len(ks) + 1 else ks[b - 1], ks[m - 1])
                  for a, b, m in _nested_order(pos))
    uppers, seen = [], set(ks)
    for prev, nxt, _ in stats:
        if nxt not in seen:                         # everything in (prev, next selected) lies between
            seen.add(nxt)
            uppers.append((nxt, prev + 1, next((k for k in ks if k > prev), n)))
    # the ranges are disjoint: in order, one minimum.reduceat over their bounds reads them all
    uppers.sort(key=lambda u: u[1])
    bounds = [x for _, a, b in uppers for x in (a, b)]
    if bounds and bounds[-1] == n:
        bounds.pop()
    ranks = ks + [u[0] for u in uppers]
    nsel = len(ranks) - len(bounds[::2]) if bounds else len(ranks)
    # as index arrays once: each phase's selection would otherwise convert the lists again
    return parts, ranks, np.array(ranks[:nsel], np.intp), np.array(bounds, np.intp) if bounds else None


def _select(v: np.ndarray, n: int, qs) -> tuple[list[int], np.ndarray]:
    """(ranks, their values in v's dtype): the order statistics the percentiles read; partitions v in place."""
    parts, ranks, selected, bounds = _selection_plan(n, tuple(qs))
    for lo, hi, k in parts:
        v[lo:hi].partition(k - lo)
    vals = v[selected]
    if bounds is not None:
        vals = np.concatenate([vals, np.minimum.reduceat(v, bounds)[::2]])
    return ranks, vals


_KEY_TYPES = {np.dtype(np.float32): (np.int32, 0x7FFFFFFF), np.dtype(np.float64): (np.int64, 0x7FFFFFFFFFFFFFFF)}


def _order_keys(runs: list[np.ndarray], positive: bool) -> np.ndarray | None:
    """Integers ordered as the float values of ``runs`` (no NaN), in a new array; None for other dtypes.

    Flipping the magnitude bits of negative floats makes their bit patterns order like the values
    (IEEE 754 sign-magnitude; positive floats already do, so when every value is > 0 the keys are a
    plain copy), and integers partition a third faster than floats (no NaN-aware comparisons); the
    selected keys map back to the very same float bits. -0.0 orders before +0.0 (np.percentile
    takes them as equal: where both lie at a percentile, the zero's sign may differ)."""
    kt = _KEY_TYPES.get(runs[0].dtype)
    if kt is None or any(r.dtype != runs[0].dtype for r in runs):
        return None
    it, mag = kt
    if positive:
        return (np.concatenate(runs) if len(runs) > 1 else runs[0].copy()).view(it)
    v = runs[0] if len(runs) == 1 else np.concatenate(runs)
    iv = v.view(it)
    k = np.right_shift(iv, iv.dtype.itemsize * 8 - 1)      # -1 where negative, else 0 (a new array)
    np.bitwise_and(k, mag, out=k)
    np.bitwise_xor(k, iv, out=k)
    return k


def _key_values(k: np.ndarray, dtype) -> np.ndarray:
    """The float values of order keys (the key map is its own inverse)."""
    return (k ^ ((k >> (k.dtype.itemsize * 8 - 1)) & _KEY_TYPES[np.dtype(dtype)][1])).view(dtype)


@functools.lru_cache(maxsize=64)
def _keys(qs, suffix: str = "") -> tuple[str, ...]:
    return tuple(f"p{q:g}{suffix}" for q in qs)


class Segments:
    """One chunk of one series cut at every phase edge, each piece summarised once.

    Phases nest (the whole capture, dwells, workloads, idle windows) and overlap the same data; every
    phase's figures are merged from the pieces it covers, so the samples are read a fixed number of
    times per chunk whatever the number of phases. The values themselves are handed to the phases as
    views (a phase covers consecutive pieces, so one view each); a phase keeping exact percentiles
    sorts its own values once, when it finishes."""

    def __init__(self, x: np.ndarray, bounds: np.ndarray):
        x = np.asarray(x)
        self.x = x
        self.bounds = bounds
        # one compiled pass over the chunk (kernels.piece_summaries): count, sum, squared deviations,
        # min and max of every piece; only gappy chunks pay for a NaN mask (the pieces' values, below)
        self.n, self.lost, self.total, self.min, self.max, self.m2 = piece_summaries(x, bounds)
        self.nanmask = np.isnan(x) if self.lost.any() else None

    def runs(self, ia: int, ib: int) -> tuple[list[np.ndarray], bool]:
        """The valid values of pieces ia..ib-1 (one array, unsorted)."""
        b = self.bounds
        v = self.x[b[ia]:b[ib]]
        if self.nanmask is not None:
            v = v[~self.nanmask[b[ia]:b[ib]]]
        return [v], False


class SeriesStats:
    """Feed values (NaN = lost) and edge weights; read mean, std, min, max, percentiles, energy."""

    def __init__(self, interval_s: float, value_range: tuple[float, float] | None = None):
        self.interval_s = interval_s
        self.n = 0                  # valid full intervals
        self.lost = 0               # NaN intervals
        self._sum = KahanSum()
        self._m2 = 0.0              # sum of squared deviations from the mean (merged pairwise, Chan et al.)
        self._energy_intervals = KahanSum()   # sum of weight * value (in interval units)
        self.min = math.inf
        self.max = -math.inf
        self._values: list[np.ndarray] | None = []
        self._sorted = True         # every kept run is sorted
        self._kept = 0
        self._hist: np.ndarray | None = None
        self._range = value_range

    @property
    def exact(self) -> bool:
        """Still keeping the values (exact percentiles)."""
        return self._values is not None

    def feed(self, x: np.ndarray) -> None:
        """Values of intervals wholly inside the phase (float32 or float64; NaN = lost), summarised as
        one piece; a copy is kept for the percentiles (the caller may reuse its array)."""
        if len(x):
            x = np.array(x)
            self.add(Segments(x, np.array([0, len(x)], np.intp)), 0, 1)

    def add(self, seg: Segments, ia: int, ib: int) -> None:
        """Pieces ia..ib-1 of a chunk's Segments (wholly inside the phase)."""
        if ib <= ia:
            return
        gappy = seg.nanmask is not None             # else every piece is whole (n > 0, nothing lost)
        if gappy:
            self.lost += int(seg.lost[ia:ib].sum())
        if ib - ia == 1:
            nv = int(seg.n[ia])
            if not nv:
                return
            total, m2 = float(seg.total[ia]), float(seg.m2[ia])
            lo, hi = float(seg.min[ia]), float(seg.max[ia])
        else:
            cnt = seg.n[ia:ib]
            nv = int(cnt.sum())
            if not nv:
                return
            tot, m2s, mins, maxs = seg.total[ia:ib], seg.m2[ia:ib], seg.min[ia:ib], seg.max[ia:ib]
            if gappy:
                ok = cnt > 0
                tot, cnt, m2s, mins, maxs = tot[ok], cnt[ok], m2s[ok], mins[ok], maxs[ok]
            total = float(tot.sum())
            dev = tot / cnt - total / nv
            m2 = float(m2s.sum() + np.dot(cnt * dev, dev))
            lo, hi = float(mins.min()), float(maxs.max())
        self._merge(nv, total, m2, lo, hi)
        self.keep(*seg.runs(ia, ib))

    def _merge(self, n: int, total: float, m2: float, lo: float, hi: float) -> None:
        if self.n:
            d = total / n - self._sum.value / self.n
            self._m2 += m2 + d * d * (self.n * n / (self.n + n))
        else:
            self._m2 = m2
        self._sum.add(total)
        self._energy_intervals.add(total)
        self.n += n
        self.min = min(self.min, lo)
        self.max = max(self.max, hi)

    def feed_edge(self, value: float, weight: float) -> None:
        """A partly covered edge interval: counts toward energy only, by the covered fraction."""
        if weight > 0 and not math.isnan(value):
            self._energy_intervals.add(value * weight)

    def keep(self, runs: list[np.ndarray], is_sorted: bool) -> None:
        """Keep values for the percentiles (exact while few, else binned); calls in feeding order."""
        if self._values is not None:
            self._values.extend(runs)
            self._sorted = self._sorted and is_sorted
            self._kept += sum(len(r) for r in runs)
            if self._kept <= EXACT_LIMIT:
                return
            allv = np.concatenate(self._values)
            self._values = None
            seen = (float(allv.min()), float(allv.max()))
            lo, hi = self._range or seen
            if not hi > lo:
                hi = lo + 1e-9
            pad = (hi - lo) * (0.0 if self._range else 0.5)
            self._edges = (lo - pad, hi + pad)
            self._hist = np.zeros(BINS, np.int64)
            self._bin(allv)
            return
        for r in runs:
            self._bin(r)

    def _bin(self, v: np.ndarray) -> None:
        """Add values to the histogram: a long phase bins every chunk (the whole capture's phase:
        every value of a 10-hour capture), in one compiled pass (kernels.bin_counts)."""
        lo, hi = self._edges
        bin_counts(self._hist, v, lo, BINS / (hi - lo))

    # ---- results ------------------------------------------------------------------------------------
    @property
    def mean(self) -> float:
        return self._sum.value / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        if self.n < 2:
            return math.nan if self.n == 0 else 0.0
        return math.sqrt(max(0.0, self._m2 / self.n))

    @property
    def energy_j(self) -> float:
        """Energy of the valid data (J): sum of mean power x time, edge intervals by their fraction."""
        return self._energy_intervals.value * self.interval_s

    def percentiles(self, qs=PERCENTILES) -> dict[str, float]:
        if self.n == 0:
            return {f"p{q:g}": math.nan for q in qs}
        if self._values is not None:
            if len(self._values) == 1 and self._sorted:
                return dict(zip(_keys(tuple(qs)), sorted_percentiles(self._values[0], qs).tolist()))
            positive = self.min > 0
            keys = _order_keys(self._values, positive)     # new: the runs may be views of the caller's data
            if keys is not None:
                ranks, kv = _select(keys, len(keys), qs)
                dtype = self._values[0].dtype
                known = dict(zip(ranks, kv.view(dtype) if positive else _key_values(kv, dtype)))
                return dict(zip(_keys(tuple(qs)), _interpolate(known.__getitem__, len(keys), qs).tolist()))
            v = np.concatenate(self._values) if len(self._values) > 1 else self._values[0].copy()
            self._values, self._sorted = [v], False
            return dict(zip(_keys(tuple(qs)), percentiles_of(v, qs).tolist()))
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
        d.update(zip(_keys(PERCENTILES, "_w"), self.percentiles().values()))
        return d
