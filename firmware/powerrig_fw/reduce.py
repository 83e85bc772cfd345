"""Reference reduction of raw 4 us samples into interval records (pure Python, allocation-free).

Input: blocks of int16 codes, interleaved per sample instant as
    v[0], i[0], v[1], i[1], ... v[R-1], i[R-1], digital
for every rail R the front end has. Output: one record per interval (wire.RAIL_FORMAT per enabled
rail) written straight into the framer's buffer.

Exactness on a 32-bit MCU: codes are clamped to +-32767 so a product p = v * i fits a small int;
p is split as hi = p >> 15, lo = p & 0x7FFF and the halves are summed separately, so every sum of
up to MAX_INTERVAL_SAMPLES products stays a small int and nothing is ever rounded.

The 100 us peak window slides across interval boundaries: a ring of the last W products per rail.

This module is the yardstick: the board's viper kernel and the simulator's numpy reducer must write
byte-identical records for the same input (tests/vectors).
"""
import array
import struct

from powerrig_fw.wire import P_SHIFT, PEAK_NONE, RAIL_FORMAT, RAIL_SIZE, RECORD_HEAD, INDEX_LO_MASK, INDEX_LO_BITS

CODE_MAX = 32767
LO_MASK = (1 << P_SHIFT) - 1
MAX_INTERVAL_SAMPLES = 2500   # 10 ms at 4 us: keeps sum_v, sum_i and sum_p_hi below 2**30
MAX_RAILS = 4
MAX_WINDOW = 64


def check_config(rail_indices, samples_per_interval, window_samples):
    """The limits every reducer (this reference and the board's) accepts: raise ValueError outside them."""
    if not 1 <= len(rail_indices) <= MAX_RAILS:
        raise ValueError("1..%d rails" % MAX_RAILS)
    if not 1 <= samples_per_interval <= MAX_INTERVAL_SAMPLES:
        raise ValueError("interval must be 1..%d samples" % MAX_INTERVAL_SAMPLES)
    if not 1 <= window_samples <= MAX_WINDOW:
        raise ValueError("window must be 1..%d samples" % MAX_WINDOW)


class Reducer:
    def __init__(self, n_rails_total):
        self.stride = 2 * n_rails_total + 1
        n = MAX_RAILS
        self.rail_idx = array.array("b", bytes(n))      # raw channel pair index of each enabled rail
        self.offset_v = array.array("i", bytes(4 * n))  # calibration offsets (codes), per enabled rail
        self.offset_i = array.array("i", bytes(4 * n))
        self.sum_v = array.array("i", bytes(4 * n))
        self.sum_i = array.array("i", bytes(4 * n))
        self.sum_hi = array.array("i", bytes(4 * n))
        self.sum_lo = array.array("i", bytes(4 * n))
        self.p_min = array.array("i", bytes(4 * n))
        self.p_max = array.array("i", bytes(4 * n))
        self.peak = array.array("i", bytes(4 * n))
        self.win_hi = array.array("i", bytes(4 * n * MAX_WINDOW))
        self.win_lo = array.array("i", bytes(4 * n * MAX_WINDOW))
        self.wsum_hi = array.array("i", bytes(4 * n))
        self.wsum_lo = array.array("i", bytes(4 * n))
        self.n_rails = 0
        self.spi = 25
        self.window = 25
        self.configure((0,), 25, 25)

    def configure(self, rail_indices, samples_per_interval, window_samples, offsets_v=None, offsets_i=None):
        """Select rails (indices into the front end's rails) and interval/window lengths in samples."""
        check_config(rail_indices, samples_per_interval, window_samples)
        self.n_rails = len(rail_indices)
        for k in range(self.n_rails):
            self.rail_idx[k] = rail_indices[k]
            self.offset_v[k] = offsets_v[k] if offsets_v else 0
            self.offset_i[k] = offsets_i[k] if offsets_i else 0
        self.spi = samples_per_interval
        self.window = window_samples
        self.restart(0, 0)

    def restart(self, idx_hi, idx_lo):
        """Begin a fresh interval at this sample index and forget the window (start, overrun)."""
        self.idx_hi = idx_hi
        self.idx_lo = idx_lo
        self.in_interval = 0
        self.in_window = 0
        self.wpos = 0
        self.dig_or = 0
        self.dig_and = 0xFF
        self.discard = 0
        for k in range(self.n_rails):
            self._clear_rail(k)
            self.wsum_hi[k] = 0
            self.wsum_lo[k] = 0
        for k in range(MAX_RAILS * MAX_WINDOW):
            self.win_hi[k] = 0
            self.win_lo[k] = 0

    def _clear_rail(self, k):
        self.sum_v[k] = 0
        self.sum_i[k] = 0
        self.sum_hi[k] = 0
        self.sum_lo[k] = 0
        self.p_min[k] = 0x3FFFFFFF
        self.p_max[k] = -0x3FFFFFFF
        self.peak[k] = PEAK_NONE

    def skip(self, n_samples):
        """n samples were lost before the next block.

        The interval in progress is lost with them, and reduction resumes at the next interval
        boundary of the original grid (the samples before it are discarded), so interval starts
        stay a whole number of intervals apart: the host sees a gap of whole intervals.
        """
        pos = self.in_interval + n_samples - self.discard   # samples past the current interval start
        if pos < 0:                     # still short of the boundary we were already heading for
            self.discard = -pos
            return
        discard = (self.spi - pos % self.spi) % self.spi
        lo = self.idx_lo + pos + discard
        hi = self.idx_hi
        while lo > INDEX_LO_MASK:
            lo -= 1 << INDEX_LO_BITS
            hi += 1
        self.restart(hi, lo)
        self.discard = discard

    def feed(self, raw, n_samples, framer):
        """Reduce n_samples sample instants from raw (array('h')); completed intervals go to framer."""
        stride = self.stride
        nr = self.n_rails
        spi = self.spi
        window = self.window
        ridx = self.rail_idx
        base = 0
        for _s in range(n_samples):
            if self.discard:
                self.discard -= 1
                base += stride
                continue
            d = raw[base + stride - 1] & 0xFF
            self.dig_or |= d
            self.dig_and &= d
            wpos = self.wpos
            for k in range(nr):
                c = 2 * ridx[k] + base
                v = raw[c] - self.offset_v[k]
                i = raw[c + 1] - self.offset_i[k]
                if v > CODE_MAX:
                    v = CODE_MAX
                elif v < -CODE_MAX:
                    v = -CODE_MAX
                if i > CODE_MAX:
                    i = CODE_MAX
                elif i < -CODE_MAX:
                    i = -CODE_MAX
                p = v * i
                hi = p >> P_SHIFT
                lo = p & LO_MASK
                self.sum_v[k] += v
                self.sum_i[k] += i
                self.sum_hi[k] += hi
                self.sum_lo[k] += lo
                if hi < self.p_min[k]:
                    self.p_min[k] = hi
                if hi > self.p_max[k]:
                    self.p_max[k] = hi
                w = k * MAX_WINDOW + wpos
                wh = self.wsum_hi[k] + hi - self.win_hi[w]
                wl = self.wsum_lo[k] + lo - self.win_lo[w]
                self.win_hi[w] = hi
                self.win_lo[w] = lo
                self.wsum_hi[k] = wh
                self.wsum_lo[k] = wl
                if self.in_window >= window - 1:
                    top = wh + (wl >> P_SHIFT)
                    if top > self.peak[k]:
                        self.peak[k] = top
            wpos += 1
            if wpos == window:
                wpos = 0
            self.wpos = wpos
            if self.in_window < window:
                self.in_window += 1
            base += stride
            self.in_interval += 1
            if self.in_interval == spi:
                self._emit(framer)

    def _emit(self, framer):
        buf = framer.buf
        off = framer.slot()
        buf[off] = self.dig_or
        buf[off + 1] = self.dig_and
        off += RECORD_HEAD
        for k in range(self.n_rails):
            lo = self.sum_lo[k]
            hi = self.sum_hi[k] + (lo >> P_SHIFT)
            struct.pack_into(RAIL_FORMAT, buf, off, self.sum_v[k], self.sum_i[k], hi, lo & LO_MASK,
                             self.p_min[k], self.p_max[k], self.peak[k])
            off += RAIL_SIZE
            self._clear_rail(k)
        framer.commit(self.idx_hi, self.idx_lo)
        lo = self.idx_lo + self.spi
        if lo > INDEX_LO_MASK:
            lo -= 1 << INDEX_LO_BITS
            self.idx_hi += 1
        self.idx_lo = lo
        self.in_interval = 0
        self.dig_or = 0
        self.dig_and = 0xFF
