"""Regenerate the golden protocol vectors (run only when the wire format changes on purpose).

    .venv/bin/python tests/vectors/make_vectors.py

Each vector NAME has NAME.json (the configuration), NAME.raw.bin (int16 LE raw samples, interleaved
v0 i0 v1 i1 v2 i2 digital) and NAME.frames.bin (the frames the firmware must produce, concatenated).
The firmware tests rebuild the frames on MicroPython and CPython and compare bytes; the host tests
decode them and compare with values computed straight from the raw samples.
"""
import array
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "firmware"))
from powerrig_fw import crc, reduce, wire  # noqa: E402

STRIDE = 7
VECTORS = [
    # name, rails, spi, per_frame, offsets_v, offsets_i, start (hi, lo), blocks, seed, n, extremes
    ("r2_100us", [0, 1], 25, 22, [0, 0], [0, 0], [300, 0xFFFF00], [500, 250, 1250, 1000], 1, 3000, False),
    ("r3_1ms_offsets", [0, 1, 2], 250, 3, [7, -3, 0], [-12, 5, 2], [0, 1000], [3000], 2, 3000, False),
    ("r1_odd_clip", [2], 37, 5, [0], [0], [1, 5], [1, 999, 2000], 3, 3000, True),
]


def make_raw(seed, n, extremes):
    rnd = random.Random(seed)
    raw = array.array("h", bytes(2 * STRIDE * n))
    for s in range(n):
        load = 1.0 + (0.8 if (s // 400) % 2 else 0.0) + (1.5 if s % 97 < 20 else 0.0)
        for r, (vnom, inom) in enumerate(((26200, 4000), (21600, 3900), (21800, 10))):
            raw[s * STRIDE + 2 * r] = vnom + rnd.randint(-4, 4)
            raw[s * STRIDE + 2 * r + 1] = int(inom * load) + rnd.randint(-6, 6)
        raw[s * STRIDE + 6] = (2 | (1 if load > 1.5 else 0) | (4 if 1000 <= s < 1010 else 0))
        if extremes and s % 50 == 0:
            raw[s * STRIDE + 4] = -32768 if s % 100 else 32767
            raw[s * STRIDE + 5] = -32768
    return raw


def build_frames(cfg, raw, crc_into):
    out = []
    framer = wire.Framer(lambda mv: out.append(bytes(mv)), crc_into)
    r = reduce.Reducer(3)
    r.configure(cfg["rails"], cfg["spi"], 25, cfg["offsets_v"], cfg["offsets_i"])
    framer.configure(wire.record_size(len(cfg["rails"])), cfg["per_frame"])
    r.restart(cfg["start"][0], cfg["start"][1])
    pos = 0
    for b in cfg["blocks"]:
        chunk = raw[pos * STRIDE:(pos + b) * STRIDE]
        r.feed(chunk, b, framer)
        pos += b
    framer.flush()
    return b"".join(out)


def main():
    for name, rails, spi, per, ov, oi, start, blocks, seed, n, ext in VECTORS:
        cfg = {"rails": rails, "spi": spi, "per_frame": per, "offsets_v": ov, "offsets_i": oi,
               "start": start, "blocks": blocks, "window": 25, "stride": STRIDE, "n": n}
        raw = make_raw(seed, n, ext)
        (HERE / f"{name}.json").write_text(json.dumps(cfg, indent=1) + "\n")
        (HERE / f"{name}.raw.bin").write_bytes(bytes(raw))
        (HERE / f"{name}.frames.bin").write_bytes(build_frames(cfg, raw, crc.crc32_into_c))
        print(name, len(raw) // STRIDE, "samples")
    # command/reply frames: fixed documents with fixed seq and index
    cmds = [
        (wire.T_COMMAND, b'{"id":1,"cmd":"describe"}', 1, 0, 0, 0),
        (wire.T_COMMAND, b'{"id":2,"cmd":"start","interval_us":100,"rails":["12V","3V3"]}', 2, 0, 0, 0),
        (wire.T_REPLY, b'{"ok":true,"id":3,"rx_index":4294967290,"index":4294967300}', 3, 0, 256, 4),
    ]
    doc = []
    for t, payload, seq, flags, hi, lo in cmds:
        f = wire.encode_frame(t, payload, seq, flags, 0, hi, lo, crc.crc32_into_c)
        doc.append({"type": t, "seq": seq, "flags": flags, "index": (hi << 24) + lo,
                    "payload": payload.decode(), "frame_hex": bytes(f).hex()})
    (HERE / "commands.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
