# The board's DMA block ring and USB link on the emulated Cortex-M (32-bit: registers by address),
# against the RAM stand-ins of tests/micropython/fwtest: every block arrives where the reader looks
# (the end-of-block handler re-arms each channel), six blocks of slack, older blocks counted as lost,
# a block overwritten while it was reduced detected, a late channel counted; the USB link never writes
# more than the CDC takes, counts what it had no room for, and every byte value 0..255 from the host
# leaves the command path standing.
import array
import gc
import json

from board.blocks import BlockRing
from board.rp2350 import Board
from fwtest.fake_dma import BLOCK, HALFWORDS, FakeAdc
from fwtest.fake_usb import Host
from powerrig_fw import wire
from powerrig_fw.device import Device


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

# further behind: the oldest are gone, counted
dma(10)
expect(50)
assert ring.adc_dropped == 3 * BLOCK, ring.adc_dropped
for b in range(51, 57):
    expect(b)
assert adc.misdirected == 0
print("late ok: 3 blocks counted as lost")

# overwritten while reduced: DMA comes round to the block's slot before the reader is done
dma(1)
raw = ring.adc_read()
dma(ring.nbuf)
assert not ring.intact() and ring.overwritten == 1
while ring.adc_read() is not None:
    pass
print("overwrite ok: detected")

# a channel still running when the handler re-arms it: counted, never silent
for s in range(4):                              # every stream's channel of this block done ...
    adc.regs[16 * (2 * s + (nb & 1)) + 2] = 0
adc.regs[16 * (nb & 1) + 2] = 5                 # ... but ADC0's, with 5 words to go
ring.st[6] = 10                                 # a short wait for the test
late = ring.late()
ring.on_block(None)
assert ring.late() == late + 1, ring.late()
print("late channel ok: counted")


# the USB link: a host that stops reading (the ring tests' memory back first: the board's burst ring is big)
src = SOURCES[1]
del adc, ring, raw, SOURCES
gc.collect()

class Console:
    def kbd_intr(self, c):
        self.last = c


host = Host(fifo_bytes=256)
board = Board(adc=FakeAdc(src), usb_in=host.to_board, usb_out=host.from_board, console=Console(), outputs={})
assert board.console.last == -1
usb = board.usb
frame = bytearray(1000)
for k in range(1000):
    frame[k] = k & 0xFF
assert usb.write(frame) and usb.used == 1000
usb.pump()
assert host.from_board.any() == 256 and usb.used == 744, (host.from_board.any(), usb.used)   # what the FIFO took
usb.pump()
assert usb.used == 744 and usb.stalled == 1          # a full FIFO: nothing written, nothing waited for
sent = 1
while usb.write(frame):
    sent += 1
assert usb.dropped_frames == 1 and usb.dropped_bytes == 1000, (usb.dropped_frames, usb.dropped_bytes)
total = 0
while usb.used:
    usb.pump()
    total += host.take()
data = host.received()
assert total == 1000 * sent and len(data) == 1000 * sent, (total, sent)
for k in range(sent):
    assert data[1000 * k:1000 * (k + 1)] == frame, k
print("usb ok: %d frames through a 256-byte FIFO, 1 dropped and counted" % sent)

# every byte value from the host, 0x03 among them: garbage, and inside a command frame
dev = Device(board)
reader = wire.FrameReader()
host.received()


def exchange(data):
    host.send(data)
    for _ in range(6):
        dev.poll()
        host.take()
    return [json.loads(p) for t, _s, p in reader.feed(host.received()) if t == wire.T_REPLY]


assert exchange(bytes(range(256))) == []
bad = exchange(wire.encode_frame(wire.T_COMMAND, bytes(range(256))))
assert len(bad) == 1 and not bad[0]["ok"], bad
ok = exchange(wire.encode_frame(wire.T_COMMAND, json.dumps({"id": "\x03\x04\x1a", "cmd": "ping"}).encode()))
assert len(ok) == 1 and ok[0]["ok"] and ok[0]["id"] == "\x03\x04\x1a", ok
st = exchange(wire.encode_frame(wire.T_COMMAND, b'{"id": 9, "cmd": "status"}'))[0]
assert st["bad_bytes"] >= 256 and st["link"]["dropped_frames"] == 1, st
print("bytes 0..255 ok")
print("ok")
