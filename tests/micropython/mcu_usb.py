# The board's USB link on the emulated Cortex-M, the whole Board() built as main.py builds it on a fresh
# heap (its burst ring needs one free run of 114 kB): the link never writes more than the CDC takes,
# counts what it had no room for, and every byte value 0..255 from the host leaves the command path
# standing. (Its own script: the ring tests of mcu_link.py leave the heap too split for that ring.)
import array
import json

from board.rp2350 import Board
from fwtest.fake_dma import HALFWORDS, FakeAdc
from fwtest.fake_usb import Host
from powerrig_fw import wire
from powerrig_fw.device import Device

src = array.array("h", bytes(2 * HALFWORDS))



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
