"""`powerrig report CAPTURE [--out DIR]`: HTML report with plots and the per-phase CSV."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("report", help="analyse a capture and write an HTML report with plots and a CSV")
    p.add_argument("capture", help="capture file (.jls) written by `powerrig record`")
    p.add_argument("--out", help="output folder (default: <capture>_report next to the capture)")
    p.set_defaults(func=run)


def run(args) -> int:
    from powerrig.report import write_report
    path = write_report(args.capture, args.out,
                        on_warning=lambda line: print(f"powerrig: warning: {line}", file=sys.stderr))
    print(f"report: {path}  (table: {path.with_name('phases.csv')})", file=sys.stderr)
    return 0
