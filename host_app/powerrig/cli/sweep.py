"""`powerrig sweep PLAN [--resume] [--results DB] [--out DIR]`: run a plan unattended.

A rich progress display on a terminal (step n of m, name, elapsed, ETA, live W and MiB/s, lost
frames), plain lines otherwise; every finished step is also a JSON line in OUT/sweep.jsonl.
"""
from __future__ import annotations

import sys
import time

from powerrig.cli._options import Terminated, sigterm_interrupts


def register(sub) -> None:
    p = sub.add_parser("sweep", help="run a sweep plan (power states x workloads) into the results database")
    p.add_argument("plan", help="plan file (TOML); see fixtures/plans/")
    p.add_argument("--resume", action="store_true",
                   help="continue the latest unfinished run of this plan (finished steps are kept, not redone)")
    p.add_argument("--results", default=None,
                   help="results database: SQLite file or postgresql://... "
                        "(default: your results store, ~/.local/share/powerrig/results.sqlite)")
    p.add_argument("--out", default=None, help="folder for captures, fio output and logs (default ~/.local/share/powerrig/sweeps/NAME-TIME)")
    p.add_argument("--quick", action="store_true",
                   help="short windows (settle 0.5 s, idle 1.5 s, measure 3 s) to try a plan in about a third of its "
                        "time; a quick run has its own plan hash (give --quick again with --resume)")
    p.add_argument("--check", action="store_true", help="only validate the plan (no rig needed) and print its steps")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from powerrig.core import paths
    from powerrig.results import ResultStore
    from powerrig.sweep.display import hms, for_stdout
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.ownership import check_out_name
    from powerrig.sweep.plan import load, quick

    plan = load(args.plan)
    if args.quick:
        plan = quick(plan)
    if args.check:
        from powerrig.sweep.plan_rig import check_running
        note = check_running(plan)          # a running rig:ID judged as bring-up will; else why not now
        for s in plan.steps():
            print(f"{s.index + 1:3d}  {s.key:<40} {s.name}")
        est, most = plan.estimate_s(), plan.longest_s()
        upto = (f" (up to {hms(most)} if its steady-state workloads run all {plan.steady.max_rounds} rounds, not "
                f"{plan.steady.rounds})") if most > est else ""
        print(f"plan {plan.name!r} ok: {len(plan.steps())} steps, about {hms(est)}{upto}, hash {plan.hash}")
        if note:
            print(note)
        return 0
    out = Path(args.out) if args.out else paths.sweeps_dir() / f"{_slug(plan.name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    if args.out:
        check_out_name(out)            # before the store or the folder is made: nothing is left behind
    store = ResultStore(args.results)      # None: the user's store (core/paths.py)
    show = for_stdout()
    sweep = Sweep(plan, store, out, on_progress=show, resume=args.resume)
    try:
        with sigterm_interrupts():          # SIGTERM ends the run "interrupted", as Ctrl-C does
            sweep.run()
    except KeyboardInterrupt as e:
        show.close()
        if sweep.run_id is None:
            raise
        why = f": {e}" if str(e) else " by Ctrl-C"      # an exception is always true: `e or ...` said "()"
        print(f"powerrig: run {sweep.run_id} interrupted{why}; `{resume_command(args)}` continues it", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    finally:
        show.close()
    from powerrig.sweep.reporting import write_run_report      # the report, with each step's, made here
    path = write_run_report(store, sweep.run_id,
                            on_warning=lambda line: print(f"powerrig: warning: {line}", file=sys.stderr))
    print(f"report: {path}", flush=True)
    return 0


def resume_command(args) -> str:
    """The exact command that resumes this run: the plan and the store given (without --results another
    store is opened and says "nothing to resume"), quoted for a shell."""
    import shlex

    words = ["powerrig", "sweep", args.plan, "--resume"] + (["--quick"] if getattr(args, "quick", False) else [])
    for option, value in (("--results", args.results), ("--out", args.out)):
        if value:
            words += [option, value]
    return " ".join(shlex.quote(str(w)) for w in words)


def _slug(s: str) -> str:
    import re
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower()
