"""The virtual interposer frames its stream as the board does: whole DMA blocks per pass, a DATA frame
of the firmware's own ``per_frame`` records leaving in the pass of the block that completed it, and
the same bytes the firmware's pure-Python reducer and Framer make of the same samples.

Driven on a simulated clock, one DMA block per pass: counts, not timing.
"""
from __future__ import annotations

import array
import re

import numpy as np
import pytest

from conftest import REPO
from powerrig.interposer import frames as wire
from powerrig.sim.interposer import board as sim_interposer
from powerrig.sim.interposer.board import DMA_BLOCK, VirtualInterposer
from powerrig_fw import crc, reduce, wire as fw
from powerrig_fw.device import plan_stream

INTERVAL_US = 100
SECONDS = 0.3


def test_the_block_is_the_boards():
    """DMA_BLOCK is the RP2350 board's block (firmware/board/adc.py, BLOCK: 250 samples, 1 ms)."""
    src = (REPO / "firmware/board/adc.py").read_text()
    m = re.search(r"^BLOCK = (\d+) if \"RP2040\" in .* else (\d+)$", src, re.M)
    assert m, "firmware/board/adc.py no longer says its BLOCK as this test reads it"
    assert DMA_BLOCK == int(m.group(2))


@pytest.fixture
def clocked(monkeypatch):
    """A virtual interposer whose board runs on a clock this test advances; its writes are kept."""
    vi = VirtualInterposer(seed=3)
    board = vi.board
    now = {"us": board.gen_index * board.period_us + 0.5}     # the board's clock at its next sample
    monkeypatch.setattr(board, "device_us", lambda: now["us"])
    sent: list[bytes] = []
    def keep(data, n=-1):
        sent.append(bytes(data[:n] if n >= 0 else data))

    monkeypatch.setattr(board, "write", keep)
    monkeypatch.setattr(vi.device.framer, "write", keep)       # (the Framer took board.write at start)
    taken: list[np.ndarray] = []
    read = board.adc_read

    def adc_read():
        raw = read()
        if raw is not None:
            taken.append(np.array(raw, copy=True))
        return raw

    monkeypatch.setattr(board, "adc_read", adc_read)
    try:
        yield vi, now, sent, taken
    finally:
        vi.stop()


def _data_frames(sent: list[bytes]) -> list[wire.Frame]:
    return [f for f in wire.FrameDecoder().feed(b"".join(sent)) if f.type == wire.T_DATA]


def test_frames_per_second_at_100us_are_the_firmwares(clocked):
    vi, now, sent, taken = clocked
    dev = vi.device
    start = dev.cmd_start({"interval_us": INTERVAL_US})
    per_frame, _bps = plan_stream(INTERVAL_US, len(start["rails"]))
    assert start["per_frame"] == per_frame > 1
    block_us = DMA_BLOCK * vi.board.period_us
    passes = int(SECONDS * 1e6 / block_us)
    frames_after_pass = []
    for _ in range(passes):
        for _step in range(block_us // INTERVAL_US):   # a pass every interval (the old simulator's pace)...
            now["us"] += INTERVAL_US
            dev.poll()
        frames_after_pass.append(len(sent))
    frames = _data_frames(sent)
    intervals = passes * block_us // INTERVAL_US
    # ...takes samples only as whole DMA blocks, one per block, as the board's main loop does
    assert len(taken) == passes and {len(t) for t in taken} == {DMA_BLOCK * vi.board.reducer.stride}
    # the firmware's frame count: full frames of per_frame records, never one per interval or per pass
    assert len(frames) == intervals // per_frame
    assert {f.count for f in frames} == {per_frame}
    assert len(frames) / SECONDS == pytest.approx(1e6 / INTERVAL_US / per_frame, abs=1e6 / INTERVAL_US / per_frame / len(frames) * 2)
    # a frame leaves in the pass of the block holding its last record
    block_intervals = block_us // INTERVAL_US
    for k, f in enumerate(frames):
        last_block = ((k + 1) * per_frame - 1) // block_intervals
        assert frames_after_pass[last_block] >= k + 1 and (last_block == 0 or frames_after_pass[last_block - 1] <= k)
    # the same bytes the firmware's own reducer and Framer make of the same samples
    ref: list[bytes] = []
    framer = fw.Framer(lambda mv: ref.append(bytes(mv)), crc.crc32_into_c)
    red = reduce.Reducer(vi.board.reducer.stride // 2)
    cal = dev.cal["rails"]
    names = start["rails"]
    red.configure([dev.rail_names.index(n) for n in names], INTERVAL_US // 4, 25,
                  [cal[n]["v_offset"] for n in names], [cal[n]["i_offset"] for n in names])
    framer.configure(fw.record_size(len(names)), per_frame)
    framer.seq = start["first_seq"]
    first = start["first_index"]
    red.restart(first >> fw.INDEX_LO_BITS, first & fw.INDEX_LO_MASK)
    for raw in taken:
        red.feed(array.array("h", raw.astype(np.int16).tobytes()), DMA_BLOCK, framer)
    assert b"".join(ref) == b"".join(f for f in sent if f[3] == fw.T_DATA)


@pytest.mark.parametrize("interval_us", [1000, 5000, INTERVAL_US])
def test_a_pass_paced_by_pass_s_takes_the_blocks_up_to_a_frame_and_sends_it(clocked, interval_us):
    """The loop waits _pass_s between passes: each pass then takes whole DMA blocks up to the one that
    completes the next frame and sends that one frame (issue 39: not a pass per block that sends
    nothing), never waiting past MAX_PASS_S."""
    vi, now, sent, taken = clocked
    start = vi.device.cmd_start({"interval_us": interval_us})
    per_frame, _bps = plan_stream(interval_us, len(start["rails"]))
    frame_blocks = -(-per_frame * interval_us // (DMA_BLOCK * vi.board.period_us))
    sent.clear()
    per_pass = []
    for _ in range(12):
        wait = vi._pass_s()
        assert 0 < wait <= sim_interposer.MAX_PASS_S
        now["us"] += wait * 1e6 * vi.board.scale + 0.5      # the board's clock runs at its own rate
        before = len(sent)
        vi.device.poll()
        per_pass.append(len(sent) - before)
    assert per_pass == [1] * 12
    # the blocks up to the 12th frame's last sample, none past it, at most a frame's span in a pass
    blocks = [len(t) // (DMA_BLOCK * vi.board.reducer.stride) for t in taken]
    assert sum(blocks) == -(-12 * per_frame * interval_us // (DMA_BLOCK * vi.board.period_us))
    assert max(blocks) <= frame_blocks
    assert [f.count for f in _data_frames(sent)] == [per_frame] * 12
