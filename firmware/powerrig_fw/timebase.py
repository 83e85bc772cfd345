"""64-bit microsecond clock from time.ticks_us, which wraps (at 2**30 us on MicroPython).

Call ``poll()`` more often than the wrap period (about 17.9 minutes): the main loop does, every pass.
"""
try:
    from time import ticks_us, ticks_ms, ticks_diff
except ImportError:  # CPython
    import time as _t

    def ticks_us():
        return _t.monotonic_ns() // 1000 & 0x3FFFFFFF

    def ticks_ms():
        return _t.monotonic_ns() // 1000000 & 0x3FFFFFFF

    def ticks_diff(a, b):
        return ((a - b + (1 << 29)) & 0x3FFFFFFF) - (1 << 29)


PERIOD = 1 << 30   # ticks_us wraps here on MicroPython


class Timebase:
    """Counts wraps of the 30-bit tick counter with small ints only, so ``poll()`` never allocates;
    the 64-bit value is built in ``now_us()``, which is not on a hot path."""

    def __init__(self, ticks=None):
        self._ticks = ticks or ticks_us
        self._last = self._ticks()
        self._start = self._last
        self._wraps = 0

    def poll(self):
        now = self._ticks()
        if now < self._last:
            self._wraps += 1
        self._last = now

    def now_us(self):
        """Microseconds since this Timebase started (poll at least every 17 minutes)."""
        self.poll()
        return self._wraps * PERIOD + self._last - self._start

    def now_into(self, out, k):
        """now_us() as out[k] * 2**24 + out[k + 1], small ints only (past 2**30 us, 18 minutes, the
        value is a big int on a 32-bit MicroPython, which allocates: the clock ping's reply must not)."""
        self.poll()
        d = self._last - self._start       # within (-2**30, 2**30): borrow a wrap when negative
        hi = self._wraps << 6              # 2**30 = 2**6 * 2**24
        if d < 0:
            d = d + 0x3FFFFFFF + 1         # (PERIOD itself is a big int on a 32-bit port)
            hi -= 64
        out[k] = hi + (d >> 24)
        out[k + 1] = d & 0xFFFFFF
