"""What one virtual rig costs: its CPU share idle and streaming, the sampling cost per pass length, and
the CPU of one impersonated nvme-cli / fio start (docs/scale.md, "Many virtual rigs on one host").

    .venv/bin/python benchmarks/bench_rig_cpu.py [--interval-us 10000[,1000,100]] [--seconds 8]

A streaming rig's line splits its CPU by thread: the busiest (the sampling thread: front end, drive
model, reduction, the firmware's Python) and the rest (the USB writer and reader, the endpoints).

CPU seconds, not wall time, but on a shared host they still move with the load (caches, SMT
siblings): take the load average printed beside them into account.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import time

import numpy as np

from hostinfo import machine


def _proc_cpu_s(pid: int | str) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _threads_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of a process, by thread id (/proc/<pid>/task)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):      # a thread that ended meanwhile
            out[tid] = _proc_cpu_s(f"{pid}/task/{tid}")
    return out


def rig_share(intervals_us: list[int], seconds: float) -> None:
    from powerrig.sim import rig

    st = rig.start()
    try:
        time.sleep(2)
        c0, t0 = _proc_cpu_s(st["pid"]), time.monotonic()
        time.sleep(seconds)
        print(f"idle rig:      {(_proc_cpu_s(st['pid']) - c0) / (time.monotonic() - t0):.3f} of a core")
        for interval_us in intervals_us:
            c0, t0, th0 = _proc_cpu_s(st["pid"]), time.monotonic(), _threads_cpu_s(st["pid"])
            p = subprocess.run([sys.executable, "-m", "powerrig", "stream", "--port", st["port"], "--interval-us",
                                str(interval_us), "--seconds", str(seconds)], capture_output=True, text=True)
            dt = time.monotonic() - t0
            th1 = _threads_cpu_s(st["pid"])
            per = sorted((th1[k] - th0.get(k, 0.0) for k in th1), reverse=True)
            covered = next((ln for ln in p.stdout.splitlines() if ln.startswith("covered")), p.stderr.strip()[-200:])
            print(f"streaming rig: {(_proc_cpu_s(st['pid']) - c0) / dt:.3f} of a core ({interval_us} us intervals; "
                  f"busiest thread {per[0] / dt:.3f}, the rest {sum(per[1:]) / dt:.3f}; load average "
                  f"{os.getloadavg()[0]:.1f}; {covered})")
    finally:
        rig.stop(st["id"])


def pass_cost() -> None:
    """CPU per simulated second of 250 kS/s by pass length: the fixed cost of a pass's numpy calls."""
    from powerrig.sim.bench.calbench import BenchFixture
    from powerrig.sim.interposer.frontend import FrontEnd
    from powerrig.sim.ssd.power import PoweredDrive
    from powerrig.sim.interposer.reducer import NumpyReducer
    from powerrig.sim.ssd.drive import VirtualSSD

    fe = FrontEnd(PoweredDrive(BenchFixture(VirtualSSD("d5-p5336"))), seed=1)
    red = NumpyReducer(3)
    red.configure((0, 1), 2500, 25, [0, 0], [0, 0])
    t0 = time.time()
    fe.sample(t0 + np.arange(10) * 4e-6)      # the one-time tables (noise) are not what is measured
    for n in (125, 625, 2500):          # 0.5 ms, 2.5 ms, 10 ms of samples per pass
        best = []
        for _rep in range(3):           # the least of three: a shared host only ever adds to CPU time
            c = time.process_time()
            for k in range(250_000 // n):
                raw, _ = fe.sample(t0 + (k * n + np.arange(n)) * 4e-6)
                red.reduce(raw.reshape(-1), n)
            best.append(time.process_time() - c)
        print(f"sampling in passes of {n * 4e-3:.1f} ms: {min(best):.3f} s CPU per simulated second "
              f"(least of 3; {max(best):.3f} at most)")


def tool_start() -> None:
    import tempfile

    from powerrig.sim.rig import tool_launcher

    folder = tempfile.mkdtemp(prefix="powerrig-bench-")
    for tool, args in (("nvme", ["version"]), ("fio", ["--version"])):
        argv = tool_launcher(tool, "/nonexistent.sock", folder) + args      # as a rig runs it: sh, then python
        c = _children_cpu_s()
        for _ in range(20):
            subprocess.run(argv, capture_output=True)
        print(f"impersonated {tool} start: {(_children_cpu_s() - c) / 20 * 1e3:.0f} ms CPU")
    c = _children_cpu_s()
    for _ in range(20):
        subprocess.run([sys.executable, "-c", "pass"], capture_output=True)
    print(f"(python -c pass with site: {(_children_cpu_s() - c) / 20 * 1e3:.0f} ms CPU)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval-us", default="10000", help="a streaming rig's interval; several: 10000,1000,100")
    ap.add_argument("--seconds", type=float, default=8.0)
    a = ap.parse_args()
    print(f"bench_rig_cpu on {machine()}")
    rig_share([int(x) for x in a.interval_us.split(",")], a.seconds)
    pass_cost()
    tool_start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
