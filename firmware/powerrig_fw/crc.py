"""CRC-32 (IEEE 802.3, the zlib/binascii polynomial) written into a frame buffer.

Two implementations with one signature ``crc_into(buf, start, end)``: the CRC of buf[start:end] is
stored little-endian at buf[end:end + 4].

- ``crc32_into_c`` calls binascii.crc32 (C on every port). On 32-bit MicroPython ports a CRC of 2**30
  or more is a boxed int, so it allocates 16 bytes per frame; the board swaps in a viper version.
- ``crc32_into`` is the allocation-free reference: a table kept as two 16-bit halves so every
  intermediate fits a small int. Used under micropython.heap_lock() in the tests.
"""
import array

try:
    import binascii
except ImportError:  # pragma: no cover - every port we target has it
    binascii = None


def _make_tables():
    lo = array.array("H", bytes(512))
    hi = array.array("H", bytes(512))
    for n in range(256):
        c = n
        for _ in range(8):
            c = (0xEDB88320 ^ (c >> 1)) if c & 1 else (c >> 1)
        lo[n] = c & 0xFFFF
        hi[n] = c >> 16
    return lo, hi


TABLE_LO, TABLE_HI = _make_tables()   # public: the board's viper CRC builds its word table from them
_T_LO, _T_HI = TABLE_LO, TABLE_HI


def crc32_into(buf, start, end):
    """Allocation-free CRC-32 of buf[start:end], stored at buf[end:end+4]."""
    tlo = _T_LO
    thi = _T_HI
    lo = 0xFFFF
    hi = 0xFFFF
    for k in range(start, end):
        idx = (lo ^ buf[k]) & 0xFF
        lo = tlo[idx] ^ ((lo >> 8) | ((hi & 0xFF) << 8))
        hi = thi[idx] ^ (hi >> 8)
    lo ^= 0xFFFF
    hi ^= 0xFFFF
    buf[end] = lo & 0xFF
    buf[end + 1] = lo >> 8
    buf[end + 2] = hi & 0xFF
    buf[end + 3] = hi >> 8


def crc32_into_c(buf, start, end):
    """CRC-32 through binascii (C). May box one int per call on 32-bit ports."""
    c = binascii.crc32(memoryview(buf)[start:end])
    buf[end] = c & 0xFF
    buf[end + 1] = (c >> 8) & 0xFF
    buf[end + 2] = (c >> 16) & 0xFF
    buf[end + 3] = (c >> 24) & 0xFF
