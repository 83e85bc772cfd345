"""The USB CDC streams as the board's UsbLink sees them (pollable MicroPython streams), in RAM.

``UsbOut`` takes at most ``room`` bytes a call and says POLLOUT only while it has room, as the CDC's
256-byte buffer does; what it takes is copied (a copying write, as the board's USB stack copies into
its FIFO) into ``sink`` and counted. ``UsbIn`` hands out the bytes given to ``feed`` one poll at a time.
"""
import io

import micropython

_POLL = 3
_POLLIN = 1
_POLLOUT = 4


@micropython.viper
def _copy(dst: ptr8, at: int, src: ptr8, start: int, n: int) -> int:
    k = 0
    while k < n:
        dst[at + k] = src[start + k]
        k += 1
    return 0


class UsbOut(io.IOBase):
    def __init__(self, sink_bytes=16384, room=1 << 30):
        self.sink = bytearray(sink_bytes)
        self.at = 0              # where the next byte goes in sink (wraps: the host reads it)
        self.total = 0
        self.room = room         # bytes the "host" will still take (decrease to stall it)
        self.calls = 0

    def ioctl(self, req, arg):
        if req == _POLL:
            return arg & _POLLOUT if self.room > 0 else 0
        return 0

    def write(self, buf, off=0, n=-1):
        if n < 0:
            n = len(buf) - off
        if n > self.room:
            raise OSError("write of %d bytes would wait: the host has room for %d" % (n, self.room))
        if self.at + n > len(self.sink):
            self.at = 0
        _copy(self.sink, self.at, buf, off, n)
        self.at += n
        self.total += n
        self.room -= n
        self.calls += 1
        return n


class UsbIn(io.IOBase):
    def __init__(self):
        self.data = bytearray()
        self.pos = 0

    def feed(self, data):
        self.data = bytearray(self.data[self.pos:]) + data
        self.pos = 0

    def ioctl(self, req, arg):
        if req == _POLL:
            return arg & _POLLIN if self.pos < len(self.data) else 0
        return 0

    def readinto(self, buf, n=-1):
        if self.pos >= len(self.data):
            return 0
        buf[0] = self.data[self.pos]
        self.pos += 1
        return 1
