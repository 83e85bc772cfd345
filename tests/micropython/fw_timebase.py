# The 64-bit timebase survives ticks_us wrapping at 2**30.
from powerrig_fw.timebase import Timebase

MASK = 0x3FFFFFFF
now = [MASK - 1000]


def ticks():
    return now[0] & MASK


def diff(a, b):
    d = (a - b) & MASK
    return d - 0x40000000 if d >= 0x20000000 else d


tb = Timebase(ticks, diff)
total = 0
for step in (500, 700, 0x10000000, 0x1FFFFFFF, 12345):
    now[0] += step
    total += step
    tb.poll()
assert tb.now_us() == total, (tb.now_us(), total)
print("timebase ok", total)
