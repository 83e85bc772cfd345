"""The drive side against a real NVMe stack in a QEMU guest: how fast, and how well powerrig places
what the real driver did, measured against QEMU's own trace of every NVMe command.

    .venv/bin/python benchmarks/bench_qemu_nvme.py [--phases 20] [--admin 200] [--no-block-trace]

(``--phases 0``: the admin commands alone, no sweep.) The first JSON line carries ``command_split``
(qemu_split.py): each placed admin command split at QEMU's stamps, per stage and opcode, and the widest.

Boots a QEMU rig (`powerrig sim start --drive qemu`), runs a sweep (one measured phase per step, read
and write, 4k and 128k, alternating) and a series of nvme-cli admin commands through the dut layer,
and prints last one JSON object:
  boot_s                        the guest's boot to its agent answering
  command_roundtrip_ms_p50      `true` through the agent transport (argv in, exit code out)
  trace_lag_ms_p99              how long after QEMU stamped a command a reader of its trace saw it
  phase_edge_error_ms_p99       each phase's start and end as powerrig placed them (the guest kernel's block tracepoints,
                                timing.block_trace, within fio's per-I/O logs' span, timing.io_log; --no-block-trace: fio's
                                logs alone; on the guest's clock, mapped by the agent's clock samples) against the trace's
                                first submit and last completion
  command_event_contains_pct    admin commands whose trace time lies inside powerrig's event for the call (the host interval:
                                nvme-cli's call and return)
  command_event_width_ms_p50    ... and how wide those host intervals are
  command_event_width_ms_p99    the same events placed from the guest kernel's nvme tracepoints (dut/nvmetrace.py: every
                                admin command moved to its traced submission and completion): how wide they are
  command_event_error_ms_p99    ... and how far each placed submission lies from QEMU's own stamp of that command
  command_events_placed_pct     the admin commands placed (the rest keep their host interval, with why)
  phase_energy_error_pct_max    the energy powerrig reports per phase against the power model's truth
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from hostinfo import machine  # noqa: E402
from qemu_split import pair, summary  # noqa: E402

from powerrig.capture import CaptureReader  # noqa: E402
from powerrig.core.timeline import FIO, NVME, PHASE, Timeline  # noqa: E402
from powerrig.dut import nvmetrace, runners  # noqa: E402
from powerrig.dut.commands import helper_argv  # noqa: E402
from powerrig.dut.remote import drive_host  # noqa: E402
from powerrig.results import ResultStore  # noqa: E402
from powerrig.sim import rig as simrig  # noqa: E402
from powerrig.sim.qemu.power import energy  # noqa: E402
from powerrig.sim.qemu.trace import TraceTail, read_all  # noqa: E402
from powerrig.sweep.engine import Sweep  # noqa: E402
from powerrig.sweep.plan import parse  # noqa: E402

KINDS = [("randread", "4k"), ("read", "128k"), ("randwrite", "4k"), ("write", "128k")]


def plan_text(rig_id: str, serial: str, phases: int, block_trace: bool = True) -> str:
    out = [f'name = "bench qemu"\npower_states = [0]\nidle_steps = false\n[rig]\nport = "rig:{rig_id}"\n'
           f'[drive]\nserial = "{serial}"\n[timing]\nsettle_s = 0.1\nidle_s = 0.3\nmeasure_s = 0.6\nio_log = true\n'
           f'block_trace = {str(block_trace).lower()}\n']
    for k in range(phases):
        rw, bs = KINDS[k % len(KINDS)]
        out.append(f'[[workload]]\nname = "w{k:02d}-{rw}-{bs}"\nrw = "{rw}"\nbs = "{bs}"\niodepth = 8\n')
    return "\n".join(out)


def pct(v, q):
    return float(np.percentile(np.asarray(v, dtype=float), q)) if len(v) else None


def sweep_figures(st: dict, a, tmp: Path):
    """Run the plan's sweep on the rig ``st`` and hold each measured phase against QEMU's trace: (sweep
    seconds, edge errors ms, energy errors %, lost s, signed start/end errors ms, edge sources)."""
    plan = parse(plan_text(st["id"], st["serial"], a.phases, not a.no_block_trace), str(tmp / "plan.toml"))
    store = ResultStore(tmp / "r.sqlite")
    t_sweep = time.monotonic()
    run_id = Sweep(plan, store, tmp / "out").run()
    t_sweep = time.monotonic() - t_sweep
    time.sleep(0.2)
    trace = read_all(st["trace"])
    io = [c for c in trace if c.kind in ("read", "write") and c.t_complete is not None]
    io_s = np.array([c.t_submit for c in io])
    edge_err, energy_err, lost, signed, sources = [], [], [], [], {}
    rows = {(p["step"], p["name"]): p for p in store.phases(run_id)}
    for s in store.steps(run_id):
        with CaptureReader(s["capture"]) as cap:
            events = list(cap.events)
        fio_ev = [e for e in events if e.kind == FIO and e.ok][-1]
        ph = [e for e in events if e.kind == PHASE and e.name.startswith("measure:")][-1]
        lo, hi = np.searchsorted(io_s, [fio_ev.t_start, fio_ev.t_end])
        mine = io[lo:hi]
        if not mine:
            continue
        first = min(c.t_submit for c in mine)
        last = max(c.t_complete for c in mine)
        edge_err += [abs(ph.t_start - first) * 1e3, abs(ph.t_end - last) * 1e3]
        src = next((e.meta.get("block_trace") or e.meta.get("time_source") for e in events
                    if e.kind == PHASE and e.name.startswith("fio:")), None)
        sources[src] = sources.get(src, 0) + 1
        signed.append([round((ph.t_start - first) * 1e3, 1), round((ph.t_end - last) * 1e3, 1)])
        row = rows[(s["key"], ph.name)]
        truth = energy(trace, ph.t_start, ph.t_end)
        energy_err.append(abs(row["energy_j"] - truth) / truth * 100)
        lost.append(row.get("lost_s") or 0.0)
    return t_sweep, edge_err, energy_err, lost, signed, sources


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phases", type=int, default=20, help="0: the admin commands alone (no sweep)")
    ap.add_argument("--admin", type=int, default=200)
    ap.add_argument("--no-block-trace", action="store_true", help="edges from fio's per-I/O logs alone")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-qemu-"))
    os.environ.setdefault("POWERRIG_SIM_DIR", str(tmp / "rigs"))
    st = simrig.start(simrig.QEMU_DRIVE, owned=True)
    lags = []
    tail = TraceTail(st["trace"], lambda c: lags.append(c.t_seen - c.t_submit)).start()
    try:
        remote = drive_host(st["drive_host"])
        rt = []
        for _ in range(30):
            t0 = time.perf_counter()
            remote.execute(helper_argv("true"))
            rt.append((time.perf_counter() - t0) * 1e3)

        # admin commands through the dut layer, each an event; the trace says when each really ran
        tl = Timeline()
        nvme, _ = runners({"nvme": st["nvme"], "fio": st["fio"], "drive_host": st["drive_host"]}, tl)
        ktrace = nvmetrace.KernelTrace(remote, "/dev/nvme0", "bench").start()
        t_admin0 = time.time()
        for k in range(a.admin):
            nvme.smart_log("/dev/nvme0") if k % 2 == 0 else nvme.id_ctrl("/dev/nvme0")
        t_admin1 = time.time()
        traced, trace_note = nvmetrace.load(ktrace)
        time.sleep(0.2)
        evs = [e for e in tl.events(kind=NVME) if e.name in ("smart-log", "id-ctrl")]
        cmds = [c for c in read_all(st["trace"]) if c.kind == "admin" and t_admin0 <= c.t_submit <= t_admin1 + 1
                and c.opname in ("NVME_ADM_CMD_GET_LOG_PAGE", "NVME_ADM_CMD_IDENTIFY")]
        starts = np.array([e.t_start for e in evs])
        inside = 0
        for c in cmds:
            k = int(np.searchsorted(starts, c.t_submit, side="right")) - 1
            inside += k >= 0 and evs[k].t_start <= c.t_submit <= evs[k].t_end
        widths = [(e.t_end - e.t_start) * 1e3 for e in evs]
        # the same events placed from the guest kernel's trace, against QEMU's stamp of each command
        placed = [copy.deepcopy(e) for e in evs]
        nvmetrace.place(placed, traced, None if traced else trace_note)
        placed = [e for e in placed if e.meta.get("placed") == "nvme_trace"]
        q_sub = np.array(sorted(c.t_submit for c in cmds))
        placed_err = [float(np.min(np.abs(q_sub - e.t_start))) * 1e3 for e in placed] if len(q_sub) else []
        placed_w = [(e.t_end - e.t_start) * 1e3 for e in placed]
        split = summary(pair(traced.admin() if traced else [], read_all(st["trace"])), t_admin0)
        split["clock_bound_ms"] = [round((traced.bound_s if traced else 0) * 1e3, 3),
                                   round(remote.clock().uncertainty_s * 1e3, 3)]

        # the sweep (--phases 0: the admin commands alone)
        t_sweep, edge_err, energy_err, lost, signed, sources = (sweep_figures(st, a, tmp) if a.phases
                                                                else (0.0, [], [], [], [], {}))
        clock_ms = remote.clock().uncertainty_s * 1e3
    finally:
        tail.stop()
        simrig.stop(st["id"])
    print(json.dumps({"host": machine(), "phases": len(edge_err) // 2, "admin_commands": len(cmds),
                      "sweep_s": round(t_sweep, 1), "phase_lost_s_max": round(max(lost), 3) if lost else None,
                      "phase_energy_error_pct": [round(e, 3) for e in energy_err],
                      "phase_edge_error_ms": signed, "guest_clock_uncertainty_ms": round(clock_ms, 2),
                      "load_average": [round(x, 2) for x in os.getloadavg()], "edge_sources": sources,
                      "command_trace": trace_note,
                      "placed_event_width_ms_p50": round(pct(placed_w, 50), 3) if placed_w else None,
                      "placed_event_error_ms_p50": round(pct(placed_err, 50), 3) if placed_err else None,
                      "command_split": split}))
    print(json.dumps({"boot_s": round(st["boot_s"], 2), "command_roundtrip_ms_p50": round(pct(rt, 50), 1),
                      "trace_lag_ms_p99": round(pct(lags, 99) * 1e3, 2),
                      "phase_edge_error_ms_p99": round(pct(edge_err, 99), 2) if edge_err else None,
                      "command_event_contains_pct": round(100.0 * inside / max(1, len(cmds)), 2),
                      "command_event_width_ms_p50": round(pct(widths, 50), 1),
                      "phase_energy_error_pct_max": round(max(energy_err), 4) if energy_err else None,
                      "command_events_placed_pct": round(100.0 * len(placed) / max(1, len(evs)), 2),
                      "command_event_width_ms_p99": round(pct(placed_w, 99), 3) if placed_w else None,
                      "command_event_error_ms_p99": round(pct(placed_err, 99), 3) if placed_err else None}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
