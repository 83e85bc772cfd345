"""viper kernels for the RP2350: the per-sample work the CPU must never do in bytecode.

The board's version of powerrig_fw.crc.crc32_into: Thumb-2 (board.crc_thumb) on the MCU, this viper
loop elsewhere. Nothing here allocates. (There is no unpacking of PIO words any more: PIO and DMA
deliver (V, I) halfword pairs, board/adc.py.)
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
