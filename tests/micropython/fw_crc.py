# The allocation-free CRC equals binascii.crc32 (zlib's), and allocates nothing.
import binascii
import struct

try:
    import micropython
    lock, unlock = micropython.heap_lock, micropython.heap_unlock
except (ImportError, AttributeError):
    lock = unlock = lambda: None

from powerrig_fw import crc

cases = [b"", b"a", b"123456789", bytes(range(256)), b"\xff" * 1000, b"powerrig" * 129]
for data in cases:
    buf = bytearray(data + bytes(4))
    n = len(data)
    lock()
    try:
        crc.crc32_into(buf, 0, n)
    finally:
        unlock()
    got = struct.unpack_from("<I", buf, n)[0]
    want = binascii.crc32(data) & 0xFFFFFFFF
    assert got == want, (data[:16], got, want)
    buf2 = bytearray(data + bytes(4))
    crc.crc32_into_c(buf2, 0, n)
    assert buf2 == buf
assert struct.unpack_from("<I", bytearray(b"123456789" + bytes(4)), 9)[0] == 0
b = bytearray(b"123456789" + bytes(4))
crc.crc32_into(b, 0, 9)
assert struct.unpack_from("<I", b, 9)[0] == 0xCBF43926   # the CRC-32 check value
print("crc ok")
