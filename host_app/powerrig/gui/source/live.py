"""LiveSource: the live stream held in bounded memory as reduction levels, for the plot and markers.

Level 0 keeps the last ``rows`` intervals at full rate (float64, what the markers' analysis reads);
each level above keeps ``bins`` summaries (min, max, sum, count) of ``factor`` bins of the level below,
so level k covers ``bins * factor**k`` intervals. Memory is fixed at construction: an overnight stream
does not grow the process (the full-rate data of the whole recording is in the capture file, written
by the Recorder; older data is read from there). Fed from the recording thread, read from workers:
one lock guards the arrays.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from powerrig.gui.source.base import Summary, TimeSource, signal_names
from powerrig.core.blocks import IntervalBlock


class _Ring:
    """A fixed-size ring of per-bin summaries (min, max, sum, count) of S signals."""

    def __init__(self, bins: int, signals: int):
        self.cap = bins
        self.min = np.full((bins, signals), np.nan, np.float32)
        self.max = np.full((bins, signals), np.nan, np.float32)
        # np.full, not np.zeros: zeros are mapped lazily and would be committed page by page as the
        # levels fill over hours, an RSS that creeps up; written now, the memory is all there from the start
        self.sum = np.full((bins, signals), 0.0, np.float64)
        self.cnt = np.full((bins, signals), 0, np.int32)
        self.n = 0                                   # bins ever written

    @property
    def oldest(self) -> int:
        return max(0, self.n - self.cap)

    def append(self, mn, mx, sm, ct) -> None:
        k = len(mn)
        if k > self.cap:
            mn, mx, sm, ct = mn[-self.cap:], mx[-self.cap:], sm[-self.cap:], ct[-self.cap:]
            self.n += k - self.cap
            k = self.cap
        idx = (self.n + np.arange(k)) % self.cap
        self.min[idx], self.max[idx], self.sum[idx], self.cnt[idx] = mn, mx, sm, ct
        self.n += k

    def read(self, a: int, b: int):
        idx = np.arange(a, b) % self.cap
        return self.min[idx], self.max[idx], self.sum[idx], self.cnt[idx]


class _RowRing:
    """The last ``cap`` full-rate rows (float64) of S signals."""

    def __init__(self, cap: int, signals: int):
        self.cap = cap
        self.x = np.full((cap, signals), np.nan)
        self.n = 0

    @property
    def oldest(self) -> int:
        return max(0, self.n - self.cap)

    def append(self, x: np.ndarray) -> None:
        k = len(x)
        if k > self.cap:
            x = x[-self.cap:]
            self.n += k - self.cap
            k = self.cap
        self.x[(self.n + np.arange(k)) % self.cap] = x
        self.n += k

    def read(self, a: int, b: int) -> np.ndarray:
        return self.x[np.arange(a, b) % self.cap]


def _reduce(mn, mx, sm, ct, factor: int):
    """Whole groups of ``factor`` bins into one bin each."""
    g = len(mn) // factor * factor
    shape = (-1, factor, mn.shape[1])
    with np.errstate(invalid="ignore"):
        return (np.fmin.reduce(mn[:g].reshape(shape), axis=1), np.fmax.reduce(mx[:g].reshape(shape), axis=1),
                sm[:g].reshape(shape).sum(axis=1), ct[:g].reshape(shape).sum(axis=1))


class LiveSource(TimeSource):
    """Summaries of the live stream from bounded reduction levels; ``feed`` it IntervalBlocks."""

    def __init__(self, rails, interval_s: float, first_index: int = 0, interval_samples: int = 1,
                 rows: int = 1 << 16, bins: int = 1 << 13, factor: int = 8, levels: int = 7):
        self.rails = tuple(rails)
        self.interval_s = float(interval_s)
        self.interval_samples = interval_samples
        self.first_index = first_index
        self.signals = signal_names(self.rails)
        self.col = {s: k for k, s in enumerate(self.signals)}
        S = len(self.signals)
        self.factor = factor
        self.rows = _RowRing(rows, S)
        self.levels = [_Ring(bins, S) for _ in range(levels)]   # level k+1 bins = factor**(k+1) rows
        self._pending = [None] * levels            # bins below not yet a whole group
        self._lock = threading.Lock()
        self.length = 0                            # intervals received (gaps included)
        self._gaps: list[tuple[int, int]] = []     # (first sample id, end) of gap rows, merged
        self.clock = None                          # a ClockModel-like (index/utc) for events, set by the core
        # running figures since the start (the multimeter): O(1) memory
        self.total_sum = np.zeros(S)
        self.total_cnt = np.zeros(S, np.int64)
        self.total_min = np.full(S, np.inf)
        self.total_max = np.full(S, -np.inf)
        self.peak = {r: -math.inf for r in [*self.rails, "total"]}     # the highest 100 us peak

    @classmethod
    def for_block(cls, block: IntervalBlock, **kw) -> "LiveSource":
        return cls(block.rails, block.interval_s, block.first_index, block.interval_samples, **kw)

    # ---- feeding (the recording thread) ---------------------------------------------------------------
    def _columns(self, b: IntervalBlock) -> np.ndarray:
        cols = []
        for k in range(len(self.rails)):
            cols += [b.p[:, k], b.v[:, k], b.i[:, k]]
        cols.append(b.p.sum(axis=1))
        return np.column_stack(cols).astype(np.float64)

    def feed(self, b: IntervalBlock) -> None:
        if not len(b):
            return
        x = self._columns(b)
        ok = ~np.isnan(x)
        with self._lock:
            start = self.length
            self.rows.append(x)
            self._add_level(0, np.where(ok, x, np.nan).astype(np.float32), np.where(ok, x, np.nan).astype(np.float32),
                            np.where(ok, x, 0.0), ok.astype(np.int32))
            self.length += len(b)
            bad = ~b.valid
            if bad.any():
                self._add_gaps(start, bad)
            self.total_sum += np.where(ok, x, 0.0).sum(axis=0)
            self.total_cnt += ok.sum(axis=0)
            if ok.any():
                self.total_min = np.fmin(self.total_min, np.nanmin(np.where(ok, x, np.inf), axis=0))
                self.total_max = np.fmax(self.total_max, np.nanmax(np.where(ok, x, -np.inf), axis=0))
            if b.valid.any():
                for k, r in enumerate(self.rails):
                    pk = b.p_peak[:, k]
                    if np.isfinite(pk).any():
                        self.peak[r] = max(self.peak[r], float(np.nanmax(pk)))
                total = b.p_peak.astype(np.float64).sum(axis=1)     # as the analysis sums them (PCM-2, total)
                if np.isfinite(total).any():
                    self.peak["total"] = max(self.peak["total"], float(np.nanmax(total)))

    def _add_level(self, k: int, mn, mx, sm, ct) -> None:
        """Group bins of level k-1 (level 0 = rows) into level k's ring, carrying the remainder."""
        if k >= len(self.levels):
            return
        p = self._pending[k]
        if p is not None:
            mn, mx, sm, ct = (np.concatenate([a, b]) for a, b in zip(p, (mn, mx, sm, ct)))
        f = self.factor
        g = len(mn) // f * f
        self._pending[k] = (mn[g:], mx[g:], sm[g:], ct[g:]) if g < len(mn) else None
        if g:
            red = _reduce(mn[:g], mx[:g], sm[:g], ct[:g], f)
            self.levels[k].append(*red)
            self._add_level(k + 1, *red)

    def _add_gaps(self, start: int, bad: np.ndarray) -> None:
        d = np.diff(np.concatenate([[0], bad.astype(np.int8), [0]]))
        for a, e in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
            a, e = start + int(a), start + int(e)
            if self._gaps and self._gaps[-1][1] == a:
                self._gaps[-1] = (self._gaps[-1][0], e)
            else:
                self._gaps.append((a, e))
        del self._gaps[:-1000]                      # bounded: the capture file keeps every gap

    # ---- reading (workers) ----------------------------------------------------------------------------
    def gaps(self, t0: float, t1: float) -> list[tuple[float, float]]:
        dt = self.interval_s
        with self._lock:
            return [(a * dt, e * dt) for a, e in self._gaps if e * dt >= t0 and a * dt <= t1]

    def oldest_s(self) -> float:
        """Start of the oldest data still held (at the coarsest level)."""
        f = self.factor ** len(self.levels)
        return self.levels[-1].oldest * f * self.interval_s

    def summaries(self, t0: float, t1: float, n: int, signals=None) -> Summary:
        """``n`` points over [t0, t1): each the min/mean/max of the intervals whose start falls in it,
        from the finest level that still holds the range and has at most one bin per point."""
        signals = list(signals or self.signals)
        cols = [self.col[s] for s in signals]
        dt = self.interval_s
        n = max(1, int(n))
        r0 = max(0, int(math.floor(t0 / dt)))
        r1 = max(r0 + 1, int(math.ceil(t1 / dt)))
        step = max(1, (r1 - r0) / n)                       # rows per point (fractional)
        with self._lock:
            r1 = min(r1, max(self.length, r0 + 1))
            level, width = self._pick(r0, step)
            b0, b1 = r0 // width, -(-r1 // width)
            have = self.rows.n if level == 0 else self.levels[level - 1].n
            oldest = self.rows.oldest if level == 0 else self.levels[level - 1].oldest
            a, b = max(b0, oldest), min(b1, have)
            if b > a:
                if level == 0:
                    x = self.rows.read(a, b)[:, cols]
                    ok = ~np.isnan(x)
                    mn = mx = x
                    sm, ct = np.where(ok, x, 0.0), ok.astype(np.int64)
                else:
                    mn, mx, sm, ct = (v[:, cols] for v in self.levels[level - 1].read(a, b))
            else:
                mn = mx = sm = ct = None
        npts = max(1, int(math.ceil((r1 - r0) / step)))
        t = (r0 + np.arange(npts) * step) * dt
        out = Summary(t, step * dt)
        if mn is None:
            for s in signals:
                out.mean[s] = out.min[s] = out.max[s] = np.full(npts, np.nan)
            return out
        # the point each bin belongs to (by its start row); points with no bin stay NaN
        pt = np.floor((np.arange(a, b) * width - r0) / step).astype(np.int64)
        keep = (pt >= 0) & (pt < npts)
        pt = pt[keep]
        mn, mx, sm, ct = mn[keep], mx[keep], sm[keep], ct[keep]
        if not len(pt):
            for s in signals:
                out.mean[s] = out.min[s] = out.max[s] = np.full(npts, np.nan)
            return out
        starts = np.flatnonzero(np.r_[True, pt[1:] != pt[:-1]])
        where = pt[starts]
        with np.errstate(invalid="ignore", divide="ignore"):
            vmn = np.fmin.reduceat(mn, starts, axis=0)
            vmx = np.fmax.reduceat(mx, starts, axis=0)
            vsm = np.add.reduceat(sm, starts, axis=0)
            vct = np.add.reduceat(ct, starts, axis=0)
            vmean = np.where(vct > 0, vsm / np.maximum(vct, 1), np.nan)
        vmn = np.where(vct > 0, vmn, np.nan)
        vmx = np.where(vct > 0, vmx, np.nan)
        for j, s in enumerate(signals):
            for dst, src in ((out.mean, vmean), (out.min, vmn), (out.max, vmx)):
                arr = np.full(npts, np.nan)
                arr[where] = src[:, j]
                dst[s] = arr
        return out

    def _pick(self, r0: int, step: float) -> tuple[int, int]:
        """(level, rows per bin): the finest level with bins no wider than a point that still holds r0."""
        best = None
        for level in range(len(self.levels) + 1):
            width = self.factor ** level
            ring = self.rows if level == 0 else self.levels[level - 1]
            holds = ring.oldest * width <= r0 or level == len(self.levels)
            if width <= step and holds:
                return level, width
            if holds and best is None:
                best = (level, width)
        return best if best is not None else (len(self.levels), self.factor ** len(self.levels))

    # ---- the analysis' view of the recent full-rate rows (markers) -------------------------------------
    def has(self, name: str) -> bool:
        return name in self.col and name.startswith("p_")

    def held(self) -> tuple[int, int]:
        """Sample ids [first, end) still held at full rate."""
        with self._lock:
            return self.rows.oldest, self.rows.n

    def chunks(self, names, start=None, stop=None, chunk: int = 1 << 20, pool=None):
        """AnalysisSource.chunks over the full-rate rows still held (older rows read as NaN; no pool)."""
        start = 0 if start is None else max(0, int(start))
        with self._lock:
            stop = self.rows.n if stop is None else min(self.rows.n, int(stop))
            cols = [self.col[n] for n in names]
            oldest = self.rows.oldest
            pieces = []
            for s in range(start, stop, chunk):
                e = min(stop, s + chunk)
                x = np.full((e - s, len(cols)), np.nan)
                a = max(s, oldest)
                if e > a:
                    x[a - s:] = self.rows.read(a, e)[:, cols]
                pieces.append((s, x))
        for s, x in pieces:
            yield s, {n: x[:, j] for j, n in enumerate(names)}

    def sample_id(self, utc):
        if self.clock is None:
            raise ValueError("no clock model yet: cannot place events")
        return (self.clock.index(utc) - self.first_index) / self.interval_samples

    def utc(self, sample_id):
        if self.clock is None:
            raise ValueError("no clock model yet")
        return self.clock.utc(self.first_index + np.asarray(sample_id, dtype=np.float64) * self.interval_samples)

    def memory_bytes(self) -> int:
        arrays = [self.rows.x] + [a for r in self.levels for a in (r.min, r.max, r.sum, r.cnt)]
        return sum(a.nbytes for a in arrays)
