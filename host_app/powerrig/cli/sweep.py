"""`powerrig sweep PLAN [--resume] [--results DB] [--out DIR]`: run a plan unattended.

A rich progress display on a terminal (step n of m, name, elapsed, ETA, live W and MiB/s, lost
frames), plain lines otherwise; every finished step is also a JSON line in OUT/sweep.jsonl.
"""
from __future__ import annotations

import sys
import time


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a sweep plan (power states x workloads) into the results database")
    p.add_argument("plan", help="plan file (TOML); see fixtures/plans/")
    p.add_argument("--resume", action="store_true",
                   help="continue the latest unfinished run of this plan (finished steps are kept, not redone)")
    p.add_argument("--results", default=None,
                   help="results database: SQLite file (default out/results/powerrig.sqlite) or postgresql://...")
    p.add_argument("--out", default=None, help="folder for captures, fio output and logs (default out/sweeps/NAME-TIME)")
    p.add_argument("--check", action="store_true", help="only validate the plan (no rig needed) and print its steps")
    p.set_defaults(func=run)


class PlainProgress:
    """One line per event: for logs, CI and pipes."""

    def __call__(self, d: dict) -> None:
        k = d["kind"]
        el = _hms(d.get("elapsed_s", 0))
        if k == "start":
            print(f"sweep {d['plan']!r} (plan {d['plan_hash']}, run {d['run']}): {d['steps']} steps, "
                  f"{d['done']} already done, ETA {_hms(d['eta_s'])}; output {d['out']}", flush=True)
        elif k == "step":
            print(f"[{el}] step {d['n']}/{d['m']} {d['name']} (ETA {_hms(d['eta_s'])})", flush=True)
        elif k == "step-done":
            f = d["figures"]
            print(f"[{el}] step {d['n']}/{d['m']} {d['name']} {d['status']}: " + _figs(f), flush=True)
        elif k == "note":
            print(f"[{el}] {d['text']}", flush=True)
        elif k == "done":
            print(f"sweep done in {el}: record {d['record']}", flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """A live progress bar (rich) with the current step, watts, MiB/s and lost frames."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.console = Console()
        self.p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[live]}"),
                          console=self.console, transient=False)
        self.task = None
        self.p.start()

    def __call__(self, d: dict) -> None:
        k = d["kind"]
        if k == "start":
            self.console.print(f"sweep [bold]{d['plan']}[/] (plan {d['plan_hash']}, run {d['run']}): {d['steps']} steps,"
                               f" {d['done']} already done; output {d['out']}")
            self.task = self.p.add_task("starting", total=d["steps"], completed=d["done"], live="")
        elif self.task is None:
            return
        elif k == "step":
            self.p.update(self.task, description=f"step {d['n']}/{d['m']} {d['name']}")
        elif k == "live":
            w, m = d.get("watts"), d.get("mib_s")
            self.p.update(self.task, live=f"{w or 0:6.2f} W  {m or 0:7.0f} MiB/s  lost {d.get('lost_frames', 0)}")
        elif k == "step-done":
            self.p.advance(self.task)
            self.console.print(f"  {d['name']}: {d['status']}, " + _figs(d["figures"]))
        elif k == "note":
            self.console.print(f"  {d['text']}")
        elif k == "done":
            self.console.print(f"sweep done: record {d['record']}")

    def close(self) -> None:
        self.p.stop()


def _figs(f: dict) -> str:
    parts = []
    for key, unit in (("power.idle", "W idle"), ("power.mean", "W"), ("throughput.mib_s", "MiB/s"),
                      ("efficiency.mib_s_per_w", "MiB/s/W")):
        if f.get(key) is not None:
            parts.append(f"{f[key]:.2f} {unit}" if unit.startswith("W") else f"{f[key]:.1f} {unit}")
    return ", ".join(parts) or "no figures"


def _hms(s: float) -> str:
    s = int(max(0, s or 0))
    return f"{s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}"


def run(args) -> int:
    from pathlib import Path

    from powerrig.results import DEFAULT_DB, ResultStore
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.plan import load

    plan = load(args.plan)
    if args.check:
        for s in plan.steps():
            print(f"{s.index + 1:3d}  {s.key:<40} {s.name}")
        print(f"plan {plan.name!r} ok: {len(plan.steps())} steps, about {_hms(plan.estimate_s())}, hash {plan.hash}")
        return 0
    store = ResultStore(args.results or DEFAULT_DB)
    out = Path(args.out) if args.out else Path("out/sweeps") / f"{_slug(plan.name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    show = RichProgress() if sys.stdout.isatty() else PlainProgress()
    try:
        Sweep(plan, store, out, on_progress=show, resume=args.resume).run()
    finally:
        show.close()
    return 0


def _slug(s: str) -> str:
    import re
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower()
