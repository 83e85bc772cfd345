"""CPU of the virtual SSD's waveform: one simulated second of 250 kS/s power, per workload, in the
virtual interposer's 10 ms passes (docs/virtual-ssd.md, "What the rails show at 4 us").

    .venv/bin/python benchmarks/bench_ssd_waveform.py

The drive's share of a streaming rig: its ``rail_currents`` alone, then the whole front end's sample
(noise, quantisation) on top, so the model's cost is seen beside what the rig pays anyway. The least
of three runs: a shared host only ever adds CPU time.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from hostinfo import machine

from powerrig.sim.interposer.frontend import FrontEnd
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.model import JobLoad

PASS = 2500                 # samples per pass: the rig's 10 ms stream interval
RATE = 250_000              # samples per second per rail (4 us)
WORKLOADS = {
    "idle": [],
    "seq write 128k QD128": [JobLoad("w", "write", 131072, 128)],
    "rand write 4k QD128": [JobLoad("w", "randwrite", 4096, 128)],
    "seq read 128k QD128": [JobLoad("r", "read", 131072, 128)],
}


class Clock:
    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def one_second(fn, t0: float) -> float:
    best = []
    for _rep in range(3):
        c = time.process_time()
        for k in range(RATE // PASS):
            fn(t0 + (k * PASS + np.arange(PASS)) / RATE)
        best.append(time.process_time() - c)
    return min(best)


def main() -> int:
    print(f"bench_ssd_waveform on {machine()}")
    for name, jobs in WORKLOADS.items():
        clock = Clock(time.time())
        ssd = VirtualSSD("d5-p5336", clock=clock)
        if jobs:
            ssd.start_io(jobs, 3600.0)
        clock.t += 1.0
        t0 = clock.t
        ssd.rail_currents(t0 + np.arange(10) / RATE)        # first call: one-time work is not measured
        model = one_second(ssd.rail_currents, t0)
        fe = FrontEnd(ssd, seed=1)
        fe.sample(t0 + np.arange(10) / RATE)                 # the noise table
        whole = one_second(fe.sample, t0)
        print(f"{name:22s} drive model {model * 1e3:6.1f} ms CPU per simulated second, "
              f"front end with it {whole * 1e3:6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
