# Raw bursts on the board's DMA layout (one region per ADC, board.kernels.BurstKernels in viper)
# against the reference path (interleaved samples, plain Python): the same BURST frames byte for byte
# for "now", threshold and edge triggers, with calibration offsets, a lost block and a ring that wraps;
# an armed burst allocates nothing per block, and beside a stream its trigger, its burst_triggered notice
# and its whole upload allocate nothing either (heap locked, issue 43). MicroPython only (viper): the unix port
# (64-bit ints) and the emulated Cortex-M (32-bit).
import array
import gc
import json
import sys
import time

import micropython

from fwtest.host_bytes import HostBytes
from powerrig_fw import wire
from powerrig_fw.device import Device
from board import kernels
from board.kernels import BurstKernels
from board.usb import copy_bytes

BLOCK = 250
NR = 3
STRIDE = 2 * NR + 1


class Lcg:
    """Deterministic pseudo-random codes on every port (no random module on the bare-metal port)."""

    def __init__(self, seed):
        self.x = seed

    def next(self, lo, hi):
        self.x = (self.x * 1103515245 + 12345) & 0x7FFFFFFF
        return lo + (self.x >> 8) % (hi - lo + 1)


def fill_block(b, regions, out):
    """Block b of the script: a 3V3 power spike at samples 1710..1719, a marker (bit 2) high over
    900..2899, bit 0 toggling every 64 samples, noise elsewhere; interleaved (v0 i0 v1 i1 v2 i2
    digital) or as the board's DMA writes it (a region per ADC of (V, I) pairs, then the digital
    words). Generated per block, not stored: the emulated MCU's heap is an RP2350's."""
    rng = Lcg(7 + b)
    for s in range(BLOCK):
        g = b * BLOCK + s
        codes = (rng.next(26000, 26300), rng.next(-200, 12000), rng.next(21000, 21700),
                 30000 if 1710 <= g < 1720 else rng.next(-30000, 3900),
                 rng.next(-32768, 32767), rng.next(-32768, 32767))
        dig = (1 if g & 64 else 0) | (4 if 900 <= g < 2900 else 0)
        for k in range(NR):
            at = k * 2 * BLOCK + 2 * s if regions else s * STRIDE + 2 * k
            out[at] = codes[2 * k]
            out[at + 1] = codes[2 * k + 1]
        if regions:              # the board's PIO puts the digital inputs in bits 15..13
            w = dig << 13
            out[NR * 2 * BLOCK + s] = w - 65536 if w > 32767 else w
        else:
            out[s * STRIDE + 6] = dig


class FakeBoard(HostBytes):
    name = "fake"
    serial = "F1"
    burst_capacity = 1500          # small: the ring wraps within the test

    def __init__(self, n_blocks, regions, cal_path):
        self.cal_path = cal_path
        self.n_blocks = n_blocks
        self.regions = regions
        self.buf = array.array("h", bytes(2 * STRIDE * BLOCK))
        if regions:
            self.layout = ([k * 2 * BLOCK for k in range(NR)], 2, NR * 2 * BLOCK, 1, 13)
            kern = BurstKernels(self.layout)
            self.burst_copy = kern.copy
            self.scan_trigger = kern.scan
        HostBytes.__init__(self)
        self.next_block = 0
        self.drop_at = -1
        self.lap_at = -1         # the block whose slot DMA writes again while it is read
        self.lapped = False
        self.index = 0
        self.last = 0

    def adc_read(self):
        if self.next_block >= self.n_blocks:
            self.index += BLOCK         # time goes on (the burst upload is paced by it), no data comes
            return None
        dropped = 0
        if self.next_block == self.drop_at:      # a block the CPU missed: its samples are gone
            self.next_block += 1
            self.index += BLOCK
            dropped = BLOCK
        # DMA came round while the main loop read this block: its slot holds the block a ring later
        self.lapped = self.next_block == self.lap_at
        fill_block(self.next_block + (8 if self.lapped else 0), self.regions, self.buf)
        self.next_block += 1
        self.last = self.index
        self.index += BLOCK
        self.adc_n = BLOCK
        self.adc_dropped = dropped
        return self.buf

    def adc_intact(self):
        return not self.lapped

    def adc_restart(self):
        return self.index

    def block_index(self):
        return self.last

    def sample_index(self):
        return self.index


def start(regions, cmd, n_blocks, drop_at=-1):
    """A device on a scripted board, calibration offsets set and the burst command sent."""
    board = FakeBoard(n_blocks, regions, "burst-cal-%d.json" % regions)
    board.drop_at = drop_at
    dev = Device(board)
    reader = wire.FrameReader()
    for doc in ({"id": 1, "cmd": "cal_set", "save": False,
                 "calibration": {"rails": {"3V3": {"v_offset": 37, "i_offset": -25}}}}, cmd):
        board.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, json.dumps(doc).encode())))
        dev.poll()
    replies = [json.loads(f[2]) for b in board.sent for f in reader.feed(b) if f[0] == wire.T_REPLY]
    assert len(replies) == 2 and all(r["ok"] for r in replies), replies
    board.sent = []
    return board, dev, reader


def drain(board, reader):
    frames = [f for b in board.sent for f in reader.feed(b)]
    board.sent = []
    return ([f[2] for f in frames if f[0] == wire.T_BURST],
            [json.loads(f[2]) for f in frames if f[0] == wire.T_NOTICE])


def compare(cmd, n_blocks, drop_at=-1):
    """The reference (interleaved, Python) and the board layout (kernels) side by side, frame by
    frame as they come (the emulated MCU's heap holds two burst rings, not two whole bursts)."""
    gc.collect()
    ref = start(False, cmd, n_blocks, drop_at)
    got = start(True, cmd, n_blocks, drop_at)
    samples = 0
    notes = []
    payload = b""
    for _ in range(4 * n_blocks + 60):
        ref[1].poll()
        got[1].poll()
        ref_bursts, ref_notes = drain(ref[0], ref[2])
        got_bursts, got_notes = drain(got[0], got[2])
        assert got_bursts == ref_bursts and got_notes == ref_notes, (cmd, got_notes, ref_notes)
        samples += sum(len(b) for b in ref_bursts) // (2 * STRIDE)
        payload += b"".join(ref_bursts)
        notes += [n for n in ref_notes if n.get("event") == "burst_triggered"]
    if notes:
        same_as_script(payload, notes[0]["first_index"])
    return samples, notes


def same_as_script(payload, first):
    """Every sample of a burst's upload is the script's at its index (fill_block)."""
    got = array.array("h", payload)
    want = array.array("h", bytes(2 * STRIDE * BLOCK))
    for k in range(len(got) // STRIDE):
        g = first + k
        if k == 0 or g % BLOCK == 0:
            fill_block(g // BLOCK, False, want)
        assert got[k * STRIDE:(k + 1) * STRIDE] == want[(g % BLOCK) * STRIDE:(g % BLOCK + 1) * STRIDE], g


def armed_without_allocating(cmd):
    """Armed, no trigger in sight: each block is scanned and copied with the heap locked."""
    gc.collect()
    board, dev, _reader = start(True, cmd, 8)
    before = dev.burst.filled
    for _ in range(4):
        raw = board.adc_read()
        n, dropped = board.adc_n, board.adc_dropped
        micropython.heap_lock()
        try:
            dev.burst.observe(raw, n, dropped)
        finally:
            micropython.heap_unlock()
    # the history an armed burst keeps: every block while pre is longer than a block, else its last pre samples
    want = before + 4 * BLOCK if cmd["pre"] >= BLOCK else cmd["pre"]
    assert dev.burst.state == "armed" and dev.burst.filled == want, dev.burst.status()


N_BLOCKS = 14
CASES = [
    ("now", {"id": 2, "cmd": "burst", "trigger": "now", "pre": 300, "post": 700}, -1, 1000),
    # 3V3 above 0.5 W: only the spike at sample 1710 (after the offsets) gets there
    ("threshold", {"id": 2, "cmd": "burst", "trigger": "threshold", "rail": "3V3", "above_w": 0.5,
                   "pre": 600, "post": 400}, -1, 1000),
    ("edge falling", {"id": 2, "cmd": "burst", "trigger": "edge", "bit": 2, "rising": False,
                      "pre": 1000, "post": 500}, -1, 1500),
    ("edge rising, lost block", {"id": 2, "cmd": "burst", "trigger": "edge", "bit": 0, "rising": True,
                                 "pre": 200, "post": 300}, 2, 500),
    # pre shorter than a block: an armed block keeps only its last 200 samples (issue 43). Armed in the
    # pass of block 1 (250..499), the first falling edge at least 200 samples in is 512, whose window
    # (312..511) crosses the block boundary: 312..499 from block 1's kept tail
    ("edge falling, short pre", {"id": 2, "cmd": "burst", "trigger": "edge", "bit": 0, "rising": False,
                                 "pre": 200, "post": 300}, -1, 500),
]
for name, cmd, drop_at, want in CASES:
    samples, notes = compare(cmd, N_BLOCKS, drop_at)
    assert len(notes) == 1 and notes[0]["samples"] == want == samples, (name, notes, samples)
    print("burst %s: %d samples from %d, trigger %d" % (name, samples, notes[0]["first_index"],
                                                         notes[0]["trigger_index"]))
    if name == "threshold":      # the spike is where it fired: sample 1710 is the first above 0.5 W
        assert notes[0]["trigger_index"] == 1710, notes
    if name == "edge rising, lost block":
        assert notes[0]["trigger_index"] > 2 * BLOCK, notes   # the rising edge after the lost block
    if name == "edge falling, short pre":
        assert (notes[0]["trigger_index"], notes[0]["first_index"]) == (512, 312), notes


def lapped_block():
    """DMA lapped the main loop while an armed burst read block 1 (samples 250..499): the slot held
    block 9's samples, where bit 0 rises at 2368. The trigger found there is forgotten (it said
    sample 368, with block 9's samples around it); the history starts again and the burst fires at a
    real edge, its samples the script's. The overwrite is counted."""
    gc.collect()
    board = FakeBoard(N_BLOCKS, True, "burst-cal-lap.json")
    board.lap_at = 1
    dev = Device(board)
    reader = wire.FrameReader()
    board.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, json.dumps(
        {"id": 1, "cmd": "burst", "trigger": "edge", "bit": 0, "rising": True, "pre": 300, "post": 300}).encode())))
    payload = b""
    notes = []
    for _ in range(4 * N_BLOCKS + 60):
        dev.poll()
        bursts, ns = drain(board, reader)
        payload += b"".join(bursts)
        notes += [n for n in ns if n.get("event") == "burst_triggered"]
    assert dev.overwritten == 1 and dev.overruns == 1, (dev.overwritten, dev.overruns)
    # the first rising edge of bit 0 at least `pre` samples into the history that restarts at 500
    assert len(notes) == 1 and notes[0]["trigger_index"] == 832 and notes[0]["first_index"] == 532, notes
    assert len(payload) == 600 * STRIDE * 2, len(payload)
    same_as_script(payload, 532)
    print("burst after a lapped block: trigger %d, first %d" % (notes[0]["trigger_index"], notes[0]["first_index"]))


lapped_block()


def cancel_without_a_window():
    """The host's cancel ({"trigger": "off"}, no pre or post: powerrig.interposer.client) is taken on a
    board whose burst RAM is smaller than the default window (it was refused for pre + post = 5000 on
    the RP2040), and it disarms an armed burst."""
    board = FakeBoard(4, True, "burst-cal-off.json")
    dev = Device(board)
    dev.burst.arm({"trigger": "edge", "bit": 0, "pre": 100, "post": 100})
    assert dev.burst.state == "armed"
    r = dev.burst.arm({"trigger": "off"})
    assert r == {"armed": None, "capacity": board.burst_capacity} and dev.burst.state == "idle", r
    try:
        dev.burst.arm({"trigger": "now"})
        raise AssertionError("the default window was taken on a 1500-sample board")
    except ValueError as e:
        assert "exceeds the burst RAM" in str(e), e


cancel_without_a_window()

class LockedBoard(FakeBoard):
    """The board path with the board's allocation-free helpers (machine-code CRC, digits, byte copy),
    its blocks made before the heap is locked, its frames written into one preallocated sink."""

    def __init__(self, n_blocks, cal_path):
        FakeBoard.__init__(self, n_blocks, True, cal_path)
        self.crc_into = kernels.crc32_into
        self.put_dec = kernels.put_dec
        self.copy = copy_bytes
        self.pre = []
        for b in range(n_blocks):
            fill_block(b, True, self.buf)
            self.pre.append(array.array("h", self.buf))
        self.sink = bytearray(24 * 1024)
        self.used = 0

    def adc_read(self):
        if self.next_block >= self.n_blocks:
            self.index += BLOCK
            return None
        raw = self.pre[self.next_block]
        self.next_block += 1
        self.last = self.index
        self.index += BLOCK
        self.adc_n = BLOCK
        self.adc_dropped = 0
        return raw

    def write(self, buf, n=-1):
        n = len(buf) if n < 0 else n
        copy_bytes(self.sink, self.used, buf, 0, n)
        self.used += n


def fired_and_uploaded_without_allocating():
    """A stream runs and an edge burst is armed (JSON commands: they allocate); then every pass, the
    one that finds the marker's rising edge (sample 900), the pass with the burst_triggered notice and
    the first chunk, and each later chunk, runs with the heap locked. On the RP2040 a pass that
    allocated here let a collection land beside a 2 ms stream, longer than its DMA ring's slack (issue
    43). The notice, the BURST frames and the stream's DATA frames are then read back."""
    gc.collect()
    board = LockedBoard(8, "burst-cal-locked.json")
    dev = Device(board)
    for doc in ({"id": 1, "cmd": "start", "interval_us": 1000, "rails": ["12V", "3V3"], "per_frame": 2},
                {"id": 2, "cmd": "burst", "trigger": "edge", "bit": 2, "rising": True, "pre": 300, "post": 400}):
        board.inbox.append(bytes(wire.encode_frame(wire.T_COMMAND, json.dumps(doc).encode())))
        dev.poll()
    assert dev.state == "streaming" and dev.burst.state == "armed", (dev.state, dev.burst.status())
    board.used = 0
    passes = 0
    gc.collect()
    micropython.heap_lock()
    try:
        while dev.burst.state != "idle" and passes < 200:
            dev.poll()
            passes += 1
    finally:
        micropython.heap_unlock()
    frames = wire.FrameReader().feed(bytes(board.sink[:board.used]))
    notes = [json.loads(f[2]) for f in frames if f[0] == wire.T_NOTICE]
    chunks = [f[2] for f in frames if f[0] == wire.T_BURST]
    assert notes == [{"event": "burst_triggered", "trigger_index": 900, "first_index": 600, "samples": 700}], notes
    types = [f[0] for f in frames]
    assert types.index(wire.T_NOTICE) < types.index(wire.T_BURST), types   # the notice, then the first chunk
    payload = b"".join(chunks)
    assert len(payload) == 700 * STRIDE * 2 and len(chunks) > 1, (len(payload), len(chunks))
    same_as_script(payload, 600)
    data = [f for f in frames if f[0] == wire.T_DATA]
    assert data and dev.overruns == 0 and dev.errors == 0, (len(data), dev.overruns, dev.errors)
    print("burst fired and uploaded beside a stream, heap locked: %d passes, %d chunks, %d data frames"
          % (passes, len(chunks), len(data)))


fired_and_uploaded_without_allocating()

armed_without_allocating({"id": 2, "cmd": "burst", "trigger": "threshold", "rail": "12V", "above_w": 400.0,
                          "pre": 100, "post": 100})
armed_without_allocating({"id": 2, "cmd": "burst", "trigger": "edge", "bit": 1, "pre": 100, "post": 100})
armed_without_allocating({"id": 2, "cmd": "burst", "trigger": "edge", "bit": 1, "pre": 300, "post": 100})

# instructions per sample point that an armed burst adds (scan + copy into the ring), board layout;
# -icount shift=0 on the emulated Cortex-M: 1 us of ticks = 1000 instructions. Meaningful there only.
if sys.implementation._machine.find("Cortex") >= 0:
    for cmd in ({"trigger": "threshold", "rail": "12V", "above_w": 400.0}, {"trigger": "edge", "bit": 1}):
        dev = board = None
        gc.collect()
        board = FakeBoard(1, True, "burst-cal-count.json")
        dev = Device(board)
        cmd.update(pre=100, post=100)
        dev.burst.arm(cmd)
        blk = board.adc_read()
        rounds = 20
        gc.collect()
        t0 = time.ticks_us()
        for _ in range(rounds):
            dev.burst.observe(blk, BLOCK, 0)
        t1 = time.ticks_us()
        for _ in range(rounds):
            board.scan_trigger(blk, 0, BLOCK, dev.burst.spec)
        t2 = time.ticks_us()
        for _ in range(rounds):
            board.burst_copy(dev.burst.ring, 0, blk, 0, BLOCK)
        t3 = time.ticks_us()
        print("armed", cmd["trigger"], time.ticks_diff(t1, t0) * 1000 // (rounds * BLOCK),
              "scan", time.ticks_diff(t2, t1) * 1000 // (rounds * BLOCK),
              "copy", time.ticks_diff(t3, t2) * 1000 // (rounds * BLOCK))
print("burst ok")
