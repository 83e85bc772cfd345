"""Where a recording's CPU goes, per thread: the recorder in this process against a virtual rig.

    .venv/bin/python benchmarks/record_threads.py [--warm 33] [--seconds 30] [--ping 0.1] [--settled 5]
                                                  [--batch 0.1] [--eager 0.008] [--write-every 2]

Records at 100 us and, after ``--warm`` seconds (past the first 30 s of fast clock pings), prints each
Python thread's share of a core (its own CPU clock) and its voluntary context switches a second (from
/proc: each is a sleep and a wake-up) over ``--seconds``, with the process's minor page faults a second and
Python's cyclic GC collections in that window; the JLS library's C thread is the process's
share less the threads listed, and the clock pings a second. ``--ping``, ``--settled``, ``--batch``,
``--eager`` override the ping interval (Interposer.ping_interval), the seconds between the bursts of
pings once the clock fit has settled (interposer/pings.py), the cap on the reader's pace
(serial_link.BATCH_S: at 100 us the pace, 9.7 ms, is set by the host's USB hold, below it) and its
eager window after a ping (PING_EAGER_S); ``--write-every`` the seconds of data per hand-over to
the writer (recorder.WRITE_EVERY_S); for experiments (docs/scale.md, "The fourth pass" to "The sixth
pass"). The virtual rig runs in its own process at nice -10 when allowed (it stands in for the board's
own MCU) and is not counted.
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_record_cpu import start_virtual_rig
from powerrig.capture import recorder
from powerrig.capture.recorder import Recorder
from powerrig.interposer import serial_link
from powerrig.interposer.client import Interposer


def _threads() -> dict[str, tuple[float, int]]:
    """{name: (CPU s, voluntary context switches)} of this process's Python threads."""
    out = {}
    for t in threading.enumerate():
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
            with open(f"/proc/self/task/{t.native_id}/status") as f:
                vol = int(f.read().split("voluntary_ctxt_switches:")[1].split()[0])
        except (OSError, ValueError, IndexError):
            continue
        out[t.name] = (cpu, vol)
    return out


_GC = [0, 0, 0]


def _count_gc(phase: str, info: dict) -> None:
    """gc.callbacks: the cyclic collections of each generation (Python's GC runs in whichever thread allocates)."""
    if phase == "stop":
        _GC[info["generation"]] += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", type=float, default=33.0, help="seconds before the measurement")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds measured")
    ap.add_argument("--ping", type=float, help="clock ping interval after the first 30 s (s)")
    ap.add_argument("--settled", type=float, help="seconds between ping bursts once the fit has settled")
    ap.add_argument("--batch", type=float, help="the cap on the reader's pace while a stream flows (s)")
    ap.add_argument("--eager", type=float, help="the reader's eager window after a ping (s)")
    ap.add_argument("--write-every", type=float, help="seconds of data per hand-over to the writer (recorder.WRITE_EVERY_S)")
    a = ap.parse_args()
    if a.write_every is not None:
        recorder.WRITE_EVERY_S = a.write_every
    if a.batch is not None:
        serial_link.BATCH_S = a.batch
    if a.eager is not None:
        serial_link.PING_EAGER_S = a.eager
    tmp = Path(tempfile.mkdtemp(prefix="powerrig-threads-"))
    sim, port = start_virtual_rig(tmp / "board")
    try:
        with Interposer.open(port) as dev:
            if a.ping is not None:
                dev.ping_interval = a.ping
            if a.settled is not None:
                dev.pings.burst_every = a.settled
            rec = Recorder(dev, str(tmp / "x.jls"), interval_us=100, seconds=a.warm + a.seconds + 5)
            rec.start()
            time.sleep(a.warm)
            gc.callbacks.append(_count_gc)
            t0, p0, before, n0 = time.monotonic(), time.process_time(), _threads(), dev.clock.total
            f0, g0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, list(_GC)
            time.sleep(a.seconds)
            dt, p1, after, n1 = time.monotonic() - t0, time.process_time(), _threads(), dev.clock.total
            f1, g1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, list(_GC)
            res = rec.wait(60)
    finally:
        sim.terminate()
    listed = 0.0
    print(f"process {100 * (p1 - p0) / dt:.2f} % of a core, load {os.getloadavg()[0]:.1f}, lost {res.lost_s:.3f} s, "
          f"{(n1 - n0) / dt:.1f} clock pings/s, {(f1 - f0) / dt:.0f} minor page faults/s, "
          f"GC collections (gen 0/1/2) {g1[0] - g0[0]}/{g1[1] - g0[1]}/{g1[2] - g0[2]}")
    for name, (cpu, vol) in after.items():
        if name in before and cpu > before[name][0]:
            listed += cpu - before[name][0]
            print(f"  {name[:40]:40s} {100 * (cpu - before[name][0]) / dt:6.2f} %  "
                  f"{(vol - before[name][1]) / dt:6.1f} voluntary switches/s")
    print(f"  {'other (the JLS library thread)':40s} {100 * (p1 - p0 - listed) / dt:6.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
