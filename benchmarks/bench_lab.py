"""A lab's fleet on one results database: N virtual rigs, N sweeps of one short plan released at the same
moment into one PostgreSQL (a throwaway server, the distribution's binaries, unix socket) and into one
SQLite file, one backend after the other.

    .venv/bin/python benchmarks/bench_lab.py --rigs 16 [--backends postgresql,sqlite] [--measure-s 0.5]

Per backend: steps expected (rigs x the plan's steps), steps stored, duplicates (rows beyond one per
run and step key, and plan rows beyond one), errors (sweeps that failed or runs not "done"), wall time
from the release to the last sweep's end, and the store's write latency (each finished step's
transaction, measured by the engine) p50/p99. The last line is one JSON object with those figures.
Every sweep is its own process (as a lab's rigs are) with its own virtual rig, brought up before the
release, a few at a time (starting 16 simulators on 2 cores is not what this measures); then all
sweeps start together. Also printed: steps stored invalid, the seconds of samples the captures lost,
the load average, and where the CPU went (the sweeps, the rigs, the impersonated nvme-cli and fio).

A lab's rigs bring their own CPU; here each virtual rig synthesizes 250 kS/s on the shared cores
(benchmarks/bench_rig_cpu.py: 0.06 s of CPU per simulated second for sampling and reduction in 10 ms
passes; 16 streaming rigs at once still want most of 2 cores). Its sampling thread therefore
runs at ``--sampler-priority`` (default: 5 nicer; ``idle``: SCHED_IDLE, only CPU nobody else wants;
the drive's endpoint in the rig keeps the sweeps' priority): when the host is short, the rigs fall behind and lose samples
(counted, shown as ``lost_s``) instead of starving nvme-cli into its 30 s timeout. The store's writers
wait for each other as long as it takes (up to POWERRIG_DB_WAIT_S, 600 s). docs/scale.md has the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hostinfo import machine

PLAN = """name = "fleet"
power_states = [0]
apst = "keep"
[rig]
port = "sim:d5-p5336"
interval_us = {interval_us}
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.1
idle_s = {idle}
measure_s = {measure}
[[workload]]
name = "seq-read-128k"
rw = "read"
"""


def _proc_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_s(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def worker(db: str, plan_path: str, out: str, go: str) -> int:
    """One rig's sweep. The virtual rig is brought up first (prints "ready"); the sweep starts at the
    moment written into the file ``go``. Prints one JSON line: the store latencies, or the error, and
    where the CPU went from the release on: this sweep's process, its virtual rig (idle while it
    waited, and during the sweep) and the tools it ran (the impersonated nvme-cli and fio)."""
    from powerrig.results import ResultStore
    from powerrig.sweep import engine
    from powerrig.sweep.plan import load

    plan, store_s = load(plan_path), []
    res = {"ok": False, "store_s": store_s, "error": None}

    def on(d):
        if d["kind"] == "step-done":
            store_s.append(d["timing"].get("store_s"))

    try:
        rig = engine.bring_up(plan)          # starting 16 simulators at once is not what is measured here
    except Exception as e:  # noqa: BLE001
        print(json.dumps({**res, "error": f"rig did not start: {e}"}), flush=True)
        return 1
    engine.bring_up = lambda _plan: rig
    rig_pid, rig_close, cpu = rig.info.get("pid"), rig.close, {}

    def close() -> None:                 # the rig's CPU just before it stops (it is reaped as our child)
        cpu["rig"] = _proc_cpu_s(rig_pid) - cpu["rig"]
        rig_close()
    rig.close = close
    cpu["rig"] = _proc_cpu_s(rig_pid)
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.05)
    time.sleep(max(0.0, float(Path(go).read_text()) - time.time()))
    cpu["rig_idle"] = _proc_cpu_s(rig_pid) - cpu["rig"]          # while it waited for the release
    cpu["rig"] += cpu["rig_idle"]
    self0, children0 = _cpu_s(resource.RUSAGE_SELF), _cpu_s(resource.RUSAGE_CHILDREN)
    try:
        res["run"] = engine.Sweep(plan, ResultStore(db), out, on_progress=on).run()
        res["ok"] = True
    except Exception as e:  # noqa: BLE001 - counted and shown, not raised: the fleet goes on
        res["error"] = f"{type(e).__name__}: {e}"
    res["cpu_s"] = {"sweep": _cpu_s(resource.RUSAGE_SELF) - self0, "rig": cpu["rig"], "rig_idle": cpu["rig_idle"],
                    "tools": max(0.0, _cpu_s(resource.RUSAGE_CHILDREN) - children0 - cpu["rig"])}
    print(json.dumps(res), flush=True)
    return 0 if res["ok"] else 1


def fleet(db: str, rigs: int, plan_path: Path, tmp: Path) -> dict:
    from powerrig.results import ResultStore
    from powerrig.sweep.plan import load

    expected = rigs * len(load(plan_path).steps())
    go = tmp / "go"
    tmp.mkdir(parents=True, exist_ok=True)
    procs, first = [], []
    for k in range(rigs):
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", db, str(plan_path), str(tmp / f"rig{k}"),
                                       str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        if len(procs) % (os.cpu_count() or 1) == 0 or k == rigs - 1:    # bring-ups a few at a time
            first += [p.stdout.readline() for p in procs[len(first):]]
    # every rig up and every process waiting: then all at once
    load = Load().start()
    at = time.time() + 1.0
    go.write_text(repr(at))
    results, errors = [], []
    for k, p in enumerate(procs):
        out, err = p.communicate(timeout=1800)
        lines = [ln for ln in (first[k] + out).splitlines() if ln.startswith("{")]
        r = json.loads(lines[-1]) if lines else {"ok": False, "store_s": [], "error": err.strip()[-300:]}
        results.append(r)
        if not r["ok"]:
            errors.append(f"rig {k}: {r['error']}")
    wall = time.time() - at
    load.stop()
    store = ResultStore(db)
    with store.engine.connect() as c:
        from sqlalchemy import text
        stored = c.execute(text("SELECT count(*) FROM steps")).scalar_one()
        distinct = c.execute(text("SELECT count(*) FROM (SELECT DISTINCT run_id, key FROM steps) d")).scalar_one()
        plans = c.execute(text("SELECT count(*) FROM plans")).scalar_one()
        invalid = c.execute(text("SELECT count(*) FROM steps WHERE status <> 'done'")).scalar_one()
        lost_s = c.execute(text("SELECT coalesce(sum(lost_s), 0) FROM steps")).scalar_one()
    runs = store.runs()
    errors += [f"run {r['id']} is {r['status']}" for r in runs if r["status"] != "done"]
    if len(runs) != rigs:
        errors.append(f"{len(runs)} runs for {rigs} sweeps")
    lat = sorted(s for r in results for s in r["store_s"] if s is not None)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None
    for e in errors[:10]:
        print(f"  error: {e}")
    cpu = {k: round(sum(r.get("cpu_s", {}).get(k, 0.0) for r in results), 1) for k in ("sweep", "rig", "rig_idle", "tools")}
    return {"expected": expected, "stored": stored, "duplicates": (stored - distinct) + max(0, plans - 1),
            "errors": len(errors), "wall_s": round(wall, 2), "write_p50_ms": round(statistics.median(lat) * 1e3, 2)
            if lat else None, "write_p99_ms": round(p99 * 1e3, 2) if p99 is not None else None,
            "invalid_steps": invalid, "lost_s": round(float(lost_s), 2),
            "cpu_s": cpu, "load_before": load.before, "load_max": load.peak}


class Load:
    """The 1-minute load average at the release and its highest value while the sweeps ran."""

    def __init__(self):
        self.before = self.peak = round(os.getloadavg()[0], 1)
        self._stop = threading.Event()

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, round(os.getloadavg()[0], 1))

    def start(self) -> "Load":
        threading.Thread(target=self._watch, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(*sys.argv[2:6])
    ap = argparse.ArgumentParser()
    ap.add_argument("--rigs", type=int, default=16)
    ap.add_argument("--backends", default="postgresql,sqlite")
    ap.add_argument("--measure-s", type=float, default=0.5)
    ap.add_argument("--idle-s", type=float, default=0.3)
    ap.add_argument("--interval-us", type=int, default=10000,
                    help="the rigs' reporting interval (10 ms: 16 streaming rigs fit on 2 cores; 1000 is the default)")
    ap.add_argument("--sampler-priority", default="5",
                    help="each virtual rig's sampling thread: 'idle' (only CPU nobody else wants), N (N nicer "
                         "than the sweeps and the tools) or 0 (as they are); see docs/scale.md")
    a = ap.parse_args()
    from powerrig.sim.interposer.board import SAMPLER_PRIORITY_ENV
    os.environ[SAMPLER_PRIORITY_ENV] = a.sampler_priority
    from powerrig.testing.postgres import Cluster

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # stop the throwaway server on the way out
    print(f"bench_lab: {a.rigs} virtual rigs, one sweep each, on {machine()} ({os.cpu_count()} cores)")
    summary: dict = {"rigs": a.rigs}
    with tempfile.TemporaryDirectory(prefix="powerrig-lab-") as tmp:
        tmp = Path(tmp)
        os.environ["POWERRIG_SIM_DIR"] = str(tmp / "sim")
        plan_path = tmp / "fleet.toml"
        plan_path.write_text(PLAN.format(idle=a.idle_s, measure=a.measure_s, interval_us=a.interval_us))
        for backend in a.backends.split(","):
            if backend == "postgresql":
                cluster = Cluster().start(max_connections=max(100, 8 * a.rigs))
                try:
                    r = fleet(cluster.database("fleet"), a.rigs, plan_path, tmp / "pg")
                finally:
                    cluster.stop()
            elif backend == "sqlite":
                r = fleet(str(tmp / "fleet.sqlite"), a.rigs, plan_path, tmp / "sqlite")
            else:
                ap.error(f"unknown backend {backend!r}: postgresql or sqlite")
            print(f"{backend:>10}: steps expected {r['expected']}, stored {r['stored']}, duplicates "
                  f"{r['duplicates']}, errors {r['errors']}, wall {r['wall_s']:.1f} s, store write latency "
                  f"p50 {r['write_p50_ms']} ms, p99 {r['write_p99_ms']} ms; load average {r['load_before']} at the "
                  f"release, {r['load_max']} at most")
            print(f"{'':>10}  steps stored invalid {r['invalid_steps']}, samples lost in the captures "
                  f"{r['lost_s']} s (the virtual rigs' sampling, behind when they wanted more CPU than there was)")
            c = r["cpu_s"]
            print(f"{'':>10}  CPU from the release: sweeps {c['sweep']} s, rigs {c['rig']} s (idle before the release "
                  f"{c['rig_idle']} s), nvme-cli and fio {c['tools']} s")
            summary[backend] = r
    print(json.dumps(summary))
    ok = all(summary[b]["errors"] == 0 and summary[b]["duplicates"] == 0 and summary[b]["stored"] ==
             summary[b]["expected"] for b in a.backends.split(","))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
