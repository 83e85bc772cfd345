#!/usr/bin/env python3
"""The shortest stream interval the RP2040 path keeps up with, on the emulated board (docs/emulator.md).

Boots the real rp2 image with firmware/ in rp2040js once (tools/rp2emu), then streams 2 rails for
--seconds of emulated time at each interval of --intervals, longest first, and prints per interval
the frames, intervals received and lost, overruns and the emulator's speed; last, one JSON object
with `shortest_clean_interval_us` (the shortest with 0 overruns and 0 lost intervals).

With --armed-seconds S it then arms a burst on an edge that never comes (PERST# rising: the input is
held high) for S emulated seconds and prints the firmware's block pass timings and overruns while
armed; with --bursts N it takes N edge bursts (pre 100, post 400) on the marker input, which toggles
every 40 ms, and says of each whether it came back whole and where the waveform puts its samples
(`index_error`: 0 when its first_index is where its digital column sits in the waveform, else the
nearest shift that puts it there, None for none within 20,000 samples).

    .venv/bin/python benchmarks/bench_rp2_emulator.py [--intervals 10000,5000,2000,1000] [--seconds 0.2]
    .venv/bin/python benchmarks/bench_rp2_emulator.py --intervals 2000 --armed-seconds 0.5 --bursts 8
    .venv/bin/python benchmarks/bench_rp2_emulator.py --intervals 2000 --pings 100

With --pings N it sends N clock pings in the host's form, one at a time, and fits the host's clock model
(powerrig.core.clock.ClockFit) to them with times taken from the emulator's time log (when each host
byte reached the board and each board byte left it, in conversions of the converters: the waveform's
clock), and prints the fit's error against that clock (`clock`: p50, p99 and max in us).

Cycle counts are rp2040js's (no flash cache misses, no bus contention): silicon may need a longer
interval; docs/bring-up.md has the on-board check.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "rp2emu"))
import clock_truth  # noqa: E402
import emulated_board as eb  # noqa: E402

from powerrig.core.errors import LinkError  # noqa: E402
from powerrig.interposer.client import Interposer, learn_rate  # noqa: E402
from powerrig.interposer.serial_link import SerialLink  # noqa: E402
from powerrig.sim.interposer.frontend import MARKER_BIT  # noqa: E402

RAILS = ["12V", "3V3"]
MARKER_HALF_PERIOD = 10_000  # samples: the marker toggles every 40 ms


def open_slow(port: str) -> Interposer:
    """An Interposer on a board that may still be booting at a few % of real time: the first
    commands wait long (the pinger then learns the board's rate and scales the timeouts)."""
    link = SerialLink(port)
    desc = link.command("describe", timeout=900)
    learn_rate(link, desc, 900)
    if desc.get("state") == "streaming":
        link.command("stop", timeout=900)
    return Interposer(link, desc)


def armed(dev: Interposer, board, seconds: float) -> dict:
    """The firmware's block passes while a burst waits for an edge that never comes."""
    with dev.stream(interval_us=10000, rails=RAILS) as st:     # (a start resets the pass statistics)
        for _ in st.blocks(seconds=0.02):
            pass
    before = dev.status()
    dev.link.command("burst", pre=100, post=100, trigger="edge", bit=1, rising=True)
    e0 = board.stats()["emu_s"]
    while board.stats()["emu_s"] < e0 + seconds:
        time.sleep(0.5)
    after = dev.status()
    dev.link.command("burst", trigger="off")
    return {"seconds": seconds, "passes": after["passes"], "overruns": after["overruns"] - before["overruns"],
            "overwritten_blocks": after["overwritten_blocks"] - before["overwritten_blocks"]}


def edge_burst(dev: Interposer, codes) -> dict:
    """One burst on the marker's rising edge: whole or not, and its index against the waveform's."""
    try:
        b = dev.burst(pre=100, post=400, trigger="edge", bit=2, rising=True, timeout=900)
    except LinkError as e:
        return {"ok": False, "error": str(e)}
    dig = codes[:, -1]
    col = b.codes[:, -1]
    at = [s for s in range(-20_000, 20_001, 1) if np.array_equal(col, dig[b.first_index + s:b.first_index + s + len(col)])]
    # (the waveform's digital inputs repeat, so a column can match further away too: the nearest counts)
    return {"ok": True, "first_index": b.first_index, "index_error": min(at, key=abs) if at else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", default="10000,5000,2000,1000", help="us, comma-separated, longest first")
    ap.add_argument("--seconds", type=float, default=0.2, help="emulated seconds per interval")
    ap.add_argument("--firmware", default=str(REPO / "firmware"))
    ap.add_argument("--armed-seconds", type=float, default=0.0, help="emulated seconds with a burst armed that never fires")
    ap.add_argument("--bursts", type=int, default=0, help="edge bursts on the marker input to take")
    ap.add_argument("--pings", type=int, default=0,
                    help="clock pings whose fit is checked against the waveform's clock (tools/rp2emu/clock_truth.py)")
    a = ap.parse_args()
    intervals = [int(x) for x in a.intervals.split(",")]
    codes, cal = eb.demo_codes(2.0 + a.armed_seconds + 0.2 * a.bursts + len(intervals) * a.seconds)
    codes[:, -1] |= (np.arange(len(codes)) // MARKER_HALF_PERIOD % 2 * MARKER_BIT).astype(np.int16)
    rows = []
    tmp_dir = tempfile.TemporaryDirectory()
    timelog = Path(tmp_dir.name) / "time.log"
    with tmp_dir as tmp, \
            eb.EmulatedBoard(codes, Path(tmp), calibration=cal, firmware=Path(a.firmware),
                             runner_args=("--timelog", str(timelog)) if a.pings else ()) as board:
        print(f"board on {board.port}; left out for ARMv6-M: {board.filesystem['not_for_armv6m']}", flush=True)
        extra = {}
        dev = open_slow(board.port)
        try:
            for iv in intervals:
                s0, t0 = board.stats(), time.monotonic()
                with dev.stream(interval_us=iv, rails=RAILS) as st:
                    for _ in st.blocks(seconds=a.seconds):
                        pass
                s, s1 = st.summary(), board.stats()
                passes = dev.status().get("passes")      # the firmware's own pass timings (ticks_us)
                row = {"interval_us": iv, "frames": s["frames"], "intervals": s["samples"],
                       "lost_intervals": s["gap_intervals"], "overruns": s["overruns"],
                       "dropped_frames": s["dropped_frames"], "emulated_s": round(s1["emu_s"] - s0["emu_s"], 3),
                       "wall_s": round(time.monotonic() - t0, 1), "passes": passes,
                       "emulator_cpu_s": round(s1.get("cpu_s", 0) - s0.get("cpu_s", 0), 1)}
                rows.append(row)
                print(json.dumps(row), flush=True)
            if a.armed_seconds:
                extra["armed"] = armed(dev, board, a.armed_seconds)
                print(json.dumps({"armed": extra["armed"]}), flush=True)
            if a.bursts:
                extra["bursts"] = [edge_burst(dev, codes) for _ in range(a.bursts)]
                for b in extra["bursts"]:
                    print(json.dumps({"burst": b}), flush=True)
        finally:
            dev.close()
        if a.pings:
            pings = clock_truth.ping_board(board.port, a.pings, 0.05, timelog)
            time.sleep(1.0)                      # (the runner writes its time log every half second)
            extra["clock"] = clock_truth.clock_error(pings, timelog)
            print(json.dumps({"clock": extra["clock"]}), flush=True)
    clean = [r["interval_us"] for r in rows if r["overruns"] == 0 and r["lost_intervals"] == 0 and r["frames"]]
    print(json.dumps({"shortest_clean_interval_us": min(clean) if clean else None, "rails": RAILS,
                      "seconds_each": a.seconds, "runs": rows, **extra}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
