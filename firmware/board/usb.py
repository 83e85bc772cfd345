"""The host link over USB CDC, never waiting for the host.

Why: MicroPython's ``sys.stdout.buffer.write`` waits while the CDC buffer (256 bytes) is full, up to
500 ms when the host stops reading, and ``readinto`` of N bytes waits for all N. A main loop that waits
loses samples. So ``write`` only copies a frame into a RAM queue (all of it or none of it: a frame
that does not fit is counted in ``dropped_frames``/``dropped_bytes``, never cut), and ``pump``, once a
pass, hands the CDC at most ``chunk`` bytes at a time while poll says it can take more (with writes of
the endpoint's 64 bytes the CDC buffer frees in whole chunks, so a chunk is taken at once).
``read`` takes bytes one at a time while poll says one is there. Nothing here allocates but ``read``'s
result, made only when the host sent something.

The streams are MicroPython streams (``write(buf, offset, n)``, ``readinto``, pollable): the board's
USB CDC, or a RAM stand-in in the tests.
"""
import select

import micropython

from board import arch

if arch.THUMB:
    from board.copy_thumb import copy_run
    if arch.THUMB2:        # unaligned words allowed: the count inverted says so (board.copy_thumb)
        def _copy(dst, at, src, start, n):
            copy_run(dst, at, src, ~((start << 16) | n))
    else:
        def _copy(dst, at, src, start, n):
            copy_run(dst, at, src, (start << 16) | n)
else:
    @micropython.viper
    def _copy(dst: ptr8, at: int, src: ptr8, start: int, n: int) -> int:
        k = 0
        while k < n:
            dst[at + k] = src[start + k]
            k += 1
        return 0


class UsbLink:
    def __init__(self, usb_in, usb_out, queue_bytes=8192, chunk=64, chunks_per_pump=10):
        self.inp = usb_in
        self.out = usb_out
        self.rx_poll = select.poll()
        self.rx_poll.register(usb_in, select.POLLIN)
        self.tx_poll = select.poll()
        self.tx_poll.register(usb_out, select.POLLOUT)
        self.queue = bytearray(queue_bytes)
        self.size = queue_bytes
        self.head = 0              # where the next frame goes
        self.tail = 0              # the next byte for the host
        self.used = 0
        self.chunk = chunk
        self.chunks_per_pump = chunks_per_pump
        self.one = bytearray(1)
        self.rx = bytearray(512)
        self.dropped_frames = 0    # frames the queue had no room for (back-pressure from the host)
        self.dropped_bytes = 0
        self.stalled = 0           # pumps that found bytes waiting and the host taking none

    def write(self, buf):
        """Queue a whole frame; False (and counted) when it does not fit."""
        n = len(buf)
        if n > self.size - self.used:
            self.dropped_frames += 1
            self.dropped_bytes += n
            return False
        h = self.head
        first = self.size - h
        if first >= n:
            _copy(self.queue, h, buf, 0, n)
        else:
            _copy(self.queue, h, buf, 0, first)
            _copy(self.queue, 0, buf, first, n - first)
        h += n
        if h >= self.size:
            h -= self.size
        self.head = h
        self.used += n
        return True

    def _readable(self):
        for _ in self.rx_poll.ipoll(0):
            return True
        return False

    def pump(self):
        """Hand queued bytes to the CDC while it takes them, without waiting; bounded per pass.
        (Locals, not attributes, in the loop: it runs for every 64 bytes.)"""
        used = self.used
        if not used:
            return
        poll = self.tx_poll
        out = self.out
        queue = self.queue
        size = self.size
        chunk = self.chunk
        tail = self.tail
        left = self.chunks_per_pump
        while used and left:
            for _ in poll.ipoll(0):
                break
            else:
                if left == self.chunks_per_pump:
                    self.stalled += 1
                break
            k = size - tail
            if k > used:
                k = used
            if k > chunk:
                k = chunk
            w = out.write(queue, tail, k)
            if not w:
                break
            tail += w
            if tail >= size:
                tail -= size
            used -= w
            left -= 1
        self.tail = tail
        self.used = used

    def read(self):
        """The bytes the host has sent so far (at most 512), or None; never waits."""
        for _ in self.rx_poll.ipoll(0):
            break
        else:
            return None
        k = 0
        rx = self.rx
        one = self.one
        while k < 512:
            if k and not self._readable() or not self.inp.readinto(one):
                break
            rx[k] = one[0]
            k += 1
        return bytes(rx[:k]) if k else None
