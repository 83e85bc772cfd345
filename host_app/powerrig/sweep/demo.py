"""`make demo`: the D5-P5336 power-state study as a real sweep on the virtual rig.

Runs fixtures/plans/d5-p5336-power-states.toml (seq 128 KiB reads and writes at QD128 in PS0, PS1,
PS2, plus idle) through the sweep engine with the live progress display, then prints one row per
power state: read and write MiB/s, watts at the interposer and MiB/s per W beside the published
figures (drive level, as the profile derives them: docs/virtual-ssd.md) and the difference in %,
and where the results database, the run record and the captures are.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from powerrig.core import paths
from powerrig.core.errors import PowerrigError
from powerrig.results import ResultStore
from powerrig.sim.ssd import profile as profiles
from powerrig.sweep import plan as plans
from powerrig.sweep.display import for_stdout
from powerrig.sweep.engine import Sweep
from powerrig.sweep.reporting import write_run_report

PLAN = Path(__file__).resolve().parents[3] / "fixtures" / "plans" / "d5-p5336-power-states.toml"


def published_rows(profile_name: str, states) -> dict:
    """{(ps, direction): (MiB/s, W, MiB/s/W)} the published figures, host share removed."""
    prof = profiles.load(profile_name)
    out = {}
    for ps in states:
        for d in ("read", "write"):
            mib, w = prof.published_drive_point(ps, d)
            out[(ps, d)] = (mib, w, mib / w)
    return out


def measured_rows(store, run_id: int) -> dict:
    """{(ps, direction): (MiB/s, W, MiB/s/W)} and {ps: idle W} from the stored run."""
    ms = store.measurements(run_id)
    rows, idle = {}, {}
    for m in ms:
        wl, ps = m["workload"], m["power_state"]
        if wl is None:
            if m["name"] == "power.idle":
                idle[ps] = m["value"]
            continue
        d = "read" if "read" in wl else "write"
        r = rows.setdefault((ps, d), [None, None, None])
        k = {"throughput.mib_s": 0, "power.mean": 1, "efficiency.mib_s_per_w": 2}.get(m["name"])
        if k is not None:
            r[k] = m["value"]
    return {k: tuple(v) for k, v in rows.items()}, idle


def comparison(store, run_id: int, profile: str, states) -> list[dict]:
    got, idle = measured_rows(store, run_id)
    pub = published_rows(profile, states)
    out = []
    for ps in states:
        for d in ("read", "write"):
            if (ps, d) not in got:
                continue
            g, p = got[(ps, d)], pub[(ps, d)]
            out.append({"ps": ps, "direction": d, "MiB/s": g[0], "W": g[1], "MiB/s/W": g[2],
                        "pub MiB/s": p[0], "pub W": p[1], "pub MiB/s/W": p[2],
                        "diff MiB/s %": 100 * (g[0] - p[0]) / p[0], "diff W %": 100 * (g[1] - p[1]) / p[1],
                        "diff MiB/s/W %": 100 * (g[2] - p[2]) / p[2], "idle W": idle.get(ps)})
    return out


def _pct(d: float) -> str:
    """A difference in %, one decimal; a tiny negative one reads +0.0%, not -0.0%."""
    return f"{(round(d, 1) or 0.0):+6.1f}%"


def print_table(rows: list[dict], say=print) -> None:
    say("")
    say("  PS  I/O     MiB/s  (published   diff) |     W  (published   diff) | MiB/s/W (published   diff) | idle W")
    last = None
    for r in rows:
        idle = f"{r['idle W']:.2f}" if r["idle W"] is not None and r["ps"] != last else ""
        last = r["ps"]
        say(f"  PS{r['ps']} {r['direction']:<5} {r['MiB/s']:7.0f}  ({r['pub MiB/s']:7.0f} {_pct(r['diff MiB/s %'])}) |"
            f" {r['W']:5.2f}  ({r['pub W']:7.2f} {_pct(r['diff W %'])}) |"
            f" {r['MiB/s/W']:7.1f} ({r['pub MiB/s/W']:7.1f} {_pct(r['diff MiB/s/W %'])}) | {idle}")


def run(out: Path | None = None, plan_path: Path = PLAN, overrides: dict | None = None, progress=None,
        quick: bool = False, store=None) -> tuple[int, list, object]:
    """Run the study; (run id, comparison rows, store). By default into the user's results store and a
    folder of its own under their sweeps folder (core/paths.py), where every other command finds it."""
    plan = plans.load(plan_path)
    if quick:
        plan = plans.quick(plan)
    if overrides:
        plan = dataclasses.replace(plan, timing=dataclasses.replace(plan.timing, **overrides))
    if out is None:
        store = store or ResultStore()
        folder = paths.sweeps_dir() / f"demo-{paths.stamp()}"
    else:
        out.mkdir(parents=True, exist_ok=True)
        store = store or ResultStore(out / "results.sqlite")
        folder = out / f"sweep-{paths.stamp()}"
    sweep = Sweep(plan, store, folder, on_progress=progress)
    run_id = sweep.run()
    return run_id, comparison(store, run_id, plan.rig.sim_profile or "d5-p5336", plan.power_states), store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="powerrig demo", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="3 s measurement windows instead of the plan's 8 s (about 1 minute instead of 2)")
    args = ap.parse_args(argv)
    print("powerrig demo: the D5-P5336 power-state study as a sweep on the virtual rig "
          "(seq 128 KiB read and write, QD128, PS0-PS2, plus idle)" + (", quick windows" if args.quick else ""),
          flush=True)
    show = for_stdout()
    try:
        run_id, rows, store = run(progress=show, quick=args.quick)
    except PowerrigError as e:
        print(f"demo failed: {e}")
        return 2
    finally:
        show.close()
    print_table(rows)
    worst = max(abs(r[k]) for r in rows for k in ("diff MiB/s %", "diff W %", "diff MiB/s/W %"))
    print(f"\n  published: StorageReview/OCP 2024, per drive with the host's share removed (docs/virtual-ssd.md); "
          f"largest difference {worst:.1f}%")
    print(f"  run {run_id} in your results store {store.path}  (`powerrig results list`)")
    print(f"  sweep report:     {write_run_report(store, run_id)}  (each step's capture report linked from it)")
    out = Path(store.run(run_id)["out_dir"])
    print(f"  run record:       {out / f'run-{run_id}.json'}")
    print(f"  captures:         {out / 'captures'}/  (.venv/bin/powerrig report CAPTURE for any of them)")
    print(f"  step log:         {out / 'sweep.jsonl'}")
    print("  next: README.md, \"After the demo\"")
    return 0


if __name__ == "__main__":
    sys.exit(main())
