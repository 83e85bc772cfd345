"""Compiled loops of the analysis pass (numba): one pass over a chunk where numpy needs several.

numpy runs one operation over a whole array per call, so summarising a chunk's pieces took a dozen
passes over every value (conversion, shift, squares, two sums, minimum, maximum; the rails' float64
sums and their maxima; the histogram's shift, scale, truncation and counting; the window sums written
out and their block maxima). The pass is memory-bound: each kernel here reads each value once and
releases the GIL, so the reading thread runs beside it.

The kernels compute the figures their numpy predecessors did with the same float arithmetic (window
sums, maxima, histogram bins bit for bit); only a piece's float64 sums differ in order (blocks of
BLOCK, shifted by the piece's own first value), which moves them by about 1e-16 of themselves.
Compiled once (``make setup`` runs ``compile_all``) and cached beside this file (or in the user's
cache when the package folder is read-only): a process pays numba's import and a cache load.
"""
from __future__ import annotations

import math

import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True)


BLOCK = 256     # values summed apart before joining a piece's sums (error ~ (BLOCK + n / BLOCK) ulp, not n)


@_jit
def _first_valid(x, a, b):
    for j in range(a, b):
        if x[j] == x[j]:
            return np.float64(x[j])
    return 0.0


@_jit
def _piece_summaries(x, bounds, n, lost, total, lo, hi, m2):
    """Per piece [bounds[i], bounds[i+1]): valid count, NaN count, sum, min, max, squared deviations.

    The sums are of the values shifted by the piece's first valid value, near its level, so that
    sum(y^2) - sum(y)^2 / n keeps its digits, and are made BLOCK values at a time; a piece with
    almost no spread (the difference would keep less than 8 digits) takes a second, exact pass."""
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        shift = _first_valid(x, a, b)
        sy = 0.0
        sq = 0.0
        k = 0
        mn = math.inf
        mx = -math.inf
        for c in range(a, b, BLOCK):
            by = 0.0
            bq = 0.0
            for j in range(c, min(c + BLOCK, b)):
                v = x[j]
                if v != v:
                    continue
                y = np.float64(v) - shift
                by += y
                bq += y * y
                k += 1
                if v < mn:
                    mn = v
                if v > mx:
                    mx = v
            sy += by
            sq += bq
        n[i] = k
        lost[i] = (b - a) - k
        total[i] = sy + k * shift
        if k == 0:
            lo[i] = np.nan
            hi[i] = np.nan
            m2[i] = 0.0
            continue
        lo[i] = mn
        hi[i] = mx
        d = sq - sy * sy / k
        if k < 2 or mn == mx:
            m2[i] = 0.0                              # one value, a constant piece: exactly 0
            continue
        if not d > 0:
            d = 0.0
        if d * 1e8 < sq:
            mean = sy / k
            e = 0.0
            for j in range(a, b):
                v = x[j]
                if v == v:
                    t = (np.float64(v) - shift) - mean
                    e += t * t
            d = e
        m2[i] = d


def piece_summaries(x: np.ndarray, bounds: np.ndarray):
    """(n, lost, total, min, max, m2) of every piece of ``x`` between consecutive ``bounds``; min and
    max in x's dtype (NaN for a piece with no valid value), m2 the sum of squared deviations."""
    p = len(bounds) - 1
    n, lost = np.empty(p, np.int64), np.empty(p, np.int64)
    total, m2 = np.empty(p), np.empty(p)
    lo, hi = np.empty(p, x.dtype), np.empty(p, x.dtype)
    _piece_summaries(x, bounds, n, lost, total, lo, hi, m2)
    return n, lost, total, lo, hi, m2


@_jit
def _sum_at(cols, j):
    """float64(cols[0][j]) + cols[1][j] + ..., added in order (the rails' total of one interval)."""
    s = np.float64(cols[0][j])
    for c in range(1, len(cols)):
        s += np.float64(cols[c][j])
    return s


def _columns(cols: list) -> tuple:
    """The series as one tuple of one dtype (what the kernels over several series take)."""
    dt = np.result_type(*cols)
    return tuple(np.asarray(c, dt) for c in cols)


@_jit
def _piece_max_of_sum(cols, bounds, piece_max, piece_at):
    """Each piece's maximum of the series' sum (_sum_at), ignoring NaN (NaN when the piece has none),
    and the first interval holding it (-1 when none): the maxima of BLOCK intervals first (the loop
    carries the maximum only), then the first block holding the piece's, searched for it."""
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        mx = -math.inf
        seen = False
        first = -1
        for c in range(a, b, BLOCK):
            m = -math.inf
            for j in range(c, min(c + BLOCK, b)):
                s = _sum_at(cols, j)
                if s == s:
                    seen = True
                    if s > m:
                        m = s
            if m > mx or (first < 0 and seen):
                mx = m
                first = c
        at = -1
        if seen:
            for j in range(first, min(first + BLOCK, b)):
                if _sum_at(cols, j) == mx:
                    at = j
                    break
        piece_max[i] = mx if seen else np.nan
        piece_at[i] = at


def piece_max_of_sum(cols: list, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each piece's maximum of the series' float64 sum, added in order, ignoring NaN intervals, and
    the first interval where it lies (where a peak is placed; -1 for a piece of NaN only)."""
    piece_max = np.empty(len(bounds) - 1)
    piece_at = np.empty(len(bounds) - 1, np.int64)
    _piece_max_of_sum(_columns(cols), bounds, piece_max, piece_at)
    return piece_max, piece_at


@_jit
def _bin_counts(hist, v, lo, scale, top):
    """hist[int(clip((v - lo) * scale, 0, top))] += 1 for every value, in the values' float type."""
    last = len(hist) - 1
    for j in range(len(v)):
        f = (v[j] - lo) * scale
        if f < 0:
            hist[0] += 1
        elif f > top:
            hist[last] += 1
        else:
            hist[int(f)] += 1


def bin_counts(hist: np.ndarray, v: np.ndarray, lo: float, scale: float) -> None:
    """Count ``v`` into ``hist``'s bins: the position (v - lo) * scale computed in v's own float type
    (float32 values in float32, as numpy's (v - lo) * scale always did), clipped to the bins, truncated."""
    t = v.dtype.type
    _bin_counts(hist, v, t(lo), t(scale), t(len(hist) - 1))


@_jit
def _prefix_sum(x, c):
    """c[0] = 0, c[i + 1] = c[i] + x[i]: np.cumsum's sequence of float64 additions, in one pass."""
    t = 0.0
    c[0] = 0.0
    for i in range(len(x)):
        t += x[i]
        c[i + 1] = t


def prefix_sum(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The float64 prefix sums of x (float32 values added as float64) into c[:len(x) + 1]: the same
    values as np.cumsum(x, dtype=np.float64), from 0."""
    c = c[:len(x) + 1]
    _prefix_sum(x, c)
    return c


@_jit
def _window_block_max(c, a, w, block, out):
    """out[b] = the max of the window sums c[j + w] - c[j] for j in block b (from a); NaN sticks.
    Four maxima at once: one compare-and-pick chain is the loop's latency (2.3 -> 1.8 ms per 1 M sums)."""
    for b in range(len(out)):
        j0 = a + b * block
        m0 = m1 = m2 = m3 = -math.inf
        for j in range(j0, j0 + block, 4):
            s0 = c[j + w] - c[j]
            s1 = c[j + 1 + w] - c[j + 1]
            s2 = c[j + 2 + w] - c[j + 2]
            s3 = c[j + 3 + w] - c[j + 3]
            m0 = s0 if s0 > m0 or s0 != s0 else m0
            m1 = s1 if s1 > m1 or s1 != s1 else m1
            m2 = s2 if s2 > m2 or s2 != s2 else m2
            m3 = s3 if s3 > m3 or s3 != s3 else m3
        m = m0
        for v in (m1, m2, m3):
            m = v if v > m or v != v else m
        out[b] = m


def window_block_max(c: np.ndarray, a: int, e: int, w: int, block: int) -> np.ndarray:
    """The max of each whole ``block`` of the window sums c[j + w] - c[j], j in [a, e), read straight
    from the prefix: the sums themselves are never written out (a phase's range is made on demand)."""
    if block % 4:
        raise ValueError(f"block {block} must be a multiple of 4")
    out = np.empty((e - a) // block)
    _window_block_max(c, a, w, block, out)
    return out


@_jit
def _window_sum(c, a, w, bad, k):
    """The window sum c[a + w + k] - c[a + k]; -inf for a window that touched a gap (``bad``, or an
    empty mask when there is none), as PrefixSums reads it."""
    if len(bad) and bad[k]:
        return -math.inf
    return c[a + w + k] - c[a + k]


@_jit
def _scan_windows(c, a, w, bad, k0, k1, best, at):
    """The window sums k in [k0, k1) taken into the highest so far (best, at; the first on ties):
    (best, at, the first NaN's k or -1: a NaN is the highest, as in np.argmax)."""
    for k in range(k0, k1):
        v = _window_sum(c, a, w, bad, k)
        if v != v:
            return best, at, k
        if at < 0 or v > best:
            best, at = v, k
    return best, at, -1


@_jit
def _first_max_of_windows(c, a, w, bad, bmax, block, k0s, k1s, out):
    """out[q] = the first k in [k0s[q], k1s[q]) where the window sum c[a + w + k] - c[a + k] is highest
    (NaN counts as the highest, as in np.argmax), -1 for an empty range: whole blocks through their
    maxima ``bmax`` (block b: sums [b * block, (b + 1) * block)), then inside the block holding it."""
    for q in range(len(k0s)):
        k0, k1 = k0s[q], k1s[q]
        out[q] = -1
        if k1 <= k0:
            continue
        j0, j1 = -(-k0 // block), k1 // block        # whole blocks [j0, j1), head [k0, h1), tail [t0, k1)
        if j1 > j0:
            h1, t0 = j0 * block, j1 * block
        else:                                        # no whole block: the values themselves
            j0 = j1 = 0
            h1 = t0 = k1
        best, at, nan_at = _scan_windows(c, a, w, bad, k0, h1, -math.inf, -1)
        in_block = -1
        if nan_at < 0:
            for b in range(j0, j1):
                m = bmax[b]
                if m != m:                 # the first NaN lies in this block
                    nan_at = _scan_windows(c, a, w, bad, b * block, (b + 1) * block, -math.inf, -1)[2]
                    break
                if at < 0 or m > best:
                    best, at, in_block = m, b * block, b
        if nan_at < 0:
            best, tail_at, nan_at = _scan_windows(c, a, w, bad, t0, k1, best, at)
            if tail_at != at:
                at, in_block = tail_at, -1
        if nan_at >= 0:
            out[q] = nan_at
            continue
        if in_block >= 0:                  # the first window of that block reaching its maximum
            for k in range(in_block * block, (in_block + 1) * block):
                if _window_sum(c, a, w, bad, k) == best:
                    at = k
                    break
        out[q] = at


def first_max_of_windows(c: np.ndarray, a: int, w: int, bmax: np.ndarray, block: int, k0s: np.ndarray,
                         k1s: np.ndarray, bad: np.ndarray | None = None) -> np.ndarray:
    """For each range [k0s[q], k1s[q]) of the window sums c[a + w + k] - c[a + k] (nothing written out;
    -inf where ``bad``, a window that touched a gap), np.argmax's index of the range (-1 when empty),
    read through the per-block maxima ``bmax`` of those sums: every phase's best window of a chunk in
    one call."""
    out = np.empty(len(k0s), np.int64)
    bad = _NO_GAP if bad is None else bad
    _first_max_of_windows(c, a, w, bad, bmax, block, np.asarray(k0s, np.int64), np.asarray(k1s, np.int64), out)
    return out


_NO_GAP = np.zeros(0, np.bool_)


def compile_all() -> None:
    """Compile (or load from the cache) every kernel for what the analysis feeds it: float32 from a
    capture file, float64 from blocks in memory; one to three rails. ``make setup`` runs it, so no
    first analysis waits ~1 s per kernel for the compiler."""
    b = np.array([0, 2, 4], np.intp)
    for dt in (np.float32, np.float64):
        x = np.ones(4, dt)
        piece_summaries(x, b)
        for rails in (1, 2, 3):
            piece_max_of_sum([x] * rails, b)
        bin_counts(np.zeros(4, np.int64), x, 0.0, 1.0)
        c = prefix_sum(np.ones(8, dt), np.empty(9))
    bm = window_block_max(c, 0, 4, 1, 4)
    for bad in (None, np.zeros(5, np.bool_)):
        first_max_of_windows(c, 0, 4, bm, 4, np.zeros(1, np.int64), np.ones(1, np.int64), bad)
