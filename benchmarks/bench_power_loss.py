"""Power-loss cycles on the simulator: does the rig find every write the drive lost, and does it
measure the cut, the hold-up and the inrush the virtual drive really had?

    .venv/bin/python benchmarks/bench_power_loss.py --cycles 1000 [--defect-rate 0.05] [--seed 1]
        [--edge-cuts] [--fio-verify]

Each cycle: sequential writes (one every 20 us, each acknowledged into the drive's cache), a 12 V cut
at a random 2..6 ms, power back 20 ms later, the enumeration delay, then every acknowledged write read
back. The firmware's own powerrig_fw.actions schedules and fires the edges; the virtual drive loses
what its PLP flush cannot save within the hold-up (a weak capacitor on ``--defect-rate`` of the cuts).
The host side sees only ADC codes and read-back tokens: the cut sample is found where the 12 V current
falls, hold-up where the drive-side volts cross the PLP threshold, inrush peak and charge after the
restore. Runs in one process on a stepped clock (powerrig.sim.power_loop; tests/test_power_sim.py
runs cycles through the pty). Prints one line per 100 cycles, then a JSON object last.

``--edge-cuts`` (issue 41 item 5): each cycle's cut is also read from a burst placed so the cut falls
on burst sample p, p running through the burst's first 64 and last 64 samples in turn (cycle k:
the (k mod 128)-th); the record (sweep/power_loss.burst_figures, given the interposer's reported
edges as the sweep has them) must place the cut on its sample or say why, and give a hold-up within
1 % of the model's or say why. ``--fio-verify`` (item 4): each cycle's acknowledged writes are also
read back through the virtual drive's own fio verify pass (sim/tools/fio_cli.py, in-process), 128 KiB
blocks on the d5-p5336 namespace, the media holding what the drive kept: a block it reports lost
that the drive did not lose is a false loss.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from powerrig.analysis import power_events
from powerrig.sim.ssd.power import PowerSpec
from powerrig.sim.power_loop import SteppedRig

PRE = 250            # samples before the edge in each burst
CUT_POST = 2000      # 8 ms: past the longest hold-up
ON_POST = 1000       # 4 ms: the inrush settles within 1 ms
EDGE_N = PRE + CUT_POST
EDGE_AT = [*range(64), *range(EDGE_N - 64, EDGE_N)]     # the burst samples an --edge-cuts cut falls on
VERIFY_BS = 131072
VERIFY_CAP = 61_440_000_000_000       # the d5-p5336 profile's one namespace


class _Endpoint:
    """The virtual SSD's endpoint as the impersonated fio asks it, in-process (identify, verify)."""

    def __init__(self):
        from powerrig.sim.ssd.power_io import PatternMedia
        self.media = PatternMedia()

    def __call__(self, ep, req, timeout=None):
        if req["op"] == "identify":
            return {"ok": True, "capacity_bytes": VERIFY_CAP, "namespaces": 1, "fdp": False,
                    "states": [{"read_MiBps": 7000.0}]}
        assert req["op"] == "verify", req
        return {"ok": True, "bad": self.media.bad_blocks(1, int(req["offset"]), int(req["size"]), int(req["bs"]),
                                                         str(req["pattern"]))}


def fio_verify_lost(acked: list[int], lost: set[int], seed: int) -> set[int]:
    """The cycle's acknowledged writes (LBAs in order) as 128 KiB blocks from the namespace's start,
    the drive's media holding all but the ones it ``lost`` (left as an earlier cycle's), read back by
    the virtual drive's fio (--verify_only --verify_state_load=1, the sweep's pass 1): the LBAs it
    reports lost."""
    import contextlib
    import io

    from powerrig.dut import commands, verify
    from powerrig.sim.tools import fio_cli

    ep = _Endpoint()
    first = acked[0] if acked else 0
    ep.media.write(1, 0, len(acked) * VERIFY_BS, str(seed - 1))
    for j, lba in enumerate(acked):
        if lba not in lost:
            ep.media.write(1, j * VERIFY_BS, (j + 1) * VERIFY_BS, str(seed))
    argv = commands.fio_verify_argv("fio", "seq", "/dev/nvme0n1", VERIFY_BS, 8, len(acked) * VERIFY_BS, "libaio",
                                    True, seed)
    err = io.StringIO()
    saved, fio_cli.request = fio_cli.request, ep
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            fio_cli.main(list(argv)[1:] + ["--output-format=json"])
    finally:
        fio_cli.request = saved
    return {first + off // VERIFY_BS for off in verify.bad_blocks(err.getvalue())}


def edge_record(rig: SteppedRig, edges, p: int) -> dict:
    """The sweep's record of a burst whose cut falls on burst sample ``p``."""
    import threading

    from powerrig.sweep.power_loss import burst_figures

    th = threading.Thread(target=lambda: None)
    th.start()
    b = rig.burst(edges[0]["index"] - p, EDGE_N)
    return burst_figures((th, {"burst": b}), True, rig.drive.spec.plp_threshold_v, edges=edges)


def cycle(rig: SteppedRig, rng, k: int = 0, edge_cuts: bool = False, fio_verify: bool = False) -> dict:
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
    out = {}
    if edge_cuts:
        p = EDGE_AT[k % len(EDGE_AT)]
        rec = edge_record(rig, edges, p)
        out["edge"] = {"p": p, "on_sample": rec.get("cut_found_at") == cut_edge["index"],
                       "found_elsewhere": rec.get("cut_found_at") not in (None, cut_edge["index"]),
                       "cut_reason": rec.get("cut_reason"), "holdup_reason": rec.get("holdup_reason"),
                       "holdup_err": (abs(rec["holdup_s"] - truth_cut["holdup_s"]) / truth_cut["holdup_s"]
                                      if rec.get("holdup_s") is not None else None)}
    if fio_verify:
        reported = fio_verify_lost(sorted(acked), injected, 1000 + k)
        out["false_losses"] = len(reported - injected)
        out["missed_losses"] = len(injected - reported)
        n = len(acked) * VERIFY_BS          # what the float round trip fio_cli took before issue 41 did to it
        out["old_arithmetic_short"] = int(n / VERIFY_CAP * VERIFY_CAP) < n
    # the burst starts PRE samples before the requested edge: found at PRE = on its sample
    return {**out, "cut_error_us": abs(at - PRE) * period * 1e6,
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
    ap.add_argument("--edge-cuts", action="store_true",
                    help="also read each cut from a burst whose first or last 64 samples it falls on (cycling)")
    ap.add_argument("--fio-verify", action="store_true",
                    help="also read each cycle back through the virtual drive's fio verify pass (false losses)")
    a = ap.parse_args()
    rig = SteppedRig(PowerSpec(defect_rate=a.defect_rate, seed=a.seed), seed=a.seed)
    rig.command({"op": "enable", "watchdog_ms": 1000})
    rng = np.random.default_rng(a.seed + 1)
    t0, cpu0 = time.perf_counter(), time.process_time()
    rows = []
    for k in range(a.cycles):
        rows.append(cycle(rig, rng, k, a.edge_cuts, a.fio_verify))
        if (k + 1) % 100 == 0:
            print(f"{k + 1} cycles, {sum(len(r['injected']) for r in rows)} writes lost so far, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
    injected = sum(len(r["injected"]) for r in rows)
    found = sum(len(r["found"]) for r in rows)
    same = all(r["injected"] == r["found"] for r in rows)
    extra = {}
    if a.edge_cuts:
        ed = [r["edge"] for r in rows]
        herr = [e["holdup_err"] for e in ed if e["holdup_err"] is not None]
        reasons: dict = {}
        for e in ed:
            for key in ("cut_reason", "holdup_reason"):
                if e[key]:
                    short = e[key].split(":")[0].split(",")[0]
                    reasons[short] = reasons.get(short, 0) + 1
        extra["edge_cuts"] = {
            "cuts": len(ed), "burst_samples": EDGE_N, "positions": len({e["p"] for e in ed}),
            "found_on_sample": sum(e["on_sample"] for e in ed),
            "found_elsewhere": sum(e["found_elsewhere"] for e in ed),
            "not_found_with_reason": sum(1 for e in ed if not e["on_sample"] and e["cut_reason"]),
            "not_found_without_reason": sum(1 for e in ed if not e["on_sample"] and not e["cut_reason"]),
            "holdup_reported": len(herr),
            "holdup_error_pct_max": round(100 * max(herr), 3) if herr else None,
            "holdup_none_with_reason": sum(1 for e in ed if e["holdup_err"] is None and e["holdup_reason"]),
            "holdup_none_without_reason": sum(1 for e in ed if e["holdup_err"] is None and not e["holdup_reason"]),
            "reasons": reasons}
    if a.fio_verify:
        extra["fio_verify"] = {"cycles": len(rows), "false_losses": sum(r["false_losses"] for r in rows),
                               "cycles_with_false_loss": sum(1 for r in rows if r["false_losses"]),
                               "missed_losses": sum(r["missed_losses"] for r in rows),
                               "cycles_the_old_float_size_would_fail": sum(r["old_arithmetic_short"] for r in rows),
                               "block_bytes": VERIFY_BS}
    print(json.dumps({
        **extra,
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
        "path": "in-process: powerrig_fw.actions + sim.ssd.power on a stepped clock (powerrig.sim.power_loop)",
    }))


if __name__ == "__main__":
    main()
