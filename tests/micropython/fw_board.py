# The board's hot path (board.reducer: viper + Thumb-2 on ARMv7-M) against the reference reducer,
# byte for byte: golden vectors, long random inputs (clipping, interval boundaries, window wrap,
# overruns, calibration offsets), the DMA layout; the streaming path with the heap locked.
# Runs on MicroPython only (viper): the unix port (64-bit) and the emulated Cortex-M (32-bit, Thumb-2).
# On the emulated Cortex-M it also prints instruction counts: "budget RAILS SPI INSTR_PER_SAMPLE".
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
VEC = ARGS[0] if ARGS else "/rom/vectors"

from powerrig_fw import crc, reduce, wire
from board import kernels
from board.reducer import BoardReducer

ON_MCU = sys.implementation._machine.find("Cortex") >= 0
print("board reducer: Thumb-2 inner loop" if BoardReducer(3).kernel == "thumb2" else "board reducer: viper inner loop")
# every rail loop this machine can run: on the emulated Cortex-M (ARMv7-M) the ARMv6-M one runs too
KERNELS = ["thumb2", "v6m", "viper"] if ON_MCU else ["viper"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Sink:
    """Frames into one preallocated buffer: writing allocates nothing."""

    def __init__(self, size):
        self.buf = bytearray(size)
        self.n = 0

    def write(self, mv):
        k = len(mv)
        self.buf[self.n:self.n + k] = mv
        self.n += k

    def bytes(self):
        return bytes(self.buf[:self.n])


def run(make, raw, ops, cfg, locked, size):
    """Feed ops (("feed", view, n) / ("skip", n)) to a reducer; the frames it sent."""
    sink = Sink(size)
    framer = wire.Framer(sink.write, kernels.crc32_into)
    r = make()
    r.configure(cfg["rails"], cfg["spi"], cfg["window"], cfg["offsets_v"], cfg["offsets_i"])
    framer.configure(wire.record_size(len(cfg["rails"])), cfg["per_frame"])
    r.restart(cfg["start"][0], cfg["start"][1])
    if "layout" in cfg:
        r.layout(*cfg["layout"])
    if locked:
        micropython.heap_lock()
    try:
        for op in ops:
            if op[0] == "feed":
                r.feed(op[1], op[2], framer)
            else:                      # an overrun: not the streaming path (flush slices a view)
                if locked:
                    micropython.heap_unlock()
                framer.mark_overrun()
                r.skip(op[1])
                if locked:
                    micropython.heap_lock()
    finally:
        if locked:
            micropython.heap_unlock()
    framer.flush()
    return sink.bytes()


def first_diff(a, b):
    for k in range(min(len(a), len(b))):
        if a[k] != b[k]:
            return k
    return -1


# 0. the board's CRC (Thumb-2 on the MCU, viper elsewhere) is zlib's, at any offset, heap locked
import binascii
import struct

for data in (b"", b"a", b"123456789", bytes(range(256)) * 9, bytes(range(7))):
    for pre in (b"z", b"zz", b"zzz", b"zzzz"):       # every alignment of the first byte
        b = bytearray(pre + data + bytes(4))
        micropython.heap_lock()
        try:
            kernels.crc32_into(b, len(pre), len(pre) + len(data))
        finally:
            micropython.heap_unlock()
        assert struct.unpack_from("<I", b, len(pre) + len(data))[0] == binascii.crc32(data) & 0xFFFFFFFF, data[:10]
print("board crc ok", "(Thumb-2)" if kernels._crc32_thumb is not None else "(viper)")

# the clock ping's digits in machine code equal the reference's (wire.put_dec), heap locked, up to a
# u64's 20 digits on a 32-bit port
digits_ref = bytearray(32)
digits_got = bytearray(32)
ends = array.array("i", [0, 0])


def both_digits(hi, lo):
    ends[0] = wire.put_dec(digits_ref, 5, hi, lo)
    ends[1] = kernels.put_dec(digits_got, 5, hi, lo)


for hi, lo in ((0, 0), (0, 7), (0, 0xFFFFFF), (1, 0), (63, 0xFFFFFF), (64, 0), (255, 1), (123456, 654321),
               (0x3FFFFFFF, 0xFFFFFF)):
    micropython.heap_lock()
    try:
        both_digits(hi, lo)
    finally:
        micropython.heap_unlock()
    want = str(hi * (1 << 24) + lo).encode()
    assert bytes(digits_ref[5:ends[0]]) == want == bytes(digits_got[5:ends[1]]), (hi, lo, digits_got)
print("board digits ok")

# 1. golden vectors, heap locked
for name in ("r2_100us", "r3_1ms_offsets", "r1_odd_clip"):
    cfg = json.loads(read(VEC + "/" + name + ".json"))
    raw = array.array("h", read(VEC + "/" + name + ".raw.bin"))
    want = read(VEC + "/" + name + ".frames.bin")
    mv = memoryview(raw)
    ops, pos, s = [], 0, cfg["stride"]
    for b in cfg["blocks"]:
        ops.append(("feed", mv[pos * s:(pos + b) * s], b))
        pos += b
    for kind in KERNELS:
        got = run(lambda: BoardReducer(3, kind), raw, ops, cfg, True, len(want) + 64)
        assert got == want, "%s (%s): first difference at byte %d" % (name, kind, first_diff(got, want))
    print("vector", name, "ok")

# 2. long random inputs: both reducers on the same interpreter, same ops
seed = [2463534242 & 0x3FFFFFFF]


def rnd(n):
    """0..n-1 from a 30-bit xorshift (small ints on every port)."""
    x = seed[0]
    x ^= (x << 13) & 0x3FFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0x3FFFFFFF
    seed[0] = x
    return x % n


N = 2000 if ON_MCU else 6000         # the emulated MCU has a 400 kB heap, as an RP2350 about does
for case in range(6):
    raw = array.array("h", bytes(2 * 7 * N))
    for k in range(7 * N):
        u = rnd(100)
        if u < 3:
            raw[k] = -32768                      # the one code the clamp changes without offsets
        elif u < 6:
            raw[k] = 32767
        else:
            raw[k] = rnd(65536) - 32768
    nr = 1 + rnd(3)
    rails = [0, 1, 2]
    for k in range(2, 0, -1):
        j = rnd(k + 1)
        rails[k], rails[j] = rails[j], rails[k]
    rails = rails[:nr]
    spi = (25, 250, 5 + rnd(300), 7, 2500 if N > 5000 else 600, 5 + rnd(60))[case]
    window = (25, 25, 25, 25, 25, 1 + rnd(64))[case]
    cfg = {"rails": rails, "spi": spi, "window": window, "per_frame": 1 + min(rnd(20), 2048 // wire.record_size(nr) - 1),
           "offsets_v": [rnd(8193) - 4096 for _ in rails], "offsets_i": [rnd(8193) - 4096 for _ in rails],
           "start": [rnd(1000), (1 << 24) - 1 - rnd(5000)]}
    mv = memoryview(raw)
    ops, pos = [], 0
    while pos < N:
        if rnd(10) < 2:
            ops.append(("skip", 1 + rnd(3 * spi)))
        n = min(N - pos, 1 + rnd(700))
        ops.append(("feed", mv[pos * 7:(pos + n) * 7], n))
        pos += n
    size = (N // spi + 40) * (wire.record_size(nr) + wire.OVERHEAD)
    ref = run(lambda: reduce.Reducer(3), raw, ops, cfg, False, size)
    assert len(ref) > 0
    for kind in KERNELS:
        got = run(lambda: BoardReducer(3, kind), raw, ops, cfg, True, size)
        assert got == ref, "random case %d, %s (%r): first difference at byte %d of %d" % (
            case, kind, cfg, first_diff(got, ref), len(ref))
    print("random", case, "ok", len(ref), "bytes")

# 3. the DMA layout: one region per ADC with (V, I) halfword pairs, then the digital words, whose
#    three inputs the PIO puts in bits 15..13 (they must come out as bits 0..2 of the records)
BLOCK = 250
raw = array.array("h", bytes(2 * 7 * BLOCK))
for k in range(7 * BLOCK):
    raw[k] = rnd(65536) - 32768
planar = array.array("h", bytes(2 * 7 * BLOCK))
for s in range(BLOCK):
    raw[s * 7 + 6] = rnd(8)
    for r in range(3):
        planar[r * 2 * BLOCK + 2 * s] = raw[s * 7 + 2 * r]
        planar[r * 2 * BLOCK + 2 * s + 1] = raw[s * 7 + 2 * r + 1]
    w = raw[s * 7 + 6] << 13
    planar[6 * BLOCK + s] = w - 65536 if w > 32767 else w
cfg = {"rails": [0, 2], "spi": 25, "window": 25, "per_frame": 3, "offsets_v": [5, -7], "offsets_i": [0, 3],
       "start": [0, 100]}
ref = run(lambda: reduce.Reducer(3), raw, [("feed", raw, BLOCK)] * 4, cfg, False, 20000)
cfg["layout"] = ([0, 2 * BLOCK, 4 * BLOCK], 2, 6 * BLOCK, 1, 13)
assert ref[wire.HEADER_SIZE] != 0, "the digital inputs must be seen in the records"
for kind in KERNELS:
    got = run(lambda: BoardReducer(3, kind), planar, [("feed", planar, BLOCK)] * 4, cfg, True, 20000)
    assert got == ref, "DMA layout (%s): first difference at byte %d" % (kind, first_diff(got, ref))
print("dma layout ok")


# 4. instruction counts (-icount shift=0: 1 us of ticks = 1000 instructions); meaningful on the MCU only
def measure(nr, spi, crc_into, rounds=80):
    n = 250            # the board's DMA block (board/adc.py BLOCK: 1 ms): per-block costs count as on the board
    blk = array.array("h", bytes(2 * 7 * n))
    for k in range(7 * n):
        blk[k] = rnd(30000)
    framer = wire.Framer(lambda mv: None, crc_into)
    r = BoardReducer(3)
    r.configure(list(range(nr)), spi, 25)
    per = min(255, 10000 // (4 * spi), wire.MAX_PAYLOAD // wire.record_size(nr))
    framer.configure(wire.record_size(nr), per)
    r.feed(blk, n, framer)
    gc.collect()
    micropython.heap_lock()
    t0 = time.ticks_us()
    for _ in range(rounds):
        r.feed(blk, n, framer)
    t1 = time.ticks_us()
    micropython.heap_unlock()
    return time.ticks_diff(t1, t0) * 1000 // (rounds * n)


def no_crc(buf, start, end):
    pass


if ON_MCU:
    for nr in (1, 2, 3):
        for spi in (25, 250):
            print("budget", nr, spi, measure(nr, spi, kernels.crc32_into), measure(nr, spi, no_crc))
    frame = bytearray(wire.OVERHEAD + 2048)
    t0 = time.ticks_us()
    for _ in range(50):
        kernels.crc32_into(frame, 2, len(frame) - 4)
    t1 = time.ticks_us()
    print("crc_per_byte_x100", time.ticks_diff(t1, t0) * 1000 * 100 // (50 * (len(frame) - 6)))
print("board ok")
