"""Highest sliding-window mean over a stream of chunks (OCP PCM-1/PCM-2, NVMe ACTP).

Every window length is computed in one pass over each chunk, for the whole signal, without a
per-sample cumulative sum (numpy's cumsum is a serial loop, ~2.5 ns a sample):

* the chunk is cut into rows of B samples (B divides every window length); one float32 matrix
  product with a 0/1 triangle gives each row's within-row prefix sums and its sum, and a float64
  cumulative sum runs over the row sums only (1/B of the samples);
* a window of m rows starting at row j, offset r, sums to ``O[j+m] - O[j] + Q[j+m, r] - Q[j, r]``:
  two vector passes per window length give every window's sum (float32, to choose), then
* the few windows within the float32 error bound of the best are summed again in float64 from the
  samples, so the value and the place reported are those of the exact float64 argmax.

The last rows (one window length) carry into the next chunk, so a 15-minute 4 us trace (225 M
samples) or a 10-hour capture streams through in fixed memory. Windows that touch a NaN (a gap) are
skipped and counted, so a result over gappy data can be marked partial.

``WindowSums`` gives the window sums of each chunk so callers can ask for the best window in any
range of window starts (``analyse`` answers every phase from one pass); ``SlidingMax`` keeps the
best window over everything fed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from powerrig.analysis.kernels import first_max_of_windows, prefix_sum, window_block_max

_U32 = 2.0 ** -24            # float32 unit roundoff
_MAX_BLOCK = 32
_BLOCK = 1024                # window sums per block maximum (candidate search)


@dataclass
class WindowMax:
    window: int                 # samples per window
    value: float = np.nan       # highest window mean seen (W)
    end: int = -1               # sample position (exclusive end) of that window
    windows: int = 0            # full windows examined
    skipped: int = 0            # windows skipped because they touched a gap

    @property
    def start(self) -> int:
        return self.end - self.window

    def update(self, best: "tuple | None") -> None:
        """Merge ``ChunkWindows.best(...)``; ties keep the earlier window."""
        if best is None:
            return
        total, start, n, skipped = best
        self.windows += n
        self.skipped += skipped
        if total is not None:
            m = total / self.window
            if not (m <= self.value):       # also true while value is NaN
                self.value = float(m)
                self.end = start + self.window


class ChunkWindows:
    """Sums of one window length for the window starts [start, start + len(sums)) of one chunk.

    ``sums`` is float32 (within ``tol`` of the float64 sums; refined on demand) or exact float64
    (``tol`` 0; a ``PrefixSums`` made from the chunk's prefix as read); windows touching a gap hold
    -inf and are flagged in ``bad``."""

    __slots__ = ("window", "start", "sums", "bad", "tol", "data", "data_start", "scratch", "_bmax", "prefix")

    def __init__(self, window, start, sums, bad, tol, data, data_start, scratch=None, prefix=None):
        self.window, self.start, self.sums, self.bad, self.tol = window, start, sums, bad, tol
        self.data, self.data_start = data, data_start      # gap-free samples (NaN -> 0) covering the windows
        self.scratch = scratch                             # bool work array as long as sums, or None
        self._bmax = None                                  # max of each _BLOCK sums (made on first use, or ready)
        self.prefix = prefix                               # a _SharedPrefix of data, or None

    @property
    def stop(self) -> int:
        return self.start + len(self.sums)

    def best(self, s0: int | None = None, s1: int | None = None):
        """(float64 sum, start, windows, skipped) of the highest window starting in [s0, s1), or None
        when no window starts there; the sum is None when every window there touched a gap."""
        k0 = 0 if s0 is None else max(0, s0 - self.start)
        k1 = len(self.sums) if s1 is None else min(len(self.sums), s1 - self.start)
        if k1 <= k0:
            return None
        n = k1 - k0
        skipped = int(np.count_nonzero(self.bad[k0:k1])) if self.bad is not None else 0
        if skipped == n:
            return None, 0, n, skipped
        if self.tol == 0.0:           # (exact sums made from a prefix are made for the part read only)
            k = self._first_max(k0, k1)
            return float(self.sums[k]), self.start + k, n, skipped
        if n >= 64 * _BLOCK:
            cand = self._candidates(k0, k1)
        else:
            seg = self.sums[k0:k1]
            top = float(np.max(seg))
            ge = np.greater_equal(seg, top - self.tol, out=None if self.scratch is None else self.scratch[k0:k1])
            cand = k0 + np.flatnonzero(ge)
        total, at = self._exact(self.start + cand)
        return total, at, n, skipped

    def best_many(self, s0: np.ndarray, s1: np.ndarray) -> list:
        """[self.best(a, b) for a, b in zip(s0, s1)]: for exact sums without gaps, every range in one
        compiled call (kernels.first_max_of_windows) instead of a few numpy calls per range."""
        sums = self.sums
        if self.tol != 0.0 or self.bad is not None or not isinstance(sums, PrefixSums):
            return [self.best(int(a), int(b)) for a, b in zip(s0, s1)]
        k0 = np.maximum(s0 - self.start, 0)
        k1 = np.minimum(s1 - self.start, len(sums))
        ks = first_max_of_windows(sums.c, sums.a, sums.w, self._block_max(), _BLOCK, k0, k1)
        c, a, w = sums.c, sums.a, sums.w
        return [None if k < 0 else (float(c[a + w + k] - c[a + k]), self.start + int(k), int(n), 0)
                for k, n in zip(ks.tolist(), (k1 - k0).tolist())]

    def ready(self) -> None:
        """Make the block maxima of exact sums now, not at the first question: a reading thread ahead
        of the one asking takes them on while it would otherwise wait (pipeline._prefetched)."""
        if self.tol == 0.0 and isinstance(self.sums, PrefixSums):
            self._block_max()

    def _block_max(self) -> np.ndarray:
        """The max of each whole _BLOCK of sums, made once per chunk and window length: nested phases
        ask for ranges of the same sums, and each argmax over its whole range re-read them."""
        if self._bmax is None:
            s = self.sums
            if isinstance(s, PrefixSums) and s.bad is None:    # from the prefix: the sums never written out
                self._bmax = window_block_max(s.c, s.a, s.a + len(s), s.w, _BLOCK)
            else:
                nb = len(s) // _BLOCK
                self._bmax = s[:nb * _BLOCK].reshape(nb, _BLOCK).max(axis=1)
        return self._bmax

    def _first_max(self, k0: int, k1: int) -> int:
        """np.argmax(sums[k0:k1]) + k0 (NaN the greatest); sums made from a prefix are read through the
        block maxima in one compiled loop (kernels.first_max_of_windows, as best_many reads them)."""
        sums = self.sums
        if not isinstance(sums, PrefixSums):
            return k0 + int(np.argmax(sums[k0:k1]))
        return int(first_max_of_windows(sums.c, sums.a, sums.w, self._block_max(), _BLOCK, [k0], [k1], sums.bad)[0])

    def _candidates(self, k0: int, k1: int) -> np.ndarray:
        """Indices in [k0, k1) of the sums within ``tol`` of the highest there, found through the
        per-block maxima: only the blocks that can hold a candidate are scanned."""
        bm = self._block_max()
        j0, j1 = -(-k0 // _BLOCK), k1 // _BLOCK            # whole blocks [j0, j1)
        h1, t0 = j0 * _BLOCK, j1 * _BLOCK                  # head [k0, h1), tail [t0, k1)
        sums = self.sums
        top = float(max(np.max(bm[j0:j1]), np.max(sums[k0:h1]) if h1 > k0 else -np.inf,
                        np.max(sums[t0:k1]) if k1 > t0 else -np.inf))
        thr = top - self.tol
        out = []
        if h1 > k0:
            out.append(k0 + np.flatnonzero(sums[k0:h1] >= thr))
        hit = np.flatnonzero(bm[j0:j1] >= thr)
        if len(hit):                                       # first to last block holding a candidate
            a, b = (j0 + int(hit[0])) * _BLOCK, (j0 + int(hit[-1]) + 1) * _BLOCK
            out.append(a + np.flatnonzero(sums[a:b] >= thr))
        if k1 > t0:
            out.append(t0 + np.flatnonzero(sums[t0:k1] >= thr))
        return np.concatenate(out) if len(out) > 1 else out[0]

    def _exact(self, starts: np.ndarray) -> tuple[float, int]:
        """The highest float64 window sum among candidate starts (sorted) and its start (first on ties)."""
        w = self.window
        best, at = -math.inf, -1
        # candidates more than a window apart are summed separately (one cumsum per cluster)
        if int(starts[-1]) - int(starts[0]) <= w:
            parts = (starts,)
        else:
            parts = np.split(starts, np.flatnonzero(np.diff(starts) > w) + 1)
        for part in parts:
            a = int(part[0]) - self.data_start
            b = int(part[-1]) - self.data_start + w
            full = self.prefix.get(b - a) if self.prefix is not None else None
            if full is not None:                # the chunk's one float64 prefix, shared by every phase
                rel = part - self.data_start
                sums = full[rel + w] - full[rel]
            else:
                c = np.empty(b - a + 1)
                c[0] = 0.0
                np.cumsum(self.data[a:b], dtype=np.float64, out=c[1:])
                rel = part - (a + self.data_start)
                sums = c[rel + w] - c[rel]
            k = int(np.argmax(sums))
            if sums[k] > best:
                best, at = float(sums[k]), int(part[k])
        return best, at


class _SharedPrefix:
    """One float64 prefix sum of a chunk's samples, made only once the candidate refinements asked
    of that chunk add up to its length (so it never costs more than twice the refinements would). A flat signal (an idle drive) has near-ties everywhere,
    so every phase's refinement spans the phase: summed over nested phases and both window lengths
    that was several cumulative sums of every sample, where one shared prefix costs one."""

    __slots__ = ("data", "asked", "c", "out")

    def __init__(self, data: np.ndarray, out):
        self.data, self.asked, self.c, self.out = data, 0, None, out      # out(): the array to fill

    def get(self, span: int) -> np.ndarray | None:
        if self.c is None:
            self.asked += span
            if self.asked < len(self.data):
                return None
            c = self.out()[:len(self.data) + 1]
            c[0] = 0.0
            np.cumsum(self.data, dtype=np.float64, out=c[1:])
            self.c = c
        return self.c


def _block_size(windows) -> int:
    g = 0
    for w in windows:
        g = math.gcd(g, int(w))
    return max(d for d in range(1, _MAX_BLOCK + 1) if g % d == 0)


class WindowSums:
    """Sliding-window sums of a stream, chunk by chunk, for several window lengths at once.

    ``feed(x)`` returns one ``ChunkWindows`` per window length (None when no window is complete yet)
    holding every window that ends in the samples fed so far and was not returned before;
    ``flush()`` returns the windows still held back at the end (it changes nothing).

    ``exact=True`` gives every window's float64 sum from one float64 prefix of each chunk instead of
    float32 sums refined on demand: a caller that asks for the best window in many ranges of every
    chunk (``analyse``: every phase, both lengths) pays one ~4 ns cumulative sum per sample where
    each range's refinement would cost more; one question per chunk (``SlidingMax``) is faster in
    float32. The values are the same float64 sums either way.

    ``ring``: how many feeds' answers stay valid (each feed writes into the next of ``ring`` sets of
    work arrays): a caller that feeds on one thread, chunks ahead of the one reading the answers, needs
    one set per chunk in flight."""

    def __init__(self, windows, position: int = 0, exact: bool = False, ring: int = 1):
        self.windows = [int(w) for w in windows]
        self.exact = exact
        if ring < 1:
            raise ValueError("ring must be >= 1 set of work arrays")
        self._ring = ring
        self._slot = 0                            # the set of work arrays this feed writes
        self._bufs = [np.empty(0, np.float32) for _ in range(ring)]
        if any(w < 1 for w in self.windows):
            raise ValueError("window lengths must be >= 1 sample")
        self.block = b = _block_size(self.windows)
        self._rows = [w // b for w in self.windows]
        self._keep = max(self._rows)
        u = np.zeros((b, b), np.float32)
        u[np.triu_indices(b, 1)] = 1.0            # column r: sum of the row's first r samples
        self._u = u
        self._stack = max(1, (1 << 17) // (b * b))   # rows per matmul (m * n * k <= 2^17)
        self.position = position                  # position of the next sample fed
        self._base = position                     # position of _carry[0]
        self._buf = self._bufs[0]                 # the carry (first _nc samples), then the chunk fed
        self._nc = 0
        self._cut = 0
        self._work: dict[tuple[str, int], np.ndarray] = {}
        self._carry_nan = None                    # bool mask of _carry, or None when it has no gap
        self._next = [position] * len(self.windows)    # first window start not yet returned
        self._amax = 0.0                          # largest |sample| so far (bounds the float32 error)

    @property
    def next_starts(self) -> list[int]:
        """Per window length, the first window start not yet returned (every earlier one was)."""
        return list(self._next)

    def _space(self, name: str, n: int, dtype) -> np.ndarray:
        """A reused work array of n elements (no fresh pages to fault in for every chunk)."""
        key = (name, self._slot)
        a = self._work.get(key)
        if a is None or len(a) < n or a.dtype != dtype:
            a = self._work[key] = np.empty(n + n // 4, dtype)
        return a[:n]

    def feed(self, x) -> list[ChunkWindows | None]:
        """Windows ending in x (and not returned before); valid until the next feed."""
        x = np.asarray(x)
        out: list[ChunkWindows | None] = [None] * len(self.windows)
        if not len(x):
            return out
        # float32 samples stay float32: the exact sums' prefix (kernels.prefix_sum) adds them in float64
        dt = np.dtype(np.float32) if x.dtype == np.float32 and self._buf.dtype == np.float32 else np.dtype(np.float64)
        nan = None
        hi = float(np.max(x))
        if math.isnan(hi):                         # max propagates NaN: the cheap test first
            nan = np.isnan(x)
        if not self.exact:                         # the float32 error bound needs the largest |sample|
            lo = float(np.min(x) if nan is None else (np.nanmin(x) if not nan.all() else 0.0))
            if nan is not None:
                hi = float(np.nanmax(x)) if not nan.all() else 0.0
            self._amax = max(self._amax, abs(hi), abs(lo))
        self._next_slot()
        nc, n = self._nc, self._nc + len(x)
        if len(self._buf) < n or self._buf.dtype != dt:
            grown = np.empty(n + n // 4, dt)
            grown[:nc] = self._buf[:nc]
            self._buf = self._bufs[self._slot] = grown
        buf = self._buf[:n]
        buf[nc:] = x
        if nan is not None:
            buf[nc:][nan] = 0.0
        if nan is not None or self._carry_nan is not None:
            cn = self._carry_nan if self._carry_nan is not None else np.zeros(nc, bool)
            nanbuf = np.concatenate([cn, nan if nan is not None else np.zeros(len(x), bool)])
        else:
            nanbuf = None
        base = self._base
        b = self.block
        rows = n // b
        prefix = None
        if self.exact:
            out = self._exact_sums(buf, nanbuf, True)
        elif rows > min(self._rows):
            x32 = buf[:rows * b]
            if x32.dtype != np.float32:
                x32 = self._space("x32", rows * b, np.float32)
                np.copyto(x32, buf[:rows * b], casting="same_kind")
            q, o = self._prefixes(x32.reshape(rows, b), self._space("q", rows * b, np.float32).reshape(rows, b))
            if nanbuf is not None:
                gn, on = self._prefixes(nanbuf[:rows * b].reshape(rows, b).astype(np.float32))
            for k, (w, m) in enumerate(zip(self.windows, self._rows)):
                j0 = (self._next[k] - base) // b
                j1 = rows - m
                if j1 <= j0:
                    continue
                s = self._space(f"s{k}", (j1 - j0) * b, np.float32).reshape(j1 - j0, b)
                np.subtract(q[j0 + m:j1 + m], q[j0:j1], out=s)
                np.add(s, (o[j0 + m:j1 + m] - o[j0:j1]).astype(np.float32)[:, None], out=s)
                s = s.reshape(-1)
                bad = None
                if nanbuf is not None:
                    cnt = np.subtract(gn[j0 + m:j1 + m], gn[j0:j1])
                    cnt += (on[j0 + m:j1 + m] - on[j0:j1]).astype(np.float32)[:, None]
                    bad = cnt.reshape(-1) > 0.5
                    if bad.any():
                        s[bad] = -np.inf
                    else:
                        bad = None
                # float32 error of a window sum: row prefixes and sums (<= b terms each), the float64
                # samples rounded to float32, and the two roundings of the sum itself
                tol = 4.0 * _U32 * self._amax * (w * (b + 3) + 2 * b * b + 8 * b)
                if prefix is None:
                    prefix = _SharedPrefix(buf, lambda n=n: self._space("prefix", n + 1, np.float64))
                out[k] = ChunkWindows(w, base + j0 * b, s, bad, tol, buf, base, self._space("cand", len(s), bool),
                                      prefix)
                self._next[k] = base + j1 * b
        keep_rows = min(rows, self._keep)
        cut = (rows - keep_rows) * b
        self._carry_nan = nanbuf[cut:].copy() if nanbuf is not None and nanbuf[cut:].any() else None
        self._cut = cut                          # the carry moves to the front at the next feed
        self._nc = n - cut
        self._base = base + cut
        self.position += len(x)
        return out

    def _next_slot(self) -> None:
        """Move to the next set of work arrays, the carry to the front of its buffer (the answers of
        the last ``ring - 1`` feeds, which read the other sets, stay as they were)."""
        prev, cut, nc = self._buf, self._cut, self._nc
        self._slot = (self._slot + 1) % self._ring
        buf = self._bufs[self._slot]
        if buf is not prev and (len(buf) < nc or buf.dtype != prev.dtype):
            buf = self._bufs[self._slot] = np.empty(max(nc, len(prev)), prev.dtype)
        buf[:nc] = prev[cut:cut + nc]           # (ring 1: the same buffer, the carry moved to its front)
        self._buf, self._cut = buf, 0

    def _prefixes(self, x32: np.ndarray, q: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Within-row exclusive prefix sums (rows, b) float32 and the float64 prefix of row sums."""
        if q is None:
            q = np.empty_like(x32)
        # in stacks of few rows: each BLAS call stays below OpenBLAS's threading threshold (its spinning
        # worker threads cost more than they gain, above all on a busy machine); same sums, same order
        r = self._stack
        whole = len(x32) - len(x32) % r
        if whole:
            np.matmul(x32[:whole].reshape(-1, r, x32.shape[1]), self._u, out=q[:whole].reshape(-1, r, q.shape[1]))
        if whole < len(x32):
            np.matmul(x32[whole:], self._u, out=q[whole:])
        o = np.empty(len(q) + 1)
        o[0] = 0.0
        np.add(q[:, -1], x32[:, -1], out=o[1:], dtype=np.float64)
        np.cumsum(o[1:], out=o[1:])
        return q, o

    @property
    def _carry(self) -> np.ndarray:
        return self._buf[self._cut:self._cut + self._nc]

    def flush(self) -> list[ChunkWindows | None]:
        """The windows complete in the samples fed but not yet returned (exact float64 sums)."""
        return self._exact_sums(self._carry, self._carry_nan, False)

    def _exact_sums(self, data: np.ndarray, nan: np.ndarray | None, advance: bool) -> list[ChunkWindows | None]:
        """Float64 sums of the windows complete in ``data`` (which starts at ``_base``; NaN already 0,
        ``nan`` its gap mask or None) not returned before. ``advance``: mark them returned, and use
        the reused work arrays (valid until the next feed); else change nothing (flush)."""
        out: list[ChunkWindows | None] = [None] * len(self.windows)
        if not len(data):
            return out
        space = self._space if advance else (lambda name, n, dtype: np.empty(n, dtype))
        c = prefix_sum(data, space("prefix", len(data) + 1, np.float64))
        if nan is not None:
            cn = np.zeros(len(data) + 1, np.int64)
            np.cumsum(nan, out=cn[1:])
        for k, w in enumerate(self.windows):
            a = self._next[k] - self._base          # first start, relative to data
            e = len(data) - w + 1                   # one past the last start
            if e <= a:
                continue
            bad = None
            if nan is not None:
                bad = (cn[a + w:e + w] - cn[a:e]) > 0
                if not bad.any():
                    bad = None
            # the block maxima are made at the first question (ChunkWindows._block_max), or ahead of it by
            # a reading thread with time to spare (ChunkWindows.ready; docs/scale.md, "An eleventh look")
            out[k] = ChunkWindows(w, self._base + a, PrefixSums(c, a, e, w, bad), bad, 0.0, data, self._base)
            if advance:
                self._next[k] = self._base + e
        return out


class PrefixSums:
    """The float64 sums c[j + w] - c[j] of the windows starting at j in [a, e) of a prefix ``c``, as
    ChunkWindows reads them (length, slices, items), each part made when asked: a phase reads its own
    range and a block or two, so writing every window's sum out (8 MB per chunk and window length)
    was most of the window stage's memory traffic. Windows touching a gap (``bad``) read -inf."""

    __slots__ = ("c", "a", "w", "n", "bad")

    def __init__(self, c: np.ndarray, a: int, e: int, w: int, bad: np.ndarray | None):
        self.c, self.a, self.w, self.n, self.bad = c, a, w, e - a, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k):
        c, a, w = self.c, self.a, self.w
        if isinstance(k, slice):
            k0, k1, step = k.indices(self.n)
            if step != 1:
                raise IndexError("window sums are read in steps of 1")
            k1 = max(k0, k1)
            s = c[a + w + k0:a + w + k1] - c[a + k0:a + k1]
            if self.bad is not None:
                s[self.bad[k0:k1]] = -np.inf
            return s
        k = int(k)
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError(f"window {k} of {self.n}")
        if self.bad is not None and self.bad[k]:
            return -np.inf
        return c[a + w + k] - c[a + k]


class SlidingMax:
    """Feed consecutive chunks; read ``results`` (one WindowMax per window length)."""

    def __init__(self, windows, position: int = 0):
        self._sums = WindowSums(windows, position)
        self._results = [WindowMax(w) for w in self._sums.windows]

    @property
    def position(self) -> int:
        return self._sums.position

    def feed(self, x: np.ndarray) -> None:
        for r, cw in zip(self._results, self._sums.feed(x)):
            if cw is not None:
                r.update(cw.best())

    @property
    def results(self) -> list[WindowMax]:
        """The best windows over everything fed (including the windows still held back)."""
        out = [replace(r) for r in self._results]
        for r, cw in zip(out, self._sums.flush()):
            if cw is not None:
                r.update(cw.best())
        return out


def max_window_mean(x: np.ndarray, window: int, chunk: int = 1 << 22) -> WindowMax:
    """Highest mean of any ``window`` consecutive samples of x (NaN windows skipped)."""
    sm = SlidingMax([window])
    for s in range(0, len(x), chunk):
        sm.feed(x[s:s + chunk])
    return sm.results[0]
