"""Link benchmarks (figures, not pass/fail):

1. Host decode throughput at the 100 us interval: frames -> resync/CRC -> records -> SI arrays, the
   host's whole per-byte path, on one core, against real time (10,000 intervals per second).
2. Clock accuracy: a virtual interposer with drift and USB jitter on a real pty; the model fitted at
   the end of each span, applied to every block of the span, against the simulator's true clock
   (p50/p99/max), and the fitted drift against the true one. One fresh simulator per span.

    .venv/bin/python benchmarks/bench_link.py [--clock-seconds 10 30 600] [--repeat 3] [--asymmetry-us 0] [--no-decode]
                                             [--settled 5]

Each span is run ``--repeat`` times (a fresh simulator each); the median of the runs is printed
with every run's figure and the load average beside it: on a machine shared with other jobs the
latency floors, and with them the clock's error, move with the load.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hostinfo import machine
from powerrig.interposer import frames as wire
from powerrig.interposer.client import Interposer
from powerrig.core.rails import rails
from powerrig.sim.interposer.reducer import NumpyReducer
from powerrig_fw import crc, wire as fw

INTERVAL_US = 100
SPI = INTERVAL_US // 4


def make_stream(seconds: float) -> bytes:
    """Frames for `seconds` of 2-rail data at 100 us, built by the simulator's reducer + firmware framer."""
    out: list[bytes] = []
    framer = fw.Framer(lambda mv: out.append(bytes(mv)), crc.crc32_into_c)
    red = NumpyReducer(3)
    red.configure([0, 1], SPI, 25)
    framer.configure(fw.record_size(2), 22)
    rng = np.random.default_rng(0)
    n_total = int(seconds * 250_000)
    block = 250_000
    for k in range(0, n_total, block):
        raw = np.zeros((block, 7), np.int16)
        raw[:, 0] = 26000 + rng.integers(-3, 4, block)
        raw[:, 1] = 1500 + rng.integers(0, 3000, block)
        raw[:, 2] = 21600
        raw[:, 3] = 3900
        red.feed(raw.reshape(-1), block, framer)
    return b"".join(out)


def bench_decode(seconds: float = 20.0) -> dict:
    data = make_stream(seconds)
    desc = {"rails": [{"name": r.name, "v_lsb": r.v_lsb, "i_lsb": r.i_lsb} for r in rails().rails], "calibration": {}}
    scales = wire.rail_scales(desc, ["12V", "3V3"])
    best = None
    for _ in range(3):
        dec = wire.FrameDecoder()
        rows = 0
        t0 = time.perf_counter()
        for k in range(0, len(data), 16384):             # reads as the serial thread gets them
            frames = dec.feed(data[k:k + 16384])
            if frames:
                si = wire.records_to_si(b"".join(f.payload for f in frames), scales, SPI, 25)
                rows += len(si["dig_or"])
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    rate = rows / best
    return {"intervals": rows, "bytes": len(data), "seconds_of_data": seconds, "cpu_s": best,
            "intervals_per_s": rate, "x_real_time": rate / (1e6 / INTERVAL_US), "MB_per_s": len(data) / best / 1e6}


def bench_clock(seconds: float, asymmetry_us: float = 0.0, settled_s: float | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        truth_path = Path(tmp) / "truth.json"
        p = subprocess.Popen([sys.executable, "-m", "powerrig", "sim", "interposer", "--truth", str(truth_path),
                              "--state-dir", tmp, "--drift-ppm", "35", "--jitter-ms", "1.0"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        port = p.stdout.readline().strip()
        errs = []
        try:
            with Interposer.open(port) as dev:
                dev.clock.asymmetry_s = asymmetry_us * 1e-6
                if settled_s is not None:
                    dev.pings.burst_every = settled_s
                with dev.stream() as st:
                    marks = []
                    t_end = time.monotonic() + seconds
                    for b in st.blocks(seconds=seconds):
                        marks.append(b.first_index)
                        if time.monotonic() > t_end + 5:
                            break
                model = st.clock.model()
                pings = np.array(st.clock.pings_since(0)[0], np.float64)
        finally:
            p.terminate()
            p.wait()
        truth = json.loads(truth_path.read_text())["clock"]
        idx = np.asarray(marks, np.float64)
        true_utc = truth["utc_at_index0"] + idx * truth["period_s"] / (1 + truth["drift_ppm"] * 1e-6)
        errs = np.abs(model.utc(idx) - true_utc) * 1e6
        # one-way latencies of every ping against the true clock: their floors' difference is the
        # asymmetry no round-trip fit can see (docs/link.md, "The bias, and where it came from")
        per = truth["period_s"] / (1 + truth["drift_ppm"] * 1e-6)
        out_us = (truth["utc_at_index0"] + pings[:, 1] * per - pings[:, 0]) * 1e6
        in_us = (pings[:, 3] - truth["utc_at_index0"] - pings[:, 2] * per) * 1e6
    return {"out_min_us": float(out_us.min()), "in_min_us": float(in_us.min()),
            "asymmetry_us": float((in_us.min() - out_us.min()) / 2),"seconds": seconds, "pings_used": model.pings, "drift_true_ppm": truth["drift_ppm"],
            "drift_fit_ppm": model.drift_ppm, "residual_us": model.residual_us,
            "err_p50_us": float(np.percentile(errs, 50)), "err_p99_us": float(np.percentile(errs, 99)),
            "err_max_us": float(errs.max())}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clock-seconds", type=float, nargs="+", default=[10.0, 30.0],
                    help="spans to measure, one simulator run each (the issue's: 10 30 600)")
    ap.add_argument("--asymmetry-us", type=float, default=0.0,
                    help="a measured latency asymmetry to correct (ClockFit.asymmetry_s); 0 = uncorrected")
    ap.add_argument("--settled", type=float, default=None,
                    help="seconds between the bursts of clock pings once the fit has settled (interposer/pings.py); default: the host's")
    ap.add_argument("--repeat", type=int, default=1, help="runs per span (a fresh simulator each); the median is printed")
    ap.add_argument("--no-decode", action="store_true", help="skip the decode benchmark")
    args = ap.parse_args()
    print(f"host: {machine()}", flush=True)
    out = {}
    if not args.no_decode:
        d = out["decode"] = bench_decode()
        print(f"decode @100us: {d['intervals_per_s']:,.0f} intervals/s on one core = {d['x_real_time']:.0f}x real "
              f"time ({d['MB_per_s']:.1f} MB/s of frames; {d['intervals']:,} intervals in {d['cpu_s']:.3f} s)")
    out["clock"] = []
    for secs in args.clock_seconds:
        runs = []
        for _ in range(args.repeat):
            load = os.getloadavg()[0]
            c = bench_clock(secs, args.asymmetry_us, args.settled)
            c["load"] = load
            runs.append(c)
            print(f"clock over {c['seconds']:.0f} s (35 ppm drift, 1 ms USB jitter): error p50 {c['err_p50_us']:.1f} us, "
                  f"p99 {c['err_p99_us']:.1f} us, max {c['err_max_us']:.1f} us; drift fit {c['drift_fit_ppm']:.2f} ppm "
                  f"(true {c['drift_true_ppm']:.2f}, off by {c['drift_fit_ppm'] - c['drift_true_ppm']:+.2f}); "
                  f"bound +-{c['residual_us']:.0f} us; {c['pings_used']} pings; load average {load:.1f}; "
                  f"latency floors: host->device {c['out_min_us']:.0f} us, device->host {c['in_min_us']:.0f} us "
                  f"(half the difference {c['asymmetry_us']:+.0f} us)", flush=True)
        med = {k: float(np.median([r[k] for r in runs])) for k in runs[0] if isinstance(runs[0][k], float)}
        med["runs"] = runs
        out["clock"].append(med)
        if args.repeat > 1:
            p99s = ", ".join(f"{r['err_p99_us']:.0f}" for r in runs)
            print(f"  median of {args.repeat} over {secs:.0f} s: p50 {med['err_p50_us']:.1f} us, p99 {med['err_p99_us']:.1f} us, "
                  f"max {med['err_max_us']:.1f} us, drift off by {med['drift_fit_ppm'] - med['drift_true_ppm']:+.2f} ppm "
                  f"(p99 of the runs: {p99s} us)", flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
