"""64-bit microsecond clock from time.ticks_us, which wraps (at 2**30 us on MicroPython).

Call ``poll()`` more often than the wrap period (about 18 minutes): the main loop does, every pass.
"""
try:
    from time import ticks_us, ticks_diff
except ImportError:  # CPython
    import time as _t

    def ticks_us():
        return _t.monotonic_ns() // 1000 & 0x3FFFFFFF

    def ticks_diff(a, b):
        d = (a - b) & 0x3FFFFFFF
        return d - 0x40000000 if d >= 0x20000000 else d


class Timebase:
    def __init__(self, ticks=None, diff=None):
        self._ticks = ticks or ticks_us
        self._diff = diff or ticks_diff
        self._last = self._ticks()
        self._elapsed = 0   # may become a big int after 18 min: only read outside hot paths

    def poll(self):
        now = self._ticks()
        self._elapsed += self._diff(now, self._last)
        self._last = now

    def now_us(self):
        self.poll()
        return self._elapsed
