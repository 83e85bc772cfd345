"""Sweep overhead: for 20 short steps on the virtual rig, the time each step spends outside
measurement (setting the power state, starting/stopping the capture, analysis, storing; settling is
excluded because the plan asks for it), and what that is as a share of a 60 s step.

    python benchmarks/bench_sweep.py [--measure-s 2] [--settle-s 2]

The settle time is the plan default a technician gets (2 s): the get-feature that confirms the new
state is read while the drive settles, so with a shorter settle its time shows up here instead.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

PLAN = """name = "overhead"
power_states = [0, 2]
idle_steps = false
[rig]
port = "sim:d5-p5336"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = {settle}
idle_s = 0.5
measure_s = {measure}
repetitions = 5
[[workload]]
name = "seq-read-128k"
rw = "read"
[[workload]]
name = "seq-write-128k"
rw = "write"
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measure-s", type=float, default=2.0)
    ap.add_argument("--settle-s", type=float, default=2.0, help="the plan's settle_s (default: the plan default)")
    a = ap.parse_args()
    from powerrig.results import ResultStore
    from powerrig.sim import rig
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.plan import parse

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["POWERRIG_SIM_DIR"] = str(Path(tmp) / "sim")
        plan = parse(PLAN.format(measure=a.measure_s, settle=a.settle_s), "overhead.toml")
        rows = []

        def on(d):
            if d["kind"] == "step-done":
                t = d["timing"]
                rows.append((t["wall_s"] - t["settle_s"] - t["measured_s"] + t.get("store_s", 0.0),
                             t["analysis_s"], t.get("store_s", 0.0), t["nvme_s"], t["fio_overhead_s"]))
        try:
            Sweep(plan, ResultStore(Path(tmp) / "r.sqlite"), Path(tmp) / "out", on_progress=on).run()
        finally:
            rig.stop(all_=True)
    over = [r[0] for r in rows]
    print(f"sweep overhead, {len(rows)} steps of {a.measure_s:g} s measured (+0.5 s idle window, {a.settle_s:g} s "
          "settle) on the virtual rig:")
    print(f"  outside measurement per step: median {statistics.median(over):.2f} s, max {max(over):.2f} s "
          f"(analysis median {statistics.median(r[1] for r in rows):.3f} s, storing {statistics.median(r[2] for r in rows):.3f} s)")
    print(f"  of which nvme-cli calls (outside the settle time) {statistics.median(r[3] for r in rows):.2f} s and fio "
          f"start-up/wind-down {statistics.median(r[4] for r in rows):.2f} s: on the virtual rig each is a Python "
          "process; the rest is capture start/stop and the wait for the last intervals")
    print(f"  as a share of a 60 s step: {100 * statistics.median(over) / 60:.1f} % (target < 2 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
