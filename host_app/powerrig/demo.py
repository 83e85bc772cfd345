"""`make demo`: the main job on the simulated rig, end to end, with nothing but this checkout.

1. Brings up a virtual rig (`powerrig sim start`): a virtual Solidigm-D5-P5336-like SSD, the endpoint
   the impersonated nvme-cli and fio talk to, and a virtual interposer on a pseudo-terminal running
   the real firmware logic, measuring that SSD's rails.
2. Finds the interposer the way a technician would, reads the drive's power states with nvme-cli.
3. Records a capture while it idles, then runs 128 KiB sequential writes at QD128 in PS0, PS1 and
   PS2, with every command and phase on the sample clock.
4. Analyses the capture (per-phase power and energy, OCP and NVMe checks, efficiency) and writes the
   HTML report; prints the figures beside the profile's published ones.

Everything goes to out/demo/ so the run can be checked and reproduced from what it wrote down.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from powerrig.analysis import analyse
from powerrig.capture import CaptureReader
from powerrig.capture.recorder import Progress, Recorder
from powerrig.devices import probe
from powerrig.dut.fio import Fio, FioJob, FioPlan
from powerrig.dut.nvme import NvmeCli
from powerrig.errors import PowerrigError
from powerrig.events import NOTE, Timeline
from powerrig.interposer import Interposer
from powerrig.report import write_report
from powerrig.sim import rig
from powerrig.sim.model import expected_point
from powerrig.sim.profile import load as load_profile

OUT = Path("out/demo")
PROFILE = "d5-p5336"
POWER_STATES = (0, 1, 2)


def say(msg: str = "") -> None:
    print(msg, flush=True)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("POWERRIG_SIM_DIR", str((OUT / "sim").resolve()))
    say("powerrig demo: a virtual rig, a capture across power states, the analysis and the report")
    state = rig.start(PROFILE)
    try:
        return _run(state, OUT)
    except PowerrigError as e:
        say(f"demo failed: {e}")
        return 2
    finally:
        rig.stop(state["id"])


def _run(state: dict, out: Path) -> int:
    """The demo's steps, in the order a technician would take them."""
    tl = Timeline()
    nvme = NvmeCli(state["nvme"], tl)
    fio = Fio(state["fio"], tl)
    _find_rig(state)
    ident = _read_drive(nvme, state["controller"])
    capture = out / "capture.jls"
    phases, summary = _record_workload(state, nvme, fio, tl, ident, capture, out)
    tl.to_jsonl(out / "events.jsonl")
    _analyse(capture, phases)
    report = write_report(capture, out / "report")
    say(f"  5. report: {report}")
    say(f"     also written: {capture}, {out / 'events.jsonl'}, {out / 'fio'}/ (fio JSON and logs)")
    lost = summary["dropped_frames"] + summary["gaps"]
    say("demo ok: no data lost" if lost == 0 else f"demo finished with {lost} losses, all recorded above")
    return 0


def _find_rig(state: dict) -> None:
    found = probe(state["port"])
    say(f"  1. virtual rig {state['id']}: interposer on {state['port']} ({found['board']}, serial {found['serial']}), "
        f"drive {state['controller']}")


def _read_drive(nvme: NvmeCli, controller: str):
    ident = nvme.id_ctrl(controller)
    say(f"  2. drive: {ident.mn.strip()} (sn {ident.sn.strip()}, fw {ident.fr.strip()}), power states:")
    for k, ps in enumerate(ident.power_states):
        say(f"       PS{k}: max {ps.max_power_w:5.2f} W, entry {ps.entry_latency_us} us, exit {ps.exit_latency_us} us"
            + (" (non-operational)" if ps.non_operational else ""))
    return ident


def _live(p: Progress) -> None:
    say(f"      [{p.intervals / 1000:5.1f} s recorded | now {p.watts['total']:6.2f} W | "
        f"lost frames {p.dropped_frames} gaps {p.gaps}]")


def _record_workload(state: dict, nvme: NvmeCli, fio: Fio, tl: Timeline, ident, capture: Path, out: Path):
    """Record while the drive idles, then writes in each power state; returns (phases, stream summary)."""
    phases = []
    with Interposer.open(state["port"]) as dev:
        meta = {"device": dev.description,
                "drive": {"id_ctrl": asdict(ident), "mn": ident.mn.strip(), "sn": ident.sn.strip(), "power_state": 0},
                "plan": {"name": "demo: seq write 128k QD128 per power state", "rig": state["id"]}}
        rec = Recorder(dev, capture, interval_us=1000, metadata=meta, timeline=tl, on_progress=_live,
                       progress_every_s=2.0)
        rec.start()
        say(f"  3. recording {capture} (1 ms intervals) while the drive works:")
        try:
            _idle(tl, 3.0)
            for ps in POWER_STATES:
                phases.append((ps, _write_phase(nvme, fio, state, ps, out)))
            nvme.set_power_state(state["controller"], 0)
            time.sleep(2.0)
        finally:
            rec.stop()
            res = rec.wait(timeout=30)
    if res.error:
        raise PowerrigError(f"the recording ended early ({res.end_reason}): {res.error}")
    s = res.summary
    say(f"     stream: {s['samples']} intervals, lost frames {s['dropped_frames']}, gaps {s['gaps']}, "
        f"CRC errors {s['crc_errors']}; clock drift {s['clock']['drift_ppm']:+.1f} ppm, residual {s['clock']['residual_us']:.0f} us")
    return phases, s


def _idle(tl: Timeline, seconds: float) -> None:
    idle = tl.begin(NOTE, "idle", meta={"idle": True})
    time.sleep(seconds)
    tl.end(idle)


def _write_phase(nvme: NvmeCli, fio: Fio, state: dict, ps: int, out: Path):
    """128 KiB sequential writes at QD128 for 4 s in power state ``ps``; returns fio's job result."""
    nvme.set_power_state(state["controller"], ps)
    time.sleep(0.5)
    job = FioJob(f"PS{ps}-seqwrite-128k", rw="write", bs="128k", iodepth=128, runtime=4, time_based=True,
                 filename=state["namespaces"][0])
    jr = fio.run(FioPlan([job]), out / "fio" / f"ps{ps}").jobs[0]
    say(f"     PS{ps}: fio wrote {jr.directions['write'].bw_bytes / 2**20:7.1f} MiB/s for {jr.job_runtime_ms / 1000:.1f} s "
        f"(times from {jr.time_source})")
    return jr


def _analyse(capture: Path, phases: list) -> None:
    say("  4. analysis: measured at the interposer, beside what the drive profile predicts (docs/virtual-ssd.md):")
    prof = load_profile(PROFILE)
    with CaptureReader(capture) as cap:
        an = analyse(cap, cap.events, cap.metadata)
    rows = {r.name: r for r in an.phases if r.name.startswith("fio:")}
    checks = {(c.check, c.phase): c for c in an.checks}
    for line in phase_table(phases, rows, checks, prof):
        say(line)
    ia = an.idle_active()
    if ia:
        say("       idle vs active: " + ", ".join(f"{k} {v:.2f} W" if isinstance(v, (int, float)) else f"{k} {v}"
                                           for k, v in ia.items()))


def _verdict(c) -> str:
    if c is None or c.value is None or c.limit is None:
        return "    n/a          "
    ok = "ok" if c.value <= c.limit else "OVER"
    return f"{c.value:6.2f} / {c.limit:5.1f} {ok:<4}"


def phase_table(phases: list, rows: dict, checks: dict, prof) -> list[str]:
    """The per-phase table: measured power, energy, OCP checks, efficiency, and the model's figures."""
    out = ["       phase                   mean W  energy J | PCM-1 1 s max / MP | PCM-2 100 us peak / PCM-3 limit |"
           "  MiB/s  MiB/s/W | model: W  MiB/s"]
    short = False
    for ps, jr in phases:
        r = rows.get(f"fio:{jr.name}")
        if r is None:
            continue
        want = expected_point(prof, ps, rw="write", bs=131072, iodepth=128)
        mib = jr.directions["write"].bw_bytes / 2**20
        c1, c3 = checks.get(("OCP PCM-1", r.name)), checks.get(("OCP PCM-3", r.name))
        short |= any(c is not None and not c.requirement_met for c in (c1, c3))
        out.append(f"       {r.name:<23} {r.mean_w:6.2f}  {r.energy_j:7.1f} | {_verdict(c1):>18} | {_verdict(c3):>31} |"
                   f" {mib:6.0f}  {mib / r.mean_w:7.1f} | {want['watts']:7.2f} {want['MiBps']:6.0f}")
    if short:
        out.append("       (verdicts are marked partial in the report: OCP asks for >= 15 min captures; these phases run 4 s)")
    return out


if __name__ == "__main__":
    sys.exit(main())
