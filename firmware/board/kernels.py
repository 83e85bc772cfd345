"""viper kernels for the RP2350: the per-sample work the CPU must never do in bytecode.

These are the board's versions of powerrig_fw.crc.crc32_into and of the unpacking of PIO words into
interleaved int16 samples. viper uses 32-bit machine integers, so nothing here allocates.
"""
import micropython
from powerrig_fw.crc import TABLE_LO, TABLE_HI

_TABLE = bytearray(1024)
for _n in range(256):
    _c = TABLE_LO[_n] | (TABLE_HI[_n] << 16)
    _TABLE[4 * _n] = _c & 0xFF
    _TABLE[4 * _n + 1] = (_c >> 8) & 0xFF
    _TABLE[4 * _n + 2] = (_c >> 16) & 0xFF
    _TABLE[4 * _n + 3] = (_c >> 24) & 0xFF


@micropython.viper
def _crc32(buf: ptr8, start: int, end: int, table: ptr32) -> int:
    c = uint(0xFFFFFFFF)
    k = start
    while k < end:
        c = uint(table[(c ^ uint(buf[k])) & 0xFF]) ^ (c >> 8)
        k += 1
    c = c ^ uint(0xFFFFFFFF)
    buf[end] = c & 0xFF
    buf[end + 1] = (c >> 8) & 0xFF
    buf[end + 2] = (c >> 16) & 0xFF
    buf[end + 3] = (c >> 24) & 0xFF
    return 0


try:   # Thumb-2 where the port has the inline assembler (the MCU); viper elsewhere
    from board.crc_thumb import crc32_run as _crc32_thumb
except (ImportError, SyntaxError, ValueError):
    _crc32_thumb = None


def crc32_into(buf, start, end):
    """CRC-32 of buf[start:end] stored at buf[end:end + 4] (powerrig_fw.crc's signature)."""
    if _crc32_thumb is not None:
        _crc32_thumb(buf, start, end, _TABLE)
    else:
        _crc32(buf, start, end, _TABLE)


@micropython.viper
def _unzip(w: uint) -> int:
    """Bits 31,29,..,1 -> code A; bits 30,28,..,0 -> code B; as (A << 16) | B."""
    a = 0
    b = 0
    k = 0
    while k < 16:
        a = (a << 1) | int((w >> uint(31 - 2 * k)) & 1)
        b = (b << 1) | int((w >> uint(30 - 2 * k)) & 1)
        k += 1
    return (a << 16) | b


@micropython.viper
def unpack_words(w0: ptr32, w1: ptr32, w2: ptr32, dig: ptr8, out: ptr16, n: int):
    """PIO words of the three ADCs -> interleaved samples v0 i0 v1 i1 v2 i2 digital.

    Each ADC's state machine shifts ``in pins, 2`` 16 times per sample: odd bits are SDOA (voltage),
    even bits SDOB (current). The 16-bit halves are two's complement codes.
    """
    s = 0
    while s < n:
        o = s * 7
        ab = int(_unzip(uint(w0[s])))
        out[o] = ab >> 16
        out[o + 1] = ab & 0xFFFF
        ab = int(_unzip(uint(w1[s])))
        out[o + 2] = ab >> 16
        out[o + 3] = ab & 0xFFFF
        ab = int(_unzip(uint(w2[s])))
        out[o + 4] = ab >> 16
        out[o + 5] = ab & 0xFFFF
        out[o + 6] = dig[s]
        s += 1
