"""`powerrig record --port PORT --out FILE [--seconds N] [--interval-us US]`: stream to a capture.

Records through the one recorder (powerrig.capture.recorder); Ctrl-C and SIGTERM end it cleanly,
with the capture's close record written and the reason it ended in its metadata.
"""
from __future__ import annotations

import sys
import time

from powerrig.cli import _options as opt
from powerrig.core.errors import CaptureError, LinkError


def register(sub) -> None:
    p = sub.add_parser("record", help="record the interposer's stream to a capture file (.jls)")
    p.add_argument("--port", default=None,
                   help="serial port of the interposer (or a simulator's pty), or `sim` to start a virtual one")
    p.add_argument("--source", default="interposer", metavar="SPEC",
                   help="what measures the rails (default: the interposer on --port): n6705c:RESOURCE[,12V=1,3V3=2] "
                        "or joulescope:12V=SERIAL,3V3=SERIAL (docs/lab-instruments.md)")
    p.add_argument("--visa-backend", default="@py", help="pyvisa backend for an n6705c source (default @py, pyvisa-py; "
                                                           "'' for the system VISA)")
    p.add_argument("--out", required=True, help="capture file to write (.jls)")
    p.add_argument("--seconds", type=float, default=None, help="stop after this much device time (default: until Ctrl-C)")
    p.add_argument("--interval-us", type=int, default=None, help="interval length in us (default: the device's)")
    p.add_argument("--rails", default=None, help="comma-separated rails (default: all the device has)")
    opt.add_reply_timeout(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from powerrig.capture.recorder import Recorder
    from powerrig.interposer.client import Interposer
    from powerrig.cli._ports import resolve_port

    out = _check_out(args.out)
    seconds = opt.seconds(args.seconds, hint=" (leave it out to record until Ctrl-C)")
    interval = opt.interval_us(args.interval_us)
    rails = opt.rails(args.rails)
    reply_timeout = opt.reply_timeout(args.reply_timeout)
    live = opt.LiveLine()
    t0 = time.monotonic()
    if args.source != "interposer":
        from powerrig.sources import open_source
        opened = open_source(args.source, backend=args.visa_backend or None)
    elif not args.port:
        raise CaptureError("record needs --port (the interposer's serial port, or `sim`) or --source SPEC")
    else:
        opened = Interposer.open(resolve_port(args.port), timeout=reply_timeout)
    with opened as dev:
        meta = {"device": dev.description, "calibration": dev.description.get("calibration"), "port": args.port,
                "command": ["powerrig", "record", *sys.argv[2:]]}
        rec = Recorder(dev, out, interval_us=interval, rails=rails, seconds=seconds, metadata=meta,
                       on_progress=lambda p: live.show(_live_text(p)))
        with opt.stop_on_signals(rec.stop) as caught:
            res = rec.run()
    live.end()
    print(_result_text(res, time.monotonic() - t0))
    if res.end_reason == "interrupted" and seconds is not None and res.covered_s < seconds:
        sig = caught.name or "an interrupt"
        print(f"powerrig: error: recording stopped by {sig} after {res.covered_s:.3f} s of the {seconds:g} s asked; "
              f"{out} holds the {res.covered_s:.3f} s covered", file=sys.stderr)
        return 143 if sig == "SIGTERM" else 130
    if res.end_reason == "link-lost":
        raise LinkError(f"{res.error} (the capture {out} is closed and holds what came before)")
    if res.end_reason == "error":
        said = "" if str(out) in (res.error or "") else f" (the capture {out} is closed and holds what came before)"
        raise CaptureError(f"{res.error}{said}")
    return 0


def _check_out(path: str):
    """Refuse an output the writer cannot create before opening the device."""
    from pathlib import Path

    out = Path(path)
    if out.suffix.lower() != ".jls":
        raise CaptureError(f"--out {out} must end in .jls")
    if out.is_dir():
        raise CaptureError(f"--out {out} is a folder; give a file name ending in .jls")
    if not out.parent.exists():
        raise CaptureError(f"folder {out.parent} does not exist; create it or choose another --out")
    return out


def _live_text(p) -> str:
    of = f"/{p.requested_s:g}" if p.requested_s else ""
    return (f"recording {p.covered_s:8.1f}{of} s covered  lost {p.lost_s:.3f} s  gaps {p.gaps}  "
            f"now {p.watts.get('total', float('nan')):7.3f} W")


def _result_text(res, wall_s: float) -> str:
    s = res.summary
    mw = s.get("mean_power_w", {}).get("total", float("nan"))
    ended = {"duration": "", "stopped": " (stopped)", "interrupted": " (stopped by a signal)",
             "link-lost": " (link lost)", "error": " (failed)"}[res.end_reason]
    return (f"{res.path}: {res.covered_s:.3f} s covered ({wall_s:.1f} s wall), {res.lost_s:.3f} s lost in "
            f"{s.get('gaps', 0)} gaps, mean {mw:.3f} W, crc errors {s.get('crc_errors', 0)}{ended}")
