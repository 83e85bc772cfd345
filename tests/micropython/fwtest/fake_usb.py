"""The host's end of the USB CDC, as the board's UsbLink sees it: C streams in RAM.

micropython.RingIO is a pollable MicroPython stream written in C, as the board's USB CDC stream is:
``write(buf, off, n)`` takes what fits without waiting and poll says POLLOUT while it has room, like
TinyUSB's FIFO. ``to_board`` holds what the host sent; ``from_board`` is the CDC's transmit FIFO,
which ``take()`` (the host reading, between passes) empties into ``sink`` (a copy, as the USB
hardware copies out of the FIFO); nothing here allocates once made.
"""
import micropython

from board.copy_thumb import copy_run


class Host:
    def __init__(self, fifo_bytes=1024, sink_bytes=16384):
        self.to_board = micropython.RingIO(1024)
        self.from_board = micropython.RingIO(fifo_bytes)
        self.scratch = bytearray(fifo_bytes)
        self.sink = bytearray(sink_bytes)
        self.at = 0            # bytes in sink since the last clear()
        self.total = 0
        self.overflow = 0      # bytes taken while sink was full (not kept)

    def send(self, data):
        self.to_board.write(data)

    def take(self):
        """The host reads everything the board queued in the FIFO."""
        n = self.from_board.readinto(self.scratch)
        self.total += n
        if self.at + n <= len(self.sink):
            copy_run(self.sink, self.at, self.scratch, n)
            self.at += n
        else:
            self.overflow += n
        return n

    def received(self):
        """The bytes kept since the last call (not for heap-locked code)."""
        data = bytes(self.sink[:self.at])
        self.at = 0
        return data
