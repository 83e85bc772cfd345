"""Compiled loops of the analysis pass (numba): one pass over a chunk where numpy needs several.

numpy runs one operation over a whole array per call, so summarising a chunk's pieces took a dozen
passes over every value (conversion, shift, squares, two sums, minimum, maximum; the rails' float64
sums and their maxima; the histogram's shift, scale, truncation and counting; the window sums written
out and their block maxima). The pass is memory-bound: each kernel here reads each value once and
releases the GIL, so the reading thread runs beside it.

The kernels compute the figures their numpy predecessors did with the same float arithmetic (window
sums, maxima, histogram bins bit for bit); only a piece's float64 sums differ in order (blocks of
BLOCK, shifted by the piece's own first value), which moves them by about 1e-16 of themselves.

Written so the compiler can keep several values in flight (issue 42, docs/scale.md "A tenth look";
the 10-hour analysis's results are the same bit for bit): loops run over slices (numba checks a
negative index on every ``x[j]`` with ``j`` from ``range(a, b)``, which stops vectorisation), the
sums of a block may be reassociated (they are exact in float64 at a capture's levels), and a
running maximum or minimum is eight, not one (one compare-and-pick per value is a latency chain;
LLVM does not vectorise a select-based float maximum without ``nnan``, which would drop the NaN
checks).
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


@numba.njit(cache=True, nogil=True, fastmath={"reassoc"})
def _block_sums(x, shift):
    """(sum, sum of squares, count) of x's valid values shifted by ``shift``, in float64. Reassociated
    (the compiler adds in vector lanes; a NaN adds 0): a block's shifted float32 values add exactly in
    float64 in any order at the levels a capture holds; the squares' last bits may move."""
    by = 0.0
    bq = 0.0
    k = 0
    for j in range(len(x)):
        v = x[j]
        ok = v == v
        y = np.float64(v) - shift if ok else 0.0
        by += y
        bq += y * y
        k += ok
    return by, bq, k


@_jit
def _up(m, v):
    """The larger of a running maximum and a value; a NaN value is passed over (compares false)."""
    return v if v > m else m


@_jit
def _down(m, v):
    """The smaller of a running minimum and a value; a NaN value is passed over."""
    return v if v < m else m


@_jit
def _max8(x, m):
    """The largest of m and x's values, NaN ignored: eight running maxima (one compare-and-pick per
    value is a latency chain; LLVM vectorises a float maximum only with ``nnan``)."""
    n8 = len(x) // 8 * 8
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = m
    for j in range(0, n8, 8):
        m0, m1, m2, m3 = _up(m0, x[j]), _up(m1, x[j + 1]), _up(m2, x[j + 2]), _up(m3, x[j + 3])
        m4, m5, m6, m7 = _up(m4, x[j + 4]), _up(m5, x[j + 5]), _up(m6, x[j + 6]), _up(m7, x[j + 7])
    for j in range(n8, len(x)):
        m0 = _up(m0, x[j])
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))


@_jit
def _min_max(x, mn, mx):
    """(min, max) of mn, mx and x's values, NaN ignored, in one pass: _max8's eight running pairs."""
    n8 = len(x) // 8 * 8
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = mn
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = mx
    for j in range(0, n8, 8):
        a0, a1, a2, a3 = _down(a0, x[j]), _down(a1, x[j + 1]), _down(a2, x[j + 2]), _down(a3, x[j + 3])
        a4, a5, a6, a7 = _down(a4, x[j + 4]), _down(a5, x[j + 5]), _down(a6, x[j + 6]), _down(a7, x[j + 7])
        b0, b1, b2, b3 = _up(b0, x[j]), _up(b1, x[j + 1]), _up(b2, x[j + 2]), _up(b3, x[j + 3])
        b4, b5, b6, b7 = _up(b4, x[j + 4]), _up(b5, x[j + 5]), _up(b6, x[j + 6]), _up(b7, x[j + 7])
    for j in range(n8, len(x)):
        a0, b0 = _down(a0, x[j]), _up(b0, x[j])
    return (min(min(min(a0, a1), min(a2, a3)), min(min(a4, a5), min(a6, a7))),
            max(max(max(b0, b1), max(b2, b3)), max(max(b4, b5), max(b6, b7))))


@_jit
def _piece_summaries(x, bounds, n, lost, total, lo, hi, m2):
    """Per piece [bounds[i], bounds[i+1]): valid count, NaN count, sum, min, max, squared deviations.

    The sums are of the values shifted by the piece's first valid value, near its level, so that
    sum(y^2) - sum(y)^2 / n keeps its digits, and are made BLOCK values at a time; a piece with
    almost no spread (the difference would keep less than 8 digits) takes a second, exact pass.
    Each block is a slice (its indices known non-negative, so the compiler vectorises the sums)."""
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        shift = _first_valid(x, a, b)
        sy = 0.0
        sq = 0.0
        k = 0
        mn = math.inf
        mx = -math.inf
        for c in range(a, b, BLOCK):
            xs = x[c:min(c + BLOCK, b)]
            by, bq, bk = _block_sums(xs, shift)
            mn, mx = _min_max(xs, mn, mx)
            sy += by
            sq += bq
            k += bk
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


def _columns(cols: list) -> tuple:
    """The series as one tuple of one dtype (what the kernels over several series take)."""
    dt = np.result_type(*cols)
    return tuple(np.asarray(c, dt) for c in cols)


@_jit
def _sums_into(cols, c, e, buf):
    """buf[:e - c] = the series' float64 sums of intervals [c, e): float64(cols[0][j]) + cols[1][j] +
    ..., added in that order (the rails' total of an interval), one series at a time over slices
    (vectorised)."""
    b = buf[:e - c]
    x = cols[0][c:e]
    for j in range(len(b)):
        b[j] = np.float64(x[j])
    for r in range(1, len(cols)):
        x = cols[r][c:e]
        for j in range(len(b)):
            b[j] += np.float64(x[j])
    return b


@_jit
def _any_valid(x):
    """Whether x holds a value that is not NaN."""
    for j in range(len(x)):
        if x[j] == x[j]:
            return True
    return False


@_jit
def _piece_max_of_sum(cols, bounds, piece_max, piece_at):
    """Each piece's maximum of the series' sum (_sums_into), ignoring NaN (NaN when the piece has none),
    and the first interval holding it (-1 when none): the maxima of BLOCK intervals first (their sums
    made into a buffer, then eight running maxima), then the first block holding the piece's,
    searched for it."""
    buf = np.empty(BLOCK)
    for i in range(len(bounds) - 1):
        a, b = bounds[i], bounds[i + 1]
        mx = -math.inf
        seen = False
        first = -1
        for c in range(a, b, BLOCK):
            sums = _sums_into(cols, c, min(c + BLOCK, b), buf)
            m = _max8(sums, -math.inf)
            if not seen:
                seen = m > -math.inf or _any_valid(sums)       # (a block of -inf sums is valid)
            if m > mx or (first < 0 and seen):
                mx = m
                first = c
        at = -1
        if seen:
            sums = _sums_into(cols, first, min(first + BLOCK, b), buf)
            for j in range(len(sums)):
                if sums[j] == mx:
                    at = first + j
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
def _bin_index(v, lo, scale, top, idx):
    """idx[j] = int(clip((v[j] - lo) * scale, 0, top)) in v's float type (vectorised)."""
    z = lo - lo
    for j in range(len(v)):
        f = (v[j] - lo) * scale
        f = f if f > z else z
        f = f if f < top else top
        idx[j] = np.int32(f)


@_jit
def _bin_counts(hist, v, lo, scale, top):
    """hist[int(clip((v - lo) * scale, 0, top))] += 1 for every value (no NaN), in the values' float
    type: 512 bins' indices at a time (vectorised), then their counts."""
    idx = np.empty(512, np.int32)
    for c in range(0, len(v), 512):
        vs = v[c:c + 512]
        _bin_index(vs, lo, scale, top, idx)
        for j in range(len(vs)):
            hist[idx[j]] += 1


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
def _window_sums_into(c, j0, j1, w, buf):
    """(buf[:j1 - j0] = the window sums c[j + w] - c[j] for j in [j0, j1), how many are NaN):
    over slices, so the compiler vectorises it."""
    lo = c[j0:j1]
    hi = c[j0 + w:j1 + w]
    s = buf[:j1 - j0]
    nan = 0
    for j in range(len(s)):
        d = hi[j] - lo[j]
        s[j] = d
        nan += d != d
    return s, nan


@_jit
def _window_block_max(c, a, w, block, out):
    """out[b] = the max of the window sums c[j + w] - c[j] for j in block b (from a); NaN sticks.
    A block's sums into a buffer, then eight running maxima; a block holding a NaN or an infinity
    is scanned again one sum at a time, NaN-sticky (the running maxima pass a NaN over)."""
    buf = np.empty(block)
    for b in range(len(out)):
        sums, nan = _window_sums_into(c, a + b * block, a + (b + 1) * block, w, buf)
        m = _max8(sums, -math.inf)
        if nan or not m - m == 0.0:
            m = -math.inf
            for s in sums:
                m = s if s > m or s != s else m
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
def _scan_windows_one_by_one(c, a, w, bad, k0, k1, best, at):
    """_scan_windows one window at a time (a range with gaps, or holding a NaN)."""
    for k in range(k0, k1):
        v = _window_sum(c, a, w, bad, k)
        if v != v:
            return best, at, k
        if at < 0 or v > best:
            best, at = v, k
    return best, at, -1


@_jit
def _scan_windows(c, a, w, bad, k0, k1, best, at, buf):
    """The window sums k in [k0, k1) taken into the highest so far (best, at; the first on ties):
    (best, at, the first NaN's k or -1: a NaN is the highest, as in np.argmax). Without gaps: the
    range's sums into ``buf`` (a range of up to its length), their maximum (eight running maxima),
    then the first window reaching it; a range with gaps or a NaN, one window at a time."""
    if k1 <= k0:
        return best, at, -1
    if len(bad) or k1 - k0 > len(buf):
        return _scan_windows_one_by_one(c, a, w, bad, k0, k1, best, at)
    sums, nan = _window_sums_into(c, a + k0, a + k1, w, buf)
    if nan:
        return _scan_windows_one_by_one(c, a, w, bad, k0, k1, best, at)
    m = _max8(sums, -math.inf)
    if at < 0 or m > best:
        for j in range(len(sums)):
            if sums[j] == m:
                return m, k0 + j, -1
    return best, at, -1


@_jit
def _first_max_of_windows(c, a, w, bad, bmax, block, k0s, k1s, out):
    """out[q] = the first k in [k0s[q], k1s[q]) where the window sum c[a + w + k] - c[a + k] is highest
    (NaN counts as the highest, as in np.argmax), -1 for an empty range: whole blocks through their
    maxima ``bmax`` (block b: sums [b * block, (b + 1) * block)), then inside the block holding it."""
    buf = np.empty(block)
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
        best, at, nan_at = _scan_windows(c, a, w, bad, k0, h1, -math.inf, -1, buf)
        in_block = -1
        if nan_at < 0:
            for b in range(j0, j1):
                m = bmax[b]
                if m != m:                 # the first NaN lies in this block
                    nan_at = _scan_windows(c, a, w, bad, b * block, (b + 1) * block, -math.inf, -1, buf)[2]
                    break
                if at < 0 or m > best:
                    best, at, in_block = m, b * block, b
        if nan_at < 0:
            best, tail_at, nan_at = _scan_windows(c, a, w, bad, t0, k1, best, at, buf)
            if tail_at != at:
                at, in_block = tail_at, -1
        if nan_at >= 0:
            out[q] = nan_at
            continue
        if in_block >= 0:                  # the first window of that block reaching its maximum
            at = _scan_windows(c, a, w, bad, in_block * block, (in_block + 1) * block, -math.inf, -1, buf)[1]
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
