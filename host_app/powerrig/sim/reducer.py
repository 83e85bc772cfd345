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
        self.spi = int(samples_per_interval)
        self.window = int(window_samples)
        self.dtype = record_dtype(r)
        self.restart(0, 0)

    def restart(self, idx_hi, idx_lo):
        self.index = (idx_hi << fw.INDEX_LO_BITS) + idx_lo
        self.carry = np.empty((0, self.stride), dtype=np.int16)
        r = len(self.ridx)
        self.tail_hi = np.empty((0, r), dtype=np.int64)
        self.tail_lo = np.empty((0, r), dtype=np.int64)
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
        """Reduce n samples; returns (first index, records array) of the intervals completed."""
        x = np.asarray(raw[: n * self.stride], dtype=np.int16).reshape(n, self.stride)
        if self.discard:
            k = min(self.discard, n)
            x = x[k:]
            self.discard -= k
        if len(self.carry):
            x = np.concatenate([self.carry, x])
        spi, w = self.spi, self.window
        n_int = len(x) // spi
        use, self.carry = x[: n_int * spi], x[n_int * spi:].copy()
        first = self.index
        recs = np.zeros(n_int, dtype=self.dtype)
        if n_int == 0:
            return first, recs
        v = np.clip(use[:, 2 * self.ridx].astype(np.int64) - self.off_v, -CODE_MAX, CODE_MAX)
        i = np.clip(use[:, 2 * self.ridx + 1].astype(np.int64) - self.off_i, -CODE_MAX, CODE_MAX)
        p = v * i
        hi, lo = p >> P_SHIFT, p & LO_MASK
        shape = (n_int, spi, len(self.ridx))
        d = (use[:, -1] & 0xFF).astype(np.uint8).reshape(n_int, spi)
        recs["dig_or"] = np.bitwise_or.reduce(d, axis=1)
        recs["dig_and"] = np.bitwise_and.reduce(d, axis=1)
        sum_v = v.reshape(shape).sum(axis=1)
        sum_i = i.reshape(shape).sum(axis=1)
        s_hi = hi.reshape(shape).sum(axis=1)
        s_lo = lo.reshape(shape).sum(axis=1)
        s_hi += s_lo >> P_SHIFT
        s_lo &= LO_MASK
        p_min = hi.reshape(shape).min(axis=1)
        p_max = hi.reshape(shape).max(axis=1)
        # sliding 100 us window over [tail, use], windows ending at each sample of use
        ext_hi = np.concatenate([self.tail_hi, hi])
        ext_lo = np.concatenate([self.tail_lo, lo])
        t = len(self.tail_hi)
        z = np.zeros((1, len(self.ridx)), dtype=np.int64)
        c_hi = np.concatenate([z, np.cumsum(ext_hi, axis=0)])
        c_lo = np.concatenate([z, np.cumsum(ext_lo, axis=0)])
        end = np.arange(t + 1, t + len(use) + 1)
        start = np.maximum(end - w, 0)
        w_hi = c_hi[end] - c_hi[start]
        w_lo = c_lo[end] - c_lo[start]
        top = w_hi + (w_lo >> P_SHIFT)
        complete = (self.seen + np.arange(1, len(use) + 1)) >= w
        top[~complete] = fw.PEAK_NONE
        peak = top.reshape(shape).max(axis=1)
        keep = w - 1
        self.tail_hi = ext_hi[-keep:] if keep else ext_hi[:0]
        self.tail_lo = ext_lo[-keep:] if keep else ext_lo[:0]
        self.seen = min(self.seen + len(use), w)
        for k in range(len(self.ridx)):
            recs[f"sum_v{k}"] = sum_v[:, k]
            recs[f"sum_i{k}"] = sum_i[:, k]
            recs[f"sum_p_hi{k}"] = s_hi[:, k]
            recs[f"sum_p_lo{k}"] = s_lo[:, k]
            recs[f"p_min{k}"] = p_min[:, k]
            recs[f"p_max{k}"] = p_max[:, k]
            recs[f"peak{k}"] = peak[:, k]
        self.index += n_int * spi
        return first, recs

    def feed(self, raw, n, framer):
        """Same contract as the firmware Reducer.feed: completed intervals go into the framer."""
        first, recs = self.reduce(raw, n)
        rs = recs.dtype.itemsize
        data = recs.tobytes()
        buf = framer.buf
        for k in range(len(recs)):
            off = framer.slot()
            buf[off:off + rs] = data[k * rs:(k + 1) * rs]
            idx = first + k * self.spi
            framer.commit(idx >> fw.INDEX_LO_BITS, idx & fw.INDEX_LO_MASK)
