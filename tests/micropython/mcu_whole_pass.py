# Whole main-loop passes, Device(Board()) as firmware/main.py runs them, on the emulated Cortex-M
# (32-bit: the DMA ring's registers are addresses). The board's own code runs; only the DMA engine and
# the USB streams are RAM stand-ins (tests/micropython/fwtest). Every timed pass runs under
# micropython.heap_lock(): an allocation anywhere in a pass raises MemoryError and fails the run.
#
# ARGS: [blocks per mode]. Prints, per mode, "pass MODE PASSES TOTAL_US WORST_US IDLE_US" where the
# times are ticks_us under QEMU -icount shift=0 (1 us = 1000 instructions), and "ok" at the end.
# ticks_us is read as the median of three reads (fwtest.icount_clock: a single read that straddles the
# port's SysTick wrap is a millisecond off), and the reads' own cost (a constant: the count is exact)
# is taken off every pass.
import array
import gc
import json
import sys
import time

import micropython

try:
    ARGS
except NameError:
    ARGS = sys.argv[1:]
BLOCKS = int(ARGS[0]) if ARGS else 2000

from board.rp2350 import Board
from fwtest.fake_dma import BLOCK, DIG_AT, HALFWORDS, REGION, FakeAdc
from fwtest.fake_usb import Host
from fwtest.icount_clock import us as ticks_us
from powerrig_fw import wire
from powerrig_fw.device import Device


class Console:
    """micropython's kbd_intr, recorded."""

    def __init__(self):
        self.calls = []

    def kbd_intr(self, c):
        self.calls.append(c)


def source_block(seed):
    """One block in the board's DMA layout: codes that vary, digital inputs in bits 15..13."""
    b = array.array("h", bytes(2 * HALFWORDS))
    x = seed
    for s in range(BLOCK):
        for k in range(3):
            x = (x * 1103515245 + 12345) & 0x3FFFFFFF
            b[k * REGION + 2 * s] = 20000 + (x & 0x3FF)           # volts
            b[k * REGION + 2 * s + 1] = 3000 + ((x >> 10) & 0x7FF)   # amps
        w = ((1 if s & 32 else 0) | 2) << 13        # activity toggling, PERST# high
        b[DIG_AT + s] = w - 65536 if w > 32767 else w
    return b


def timer_us(n=200):
    """The timing's own cost in us (two median reads and a diff), the least of n tries."""
    ticks = ticks_us
    diff = time.ticks_diff
    least = 1 << 20
    for _ in range(n):
        t0 = ticks()
        d = diff(ticks(), t0)
        if d < least:
            least = d
    return least


TIMER_US = timer_us()


class Rig:
    def __init__(self):
        self.src = source_block(1)
        self.adc = FakeAdc(self.src)
        self.host = Host()
        self.console = Console()
        self.board = Board(adc=self.adc, usb_in=self.host.to_board, usb_out=self.host.from_board,
                           console=self.console, outputs={})
        self.dev = Device(self.board)
        self.reader = wire.FrameReader()

    def command(self, doc):
        """Send a command, run passes until its reply came; the reply."""
        self.host.received()
        self.reader = wire.FrameReader()
        self.host.send(wire.encode_frame(wire.T_COMMAND, json.dumps(doc).encode()))
        for _ in range(4):
            self.dev.poll()
            self.host.take()
        for r in self.replies():
            return r
        raise AssertionError("no reply to %r" % (doc,))

    def frames(self):
        return self.reader.feed(self.host.received())

    def replies(self):
        return [json.loads(p) for t, _s, p in self.frames() if t == wire.T_REPLY]

    def passes(self, n):
        """n passes, one DMA block each, heap locked: (total us, worst us) of Device.poll alone."""
        adc = self.adc
        take = self.host.take
        poll = self.dev.poll
        ticks = ticks_us
        diff = time.ticks_diff
        total = 0
        worst = 0
        gc.collect()
        micropython.heap_lock()
        try:
            for _ in range(n):
                adc.complete_block()
                t0 = ticks()
                poll()
                d = diff(ticks(), t0) - TIMER_US
                take()
                total += d
                if d > worst:
                    worst = d
        finally:
            micropython.heap_unlock()
        return total, worst

    def idle(self, n):
        """n passes with no block ready (the loop between blocks)."""
        ticks = time.ticks_us
        micropython.heap_lock()
        try:
            t0 = ticks()
            for _ in range(n):
                self.dev.poll()
            t1 = ticks()
            self.host.take()
        finally:
            micropython.heap_unlock()
        return time.ticks_diff(t1, t0)


def ping_passes(rig, n, every):
    """n block passes with a clock ping (the host's bytes, powerrig.interposer.frames.encode_command's
    form) arriving before every ``every``-th, heap locked: the pings the host sends 25-100 times a
    second during a stream answered without allocating (an automatic collection on the RP2040 takes
    longer than its DMA ring's slack). The replies are parsed after the lock: (total us, worst us,
    ids answered, replies)."""
    frames = [wire.encode_frame(wire.T_COMMAND, ('{"id":%d,"cmd":"ping"}' % (9000 + k)).encode()) for k in range(n // every)]
    adc = rig.adc
    send = rig.host.to_board.write
    take = rig.host.take
    poll = rig.dev.poll
    ticks = ticks_us
    diff = time.ticks_diff
    total = 0
    worst = 0
    k = 0
    gc.collect()
    micropython.heap_lock()
    try:
        for b in range(n):
            if b % every == 0:
                send(frames[k])
                k += 1
            adc.complete_block()
            t0 = ticks()
            poll()
            d = diff(ticks(), t0) - TIMER_US
            take()
            total += d
            if d > worst:
                worst = d
    finally:
        micropython.heap_unlock()
    print("pass pings", n, total, worst, 0)
    return [r for r in rig.replies()]


def mode(name, rig, n):
    self_total, worst = rig.passes(n)
    idle = rig.idle(200)
    print("pass", name, n, self_total, worst, idle)


rig = Rig()
assert rig.console.calls == [-1], rig.console.calls       # Ctrl-C off before anything reads the host
d = rig.command({"id": 1, "cmd": "describe"})
assert d["ok"] and d["burst_capacity"] == rig.board.burst_capacity, d
print("heap free after Device(Board()):", gc.mem_free(), "of", gc.mem_free() + gc.mem_alloc())

r = rig.command({"id": 2, "cmd": "start", "interval_us": 100, "rails": ["12V", "3V3"]})
assert r["ok"] and r["per_frame"] > 1, r
mode("r2_100us", rig, BLOCKS)
n_data = 0
for t, _s, p in rig.frames():
    if t == wire.T_DATA:
        n_data += 1
assert n_data > 0, "no data frames"
st = rig.command({"id": 3, "cmd": "status"})
assert st["overruns"] == 0 and st["link"]["dropped_frames"] == 0 and rig.adc.misdirected == 0, (st, rig.adc.misdirected)

r = rig.command({"id": 4, "cmd": "burst", "trigger": "threshold", "rail": "12V", "above_w": 1000.0,
                 "pre": 2500, "post": 2500})
assert r["ok"], r
mode("r2_100us_burst_threshold", rig, max(200, BLOCKS // 4))
r = rig.command({"id": 5, "cmd": "burst", "trigger": "edge", "bit": 2, "rising": True, "pre": 2500, "post": 2500})
assert r["ok"], r
mode("r2_100us_burst_edge", rig, max(200, BLOCKS // 4))
rig.command({"id": 6, "cmd": "burst", "trigger": "off"})

for rails, us in ((["12V", "3V3"], 1000), (["12V", "3V3", "5V"], 140), (["12V", "3V3", "5V"], 1000)):
    r = rig.command({"id": 7, "cmd": "start", "interval_us": us, "rails": rails})
    assert r["ok"], r
    mode("r%d_%dus" % (len(rails), us), rig, max(200, BLOCKS // 4))
r = rig.command({"id": 10, "cmd": "start", "interval_us": 10000, "rails": ["12V", "3V3"]})
assert r["ok"], r
rig.frames()
pongs = ping_passes(rig, max(200, BLOCKS // 4), 5)
assert [p["id"] for p in pongs] == list(range(9000, 9000 + len(pongs))) and len(pongs) == max(200, BLOCKS // 4) // 5, pongs
for p in pongs:
    assert sorted(p) == ["echo", "id", "index", "ok", "rx_index", "us"] and p["ok"] is True and p["echo"] is None, p
    assert 0 < p["rx_index"] <= p["index"] and p["us"] > 0, p
assert all(pongs[k + 1]["index"] - pongs[k]["index"] == 5 * BLOCK for k in range(len(pongs) - 1)), pongs[:3]
print("pings heap-locked ok:", len(pongs), "answered")
# the board's (hi, lo) sample index is sample_index(), also past 2**30 samples (71 minutes) and 2**32,
# and it falls on the sample being converted: the blocks done plus what the digital stream's running
# channel has moved (its TRANS_COUNT counts down), not on a block's start (issue 43: pings were stamped
# with multiples of the block)
split = array.array("i", [0, 0])
st = rig.board.ring.st
done = st[0]
regs = rig.adc.regs
dig = [16 * ch + 2 for ch in (6, 7)]          # TRANS_COUNT of the digital stream's channels (fake_dma.CHANNELS)
counts = [regs[a] for a in dig]
for blocks in (done, 1 << 22, (1 << 22) + 4095, 17179869 + 3, (1 << 29) + 12345):
    for left in (BLOCK, 77, 1):
        for a in dig:
            regs[a] = left
        st[0] = blocks
        rig.board.sample_index_into(split, 0)
        want = blocks * BLOCK + BLOCK - left
        assert split[0] * (1 << 24) + split[1] == rig.board.sample_index() == want and split[1] < 1 << 24, (blocks, left, list(split))
st[0] = done
for a in dig:
    regs[a] = 77
rig.host.received()
rig.host.send(wire.encode_frame(wire.T_COMMAND, b'{"id":31,"cmd":"ping"}'))
rig.dev.poll()
rig.host.take()
pong = rig.replies()[0]
assert pong["id"] == 31 and pong["rx_index"] == done * BLOCK + BLOCK - 77 == pong["index"], (pong, done)
for a, c in zip(dig, counts):
    regs[a] = c
print("split index ok")
rig.command({"id": 8, "cmd": "stop"})
mode("idle_stream_off", rig, 200)
st = rig.command({"id": 9, "cmd": "status"})
assert st["overruns"] == 0 and rig.adc.misdirected == 0, st
print("ok")
