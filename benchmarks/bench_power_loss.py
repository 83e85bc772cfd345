"""Power-loss cycles on the simulator: does the rig find every write the drive lost, and does it
measure the cut, the hold-up and the inrush the virtual drive really had?

    .venv/bin/python benchmarks/bench_power_loss.py --cycles 1000 [--defect-rate 0.05] [--seed 1]

Each cycle: sequential writes (one every 20 us, each acknowledged into the drive's cache), a 12 V cut
at a random 2..6 ms, power back 20 ms later, the enumeration delay, then every acknowledged write read
back. The firmware's own powerrig_fw.actions schedules and fires the edges; the virtual drive loses
what its PLP flush cannot save within the hold-up (a weak capacitor on ``--defect-rate`` of the cuts).
The host side sees only ADC codes and read-back tokens: the cut sample is found where the 12 V current
falls, hold-up where the drive-side volts cross the PLP threshold, inrush peak and charge after the
restore. Runs in one process on a stepped clock (powerrig.sim.power_loop; tests/test_power_sim.py
runs cycles through the pty). Prints one line per 100 cycles, then a JSON object last.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from powerrig.analysis import power_events
from powerrig.sim.power import PowerSpec
from powerrig.sim.power_loop import SteppedRig

PRE = 250            # samples before the edge in each burst
CUT_POST = 2000      # 8 ms: past the longest hold-up
ON_POST = 1000       # 4 ms: the inrush settles within 1 ms


def cycle(rig: SteppedRig, rng) -> dict:
    cut_after = int(rng.integers(2000, 6000))
    edges = rig.run([{"output": "12V", "level": 0, "after_us": cut_after},
                     {"output": "12V", "level": 1, "after_us": 20000}])
    cut_edge, on_edge = edges
    cuts = [t for t in rig.drive.truth if t["output"] == "12V"][-2:]
    truth_cut, truth_on = cuts
    rig.wait_ready()
    acked, read = rig.read_back()
    found = power_events.verify(acked, read)
    injected = {lba for lba, _tok in rig.drive.cache.lost[-truth_cut["lost_writes"]:]} if truth_cut["lost_writes"] else set()

    period = rig.period_s
    b = rig.burst(cut_edge["requested"] - PRE, PRE + CUT_POST)
    v, i, _ = b.rail("12V")
    at = power_events.find_fall(i)
    holdup = power_events.holdup_s(v, at, rig.drive.spec.plp_threshold_v, period)
    b = rig.burst(on_edge["requested"] - PRE, PRE + ON_POST)
    _v, i, _ = b.rail("12V")
    on = power_events.find_rise(i)
    ir = power_events.inrush(i, on, period)
    # the burst starts PRE samples before the requested edge: found at PRE = on its sample
    return {"cut_error_us": abs(at - PRE) * period * 1e6,
            "on_error_us": abs(on - PRE) * period * 1e6,
            "reported_late_us": max(e["index"] - e["requested"] for e in edges) * period * 1e6,
            "holdup_err": abs(holdup - truth_cut["holdup_s"]) / truth_cut["holdup_s"],
            "peak_err": abs(ir["peak_a"] - truth_on["inrush_peak_a"]) / truth_on["inrush_peak_a"],
            "charge_err": abs(ir["charge_c"] - truth_on["inrush_charge_c"]) / truth_on["inrush_charge_c"],
            "injected": injected, "found": set(found), "acked": len(acked), "weak": truth_cut["weak_plp"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--defect-rate", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rig = SteppedRig(PowerSpec(defect_rate=a.defect_rate, seed=a.seed), seed=a.seed)
    rig.command({"op": "enable", "watchdog_ms": 1000})
    rng = np.random.default_rng(a.seed + 1)
    t0, cpu0 = time.perf_counter(), time.process_time()
    rows = []
    for k in range(a.cycles):
        rows.append(cycle(rig, rng))
        if (k + 1) % 100 == 0:
            print(f"{k + 1} cycles, {sum(len(r['injected']) for r in rows)} writes lost so far, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    injected = sum(len(r["injected"]) for r in rows)
    found = sum(len(r["found"]) for r in rows)
    same = all(r["injected"] == r["found"] for r in rows)
    print(json.dumps({
        "cycles": a.cycles,
        "injected_lost_writes": injected,
        "found_lost_writes": found,
        "found_equals_injected_per_cycle": same,
        "acknowledged_writes": sum(r["acked"] for r in rows),
        "weak_plp_cuts": sum(r["weak"] for r in rows),
        "cut_error_us_max": max(r["cut_error_us"] for r in rows),
        "power_on_error_us_max": max(r["on_error_us"] for r in rows),
        "edge_reported_late_us_max": max(r["reported_late_us"] for r in rows),
        "holdup_error_pct": 100 * max(r["holdup_err"] for r in rows),
        "inrush_error_pct": 100 * max(max(r["peak_err"], r["charge_err"]) for r in rows),
        "inrush_peak_error_pct": 100 * max(r["peak_err"] for r in rows),
        "inrush_charge_error_pct": 100 * max(r["charge_err"] for r in rows),
        "wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(time.process_time() - cpu0, 1),
        "path": "in-process: powerrig_fw.actions + sim.power on a stepped clock (powerrig.sim.power_loop)",
    }))


if __name__ == "__main__":
    main()
