"""`powerrig report CAPTURE|RUN`: the HTML report of a capture (plots, per-phase CSV) or of a sweep run.

A sweep run is named by its id in the results database (`powerrig results list`); anything else is a
capture file. The sweep report links the per-step capture reports, which it writes beside itself."""
from __future__ import annotations

import sys
from pathlib import Path

from powerrig.core.errors import PowerrigError


def register(sub) -> None:
    p = sub.add_parser("report", help="HTML report of a capture, or of a sweep run (by its id)")
    p.add_argument("target", metavar="CAPTURE|RUN",
                   help="capture file (.jls) written by `powerrig record`, `latest` (your newest capture), or a sweep run "
                        "id (`powerrig results list`)")
    p.add_argument("--out", help="output folder (default: <capture>_report next to the capture; for a run, "
                                 "the run's output folder /report)")
    p.add_argument("--db", default=None, help="results database of the run (default: your results store, ~/.local/share/powerrig/results.sqlite)")
    p.add_argument("--from", dest="from_", metavar="T|NAME", default=None,
                   help="for a capture: report from here, seconds from its start or the name of a phase, command "
                        "or marker (its start)")
    p.add_argument("--to", metavar="T|NAME", default=None,
                   help="for a capture: report up to here, seconds from its start or a name (its end)")
    p.add_argument("--phase", metavar="NAME", default=None,
                   help="for a capture: report one phase or marker alone (the same as --from NAME --to NAME)")
    p.add_argument("--no-capture-reports", action="store_true",
                   help="for a run: do not write each step's capture report (the report shows the command instead)")
    p.set_defaults(func=run)


def is_run_id(target: str) -> bool:
    """A run id is a positive integer that is not also the name of a file here."""
    return target.isdigit() and not Path(target).exists()


def sweep_report(db: str | None, run_id: int, out: str | None, capture_reports: bool = True) -> Path:
    from powerrig.results.store import open_existing
    from powerrig.capture_report import write_report
    from powerrig.results.sweep_report import write_sweep_report

    def one(capture, out_dir):
        return write_report(capture, out_dir,
                            on_warning=lambda line: print(f"powerrig: warning: {capture}: {line}", file=sys.stderr))
    return write_sweep_report(open_existing(db), run_id, out, one if capture_reports else None)


def capture_path(target: str) -> Path:
    """A capture named on the command line: a file, or `latest`, the newest in your captures folder."""
    from powerrig.core import paths

    if target == paths.LATEST and not Path(target).exists():
        found = paths.latest_capture()
        if found is None:
            raise PowerrigError(f"`latest`: no capture in {paths.captures_dir()} yet (`powerrig record` makes one)")
        print(f"powerrig: latest capture: {found}", file=sys.stderr)
        return found
    return Path(target)


def run(args) -> int:
    if is_run_id(args.target):
        if args.phase or args.from_ or args.to:
            raise PowerrigError("--from, --to and --phase are for a capture; a run's steps each have a capture "
                                "(`powerrig results steps RUN`, then `powerrig report CAPTURE --phase NAME`)")
        path = sweep_report(args.db, int(args.target), args.out, not args.no_capture_reports)
        print(path)
        return 0
    window = (args.phase, args.phase) if args.phase else (args.from_, args.to)
    if args.phase and (args.from_ or args.to):
        raise PowerrigError("give --phase NAME, or --from and --to, not both")
    target = capture_path(args.target)
    if not target.exists():
        raise PowerrigError(f"{args.target}: no such capture file, and not a run id (a number from "
                            "`powerrig results list`) nor `latest`")
    from powerrig.capture_report import write_report
    path = write_report(target, args.out, window=window,
                        on_warning=lambda line: print(f"powerrig: warning: {line}", file=sys.stderr))
    print(f"report: {path}  (table: {path.with_name('phases.csv')})", file=sys.stderr)
    return 0
