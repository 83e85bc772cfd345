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
meanwhile (a block overwritten while it was reduced: counted as an overrun, never silent). After
either the reader resumes at the newest finished block, not at the oldest left (which DMA writes
next: one loss would become a run of them).

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
_RESYNC = const(7)      # 1 after a block was overwritten while reduced: the next take resumes at the newest
_NEXT = const(8)        # the reader: the oldest block not yet read,
_READING = const(9)     # the block handed out last, plus 1 (0: none yet; intact() checks it),
_DROP = const(10)       # blocks lost just before it,
_OVERWR = const(11)     # blocks DMA came round to while they were being reduced
_STREAMS = const(12)    # per stream: region offset, then per parity (even, odd): WRITE_ADDR and TRANS_COUNT
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
def take_block(st: ptr32, strict: int) -> int:
    """The reader's step, in machine code (BlockRing.adc_read and board.reducer's one-call block pass):
    hand out the oldest unread block and return the address of its slot, or 0 when none is ready.
    Block b lives in slot b % NBUF, which DMA writes again once block b + NBUF - 1 has finished, so an
    older block is gone: then ``strict`` returns -1 and takes nothing (the caller's general path counts
    the loss), else the newest finished block is handed out and st[_DROP] says how many were lost
    (the same after a block was overwritten while reduced: st[_RESYNC])."""
    done = st[_DONE]
    b = st[_NEXT]
    if b >= done:
        return 0
    nbuf = st[_NBUF]
    drop = 0
    if b < done - nbuf + 1 or st[_RESYNC]:
        # behind by a lap (or the last block was overwritten while reduced): the oldest block left is
        # the next DMA writes, so reading on from it loses block after block (issue 43: one status pass
        # cost a stretch, then each following block was overwritten too). Resume at the newest
        # finished block, the ring's whole slack ahead: one loss, counted once.
        if strict:
            return -1
        drop = done - 1 - b
        b = done - 1
        st[_RESYNC] = 0
    st[_DROP] = drop
    st[_NEXT] = b + 1
    st[_READING] = b + 1
    return st[_BASE] + (b & (nbuf - 1)) * st[_BLOCK_BYTES]


@micropython.viper
def block_intact(st: ptr32) -> int:
    """1 unless DMA has begun to write the slot of the block handed out last since it was handed out
    (then 0, and counted in st[_OVERWR]): the check after a block was reduced."""
    reading = st[_READING]
    if reading == 0 or st[_DONE] - reading + 1 < st[_NBUF]:
        return 1
    st[_OVERWR] = st[_OVERWR] + 1
    st[_RESYNC] = 1
    return 0


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
def now_split(st: ptr32, block: int, out: ptr32, k: int) -> int:
    """_now as out[k] * 2**24 + out[k + 1] with small ints only (a clock ping's stamps: past 2**30
    samples, 71 minutes, the int itself would be a big int, which allocates). Blocks done
    d = dh * 2**12 + dl, so d * block = (dh * block) * 2**12 + dl * block, plus the samples the running
    channel has moved into the block being converted."""
    q = _STREAMS + (st[_NSTREAM] - 1) * _SW
    while True:
        done = st[_DONE]
        count = ptr32(st[q + 2 + 2 * (done & 1)])[0] & 0x0FFFFFFF
        if st[_DONE] == done:
            break
    m = (done >> 12) * block           # < 2**28 while done < 2**30 blocks (12 days of 1 ms blocks)
    lo = (done & 0xFFF) * block + ((m & 0xFFF) << 12) + block - count
    out[k] = (m >> 12) + (lo >> 24)
    out[k + 1] = lo & 0xFFFFFF
    return 0


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
        # made from a range (its length known: one allocation) and zeroed in place: array("h", bytes(n))
        # needs the ring's size twice over for a moment, which the RP2040's heap (16 blocks, 56 kB)
        # did not have in one piece (MemoryError in Board())
        self.buf = array.array("h", range(block_halfwords * nbuf))
        _zero(self.buf, block_halfwords * nbuf)
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
        self.adc_n = block_samples  # samples in the block adc_read() returned
        self.adc_dropped = 0    # samples lost just before it

    def address(self, block, stream):
        """Where block ``block``'s region of ``stream`` starts (the channels' first write addresses)."""
        return self.st[_BASE] + (block & (self.nbuf - 1)) * self.block_bytes + self.st[_STREAMS + stream * _SW]

    def reset(self):
        st = self.st
        st[_DONE] = 0
        st[_LATE] = 0
        st[_NEXT] = 0
        st[_READING] = 0
        st[_DROP] = 0
        st[_RESYNC] = 0

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

    def waiting(self):
        """Finished blocks not read yet (0: the reader has caught up). The device runs a JSON command
        or a burst upload chunk beside a stream only then, so their passes start with the ring's whole
        slack (issue 43)."""
        st = self.st
        return st[_DONE] - st[_NEXT]

    def late(self):
        return self.st[_LATE]

    def skip_unread(self):
        """Forget the blocks not read yet: the next adc_read() returns the block DMA is writing now.
        A stream starts there (Device.cmd_start), with the ring's whole slack ahead of it: a start
        command's pass (its collection, the reducer's set-up) outlasted the slack on the RP2040, and
        the stream's first block came after a loss."""
        self.st[_NEXT] = self.st[_DONE]
        self.st[_RESYNC] = 0

    def adc_read(self):
        """The oldest unread block (a memoryview of its slot), or None; sets ``adc_n`` and
        ``adc_dropped``. The board's adc_read (powerrig_fw.device reads it through ``board.blocks``):
        allocation-free, the views are made once."""
        st = self.st
        if not take_block(st, 0):
            return None
        self.adc_dropped = st[_DROP] * self.block
        return self.views[(st[_READING] - 1) & (self.nbuf - 1)]

    def taken(self):
        """The block handed out last (by adc_read or by the reducer's one-call block pass), as its
        memoryview: an armed burst reads the block the stream's native pass has just reduced."""
        return self.views[(self.st[_READING] - 1) & (self.nbuf - 1)]

    @property
    def index(self):
        """Sample index of the next block adc_read() returns (whole blocks since reset: the blocks
        lost are whole blocks too)."""
        return self.st[_NEXT] * self.block

    @property
    def last_block(self):
        """Sample index of the block adc_read() returned last."""
        return max(0, self.st[_READING] - 1) * self.block

    @property
    def overwritten(self):
        return self.st[_OVERWR]

    def intact(self):
        """False when DMA has begun to write the slot of the block adc_read() gave, since it gave it."""
        return block_intact(self.st) != 0


@micropython.viper
def _zero(buf: ptr16, n: int) -> int:
    """n halfwords of buf to 0 (halfwords, not bytes: the same count indexes the array('h') itself
    wherever viper is a no-op, as in the host tests)."""
    k = 0
    while k < n:
        buf[k] = 0
        k += 1
    return 0


@micropython.viper
def _address(buf) -> int:
    return int(ptr8(buf))
