"""The emulated Cortex-M's instruction count as the sample clock (QEMU -icount shift=0: 1 us of
ticks_us is 1000 instructions; a sample is 4 us), and the board's fire() on it: the stand-in for the
DMA-derived clock of board.blocks, for powerrig_fw.actions' timing tests.

The qemu port's ticks_us reads its millisecond count and the SysTick counter one after the other, so a
read that straddles a SysTick wrap is off by a millisecond; the median of three reads in a row never
is (one read at most straddles it)."""
import time

import micropython

_ticks = time.ticks_us


@micropython.viper
def _us() -> int:
    ticks = _ticks
    a = int(ticks())
    b = int(ticks())
    c = int(ticks())
    if a > b:
        a, b = b, a
    if b > c:
        b = c
    if a > b:
        b = a
    return b


def sample_now():
    return _us() >> 2


us = _us        # ticks_us without the straddle's millisecond (the benchmarks' pass timings)


@micropython.viper
def fire(plan: ptr32, n: int) -> int:
    """board.blocks._fire with this clock: wait for each row's sample, write its register, note when."""
    us = _us
    k = 0
    while k < n:
        at = plan[4 * k]
        while int((int(us()) >> 2) - at) < 0:
            pass
        ptr32(plan[4 * k + 1])[0] = plan[4 * k + 2]
        plan[4 * k + 3] = int(us()) >> 2
        k += 1
    return n
