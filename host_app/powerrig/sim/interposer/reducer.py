"""numpy version of firmware/powerrig_fw/reduce.py for the simulator: same interface, same bytes.

The simulated front end produces 250 kS/s per channel; the firmware's pure-Python reference is far
too slow for that on a host, so the virtual interposer reduces with this class instead. Equality
with the reference is proven on shared vectors (tests/test_reducer_equivalence.py).
"""
from __future__ import annotations

import numpy as np

from powerrig.interposer.frames import fw, record_dtype

P_SHIFT = fw.P_SHIFT
LO_MASK = (1 << P_SHIFT) - 1
CODE_MAX = 32767
PEAK_NONE_P = fw.PEAK_NONE << P_SHIFT     # a window sum below any real one: PEAK_NONE once shifted


def _by_rail(dtype: np.dtype, r: int) -> np.dtype:
    """``record_dtype(r)``'s bytes as (dig_or, dig_and, r structs of one rail's fields): rail 0's
    fields, their names without the rail number, offsets from the first of them."""
    per = (len(dtype.names) - 2) // r
    names = dtype.names[2:2 + per]
    base = dtype.fields[names[0]][1]
    rail = np.dtype({"names": [n[:-1] for n in names], "formats": [dtype.fields[n][0] for n in names],
                     "offsets": [dtype.fields[n][1] - base for n in names],
                     "itemsize": (dtype.itemsize - base) // r})
    return np.dtype([("dig_or", "u1"), ("dig_and", "u1"), ("rails", rail, (r,))])


class NumpyReducer:
    def __init__(self, n_rails_total: int):
        self.stride = 2 * n_rails_total + 1
        self.configure((0,), 25, 25)

    def configure(self, rail_indices, samples_per_interval, window_samples, offsets_v=None, offsets_i=None):
        if not 1 <= len(rail_indices) <= 4:
            raise ValueError("1..4 rails")
        self.ridx = np.asarray(rail_indices, dtype=np.intp)
        r = len(self.ridx)
        self.off_v = np.asarray(offsets_v if offsets_v else [0] * r, dtype=np.int64)
        self.off_i = np.asarray(offsets_i if offsets_i else [0] * r, dtype=np.int64)
        # rail-major work arrays: rows v0..v(r-1), i0..i(r-1); every sum and window runs along a row
        self.cols = np.concatenate([2 * self.ridx, 2 * self.ridx + 1])
        self.off = np.concatenate([self.off_v, self.off_i])[:, None]
        self.spi = int(samples_per_interval)
        self.window = int(window_samples)
        # rails on adjacent channels (the usual (0, 1, 2)): their codes are one slice of a sample, taken
        # with a strided view instead of a gather
        lo = 2 * int(self.ridx[0])
        self.span = (lo, lo + 2 * r) if list(self.ridx) == list(range(self.ridx[0], self.ridx[0] + r)) else None
        self.off32 = self.off.astype(np.int32) if self.off.any() else None
        self.dtype = record_dtype(r)
        # the same bytes seen as (dig_or, dig_and, r rail structs): a field is set for every rail in one
        # assignment (7 a pass, not 7 per rail)
        self.by_rail = _by_rail(self.dtype, r)
        assert self.by_rail.itemsize == self.dtype.itemsize
        self.restart(0, 0)

    def restart(self, idx_hi, idx_lo):
        self.index = (idx_hi << fw.INDEX_LO_BITS) + idx_lo
        self.carry = np.empty((0, self.stride), dtype=np.int16)
        self.tail = np.empty((len(self.ridx), 0), dtype=np.int32)   # the last window - 1 products
        self.seen = 0   # samples since restart (for the window warm-up)
        self.discard = 0

    def skip(self, n_samples):
        """Lost samples: resume at the next interval boundary of the grid (as the firmware does)."""
        pos = len(self.carry) + n_samples - self.discard
        if pos < 0:
            self.discard = -pos
            return
        discard = (self.spi - pos % self.spi) % self.spi
        nxt = self.index + pos + discard
        self.restart(nxt >> fw.INDEX_LO_BITS, nxt & fw.INDEX_LO_MASK)
        self.discard = discard

    def reduce(self, raw: np.ndarray, n: int) -> tuple[int, np.ndarray]:
        """Reduce n samples; returns (first index, records array) of the intervals completed.

        The work is rail-major (one row per channel, samples along it), so each sum, min, max and the
        window's running sum is one numpy call over contiguous rows for every rail at once, whatever
        the number of rails and intervals. The firmware splits each product p = hi * 2**P_SHIFT + lo to
        keep its sums small ints; here the products themselves are summed (int64) and split after:
        sum(hi) + (sum(lo) >> P_SHIFT) is sum(p) >> P_SHIFT, sum(lo) & LO_MASK is sum(p) & LO_MASK, and
        a shift is monotonic, so min(hi) is min(p) >> P_SHIFT and the window's peak max(sum(p)) >>
        P_SHIFT: the same integers from a third of the rows (tests/test_reducer_equivalence.py)."""
        x = np.asarray(raw[: n * self.stride], dtype=np.int16).reshape(n, self.stride)
        if self.discard:
            k = min(self.discard, n)
            x = x[k:]
            self.discard -= k
        if len(self.carry):
            x = np.concatenate([self.carry, x])
        spi, w, r = self.spi, self.window, len(self.ridx)
        n_int = len(x) // spi
        m = n_int * spi
        first = self.index
        self.carry = x[m:].copy()
        if n_int == 0:
            return first, np.zeros(0, dtype=self.dtype)
        use = x[:m]
        work = np.empty((3 * r, m), dtype=np.int32)       # v; i; product (a clipped one is below 2**30)
        vi = work[:2 * r]
        if self.span is not None:       # channels a..b-1 are v0 i0 v1 i1 ...: rows v0..v(r-1), i0..
            a, b = self.span
            vi.reshape(2, r, m)[...] = use[:, a:b].reshape(m, r, 2).transpose(2, 1, 0)
        else:
            vi[...] = use[:, self.cols].T
        if self.off32 is not None:
            vi -= self.off32
        np.minimum(vi, CODE_MAX, out=vi)        # np.clip's result without its Python wrapper
        np.maximum(vi, -CODE_MAX, out=vi)
        prod = work[2 * r:]
        np.multiply(vi[:r], vi[r:], out=prod)
        sums = np.add.reduce(work.reshape(3 * r, n_int, spi), axis=2, dtype=np.int64)
        p3 = prod.reshape(r, n_int, spi)
        recs = np.empty(n_int, dtype=self.by_rail)     # packed: every byte is one of the fields set below
        d = use[:, -1].astype(np.uint8).reshape(n_int, spi)     # the low byte (a C cast keeps it)
        np.bitwise_or.reduce(d, axis=1, out=recs["dig_or"])
        np.bitwise_and.reduce(d, axis=1, out=recs["dig_and"])
        rails = recs["rails"]                        # (n_int, r) rail structs
        rails["p_min"] = (np.minimum.reduce(p3, axis=2) >> P_SHIFT).T
        rails["p_max"] = (np.maximum.reduce(p3, axis=2) >> P_SHIFT).T
        # sliding 100 us window over [tail, use], windows ending at each sample of use
        t = self.tail.shape[1]
        ext = np.concatenate([self.tail, prod], axis=1)
        c = np.empty((r, t + m + 1), dtype=np.int64)
        c[:, 0] = 0
        np.cumsum(ext, axis=1, dtype=np.int64, out=c[:, 1:])
        if t + 1 >= w:                  # a full tail: every window starts inside ext
            win = c[:, t + 1:] - c[:, t + 1 - w:t + m + 1 - w]
        else:
            end = np.arange(t + 1, t + m + 1)
            win = c[:, end] - c[:, np.maximum(end - w, 0)]
        warm = w - self.seen - 1        # the first samples' windows are not complete yet
        if warm > 0:
            win[:, :warm] = PEAK_NONE_P
        rails["peak"] = (np.maximum.reduce(win.reshape(r, n_int, spi), axis=2) >> P_SHIFT).T
        keep = w - 1
        self.tail = ext[:, -keep:].copy() if keep else ext[:, :0]
        self.seen = min(self.seen + m, w)
        rails["sum_v"] = sums[:r].T
        rails["sum_i"] = sums[r:2 * r].T
        rails["sum_p_hi"] = (sums[2 * r:] >> P_SHIFT).T
        rails["sum_p_lo"] = (sums[2 * r:] & LO_MASK).T
        self.index += m
        return first, recs.view(self.dtype)

    def feed(self, raw, n, framer):
        """Same contract as the firmware Reducer.feed: completed intervals go into the framer. Records
        are copied a frame's worth at a time (the framer's slot, n and first index set as commit()
        sets them, then send_full()), not one commit() per record: the same frames, a few Python
        calls per frame instead of a few per 100 us interval."""
        first, recs = self.reduce(raw, n)
        k = len(recs)
        if not k:
            return
        rs = recs.dtype.itemsize
        data = recs.tobytes()
        buf = framer.buf
        per = framer.per_frame
        done = 0
        while done < k:
            if framer.n == 0:
                idx = first + done * self.spi
                framer.idx_hi = idx >> fw.INDEX_LO_BITS
                framer.idx_lo = idx & fw.INDEX_LO_MASK
            take = min(per - framer.n, k - done)
            off = framer.slot()
            buf[off:off + take * rs] = data[done * rs:(done + take) * rs]
            framer.n += take
            done += take
            if framer.n == per:
                framer.send_full()
