"""Every NVMe command on the sample clock, on the virtual rig: power-state transitions timed from the
rails from the Set Features submission the virtual drive host's kernel trace gives (dut/nvmetrace.py,
sim/ssd/drive_trace.py), and the energy of one I/O per class from the traced I/O stream and the rails
(analysis/io_energy.py), each against the virtual SSD's power model.

    .venv/bin/python benchmarks/bench_command_energy.py [--transitions 14] [--interval-us 100]

Starts a virtual D5-P5336 rig, records its rails (interval 100 us), traces the drive host's nvme
tracepoints for the whole run, and does:
  1. a 128 KiB sequential write (4 s fio runs back to back) running while the host walks the power
     states (PS0 -> PS1 -> PS2 -> PS0 ...) through the guarded runner; a change that falls between two
     runs of the load, or within 0.15 s of a run's end, is listed and not timed;
  2. four I/O phases at PS0 with idle between (random read 4 KiB, sequential read 128 KiB, random
     write 4 KiB, sequential write 128 KiB; fio rate_iops keeps the trace a size a kernel's buffer
     holds), then one with 1 MiB reads.
  3. a format, a sanitize, a flush, a firmware commit and a controller reset at PS0 with idle between,
     through the guarded door (dut/destructive.py).
The admin commands are placed on their traced submission and completion. Each transition's latency
(submission -> the rails leave the old level: analysis/transitions.py) is compared with the model's
(the drive switches at half of EXLAT(old) + ENLAT(new) after taking the command, sim/ssd/drive.py); each
class's energy per I/O (above idle, least squares over 20 ms windows of the phase and the idle before
it) with the model's: (the model's true mean power over the phase's steady part - its idle power) /
the I/Os per second the drive moved (fio's iops, the drive's own accounting).

Each command of 3. has its energy above the level before (analysis/admin_energy.py, through
sweep/command_trace.command_rows) compared with the virtual SSD's truth (sim/ssd/admin_power.py: extra
power x busy time).

Prints last one JSON object: ps_transitions, ps_transition_error_ms_p99, io_classes,
io_energy_error_pct_max, admin_commands, admin_energy_error_pct_max (and per class / per transition /
per command detail before it).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from hostinfo import machine  # noqa: E402

from powerrig.analysis.io_energy import io_energy  # noqa: E402
from powerrig.analysis.transitions import time_transition  # noqa: E402
from powerrig.capture import CaptureReader  # noqa: E402
from powerrig.capture.recorder import Recorder  # noqa: E402
from powerrig.core.timeline import NVME, Timeline  # noqa: E402
from powerrig.dut import destructive, nvmetrace, runners  # noqa: E402
from powerrig.dut.fio import FioJob, FioPlan  # noqa: E402
from powerrig.sim import rig as simrig  # noqa: E402
from powerrig.sim.ssd.drive_trace import SimTrace  # noqa: E402
from powerrig.sim.ssd.profile import load as load_profile  # noqa: E402
from powerrig.sim.ssd.client import request  # noqa: E402
from powerrig.sweep.command_trace import command_rows  # noqa: E402
from powerrig.sweep.plan_rig import open_interposer  # noqa: E402

PROFILE = "d5-p5336"
# (rw, bs, rate_iops): a class each
IO_PHASES = [("randread", "4k", 20000), ("read", "128k", 4000), ("randwrite", "4k", 12000),
             ("write", "128k", 3000), ("read", "1m", 600)]
WALK = [1, 2, 0, 2, 1, 0]


def pct(v, q):
    return float(np.percentile(np.asarray(v, float), q)) if len(v) else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--transitions", type=int, default=14)
    ap.add_argument("--interval-us", type=int, default=100)
    ap.add_argument("--phase-s", type=float, default=1.5)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-cmd-energy-"))
    os.environ.setdefault("POWERRIG_SIM_DIR", str(tmp / "rigs"))
    st = simrig.start(PROFILE, owned=True)
    prof = load_profile(PROFILE)
    ctrl, ns = st["controller"], st["namespaces"][0]
    tl = Timeline()
    nvme, fio = runners({"nvme": st["nvme"], "fio": st["fio"], "host": st.get("host")}, tl)
    dev = open_interposer(st["port"])
    cap_path = tmp / "run.jls"
    covered = [0.0]
    rec = Recorder(dev, cap_path, interval_us=a.interval_us, timeline=tl, progress_every_s=0.1,
                   on_progress=lambda p: covered.__setitem__(0, p.covered_s))
    t_rec = time.time()
    phases = []                     # (name, t0, t1, fio result)
    idles = []
    try:
        rec.start()
        time.sleep(1.0)
        trace = SimTrace(st["endpoint"], ctrl, "bench").start()
        assert trace.started, trace.reason
        nvme.set_power_state(ctrl, 0)
        time.sleep(0.3)

        # 1. transitions under a write load
        n = a.transitions
        stop = threading.Event()

        def load():
            k = 0
            while not stop.is_set():       # 4 s runs back to back: the walk takes as long as the host's tools take
                job = FioJob(f"walk{k}", rw="write", bs="128k", iodepth=32, runtime=4.0, time_based=True, filename=ns,
                             direct=True)
                fio.run(FioPlan([job]), tmp / f"fio-walk{k}", serial=st["serial"])
                k += 1
        th = threading.Thread(target=load)
        th.start()
        # the walk starts once the drive is writing (a tool's start takes a while on a loaded host)
        t_wait = time.time() + 30
        while time.time() < t_wait:
            now = time.time()
            w = request(st["endpoint"], {"op": "power_model", "dev": ctrl, "t0": now - 0.05, "t1": now,
                                         "step_s": 0.001})["watts"]
            if min(w) > 15.0:
                break
            time.sleep(0.1)
        for k in range(n):
            time.sleep(0.3)
            nvme.set_power_state(ctrl, WALK[k % len(WALK)], confirm=False)
        stop.set()
        th.join()
        time.sleep(0.5)
        # 2. I/O classes at PS0
        nvme.set_power_state(ctrl, 0)
        for k, (rw, bs, rate) in enumerate(IO_PHASES):
            t_idle = time.time()
            time.sleep(0.8)
            idles.append((t_idle, time.time()))
            j = FioJob(f"c{k}-{rw}-{bs}", rw=rw, bs=bs, iodepth=16, runtime=a.phase_s, time_based=True, filename=ns,
                       direct=True, rate_iops=rate)
            res = fio.run(FioPlan([j]), tmp / f"fio-{k}", serial=st["serial"])
            phases.append((j.name, res))
        time.sleep(0.5)
        # 3. admin commands (and a flush), each with idle before and after
        for cmd in (lambda: destructive.format(nvme, ns, st["serial"], ses=1, controller=ctrl),
                    lambda: destructive.sanitize(nvme, ctrl, st["serial"], action=2),
                    lambda: nvme.flush(ns),
                    lambda: destructive.firmware_commit(nvme, ctrl, st["serial"], slot=1, action=3),
                    lambda: destructive.reset(nvme, ctrl, st["serial"])):
            cmd()
            time.sleep(1.0)            # a sanitize runs on ~0.6 s after its completion
        placed_trace, note = nvmetrace.load(trace)
        evs = [e for e in tl.events() if e.kind in (NVME, "power_state")]
        nvmetrace.place(evs, placed_trace, None if placed_trace else note)
        t_end = time.time()
        time.sleep(0.3)
        t_wait = time.monotonic() + 30          # the stream may run behind the wall clock on a loaded host
        while covered[0] < time.time() - t_rec and time.monotonic() < t_wait:
            time.sleep(0.05)
    finally:
        rec.stop()
        rec.wait(30)

    # the model's truth: the drive's power over the run, 1 ms steps
    truth = {}
    with CaptureReader(cap_path) as cap:
        dt = cap.interval_s
        p = cap.samples("p_total").astype(float)
        sid0 = 0

        def sid(t):
            return float(cap.sample_id(t))
        # transitions
        errs, detail = [], []
        sets = [e for e in tl.events(kind=NVME) if e.name == "set-feature power" and e.meta.get("placed")]
        ps_prev = None
        loads = [(x.t_start, x.t_end) for x in tl.events(kind="phase") if x.name.startswith("fio:walk") and x.t_end]
        for k, e in enumerate(sets):
            nxt = sid(sets[k + 1].t_start) if k + 1 < len(sets) else None
            # timed under the write load only, inside one run of it (a level to leave and a level to reach)
            run = next(((r0, r1) for r0, r1 in loads if r0 + 0.05 <= e.t_start <= r1 - 0.15), None)
            if run is None:
                new = int(e.meta["value"]) & 0x1F
                if ps_prev is not None and ps_prev != new:
                    detail.append({"from": ps_prev, "to": new, "note": "not inside a run of the write load"})
                ps_prev = new
                continue
            nxt = min(nxt if nxt is not None else float("inf"), sid(run[1]))
            new = int(e.meta["value"]) & 0x1F
            if ps_prev is None or ps_prev == new:
                ps_prev = new
                continue
            limit = (prof.state(ps_prev).exlat_us + prof.state(new).enlat_us) * 1e-6
            model = 0.5 * limit
            tr = time_transition(p, sid0, sid(e.t_start), dt, limit, ps_prev, new, end_at=nxt,
                                 pre_from=sid(run[0]))
            ps_prev = new
            if tr.note:
                detail.append({"from": tr.from_ps, "to": new, "note": tr.note})
                continue
            errs.append(abs(tr.latency_s - model) * 1e3)
            detail.append({"from": tr.from_ps, "to": new, "latency_ms": round(tr.latency_s * 1e3, 3),
                           "model_ms": model * 1e3, "settle_ms": round(tr.settle_s * 1e3, 2), "verdict": tr.verdict,
                           "before_w": round(tr.before_w, 2), "after_w": round(tr.after_w, 2)})
        # per-I/O energy
        io = placed_trace.io_arrays()
        t_first = cap.utc(0)
        io_cap = {**io, "submit": io["submit"] - t_first, "complete": io["complete"] - t_first}
        classes, ioerr = [], []
        for (name, res), (i0, i1) in zip(phases, idles):
            job = res.jobs[0]
            t0, t1 = job.start_utc, job.end_utc
            m = (io["submit"] >= t0 - 0.05) & (io["complete"] <= t1 + 0.05)
            sub = {k: v[m] for k, v in io_cap.items()}
            got = io_energy(p, 0.0, dt, sub, [(t0 - t_first, t1 - t_first)], (i0 - t_first + 0.1, i1 - t_first))
            if len(got) != 1:
                classes.append({"phase": name, "note": f"{len(got)} classes found"})
                continue
            g = got[0]
            # truth: the model's true power in the phase's middle and at idle, and the drive's I/Os per second
            mid0, mid1 = t0 + 0.2 * (t1 - t0), t1 - 0.2 * (t1 - t0)
            w_busy = np.mean(request(st["endpoint"], {"op": "power_model", "dev": ctrl, "t0": mid0, "t1": mid1,
                                                      "step_s": 0.001})["watts"])
            w_idle = np.mean(request(st["endpoint"], {"op": "power_model", "dev": ctrl, "t0": i0 + 0.3, "t1": i1,
                                                      "step_s": 0.001})["watts"])
            iops = sum(d.iops for d in job.directions.values())
            e_true = (w_busy - w_idle) / iops
            err = abs(g.energy_j - e_true) / e_true * 100
            ioerr.append(err)
            classes.append({"phase": name, "class": g.io_class, "ios": g.count, "energy_uj": round(g.energy_j * 1e6, 3),
                            "ci_uj": [round(g.ci_low_j * 1e6, 3), round(g.ci_high_j * 1e6, 3)],
                            "model_uj": round(e_true * 1e6, 3), "baseline_w": round(g.baseline_w, 3),
                            "error_pct": round(err, 3)})
        # admin commands against the virtual SSD's truth (the truth's kinds in the order they ran)
        admin_truth = request(st["endpoint"], {"op": "admin_truth", "dev": ctrl})["commands"]
        rows = command_rows(cap, tl.events())
        cmds, admin_err = [], []
        for r, t in zip(rows, admin_truth):
            n = json.loads(r["notes"])
            if t["kind"] != r["phase"].replace("-", "_"):
                cmds.append({"command": r["phase"], "note": f"paired with the truth's {t['kind']}: not compared"})
                continue
            if r["value"] is None or n.get("cut_short"):
                cmds.append({"command": r["phase"], "note": n.get("cut_short") or n.get("why")})
                continue
            err = abs(r["value"] - t["energy_j"]) / abs(t["energy_j"]) * 100
            admin_err.append(err)
            cmds.append({"command": r["phase"], "truth_kind": t["kind"], "energy_j": round(r["value"], 6),
                         "model_j": round(t["energy_j"], 6), "error_pct": round(err, 3), "from": n.get("from"),
                         "settle_ms": round(n["duration_s"] * 1e3, 2), "baseline_w": round(n["baseline_w"], 3)})
    simrig.stop(st["id"])
    print(json.dumps({"host": machine(), "interval_us": a.interval_us, "trace": note, "transitions": detail,
                      "classes": classes, "commands": cmds, "load_average": [round(x, 2) for x in os.getloadavg()]}))
    print(json.dumps({"ps_transitions": len(errs), "ps_transition_error_ms_p99": round(pct(errs, 99), 3) if errs else None,
                      "io_classes": len(ioerr), "io_energy_error_pct_max": round(max(ioerr), 3) if ioerr else None,
                      "admin_commands": len(admin_err),
                      "admin_energy_error_pct_max": round(max(admin_err), 3) if admin_err else None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
