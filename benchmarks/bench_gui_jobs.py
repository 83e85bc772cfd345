"""The GUI core's worker jobs: what each costs the process, in memory that stays.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_gui_jobs.py [--jobs 20000] [--rounds 5]

Why: the live view runs one job per frame (33 a second) and the drive panel one per poll, for as
long as the window is open, so anything a job leaves behind grows an overnight session. Runs
``Core.run`` with a trivial function ``--rounds`` times ``--jobs`` times, with and without a
failure handler of its own (without one, failures go to the window's error signal), and prints the
resident memory after malloc_trim after each round, and the growth per job. The results list the
benchmark keeps is 8 bytes a job of that. The jobs never fail: the second variant measures having a
failure handler connected, not the failure path. Figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import gc
import sys

from bench_gui import rss_after_trim_mb      # sets QT_QPA_PLATFORM=offscreen unless given


def run_rounds(app, core, jobs: int, rounds: int, own_failure_handler: bool) -> None:
    got: list = []
    kw = {"failed": got.append} if own_failure_handler else {}
    base = None
    for r in range(rounds + 1):
        for k in range(jobs):
            core.run(int, done=got.append, **kw)
            if k % 50 == 49:                     # as the app: results delivered while jobs go on
                core.pool.waitForDone()
                app.processEvents()
        core.pool.waitForDone()
        app.processEvents()
        gc.collect()
        now = rss_after_trim_mb()
        if base is None:
            base = now                           # round 0 warms up (pool threads, first allocations)
            continue
        print(f"  after {r * jobs:7d} jobs: RSS {now:6.1f} MB after malloc_trim, "
              f"+{(now - base) * 2**20 / (r * jobs):6.1f} bytes a job ({core.pending} pending)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    from PySide6.QtWidgets import QApplication

    from powerrig.gui.core import Core
    app = QApplication(sys.argv[:1])
    core = Core()
    for own in (False, True):
        print(f"Core.run, {'its own failure handler' if own else 'failures to the window (the default)'}:")
        run_rounds(app, core, a.jobs, a.rounds, own)
    core.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
