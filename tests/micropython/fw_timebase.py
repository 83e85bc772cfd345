# The 64-bit timebase survives ticks_us wrapping at 2**30.
from powerrig_fw.timebase import Timebase

MASK = 0x3FFFFFFF
now = [MASK - 1000]


def ticks():
    return now[0] & MASK


tb = Timebase(ticks)
total = 0
for step in (500, 700, 0x10000000, 0x1FFFFFFF, 12345):
    now[0] += step
    total += step
    tb.poll()
assert tb.now_us() == total, (tb.now_us(), total)
print("timebase ok", total)

# after the 30-bit counter wrapped, poll() still allocates nothing (the value lives in small ints)
try:
    import micropython
    lock, unlock = micropython.heap_lock, micropython.heap_unlock
except (ImportError, AttributeError):
    lock = unlock = lambda: None
now2 = [MASK - 10]


def ticks2():
    return now2[0]


tb2 = Timebase(ticks2)
now2[0] = 5                     # wrapped
tb2.poll()
def polls(n):
    for _ in range(n):      # in a function: loop variables are locals, not dict entries
        now2[0] = (now2[0] + 1000) & MASK
        tb2.poll()


lock()
try:
    polls(100)
finally:
    unlock()
assert tb2.now_us() == 10 + 1 + 5 + 100 * 1000, tb2.now_us()
print("timebase heap-locked ok")

# the clock ping's numbers past 2**30 (a big int on a 32-bit port, which allocates): now_into splits
# the microseconds into (hi, lo) and wire.put_dec writes their digits, heap locked, small ints only
import array

from powerrig_fw import wire

hl = array.array("i", [0, 0])
digits = bytearray(24)
now3 = [MASK - 10]


def ticks3():
    return now3[0]


tb3 = Timebase(ticks3)          # starts 10 us before a wrap: the first reading is below the start
seen = array.array("i", [0])


def ping_digits(step, at):
    t = now3[0] - MASK - 1 + step       # the 30-bit counter moved on by step, in small ints
    now3[0] = t if t >= 0 else t + MASK + 1
    tb3.poll()
    tb3.now_into(hl, 0)
    seen[0] = wire.put_dec(digits, at, hl[0], hl[1])


def digits_of(hi, lo, at):
    seen[0] = wire.put_dec(digits, at, hi, lo)


checks = (11, 5000, 0x3FFFFFF0, 0x20000000, 0x30000000, 0x30000000, 1, 0x3FFFFFFF)
for step in checks:
    lock()
    try:
        ping_digits(step, 0)
    finally:
        unlock()
    assert bytes(digits[:seen[0]]) == str(tb3.now_us()).encode(), (bytes(digits[:seen[0]]), tb3.now_us())
assert tb3.now_us() > 1 << 31, tb3.now_us()
for hi, lo in ((0, 0), (0, 9), (0, 0xFFFFFF), (1, 0), (99999, 12345), (0x3FFFFF, 0xFFFFFF)):
    lock()
    try:
        digits_of(hi, lo, 3)
    finally:
        unlock()
    n = seen[0]
    assert bytes(digits[3:n]) == str(hi * (1 << 24) + lo).encode(), (hi, lo, bytes(digits[3:n]))
print("ping digits heap-locked ok", tb3.now_us())
