"""`powerrig export`: a capture as a sigrok session (.sr, for PulseView) or a CSV table; the folder
of powerrig's sigrok protocol decoders (for SIGROKDECODE_DIR)."""
from __future__ import annotations

import sys

from powerrig.core.errors import PowerrigError


class UsageError(PowerrigError):
    """The export was asked without a capture, a format or an output file."""


def register(sub) -> None:
    p = sub.add_parser("export", help="export a capture as a sigrok session (.sr) or CSV; print the decoders folder",
                       description="Export a capture (or the part --from/--to, in seconds from its start) for other "
                                   "tools. See docs/sigrok.md.")
    p.add_argument("capture", nargs="?", help="capture file (.jls) written by `powerrig record`, or `latest` (your newest)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--sigrok", action="store_true", help="write a sigrok session (.sr) for PulseView / sigrok-cli")
    fmt.add_argument("--csv", action="store_true", help="write a CSV table: time and every signal, one row per interval")
    fmt.add_argument("--decoders-dir", action="store_true",
                     help="print the folder of powerrig's sigrok decoders (put it in SIGROKDECODE_DIR) and exit")
    p.add_argument("--from", dest="from_s", type=float, metavar="T", help="start, seconds from the capture's start")
    p.add_argument("--to", dest="to_s", type=float, metavar="T", help="end, seconds from the capture's start")
    p.add_argument("--out", help="output file (.sr for --sigrok, .csv for --csv; default: beside the capture, "
                                 "its name with that suffix)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.decoders_dir:
        from powerrig.export import DECODERS_DIR
        print(DECODERS_DIR)
        return 0
    if not args.capture:
        raise UsageError("export needs a CAPTURE file: powerrig export --sigrok CAPTURE --out FILE.sr")
    if not (args.sigrok or args.csv):
        raise UsageError("say what to export: --sigrok (a .sr session) or --csv (a table)")
    from pathlib import Path

    from powerrig.cli.report import capture_path

    args.capture = str(capture_path(args.capture))
    if not args.out:                    # beside the capture, which is where its report goes too
        args.out = str(Path(args.capture).with_suffix(".sr" if args.sigrok else ".csv"))
    if args.sigrok:
        from powerrig.export.sigrok import export_sigrok
        res = export_sigrok(args.capture, args.out, args.from_s, args.to_s)
    else:
        from powerrig.export.table import export_csv
        res = export_csv(args.capture, args.out, args.from_s, args.to_s)
    print(res.lines(), file=sys.stderr)
    for note in res.shortfalls:          # an export of a cut-short capture must not pass for a whole one
        print(f"powerrig: warning: {args.capture}: {note}", file=sys.stderr)
    return 0
