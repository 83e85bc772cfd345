"""Which machine-code kernels this CPU runs, decided once at start-up.

The RP2350's Cortex-M33 (ARMv8-M mainline, reported by MicroPython as an ARMv7-M class target) runs
the Thumb-2 kernels (board/*_thumb.py); the RP2040's Cortex-M0+ (ARMv6-M) has no Thumb-2 (no SSAT, no
IT blocks, no unaligned word stores) and runs the ARMv6-M rail loop (board/rail_v6m.py); the CRC and
burst kernels use Thumb-1 instructions only and run on both. Any other port (the unix port in the
tests) uses the viper loops. The architecture is the one MicroPython's native emitter targets
(sys.implementation._mpy), so the choice follows the firmware image, not a name.
"""
import sys

_ARCH_ARMV6M = 4
_ARCH_ARMV7M = 5
_ARCH_ARMV8_LAST = 8       # armv7em, armv7emsp, armv7emdp: Thumb-2 as well

try:
    ARCH = (sys.implementation._mpy >> 10) & 0x0F
except AttributeError:      # a port without native code
    ARCH = 0

THUMB2 = _ARCH_ARMV7M <= ARCH <= _ARCH_ARMV8_LAST
ARMV6M = ARCH == _ARCH_ARMV6M
THUMB = THUMB2 or ARMV6M
ALIGNED_ONLY = not THUMB2 and ARCH != 1 and ARCH != 2   # x86/x64 and ARMv7-M store unaligned words


def rail_kernel(kind=None):
    """The rail loop for ``kind`` ("thumb2", "v6m", "viper"; None: this CPU's), or None for viper."""
    kind = kind or ("thumb2" if THUMB2 else "v6m" if ARMV6M else "viper")
    if kind == "thumb2":
        from board.rail_thumb import block_run      # the whole block, records included
        return block_run
    if kind == "v6m":
        from board.rail_v6m import rail_run
        return rail_run
    return None
