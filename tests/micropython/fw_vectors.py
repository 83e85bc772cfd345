# Firmware vs golden vectors, byte for byte; the streaming path runs with the heap locked.
# Runs on MicroPython (micropython fw_vectors.py DIR; the emulated Cortex-M with ARGS) and CPython.
import array
import json
import sys

try:
    ARGS
except NameError:
    ARGS = sys.argv[1:]
VEC = ARGS[0] if ARGS else "/vectors"

try:
    import micropython
    lock, unlock = micropython.heap_lock, micropython.heap_unlock
except (ImportError, AttributeError):
    lock = unlock = lambda: None

from powerrig_fw import crc, reduce, wire


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Sink:
    """Collects frames into one preallocated buffer so writing allocates nothing."""

    def __init__(self, size):
        self.buf = bytearray(size)
        self.n = 0

    def write(self, mv):
        k = len(mv)
        self.buf[self.n:self.n + k] = mv
        self.n += k


for name in ("r2_100us", "r3_1ms_offsets", "r1_odd_clip"):
    cfg = json.loads(read(VEC + "/" + name + ".json"))
    raw = array.array("h", read(VEC + "/" + name + ".raw.bin"))
    expected = read(VEC + "/" + name + ".frames.bin")
    stride = cfg["stride"]
    sink = Sink(len(expected) + 64)
    framer = wire.Framer(sink.write, crc.crc32_into)
    r = reduce.Reducer(3)
    r.configure(cfg["rails"], cfg["spi"], cfg["window"], cfg["offsets_v"], cfg["offsets_i"])
    framer.configure(wire.record_size(len(cfg["rails"])), cfg["per_frame"])
    r.restart(cfg["start"][0], cfg["start"][1])
    # blocks as the DMA would hand them over: preallocated views, no copies
    mv = memoryview(raw)
    views = []
    pos = 0
    for b in cfg["blocks"]:
        views.append((mv[pos * stride:(pos + b) * stride], b))
        pos += b
    lock()
    try:
        for view, b in views:
            r.feed(view, b, framer)
    finally:
        unlock()
    framer.flush()
    got = bytes(sink.buf[:sink.n])
    assert got == expected, "%s: %d bytes produced, %d expected, first difference at %d" % (
        name, len(got), len(expected), next((k for k in range(min(len(got), len(expected))) if got[k] != expected[k]), -1))
    print("vector", name, "ok", len(got), "bytes")

for doc in json.loads(read(VEC + "/commands.json")):
    idx = doc["index"]
    f = wire.encode_frame(doc["type"], doc["payload"].encode(), doc["seq"], doc["flags"], 0,
                          idx >> 24, idx & 0xFFFFFF, crc.crc32_into)
    assert bytes(f).hex() == doc["frame_hex"], "command frame %s differs" % doc["payload"]
    reader = wire.FrameReader(crc.crc32_into)
    frames = reader.feed(b"\x00\xa5garbage" + bytes(f) + b"\xa5")
    assert len(frames) == 1 and frames[0][2] == doc["payload"].encode(), frames
    assert reader.bad == 9, reader.bad
print("commands ok")
