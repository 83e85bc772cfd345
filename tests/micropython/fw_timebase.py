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
