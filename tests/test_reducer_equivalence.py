"""The simulator's numpy reducer writes the same bytes as the firmware's reference reducer."""
from __future__ import annotations

import array
import json

import numpy as np
import pytest

from conftest import REPO
from powerrig.sim.interposer.reducer import NumpyReducer
from powerrig.interposer.frames import fw
from powerrig_fw import crc, reduce, wire

VEC = REPO / "tests" / "vectors"


def frames_from(reducer, raw, blocks, cfg, as_array):
    out = []
    framer = wire.Framer(lambda mv: out.append(bytes(mv)), crc.crc32_into_c)
    reducer.configure(cfg["rails"], cfg["spi"], 25, cfg["offsets_v"], cfg["offsets_i"])
    framer.configure(wire.record_size(len(cfg["rails"])), cfg["per_frame"])
    reducer.restart(cfg["start"][0], cfg["start"][1])
    pos, s = 0, 7
    for b in blocks:
        chunk = raw[pos * s:(pos + b) * s]
        reducer.feed(array.array("h", chunk.tobytes()) if as_array else chunk, b, framer)
        pos += b
    framer.flush()
    return b"".join(out)


@pytest.mark.parametrize("name", ["r2_100us", "r3_1ms_offsets", "r1_odd_clip"])
def test_numpy_reproduces_golden_vectors(name):
    cfg = json.loads((VEC / f"{name}.json").read_text())
    raw = np.frombuffer((VEC / f"{name}.raw.bin").read_bytes(), dtype="<i2")
    want = (VEC / f"{name}.frames.bin").read_bytes()
    for blocks in (cfg["blocks"], [cfg["n"]], [1] * 30 + [cfg["n"] - 30]):
        assert frames_from(NumpyReducer(3), raw, blocks, cfg, False) == want


@pytest.mark.parametrize("seed", range(6))
def test_random_inputs_and_splits(seed):
    """Random codes over the full range (incl. -32768), random interval lengths, random block splits."""
    rng = np.random.default_rng(seed)
    n = 4000
    raw = rng.integers(-32768, 32768, size=n * 7, dtype=np.int16)
    cfg = {"rails": list(rng.permutation(3)[: rng.integers(1, 4)]), "spi": int(rng.integers(1, 300)),
           "per_frame": int(rng.integers(1, 9)), "offsets_v": None, "offsets_i": None,
           "start": [int(rng.integers(0, 1000)), int(rng.integers(0, 1 << 24))]}
    if seed % 2:
        r = len(cfg["rails"])
        cfg["offsets_v"] = [int(x) for x in rng.integers(-50, 50, r)]
        cfg["offsets_i"] = [int(x) for x in rng.integers(-50, 50, r)]
    cuts = np.sort(rng.choice(np.arange(1, n), size=7, replace=False))
    blocks = list(np.diff(np.concatenate([[0], cuts, [n]])))
    ref = frames_from(reduce.Reducer(3), raw, blocks, cfg, True)
    assert len(ref) > 0
    assert frames_from(NumpyReducer(3), raw, [n], cfg, False) == ref
    assert frames_from(NumpyReducer(3), raw, blocks, cfg, False) == ref


def test_skip_restarts_the_window_in_both():
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 20000, size=1000 * 7, dtype=np.int16)
    outs = []
    for R, conv in ((reduce.Reducer, lambda c: array.array("h", c.tobytes())), (NumpyReducer, lambda c: c)):
        frames = []
        fr = wire.Framer(lambda mv: frames.append(bytes(mv)), crc.crc32_into_c)
        r = R(3)
        r.configure([0, 1], 25, 25)
        fr.configure(wire.record_size(2), 4)
        r.feed(conv(raw[: 510 * 7]), 510, fr)
        fr.mark_overrun()
        r.skip(123)
        r.feed(conv(raw[510 * 7:]), 490, fr)
        fr.flush()
        outs.append(b"".join(frames))
    assert outs[0] == outs[1]
    frames = __import__("powerrig.interposer.frames", fromlist=["FrameDecoder"]).FrameDecoder().feed(outs[0])
    over = [f for f in frames if f.flags & fw.F_OVERRUN]
    # the partial interval is lost with the skipped samples; reduction resumes on the interval grid
    assert len(over) == 1 and over[0].index == 650 and over[0].index % 25 == 0


@pytest.mark.parametrize("seed", range(8))
def test_records_match_their_labels_across_repeated_overruns(seed):
    """Random feeds and skips (overruns, some while a discard is still pending): both reducers agree,
    and every record's sums are those of the raw samples at the positions its label says."""
    from powerrig.interposer.frames import FrameDecoder

    rng = np.random.default_rng(100 + seed)
    spi = int(rng.integers(3, 40))
    total = 6000
    absolute = rng.integers(0, 30000, size=(total, 7), dtype=np.int16)   # every sample the ADC made
    ops, pos = [], 0
    while pos < total - 50:
        if rng.random() < 0.35:
            m = int(rng.integers(1, 3 * spi))
            ops.append(("skip", m))
            pos += m
        else:
            n = int(rng.integers(1, 2 * spi + 5))
            ops.append(("feed", pos, n))
            pos += n
    outs = []
    for R, conv in ((reduce.Reducer, lambda c: array.array("h", c.tobytes())), (NumpyReducer, lambda c: c)):
        frames = []
        fr = wire.Framer(lambda mv: frames.append(bytes(mv)), crc.crc32_into_c)
        r = R(3)
        r.configure([0], spi, 25)
        fr.configure(wire.record_size(1), 3)
        for op in ops:
            if op[0] == "skip":
                fr.mark_overrun()
                r.skip(op[1])
            else:
                _, p0, n = op
                r.feed(conv(absolute[p0:p0 + n].reshape(-1)), n, fr)
        fr.flush()
        outs.append(b"".join(frames))
    assert outs[0] == outs[1]
    dt = np.dtype([("o", "u1"), ("a", "u1"), ("sv", "<i4"), ("si", "<i4"), ("ph", "<i4"), ("pl", "<u2"),
                   ("mn", "<i2"), ("mx", "<i2"), ("pk", "<i4")])
    checked = 0
    for f in FrameDecoder().feed(outs[0]):
        recs = np.frombuffer(f.payload, dtype=dt)
        for k, rec in enumerate(recs):
            at = f.index + k * spi
            assert at % spi == 0, "interval starts must stay on the grid"
            want = absolute[at:at + spi, 0].astype(np.int64).sum()
            assert rec["sv"] == want, (at, rec["sv"], want)
            checked += 1
    assert checked > 20
