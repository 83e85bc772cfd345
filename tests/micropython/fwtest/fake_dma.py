"""The RP2's DMA moving ADC blocks, emulated in RAM at the register boundary (32-bit ports only).

board.blocks.BlockRing reaches the DMA through register addresses; here those addresses point into
``regs``, a RAM image of eight channels (16 words each, as on the chip). ``complete_block()`` does
what the two chained channels of every stream do at the end of a block: write the block's words at
the channel's WRITE_ADDR (advancing it, as INCR_WRITE does), leave its TRANS_COUNT at 0, reload the
partner's count (CHAIN_TO), and raise the end-of-block interrupt (call the ring's handler). A channel
whose WRITE_ADDR is not the start of a ring slot's region (not re-armed) is counted in ``misdirected``
and its words go nowhere: on the chip they would overwrite whatever lies past the region.
"""
import array

import micropython

from board.blocks import BlockRing

BLOCK = 250
N_RAILS = 3
REGION = 2 * BLOCK
DIG_AT = 6 * BLOCK
HALFWORDS = 7 * BLOCK
DIG_SHIFT = 13
CHANNELS = [(2 * k, 2 * k + 1) for k in range(N_RAILS + 1)]
OFFSETS = [2 * k * REGION for k in range(N_RAILS)] + [2 * DIG_AT]     # bytes
LENGTHS = [4 * BLOCK] * N_RAILS + [2 * BLOCK]                          # bytes a stream writes per block


@micropython.viper
def _copy(dst: ptr8, src: ptr8, n: int) -> int:
    k = 0
    while k < n:
        dst[k] = src[k]
        k += 1
    return 0


@micropython.viper
def _address(buf) -> int:
    return int(ptr8(buf))


class FakeAdc:
    """board.adc.Adc's interface (ring, layout(), start(), stop()) over the emulated DMA."""

    def __init__(self, source, nbuf=8):
        self.regs = array.array("i", bytes(4 * 16 * 8))
        self.ring = BlockRing(BLOCK, HALFWORDS, OFFSETS, CHANNELS, nbuf, dma_base=_address(self.regs))
        self.source = source          # one block in the board layout (array "h", HALFWORDS)
        self.blocks = 0
        self.misdirected = 0
        self.running = False

    def layout(self):
        return [k * REGION for k in range(N_RAILS)], 2, DIG_AT, 1, DIG_SHIFT

    def start(self):
        self.ring.reset()
        for s, (a, b) in enumerate(CHANNELS):
            for block, ch in ((0, a), (1, b)):
                self.regs[16 * ch + 1] = self.ring.address(block, s)
                self.regs[16 * ch + 2] = BLOCK
        self.blocks = 0
        self.running = True

    def stop(self):
        self.running = False

    def _slot_start(self, addr, s):
        rel = addr - self.ring.st[3] - OFFSETS[s]
        return rel >= 0 and rel % self.ring.block_bytes == 0 and rel // self.ring.block_bytes < self.ring.nbuf

    def complete_block(self, source=None):
        """One block's worth of DMA transfers from ``source`` (default: the fixed block), then the IRQ."""
        src = _address(source if source is not None else self.source)
        p = self.blocks & 1
        for s in range(N_RAILS + 1):
            ch = CHANNELS[s][p]
            wa = self.regs[16 * ch + 1]
            if self._slot_start(wa, s):
                _copy(wa, src + OFFSETS[s], LENGTHS[s])
            else:
                self.misdirected += 1
            self.regs[16 * ch + 1] = wa + LENGTHS[s]
            self.regs[16 * ch + 2] = 0
            self.regs[16 * CHANNELS[s][1 - p] + 2] = BLOCK
        self.blocks += 1
        self.ring.on_block(None)
