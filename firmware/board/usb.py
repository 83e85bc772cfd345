"""The host link over USB CDC, never waiting for the host.

Why: MicroPython's ``sys.stdout.buffer.write`` waits while the CDC buffer (256 bytes) is full, up to
500 ms when the host stops reading, and ``readinto`` of N bytes waits for all N. A main loop that waits
loses samples. So ``write`` only copies a frame into a RAM queue (all of it or none of it: a frame
that does not fit is counted in ``dropped_frames``/``dropped_bytes``, never cut), and ``pump``, once a
pass, hands the CDC at most ``chunk`` bytes at a time while poll says it can take more (with writes of
the endpoint's 64 bytes the CDC buffer frees in whole chunks, so a chunk is taken at once).
``read_into`` takes bytes one at a time while poll says one is there (a viper loop), into the buffer it is
given (the device's FrameReader). Nothing here allocates.

The streams are MicroPython streams (``write(buf, offset, n)``, ``readinto``, pollable): the board's
USB CDC, or a RAM stand-in in the tests.
"""
import array
import select

import micropython
from micropython import const

from board import arch

# copy_bytes(dst, at, src, start, n): dst[at:at + n] = src[start:start + n], front to back (a move
# down within one buffer is safe), allocation-free: frames into the queue, and the FrameReader's move
# of a command cut between two reads
if arch.THUMB:
    from board.copy_thumb import copy_run
    if arch.THUMB2:        # unaligned words allowed: the count inverted says so (board.copy_thumb)
        def copy_bytes(dst, at, src, start, n):
            copy_run(dst, at, src, ~((start << 16) | n))
    else:
        def copy_bytes(dst, at, src, start, n):
            copy_run(dst, at, src, (start << 16) | n)
else:
    @micropython.viper
    def copy_bytes(dst: ptr8, at: int, src: ptr8, start: int, n: int) -> int:
        k = 0
        while k < n:
            dst[at + k] = src[start + k]
            k += 1
        return 0


_USED = const(0)       # bytes queued (the pump's state words, shared with the viper loop)
_TAIL = const(1)       # the next byte for the host
_SIZE = const(2)
_CHUNK = const(3)
_PER_PUMP = const(4)   # chunks a pump hands over at most
_STALLED = const(5)    # pumps that found bytes waiting and the host taking none
_WRITTEN = const(6)    # bytes ever queued, mod 2**30 (board.reducer marks it at each block: take_back)
WRITTEN = _WRITTEN


@micropython.viper
def _pump(st: ptr32, ipoll, write, queue) -> int:
    """queue bytes to the stream in chunks while poll says it takes more; the chunks written.
    viper: the loop runs for every 64 bytes, its arithmetic in machine code, only the two calls not."""
    used = st[_USED]
    tail = st[_TAIL]
    size = st[_SIZE]
    chunk = st[_CHUNK]
    left = st[_PER_PUMP]
    wrote = 0
    while used > 0 and left > 0:
        ready = 0
        for _ in ipoll(0):
            ready = 1
            break
        if ready == 0:
            if wrote == 0:
                st[_STALLED] = st[_STALLED] + 1
            break
        k = size - tail
        if k > used:
            k = used
        if k > chunk:
            k = chunk
        w = int(write(queue, tail, k))
        if w <= 0:
            break
        tail += w
        if tail >= size:
            tail -= size
        used -= w
        left -= 1
        wrote += 1
    st[_USED] = used
    st[_TAIL] = tail
    return wrote


@micropython.viper
def _read(ipoll, readinto, slot, one: ptr8, dst: ptr8, at: int, room: int, first) -> int:
    """The bytes the host has sent, one at a time while poll says another is there, into
    dst[at:at + room]; their count. viper: a command's bytes cost two C calls each, no bytecode
    between them (a 46-byte ping took ~5 ms of the RP2040's main loop byte by byte in Python).
    ``first()`` is called when the first byte is there, before any is read: the clock ping's receive
    stamp (a ping's bytes take ~0.5 ms to read on the RP2040, which a stamp after them added to the
    clock's asymmetry)."""
    k = 0
    while k < room:
        ready = 0
        for _ in ipoll(0):
            ready = 1
            break
        if ready == 0:
            break
        if k == 0:
            first()
        if int(readinto(slot)) <= 0:
            break
        dst[at + k] = one[0]
        k += 1
    return k


def _nothing():
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
        self.st = array.array("i", [0, 0, queue_bytes, chunk, chunks_per_pump, 0, 0])
        self.ipoll = self.tx_poll.ipoll
        self.out_write = usb_out.write
        self.one = bytearray(1)            # the byte being read (readinto's target, made once)
        self.slot = memoryview(self.one)
        self.rx_ipoll = self.rx_poll.ipoll
        self.inp_readinto = usb_in.readinto
        self.first = _nothing          # called as a read finds its first byte (stamp_first)
        self.dropped_frames = 0    # frames the queue had no room for (back-pressure from the host)
        self.dropped_bytes = 0

    def write(self, buf, n=-1):
        """Queue a whole frame (buf, or its first n bytes); False (and counted) when it does not fit."""
        if n < 0:
            n = len(buf)
        st = self.st
        if n > self.size - st[_USED]:
            self.dropped_frames += 1
            self.dropped_bytes += n
            return False
        h = self.head
        first = self.size - h
        if first >= n:
            copy_bytes(self.queue, h, buf, 0, n)
        else:
            copy_bytes(self.queue, h, buf, 0, first)
            copy_bytes(self.queue, 0, buf, first, n - first)
        h += n
        if h >= self.size:
            h -= self.size
        self.head = h
        st[_USED] += n
        st[_WRITTEN] = (st[_WRITTEN] + n) & 0x3FFFFFFF
        return True

    def take_back(self, written):
        """Take the bytes queued since ``st[WRITTEN]`` was ``written`` out of the queue again (the
        frames of a block DMA overwrote while it was reduced: board.reducer.BoardReducer.abandon).
        Only bytes no pump has handed on can come back: the device marks at the block's take and
        takes back before the pass's pump. Returns the bytes taken back."""
        st = self.st
        n = (st[_WRITTEN] - written) & 0x3FFFFFFF
        if n > st[_USED]:
            raise ValueError("take_back of %d bytes, %d queued: a pump ran since the mark" % (n, st[_USED]))
        h = self.head - n
        if h < 0:
            h += self.size
        self.head = h
        st[_USED] -= n
        st[_WRITTEN] = written
        return n

    @property
    def used(self):
        return self.st[_USED]

    @property
    def stalled(self):
        return self.st[_STALLED]

    def pump(self):
        """Hand queued bytes to the CDC while it takes them, without waiting; bounded per pass.
        Returns the 64-byte chunks handed over (0: nothing queued, or the CDC took nothing)."""
        if self.st[_USED]:
            return _pump(self.st, self.ipoll, self.out_write, self.queue)
        return 0

    def read_into(self, buf, at, room):
        """The bytes the host has sent so far into buf[at:at + room]; their count. Never waits,
        never allocates (the device's FrameReader holds buf)."""
        return _read(self.rx_ipoll, self.inp_readinto, self.slot, self.one, buf, at, room, self.first)

    def stamp_first(self, fn):
        """fn() is called whenever a read finds the host's first byte there, before reading it."""
        self.first = fn
