"""The DMA block ring: where the ADC blocks land, the end-of-block interrupt, and the reader's checks.

Why a ring of NBUF blocks and not a ping-pong pair: a pass of the main loop that runs long (a command,
a burst upload, an automatic collection) must not cost samples, so the reader may fall NBUF - 2
blocks behind the newest finished one (6 ms with 8 blocks of 1 ms). Each stream (one per ADC and one
for the digital inputs) has two chained DMA channels: the even blocks go through one, the odd through
the other. CHAIN_TO reloads a channel's count, not its write address, so the end-of-block interrupt
re-arms the pair that just finished with the address of the block two ahead: allocation-free (a
viper function writing the registers through their addresses; ``ch.registers[i] = x`` allocates a
memoryview, which a hard IRQ must not do).

The reader (``adc_read``) takes the oldest unread block. Block b lives in slot b % NBUF, which DMA writes
again once block b + NBUF - 1 has finished; so a block more than NBUF - 1 behind is gone (counted as
dropped samples), and ``intact()`` after the block was reduced says whether DMA came round to its slot
meanwhile (a block overwritten while it was reduced: counted as an overrun, never silent).

Registers are reached through their addresses, so the same code runs against a RAM image of the DMA
registers in the tests (tests/micropython/fwtest/fake_dma.py moves the words as the DMA would).
"""
import array

import micropython
from micropython import const

# state words (array "i", read by the viper IRQ handler)
_DONE = const(0)        # blocks finished (the digital stream's end-of-block interrupt counts them)
_NBUF = const(1)        # blocks in the ring (a power of two)
_BLOCK_BYTES = const(2)
_BASE = const(3)        # address of the ring's first byte
_NSTREAM = const(4)
_LATE = const(5)        # re-arms that found a channel still running (its block is counted as lost)
_SPIN = const(6)        # how long the handler waits for a stream's last word before it gives up
_STREAMS = const(8)     # per stream: region offset, then per parity (even, odd): WRITE_ADDR and TRANS_COUNT
_SW = const(5)          # words per stream
_MAX_STREAMS = const(6)

DMA_BASE = 0x50000000   # RP2040 and RP2350: channel n's registers at DMA_BASE + 0x40 * n
WRITE_ADDR = const(0x04)
TRANS_COUNT = const(0x08)


@micropython.viper
def _rearm(st: ptr32) -> int:
    """The end-of-block interrupt: re-arm every stream's channel of the block that just finished
    with the slot of the block two ahead, then count the block. Returns the blocks finished."""
    done = st[_DONE]
    nbuf = st[_NBUF]
    slot = (done + 2) & (nbuf - 1)
    at = st[_BASE] + slot * st[_BLOCK_BYTES]
    p = done & 1
    ns = st[_NSTREAM]
    s = 0
    while s < ns:
        q = _STREAMS + s * _SW
        count = ptr32(st[q + 2 + 2 * p])
        spin = st[_SPIN]
        # the digital word of a sample comes first (CS edge), the ADC words after the conversion:
        # wait for this stream's last word before moving its channel on
        while (count[0] & 0x0FFFFFFF) != 0:
            spin -= 1
            if spin <= 0:
                st[_LATE] = st[_LATE] + 1
                break
        ptr32(st[q + 1 + 2 * p])[0] = at + st[q]
        s += 1
    done += 1
    st[_DONE] = done
    return done


@micropython.viper
def _now(st: ptr32, block: int) -> int:
    """The sample being converted now: blocks done, plus how far the digital stream's running channel
    has got into the current one (its TRANS_COUNT counts down); read again if a block ended meanwhile."""
    q = _STREAMS + (st[_NSTREAM] - 1) * _SW
    while True:
        done = st[_DONE]
        count = ptr32(st[q + 2 + 2 * (done & 1)])[0] & 0x0FFFFFFF
        if st[_DONE] == done:
            return done * block + block - count


@micropython.viper
def _fire(st: ptr32, block: int, plan: ptr32, n: int) -> int:
    """powerrig_fw.actions' edges: for each row of plan (sample mod 2**32, register, value, -), wait
    until that sample is being converted, write the register, note the sample (the 4th word). The
    clock is _now's, inline: a call per turn would cost a microsecond."""
    q = _STREAMS + (st[_NSTREAM] - 1) * _SW
    k = 0
    while k < n:
        at = plan[4 * k]
        now = 0
        while True:
            done = st[_DONE]
            count = ptr32(st[q + 2 + 2 * (done & 1)])[0] & 0x0FFFFFFF
            if st[_DONE] != done:
                continue
            now = done * block + block - count
            if int(now - at) >= 0:
                break
        ptr32(plan[4 * k + 1])[0] = plan[4 * k + 2]
        done = st[_DONE]
        count = ptr32(st[q + 2 + 2 * (done & 1)])[0] & 0x0FFFFFFF
        plan[4 * k + 3] = done * block + block - count
        k += 1
    return n


class BlockRing:
    """NBUF blocks of ``block_bytes``, each with one region per stream at ``offsets`` (bytes)."""

    def __init__(self, block_samples, block_halfwords, offsets, channels, nbuf=8, dma_base=DMA_BASE):
        """``channels``: per stream the (even, odd) DMA channel numbers. ``dma_base``: the address of
        channel 0's registers (the RP2's DMA, or a RAM image of it in the tests)."""
        if nbuf & (nbuf - 1) or nbuf < 4:
            raise ValueError("nbuf must be a power of two, at least 4")
        if len(offsets) > _MAX_STREAMS:
            raise ValueError("at most %d streams" % _MAX_STREAMS)
        self.block = block_samples
        self.nbuf = nbuf
        self.block_bytes = 2 * block_halfwords
        self.buf = array.array("h", bytes(self.block_bytes * nbuf))
        self.views = [memoryview(self.buf)[k * block_halfwords:(k + 1) * block_halfwords] for k in range(nbuf)]
        st = array.array("i", bytes(4 * (_STREAMS + _SW * _MAX_STREAMS)))
        self.st = st
        st[_NBUF] = nbuf
        st[_BLOCK_BYTES] = self.block_bytes
        st[_BASE] = _address(self.buf)
        st[_NSTREAM] = len(offsets)
        st[_SPIN] = 2000
        for s, off in enumerate(offsets):
            q = _STREAMS + s * _SW
            st[q] = off
            for p in (0, 1):
                reg = dma_base + 0x40 * channels[s][p]
                st[q + 1 + 2 * p] = reg + WRITE_ADDR
                st[q + 2 + 2 * p] = reg + TRANS_COUNT
        self.next = 0           # the oldest block not yet read
        self.reading = -1       # the block handed out last (intact() checks it)
        self.adc_n = block_samples  # samples in the block adc_read() returned
        self.adc_dropped = 0    # samples lost just before it
        self.index = 0          # sample index of the next block adc_read() returns
        self.last_block = 0     # ... and of the last one it returned
        self.overwritten = 0    # blocks DMA came round to while they were being reduced

    def address(self, block, stream):
        """Where block ``block``'s region of ``stream`` starts (the channels' first write addresses)."""
        return self.st[_BASE] + (block & (self.nbuf - 1)) * self.block_bytes + self.st[_STREAMS + stream * _SW]

    def reset(self):
        st = self.st
        st[_DONE] = 0
        st[_LATE] = 0
        self.next = 0
        self.reading = -1
        self.index = 0
        self.last_block = 0

    def on_block(self, _dma=None):
        """The hard IRQ handler of the stream that finishes a block last-first (the digital one)."""
        _rearm(self.st)

    def done(self):
        return self.st[_DONE]

    def sample_now(self):
        """The exact sample index now (powerrig_fw.actions plans by it)."""
        return _now(self.st, self.block)

    def fire(self, plan, n):
        """powerrig_fw.actions' edges at their samples (see _fire)."""
        return _fire(self.st, self.block, plan, n)

    def late(self):
        return self.st[_LATE]

    def adc_read(self):
        """The oldest unread block (a memoryview of its slot), or None; sets ``adc_n``, ``adc_dropped``
        and the sample indices. The board's adc_read (powerrig_fw.device reads it through
        ``board.blocks``): allocation-free, the views are made once."""
        done = self.st[_DONE]
        b = self.next
        if b >= done:
            return None
        oldest = done - self.nbuf + 1      # older blocks' slots are DMA's again
        dropped = 0
        if b < oldest:
            dropped = (oldest - b) * self.block
            b = oldest
        self.adc_dropped = dropped
        self.next = b + 1
        self.reading = b
        index = self.index + dropped
        self.last_block = index
        self.index = index + self.block
        return self.views[b & (self.nbuf - 1)]

    def intact(self):
        """False when DMA has begun to write the slot of the block adc_read() gave, since it gave it."""
        if self.reading < 0:
            return True
        if self.st[_DONE] - self.reading < self.nbuf:
            return True
        self.overwritten += 1
        return False


@micropython.viper
def _address(buf) -> int:
    return int(ptr8(buf))
