"""`powerrig results`: list runs and their steps, compare two runs, export a run.

    powerrig results [--db FILE|URL] list
    powerrig results steps RUN
    powerrig results compare RUN_A RUN_B
    powerrig results export RUN FILE.csv|.json|.parquet [--what measurements|steps|phases]
    powerrig results report RUN [--out DIR]     (the same as `powerrig report RUN`)
"""
from __future__ import annotations

import time


def register(sub) -> None:
    p = sub.add_parser("results", help="list, compare and export sweep results")
    p.add_argument("--db", default=None, help="results database: a SQLite file "
                                              "(default: your results store, ~/.local/share/powerrig/results.sqlite, XDG_DATA_HOME) "
                                              "or a SQLAlchemy URL such as postgresql://user@host/db")
    rs = p.add_subparsers(dest="results_cmd", metavar="ACTION", required=True)
    rs.add_parser("list", help="runs in the database")
    s = rs.add_parser("steps", help="the steps of a run with W, MiB/s and MiB/s/W")
    s.add_argument("run", type=int)
    c = rs.add_parser("compare", help="two runs side by side (the steps they share), as a table and a chart",
                      description="Two runs side by side over the steps they share (same power state and workload): "
                                  "idle W, W, MiB/s and MiB/s per W of each, and the differences (B - A). Two runs "
                                  "of one drive show a change (firmware, setting, temperature); runs of two drives "
                                  "compare the drives.")
    c.add_argument("run_a", type=int, metavar="RUN_A", help="the first run's id (the baseline; `powerrig results list`)")
    c.add_argument("run_b", type=int, metavar="RUN_B", help="the second run's id, compared against RUN_A")
    c.add_argument("--png", nargs="?", const="", default=None, metavar="FILE",
                   help="also draw the comparison as a PNG chart (throughput against power per workload with the "
                        "two runs' curves overlaid, idle and active W, MiB/s per W); default file "
                        "~/.local/share/powerrig/charts/compare-A-B.png")
    e = rs.add_parser("export", help="write a run as CSV, JSON or Parquet")
    e.add_argument("run", type=int)
    e.add_argument("file")
    e.add_argument("--what", default="measurements", choices=("measurements", "steps", "phases"))
    r = rs.add_parser("report", help="the sweep report of a run (HTML + PNG)")
    r.add_argument("run", type=int)
    r.add_argument("--out", default=None, help="folder (default: the run's output folder /report)")
    r.add_argument("--no-capture-reports", action="store_true", help="do not write each step's capture report")
    p.set_defaults(func=run)


def _table(rows: list[dict], cols: list[str]) -> None:
    from powerrig.core.shown import printable
    from powerrig.results.tables import fmt

    cells = [[printable(fmt(r.get(c))) for c in cols] for r in rows]      # stored names: never a terminal's codes
    widths = [max([len(c)] + [len(row[k]) for row in cells]) for k, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def run(args) -> int:
    from powerrig.cli.report import sweep_report
    from powerrig.results.store import open_existing
    from powerrig.results.tables import compare, export, step_summary

    store = open_existing(args.db)
    if args.results_cmd == "list":
        rows = store.runs()
        for r in rows:
            r["started"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r["started_utc"]))
        _table(rows, ["id", "plan", "plan_hash", "status", "steps", "started", "station", "dut_serial", "dut_firmware"])
    elif args.results_cmd == "steps":
        store.run(args.run)
        _table(step_summary(store, args.run), ["step", "status", "W", "MiB/s", "MiB/s/W", "IOPS/W"])
    elif args.results_cmd == "compare":
        store.run(args.run_a)
        store.run(args.run_b)
        a, b = args.run_a, args.run_b
        rows = compare(store, a, b)
        print(f"run {a} (A) against run {b} (B): {len(rows)} shared steps; W is the workload's mean power "
              "(idle steps: idle), differences are B - A")
        _table([{"step": r["step"], f"idle W A": r["idle W_a"], f"idle W B": r["idle W_b"], "W A": r["W_a"],
                 "W B": r["W_b"], "dW": r["dW"], "MiB/s A": r["MiB/s_a"], "MiB/s B": r["MiB/s_b"],
                 "MiB/s/W A": r["MiB/s/W_a"], "MiB/s/W B": r["MiB/s/W_b"], "dMiB/s/W %": r["dMiB/s/W_%"]}
                for r in rows],
               ["step", "idle W A", "idle W B", "W A", "W B", "dW", "MiB/s A", "MiB/s B", "MiB/s/W A", "MiB/s/W B",
                "dMiB/s/W %"])
        if args.png is not None:
            print(f"chart: {_compare_png(store, a, b, args.png)}")
    elif args.results_cmd == "export":
        store.run(args.run)
        print(export(store, args.run, args.file, args.what))
    elif args.results_cmd == "report":          # the same as `powerrig report RUN`
        print(sweep_report(args.db, args.run, args.out, not args.no_capture_reports))
    return 0


def _compare_png(store, run_a: int, run_b: int, name: str):
    """Write the comparison chart; the path written."""
    from pathlib import Path

    from powerrig.core import paths
    from powerrig.results import ResultsError
    from powerrig.results.compare_chart import draw_compare

    if name:
        path = Path(name)
        if path.suffix.lower() != ".png":
            raise ResultsError(f"--png {name}: the chart is a PNG; give a file name ending in .png")
        if not path.parent.is_dir():
            raise ResultsError(f"--png {name}: folder {path.parent} does not exist")
    else:
        paths.charts_dir().mkdir(parents=True, exist_ok=True)
        path = paths.charts_dir() / f"compare-{run_a}-{run_b}.png"
    if not draw_compare(store, run_a, run_b, path, "png"):
        raise ResultsError(f"runs {run_a} and {run_b} share no step with a measured power: nothing to draw")
    return path
