#!/usr/bin/env python3
"""The shortest stream interval the RP2040 path keeps up with, on the emulated board (docs/emulator.md).

Boots the real rp2 image with firmware/ in rp2040js once (tools/rp2emu), then streams 2 rails for
--seconds of emulated time at each interval of --intervals, longest first, and prints per interval
the frames, intervals received and lost, overruns and the emulator's speed; last, one JSON object
with `shortest_clean_interval_us` (the shortest with 0 overruns and 0 lost intervals).

    .venv/bin/python benchmarks/bench_rp2_emulator.py [--intervals 10000,5000,2000,1000] [--seconds 0.2]

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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools" / "rp2emu"))
import emulated_board as eb  # noqa: E402

from powerrig.interposer.client import Interposer, learn_rate  # noqa: E402
from powerrig.interposer.serial_link import SerialLink  # noqa: E402

RAILS = ["12V", "3V3"]


def open_slow(port: str) -> Interposer:
    """An Interposer on a board that may still be booting at a few % of real time: the first
    commands wait long (the pinger then learns the board's rate and scales the timeouts)."""
    link = SerialLink(port)
    desc = link.command("describe", timeout=900)
    learn_rate(link, desc, 900)
    if desc.get("state") == "streaming":
        link.command("stop", timeout=900)
    return Interposer(link, desc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--intervals", default="10000,5000,2000,1000", help="us, comma-separated, longest first")
    ap.add_argument("--seconds", type=float, default=0.2, help="emulated seconds per interval")
    ap.add_argument("--firmware", default=str(REPO / "firmware"))
    a = ap.parse_args()
    intervals = [int(x) for x in a.intervals.split(",")]
    codes, cal = eb.demo_codes(2.0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, \
            eb.EmulatedBoard(codes, Path(tmp), calibration=cal, firmware=Path(a.firmware)) as board:
        print(f"board on {board.port}; left out for ARMv6-M: {board.filesystem['not_for_armv6m']}", flush=True)
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
        finally:
            dev.close()
    clean = [r["interval_us"] for r in rows if r["overruns"] == 0 and r["lost_intervals"] == 0 and r["frames"]]
    print(json.dumps({"shortest_clean_interval_us": min(clean) if clean else None, "rails": RAILS,
                      "seconds_each": a.seconds, "runs": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
