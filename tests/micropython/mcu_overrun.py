# Every delivered record right or marked (issue 43, item 3), and back-pressure that drops frames, not
# samples (item 4): Device(Board()) as firmware/main.py runs it, on the emulated Cortex-M, with the
# board's own reducer, DMA ring and USB link; only the DMA engine and the host's end of the USB are
# stand-ins (tests/micropython/fwtest).
#
# A known waveform: block b of the DMA ring holds source block b % K (K distinct blocks). Overruns are
# forced three ways: the reader falls more than the ring behind (samples lost before a block), DMA
# laps the block being reduced (the hook below completes a ring's worth of blocks just before the
# rail kernel reads it: its records would hold the newer blocks' samples) at many points of the frame
# cycle (before, between and after frames sent within the block), and both at once. Then the host stops
# reading for 0.5 s (500 blocks) while the stream goes on. Every record the host receives is
# compared, byte for byte, with the record a clean reducer makes from the waveform itself, restarted
# where the device restarted (each F_OVERRUN frame): a record that differs is a wrong record delivered.
# ARGS: none. Prints "records N checked", figures, and "ok".
import json

from board.reducer import BoardReducer
from board.rp2350 import Board
from fwtest.fake_dma import BLOCK, DIG_AT, HALFWORDS, REGION, FakeAdc
from fwtest.fake_usb import Host
from fwtest.tinyusb_cdc import TinyUsbCdc
from powerrig_fw import rails_default, wire
from powerrig_fw.device import Device
import array

K = 12                              # distinct source blocks (not a divisor of the ring's 8: a lap changes them)
INTERVAL_US = 140                   # 35 samples: intervals straddle blocks, restarts fall inside them
RAILS = ["12V", "3V3", "5V"]


def source_block(seed):
    b = array.array("h", bytes(2 * HALFWORDS))
    x = seed * 7919 + 1
    for s in range(BLOCK):
        for k in range(3):
            x = (x * 1103515245 + 12345) & 0x3FFFFFFF
            b[k * REGION + 2 * s] = 18000 + seed * 500 + (x & 0x3FF)
            b[k * REGION + 2 * s + 1] = 2000 + seed * 300 + ((x >> 10) & 0x7FF)
        w = (((s >> 4) + seed) & 7) << 13
        b[DIG_AT + s] = w - 65536 if w > 32767 else w
    return b


SRC = []                            # made after Board(): its 114 kB burst ring needs one free run first


class Console:
    def kbd_intr(self, c):
        pass


class Rig:
    def __init__(self):
        self.adc = FakeAdc(None)
        self.host = Host(fifo_bytes=1024, sink_bytes=16384)
        self.cdc = self.host.from_board = TinyUsbCdc()     # the CDC as the powerrig image's TinyUSB drives it
        self.board = Board(adc=self.adc, usb_in=self.host.to_board, usb_out=self.host.from_board,
                           console=Console(), outputs={})
        self.dev = Device(self.board)
        self.blocks = 0               # blocks DMA has finished (block b holds SRC[b % K])
        self.reading = True           # the host reads between passes
        self.kernel = self.board.reducer.rail_run
        self.lap_at = -1              # the kernel call before which DMA laps the ring
        self.calls = 0
        self.laps = 0
        self.board.reducer.rail_run = self.hook
        self.pending = bytearray()
        self.replies = []

    def dma(self, n=1):
        for _ in range(n):
            self.adc.complete_block(SRC[self.blocks % K])
            self.blocks += 1

    def hook(self, *a):
        """The rail kernel, with DMA lapping the ring just before the call picked (lap_at)."""
        self.calls += 1
        if self.calls == self.lap_at:
            self.dma(self.adc.ring.nbuf)
            self.laps += 1
        return self.kernel(*a)

    def poll(self, n=1):
        for _ in range(n):
            self.dev.poll()
        if self.reading:
            self.host.take()
            self.parse(self.host.received())

    def parse(self, data):
        """The board's bytes as the host takes them: whole frames, back to back (the queue drops
        whole frames only), DATA to the check, replies kept."""
        self.pending += data
        b = self.pending
        at = 0
        while len(b) - at >= wire.OVERHEAD:
            assert b[at] == wire.SYNC0 and b[at + 1] == wire.SYNC1, ("not a frame start", at, bytes(b[at:at + 8]))
            n = b[at + 6] | (b[at + 7] << 8)
            if len(b) - at < wire.OVERHEAD + n:
                break
            t, flags, count = b[at + 3], b[at + 4], b[at + 5]
            seq = b[at + 8] | (b[at + 9] << 8)
            index = b[at + 10] | (b[at + 11] << 8) | (b[at + 12] << 16) | (b[at + 13] << 24)
            payload = bytes(b[at + wire.HEADER_SIZE:at + wire.HEADER_SIZE + n])
            if t == wire.T_DATA:
                check.frame(seq, flags, count, index, payload)
            elif t == wire.T_REPLY:
                self.replies.append(json.loads(payload))
            at += wire.OVERHEAD + n
        self.pending = b[at:]

    def command(self, doc):
        self.replies = []
        self.host.send(wire.encode_frame(wire.T_COMMAND, json.dumps(doc).encode()))
        for k in range(30):          # 6 passes, more while the reply is still on its way (behind a
            self.poll()             # queue the host drains a packet at a time)
            if self.replies and k >= 5:
                break
        assert self.replies, doc
        return self.replies[0]


class Check:
    """The host's side: DATA frames in order, every record compared with the clean reducer's."""

    def __init__(self, rig, start):
        self.rig = rig
        self.spi = start["interval_us"] // rails_default.SAMPLE_PERIOD_US
        self.rec = start["record_size"]
        names = [r[0] for r in rails_default.RAILS]
        cal = rig.dev.cal["rails"]
        self.clean = BoardReducer(3)
        self.clean.layout(*rig.adc.layout())
        self.clean.configure([names.index(n) for n in RAILS], self.spi,
                             rails_default.PEAK_WINDOW_US // rails_default.SAMPLE_PERIOD_US,
                             [cal[n]["v_offset"] for n in RAILS], [cal[n]["i_offset"] for n in RAILS])
        self.out = []
        self.want = 0
        self.cf = wire.Framer(self._record, rig.board.crc_into)
        self.cf.configure(self.rec, 1)
        self.block = 0
        self.expect = start["first_index"]      # the index the next frame continues from
        self.seq = start["first_seq"]
        self.records = 0
        self.overrun_frames = 0
        self.gap_samples = 0
        self.link_lost = 0
        self.wrong = []
        self.started = False

    def _record(self, view):
        b = bytes(view)
        idx = b[10] | (b[11] << 8) | (b[12] << 16) | (b[13] << 24)
        if idx >= self.want:                # (the records of frames the host never got: not kept)
            self.out.append((idx, b[wire.HEADER_SIZE:wire.HEADER_SIZE + self.rec]))

    def restart(self, index):
        """The clean reducer as the device restarts: a fresh interval and window at ``index`` (a grid
        point, fewer than an interval past a block's start; skip discards up to it)."""
        bs = index - index % BLOCK
        off = index - bs
        assert off < self.spi, (index, off)
        n = (self.spi - off) % self.spi
        self.clean.restart(0, bs - n)
        self.clean.skip(n)
        self.block = bs // BLOCK
        self.out = []
        self.cf.n = 0

    def truth(self, index):
        self.want = index
        while not self.out or self.out[-1][0] < index:
            assert self.block < self.rig.blocks, ("record past the waveform", index)
            self.clean.feed(SRC[self.block % K], BLOCK, self.cf)
            self.block += 1
        while self.out[0][0] < index:
            self.out.pop(0)
        i, rec = self.out.pop(0)
        assert i == index, (i, index)
        return rec

    def frame(self, seq, flags, count, index, payload):
        assert len(payload) == count * self.rec, (len(payload), count)
        lost = (seq - self.seq) & 0xFFFF
        self.seq = (seq + 1) & 0xFFFF
        self.link_lost += lost
        if flags & wire.F_OVERRUN:
            self.overrun_frames += 1
            assert index > self.expect, ("an overrun frame without a gap", index, self.expect)
            self.gap_samples += index - self.expect
        elif not lost:
            assert index == self.expect, ("a jump without F_OVERRUN or lost frames", index, self.expect, seq)
        if not self.started or flags & wire.F_OVERRUN:
            self.restart(index)            # where the device's reducer restarted
            self.started = True
        for k in range(count):
            got = payload[k * self.rec:(k + 1) * self.rec]
            want = self.truth(index + k * self.spi)
            if got != want:
                self.wrong.append((index + k * self.spi, seq, flags))
            self.records += 1
        self.expect = index + count * self.spi


check = None
rig = Rig()
SRC.extend(source_block(k) for k in range(K))
rig.dma(1)
rig.poll()
start = rig.command({"id": 1, "cmd": "start", "interval_us": INTERVAL_US, "rails": RAILS})
assert start["ok"], start
check = Check(rig, start)
for _ in range(40):
    rig.dma()
    rig.poll()
assert check.records > 200 and not check.wrong, (check.records, check.wrong[:3])

# DMA laps the block being reduced, at every kernel call of a frame's cycle (4-5 blocks a frame,
# a frame-full return between the calls of a block): before, between and after the frames within it
at_call = [0, 0, 0]
for k in range(40):
    rig.dma()
    rig.calls = 0
    rig.lap_at = 1 + k % 2
    laps = rig.laps
    rig.poll()
    rig.lap_at = -1
    if rig.laps > laps:
        at_call[1 + k % 2] += 1
    for _ in range(1 + k % 5):           # a few whole blocks between, so laps fall on every phase
        rig.dma()
        rig.poll()
assert at_call[1] == 20 and at_call[2] >= 3 and rig.dev.overwritten >= rig.laps, (at_call, rig.dev.overwritten)
print("laps", rig.laps, "(after a frame sent within the block:", at_call[2], ") overwritten", rig.dev.overwritten)

# the reader falls behind the ring (samples lost before the next block), then laps on top of it
for k in range(10):
    rig.dma(rig.adc.ring.nbuf + 1 + k % 3)
    rig.calls = 0
    rig.lap_at = 1 if k % 2 else -1
    rig.poll()
    rig.lap_at = -1
    for _ in range(3):
        rig.dma()
        rig.poll()
st = rig.command({"id": 2, "cmd": "status"})
assert st["overruns"] >= 34 and st["lost_samples"] > 0, st
print("after forced overruns: records", check.records, "overrun frames", check.overrun_frames,
      "board overruns", st["overruns"], "lost samples", st["lost_samples"], "host gap samples", check.gap_samples)
assert check.overrun_frames >= 10 and check.link_lost == 0, (check.overrun_frames, check.link_lost)
assert not check.wrong, ("wrong records delivered", len(check.wrong), check.wrong[:5])

# the host stops reading for 0.5 s (500 blocks of 1 ms): frames are dropped at the queue and counted,
# no sample is lost, the loop goes on; then it reads again
ov0 = st["overruns"]
drop0 = st["link"]["dropped_frames"]
rig.reading = False
rig.cdc.away = True
for _ in range(500):
    rig.dma()
    rig.poll()
rig.reading = True
rig.cdc.away = False
for _ in range(20):
    rig.dma()
    rig.poll()
st = rig.command({"id": 3, "cmd": "status"})
dropped = st["link"]["dropped_frames"] - drop0
print("host away 0.5 s: board dropped frames", dropped, "host saw lost frames", check.link_lost,
      "overruns", st["overruns"] - ov0, "stalled pumps", st["link"]["stalled_pumps"])
assert st["overruns"] == ov0, ("samples lost while the host was away", st["overruns"] - ov0)
assert dropped > 50 and check.link_lost == dropped, (dropped, check.link_lost)
assert st["link"]["stalled_pumps"] > 0, st["link"]
assert not check.wrong, ("wrong records delivered", len(check.wrong), check.wrong[:5])
assert rig.cdc.waits == 0, ("a write waited for the host", rig.cdc.waits)
print("cdc writes", rig.cdc.writes, "none waited")

# the same away on stock MicroPython's poll (writable at one byte free): writes that wait up to 500 ms
for _ in range(200):                    # from an empty queue (a backlog goes out in whole packets)
    if not rig.board.link_status()["queued"]:
        break
    rig.poll()
rig.cdc.packet_poll = False
rig.cdc.away = True
# a reply first whose length is no multiple of the 64-byte packet, so that the FIFO's room gets odd
# (without it whether it does depended on where the stream's frames fell in their blocks, which a
# change in how the reader recovers from a loss moved)
rig.host.send(wire.encode_frame(wire.T_COMMAND, json.dumps({"id": 5, "cmd": "ping", "echo": "odd"}).encode()))
rig.poll(3)
for k in range(300):
    rig.dma()
    rig.poll()
    rig.cdc.away = (k + 1) % 7 != 0     # the host takes what it can now and then: the FIFO's room gets odd
rig.cdc.away = False
rig.cdc.packet_poll = True
print("stock poll: writes that would wait", rig.cdc.waits, "for up to", rig.cdc.wait_ms, "ms")
assert rig.cdc.waits > 0, "the model cannot tell the two polls apart"
rig.cdc.waits = 0
for _ in range(30):
    rig.dma()
    rig.poll()
r = rig.command({"id": 4, "cmd": "stop"})
assert r["ok"], r
print("records", check.records, "checked")
print("ok")
