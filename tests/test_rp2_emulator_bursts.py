"""Bursts beside a 2 ms stream on the emulated RP2040 (issue 43, item 5; docs/emulator.md, "Bursts beside a stream").

The real rp2 image in rp2040js (tests/test_rp2_emulator.py's board and waveform, a board of this
module's own): a burst armed on an edge that never comes (PERST# rising: the input is held high) during
a 2 ms stream costs the stream nothing (it gave 162 overruns in 0.3 s and the stream stopped, because
every armed block went through bytecode and was copied whole), and an edge that then comes fires the
burst during the same stream, its upload split across BURST frames and whole.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "tools" / "rp2emu"))

from powerrig.interposer import frames as wire  # noqa: E402
from powerrig.interposer.client import Interposer  # noqa: E402
from powerrig.sim.interposer.frontend import MARKER_BIT, PERST_BIT  # noqa: E402
from test_rp2_emulator import RAILS, expected_power, started_board, waveform  # noqa: E402

pytestmark = pytest.mark.timeout(3600)

INTERVAL_US = 2000           # the stream: one interval a DMA block on the RP2040
LEAD_S = 0.05                # streamed before the burst is armed
ARMED_S = 0.3                # the 0.3 s with a burst armed on an edge that never comes
AFTER_S = 0.1                # streamed after the edge burst came back
POLL_S = 0.2                 # then `status` polled at 5 Hz (issue 43: a status pass cost ~17 ms,
POLLS = 10                   # over the ring's 14 ms of slack, and each poll lost blocks)
PRE, POST = 100, 400


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    codes, cal = waveform()
    b = started_board(codes, cal, tmp_path_factory.mktemp("rp2burst"))
    yield b
    b.close()


@pytest.fixture(scope="module")
def run(board):
    """One 2 ms stream: LEAD_S, then a burst armed on PERST# rising for ARMED_S, then the burst
    cancelled and an edge burst on the marker's rising edge taken, then AFTER_S more, then POLLS
    `status` commands POLL_S apart."""
    dig = board.codes[:, -1].astype(np.int64)
    assert (dig & PERST_BIT).all(), "the waveform must hold PERST# high: its rising edge never comes"
    out = {}
    with Interposer.open(board.port, timeout=900) as dev:
        with dev.stream(interval_us=INTERVAL_US, rails=RAILS, stall_timeout=3.0) as st:
            lead = [b for b in st.blocks(seconds=LEAD_S)]
            r = dev.link.command("burst", pre=PRE, post=POST, trigger="edge", bit=1, rising=True, timeout=900)
            assert r["armed"]["trigger"] == "edge", r
            out["armed"] = [b for b in st.blocks(seconds=ARMED_S)]
            out["armed_summary"] = st.summary()
            dev.link.command("burst", trigger="off", timeout=900)
            out["burst"] = dev.burst(pre=PRE, post=POST, trigger="edge", bit=2, rising=True, timeout=900)
            out["after"] = [b for b in st.blocks(seconds=AFTER_S)]
            out["summary"] = st.summary()
            out["polls"] = [dev.link.command("status", timeout=900)]
            polled = []
            for _k in range(POLLS):
                polled += [b for b in st.blocks(seconds=POLL_S)]
                out["polls"].append(dev.link.command("status", timeout=900))
            out["polled"] = polled
            out["polled_summary"] = st.summary()
        out["status"] = dev.status()
        out["lead"] = lead
    return out


def intervals(blocks) -> int:
    return sum(int(np.count_nonzero(b.valid)) for b in blocks)


def test_a_burst_armed_on_an_edge_that_never_comes_costs_a_2ms_stream_nothing(board, run):
    """While the burst waits: every interval of the 0.3 s arrives (no gap, no overrun), each carrying
    the waveform's power at its samples."""
    s = run["armed_summary"]
    assert (s["gap_intervals"], s["overruns"], s["dropped_frames"], s["crc_errors"]) == (0, 0, 0, 0), s
    armed = run["armed"]
    assert intervals(armed) == int(round(ARMED_S * 1e6 / INTERVAL_US)), [len(b) for b in armed]
    spi = INTERVAL_US // 4
    got = np.array([float(np.nansum(b.p[j])) for b in armed for j in range(len(b))])
    want = np.array([expected_power(board.codes, board.cal, b.first_index + j * spi, b.first_index + (j + 1) * spi)
                     for b in armed for j in range(len(b))])
    assert np.allclose(got, want, rtol=2e-3, atol=1e-3), np.max(np.abs(got / want - 1))


def test_an_edge_that_comes_fires_the_burst_during_the_stream_and_its_upload_arrives_whole(board, run):
    """The marker's rising edge fires the burst: PRE + POST samples around an edge of the waveform, the
    digital column and every code the waveform's (the AD7380 clocks conversion k-1 out with sample k),
    uploaded in BURST frames of at most MAX_PAYLOAD bytes (the client refuses a chunk out of order or
    a short upload); the stream loses no interval from the burst's arming to AFTER_S after its upload."""
    b = run["burst"]
    codes = board.codes
    dig = codes[:, -1].astype(np.int64)
    edge = b.first_index + PRE
    assert dig[edge] & MARKER_BIT and not dig[edge - 1] & MARKER_BIT, (edge, dig[edge - 3:edge + 3])
    assert b.codes.shape == (PRE + POST, 7), b.codes.shape
    assert 2 * b.codes.size > wire.fw.MAX_PAYLOAD        # so it came in more than one frame
    assert np.array_equal(b.codes[:, -1], codes[b.first_index:b.first_index + PRE + POST, -1])
    assert np.array_equal(b.codes[:, :6], codes[b.first_index - 1:b.first_index - 1 + PRE + POST, :6])
    # the stream goes on through the trigger, the notice and the upload and after it: every interval
    # arrives, no gap. (It lost a counted stretch of 7-13 intervals in about 1 run of 3, with the
    # collector off too: the notice's and the chunks' passes, and the burst commands', came while the
    # loop was still catching up after another and summed past the ring's slack. They now wait for a
    # pass that finds no block unread, and the notice is written in place: docs/emulator.md.)
    s = run["polled_summary"]
    after = run["after"]
    gap = run["summary"]["gap_intervals"] - run["armed_summary"]["gap_intervals"]
    assert intervals(after) == int(round(AFTER_S * 1e6 / INTERVAL_US)) and gap == 0, \
        (run["summary"], [len(x) for x in after])
    assert s["dropped_frames"] == 0, s
    st = run["status"]
    assert st["lost_samples"] == s["gap_intervals"] * INTERVAL_US // 4 and st["errors"] == 0, (st, s)
    assert st["burst"]["state"] == "idle" and st["burst"]["sent"] == PRE + POST, st["burst"]
    print(f"rp2 emulator, burst beside a {INTERVAL_US} us stream: armed {ARMED_S} s, {intervals(run['armed'])} "
          f"intervals, 0 lost; edge burst at {edge}, {PRE + POST} samples whole; after it {intervals(after)} "
          f"intervals, stream overruns {s['overruns']} ({s['gap_intervals']} intervals); board overruns "
          f"{st['overruns']}, overwritten blocks {st['overwritten_blocks']}, link {st.get('link')}, passes {st['passes']}")


def test_status_polled_at_5hz_during_a_2ms_stream(board, run):
    """POLLS `status` commands POLL_S apart during the stream. A status pass cost ~12-17 ms on the
    RP2040 (7.4 ms of it gc.mem_free walking the heap, plus an automatic collection when one came due
    inside it), over the ring's 14 ms of slack, and after a loss the reader went on at the oldest block,
    the next DMA writes, so one loss became a run. Now: a mean command pass of ~4.8 ms; a loss, if
    any, is one the board counted, one stretch (the reader resumes at the newest block), at most one
    in the phase; every interval delivered is the waveform's power (docs/emulator.md)."""
    polls, before, s = run["polls"], run["summary"], run["polled_summary"]
    gap = s["gap_intervals"] - before["gap_intervals"]
    lost = polls[-1]["lost_samples"] - polls[0]["lost_samples"]
    assert s["dropped_frames"] == 0 and lost == gap * INTERVAL_US // 4, (before, s, lost)
    # one stretch: at most the ring's 8 blocks and the 5 records a frame holds
    assert s["overruns"] - before["overruns"] <= 1 and gap <= 13, \
        [(p["overruns"], p["lost_samples"], p["overwritten_blocks"], p["passes"]) for p in polls]
    polled = run["polled"]
    assert intervals(polled) + gap == int(round(POLLS * POLL_S * 1e6 / INTERVAL_US)), [len(b) for b in polled]
    spi = INTERVAL_US // 4
    rows = [(b, j) for b in polled for j in range(len(b)) if b.valid[j]]
    got = np.array([float(np.nansum(b.p[j])) for b, j in rows])
    want = np.array([expected_power(board.codes, board.cal, b.first_index + j * spi, b.first_index + (j + 1) * spi)
                     for b, j in rows])
    assert np.allclose(got, want, rtol=2e-3, atol=1e-3), np.max(np.abs(got / want - 1))
    p = polls[-1]
    print(f"rp2 emulator, status at {1 / POLL_S:g} Hz beside a {INTERVAL_US} us stream: {len(polls)} polls, "
          f"{intervals(polled)} intervals, {gap} lost ({s['overruns'] - before['overruns']} overruns); passes "
          f"{p['passes']}, overwritten blocks {p['overwritten_blocks']}, "
          f"heap_free {p['heap_free']}")
