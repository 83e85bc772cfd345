# The board's DMA block ring on the emulated Cortex-M (32-bit: registers by address), against the RAM
# stand-ins of tests/micropython/fwtest: every block arrives where the reader looks (the end-of-block
# handler re-arms each channel), six blocks of slack, older blocks counted as lost, a block overwritten
# while it was reduced detected, a late channel counted. The USB link: mcu_usb.py.
import array

from board.blocks import BlockRing
from fwtest.fake_dma import BLOCK, HALFWORDS, FakeAdc
from powerrig_fw import wire


def stamped(b):
    """A block whose every halfword says which block it is."""
    x = array.array("h", bytes(2 * HALFWORDS))
    for k in range(HALFWORDS):
        x[k] = b
    return x


SOURCES = [stamped(b) for b in range(10)]
adc = FakeAdc(SOURCES[0])
ring = adc.ring
adc.start()
nb = 0


def dma(n):
    global nb
    for _ in range(n):
        adc.complete_block(SOURCES[nb % 10])
        nb += 1


def expect(b):
    raw = ring.adc_read()
    assert raw is not None, "block %d not ready" % b
    assert raw[0] == b % 10 and raw[HALFWORDS - 1] == b % 10, (b, raw[0], raw[HALFWORDS - 1])
    assert ring.intact()
    return raw


# keeping up: 40 blocks, each where it should be (two laps of the ring, both channels of every stream)
for b in range(40):
    dma(1)
    expect(b)
    assert ring.adc_dropped == 0
assert ring.adc_read() is None and adc.misdirected == 0, adc.misdirected
print("re-armed ok: 40 blocks")

# slack: seven blocks behind (the newest finished one and six before it) cost nothing
dma(7)
for b in range(40, 47):
    expect(b)
    assert ring.adc_dropped == 0, ring.adc_dropped
print("slack ok: 7 blocks late, none lost")

# further behind: the oldest are gone, counted, and the reader resumes at the newest finished block
# (the oldest left is the next DMA writes: reading on from it, one loss became a run of them)
dma(10)
expect(56)
assert ring.adc_dropped == 9 * BLOCK, ring.adc_dropped
assert ring.adc_read() is None
dma(6)
for b in range(57, 63):
    expect(b)
    assert ring.adc_dropped == 0, ring.adc_dropped
assert adc.misdirected == 0
print("late ok: 9 blocks counted as lost, reading resumed at the newest")

# overwritten while reduced: DMA comes round to the block's slot before the reader is done
dma(1)
raw = ring.adc_read()
dma(ring.nbuf)
assert not ring.intact() and ring.overwritten == 1
# the next block handed out is the newest finished one, the blocks before it counted as lost
raw = ring.adc_read()
assert ring.st[9] == ring.done() and ring.adc_dropped == (ring.nbuf - 1) * BLOCK, (ring.st[9], ring.adc_dropped)
assert ring.adc_read() is None
print("overwrite ok: detected, reading resumed at the newest")

# a channel still running when the handler re-arms it: counted, never silent
for s in range(4):                              # every stream's channel of this block done ...
    adc.regs[16 * (2 * s + (nb & 1)) + 2] = 0
adc.regs[16 * (nb & 1) + 2] = 5                 # ... but ADC0's, with 5 words to go
ring.st[6] = 10                                 # a short wait for the test
late = ring.late()
ring.on_block(None)
assert ring.late() == late + 1, ring.late()
print("late channel ok: counted")


# the one-call block pass (board.reducer.BoardReducer.stream) against adc_read + feed + intact on the
# same blocks: the same frames byte for byte (frames fill mid-block, intervals straddle blocks); lost
# samples are left to the general path (3, nothing taken); a block overwritten while reduced is seen (4)
from board import kernels
from board.reducer import BoardReducer
from fwtest.fake_dma import DIG_AT, REGION


def varied(seed):
    b = array.array("h", bytes(2 * HALFWORDS))
    x = seed
    for k in range(3 * REGION):
        x = (x * 1103515245 + 12345) & 0x3FFFFFFF
        b[k] = (x & 0x7FFF) - 16384
    for k in range(BLOCK):
        b[DIG_AT + k] = ((k >> 4) & 7) << 13
    return b


VARIED = [varied(k + 1) for k in range(3)]


def one_path(one_call, blocks=12, during_send=None):
    """Frames (bytes) and per-block results of a stream of ``blocks`` DMA blocks through one path."""
    a = FakeAdc(VARIED[0])
    a.start()
    out = []

    def sink(mv):
        out.append(bytes(mv))
        if during_send:
            during_send(a)
    framer = wire.Framer(sink, kernels.crc32_into)
    red = BoardReducer(3)
    red.layout(*a.layout())
    red.blocks(a.ring.st, BLOCK)
    red.configure((0, 2), 100, 25, [5, -3], [7, 2])
    framer.configure(wire.record_size(2), 3)
    red.restart(0, 0)
    codes = []
    for b in range(blocks):
        a.complete_block(VARIED[b % 3])
        if one_call:
            codes.append(red.stream(framer))
        else:
            red.feed(a.ring.adc_read(), BLOCK, framer)
            codes.append(1 if a.ring.intact() else 4)
    if one_call:
        codes.append(red.stream(framer))            # nothing left: 0
    framer.flush()
    return b"".join(out), codes, a, red, framer


want, codes, _a, _r, _f = one_path(False)
got, codes, a, red, framer = one_path(True)
assert len(want) > 10 * wire.OVERHEAD and got == want, (len(got), len(want))
assert codes == [1] * 12 + [0], codes
for _ in range(a.ring.nbuf + 2):                    # the reader falls behind the ring: 3, nothing taken
    a.complete_block(VARIED[0])
nxt = a.ring.index
assert red.stream(framer) == 3 and a.ring.index == nxt, a.ring.index
# the general path then takes the newest finished block, the nbuf + 1 before it counted as lost
assert a.ring.adc_read() is not None and a.ring.adc_dropped == (a.ring.nbuf + 1) * BLOCK, a.ring.adc_dropped
assert a.ring.index == a.ring.done() * BLOCK, (a.ring.index, a.ring.done())
_got, codes, a, _r, _f = one_path(True, 4, lambda a: [a.complete_block(VARIED[1]) for _ in range(a.ring.nbuf)])
assert 4 in codes and a.ring.overwritten >= 1, (codes, a.ring.overwritten)
# a stream's start forgets the blocks not read yet (Board.adc_skip): the next block read is whole
for _ in range(a.ring.nbuf + 3):
    a.complete_block(VARIED[2])
a.ring.skip_unread()
assert a.ring.adc_read() is None
a.complete_block(VARIED[2])
assert a.ring.adc_read() is not None and a.ring.adc_dropped == 0 and a.ring.index == a.ring.done() * BLOCK
del a, red, framer, want, got, VARIED, _a, _r, _f, _got
print("one-call block pass ok: same frames, losses and overwrites seen; skip to the newest block")
print("ok")
