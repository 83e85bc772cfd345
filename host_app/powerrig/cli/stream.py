"""`powerrig stream`: stream from an interposer and print a live line and a summary."""
from __future__ import annotations

import json
import time

from powerrig.cli import _options as opt
from powerrig.core.errors import LinkError


def register(sub) -> None:
    p = sub.add_parser("stream", help="stream from an interposer and print a summary",
                       description="Stream intervals from an interposer; print a live line per second on "
                                   "stderr and a summary at the end (JSON with --json).")
    p.add_argument("--port", required=True,
                   help="serial port of the interposer (see `powerrig devices`), or `sim` to start a virtual one")
    p.add_argument("--seconds", type=float, default=10.0, help="device seconds to stream (default 10)")
    p.add_argument("--interval-us", type=int, default=None, help="interval length in us (default: device's, 1000)")
    p.add_argument("--rails", default=None, help="comma-separated rails (default: all non-optional)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument("--quiet", action="store_true", help="no live lines on stderr")
    opt.add_reply_timeout(p)
    p.set_defaults(func=cmd_stream)


def cmd_stream(args) -> int:
    """Check the options, stream, then print the summary, also when the stream ended in an error
    (a stall, a lost port): the partial summary says what was received before it."""
    from powerrig.interposer.client import Interposer
    from powerrig.cli._ports import resolve_port

    seconds = opt.seconds(args.seconds)
    interval = opt.interval_us(args.interval_us)
    rails = opt.rails(args.rails)
    live = opt.LiveLine(enabled=not args.quiet)
    reply_timeout = opt.reply_timeout(args.reply_timeout)
    error: LinkError | None = None
    with Interposer.open(resolve_port(args.port), timeout=reply_timeout) as dev:
        with dev.stream(interval_us=interval, rails=rails) as st:
            try:
                _stream(st, seconds, live)
            except LinkError as e:
                error = e
        summary = st.summary()
    live.end()
    if error is not None:
        summary["error"] = str(error)
    if args.json:
        print(json.dumps(summary), flush=True)
    else:
        print_summary(summary)
    if error is not None:
        raise error
    return 0


def _stream(st, seconds: float, live: opt.LiveLine) -> None:
    """Read the stream to its end, showing covered and lost device time once a second."""
    t_last = time.monotonic()
    covered = lost = 0
    for block in st.blocks(seconds=seconds):
        covered += len(block)
        lost += int((~block.valid).sum())
        if time.monotonic() - t_last >= 1.0:
            t_last = time.monotonic()
            live.show(live_text(st.summary(), covered * block.interval_s, lost * block.interval_s, seconds))


def live_text(s: dict, covered_s: float, lost_s: float, seconds: float | None) -> str:
    of = f"/{seconds:g}" if seconds else ""
    return (f"  {covered_s:6.1f}{of} s covered  lost {lost_s:6.3f} s  frames {s['frames']:7d}  "
            f"dropped {s['dropped_frames']:4d}  gaps {s['gaps']:3d}  crc {s['crc_errors']:4d}  "
            f"mean {s['mean_power_w']['total']:7.3f} W")


def print_summary(s: dict) -> None:
    c = s["clock"]
    lost_s = s["gap_intervals"] * s["interval_us"] * 1e-6
    covered_s = (s["samples"] + s["gap_intervals"]) * s["interval_us"] * 1e-6
    print(f"port {s['port']}  interval {s['interval_us']} us  rails {', '.join(s['rails'])}")
    print(f"covered {covered_s:.3f} s  lost {lost_s:.3f} s  frames {s['frames']}  intervals {s['samples']}  "
          f"dropped frames {s['dropped_frames']}  gaps {s['gaps']}  crc errors {s['crc_errors']}")
    print("mean power: " + "  ".join(f"{k} {v:.4f} W" for k, v in s["mean_power_w"].items()))
    if c["pings"]:
        print(f"clock: drift {c['drift_ppm']:+.2f} ppm  residual {c['residual_us']:.1f} us  ({c['pings']} pings)")
    if s.get("error"):
        print(f"ended early: {s['error']}")
