"""`powerrig stream`: stream from an interposer and print a live line and a summary."""
from __future__ import annotations

import json
import sys
import time

from powerrig.errors import LinkError


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
    p.set_defaults(func=cmd_stream)


def cmd_stream(args) -> int:
    from powerrig.interposer import Interposer

    if args.seconds <= 0:
        raise LinkError("--seconds must be positive")
    from powerrig.cli._ports import resolve_port

    rails = [r.strip() for r in args.rails.split(",")] if args.rails else None
    with Interposer.open(resolve_port(args.port)) as dev:
        with dev.stream(interval_us=args.interval_us, rails=rails) as st:
            t_last = time.monotonic()
            for _block in st.blocks(seconds=args.seconds):
                if not args.quiet and time.monotonic() - t_last >= 1.0:
                    t_last = time.monotonic()
                    s = st.summary()
                    p = s["mean_power_w"]
                    print(f"  {s['samples'] * st.interval_us / 1e6:6.1f} s  frames {s['frames']:7d}  "
                          f"lost {s['dropped_frames']:4d}  gaps {s['gaps']:3d}  crc {s['crc_errors']:4d}  "
                          f"mean {p['total']:7.3f} W", file=sys.stderr, flush=True)
        summary = st.summary()
    if args.json:
        print(json.dumps(summary))
    else:
        print_summary(summary)
    return 0


def print_summary(s: dict) -> None:
    c = s["clock"]
    print(f"port {s['port']}  interval {s['interval_us']} us  rails {', '.join(s['rails'])}")
    print(f"frames {s['frames']}  intervals {s['samples']}  dropped frames {s['dropped_frames']}  "
          f"gaps {s['gaps']}  crc errors {s['crc_errors']}")
    print("mean power: " + "  ".join(f"{k} {v:.4f} W" for k, v in s["mean_power_w"].items()))
    if c["pings"]:
        print(f"clock: drift {c['drift_ppm']:+.2f} ppm  residual {c['residual_us']:.1f} us  ({c['pings']} pings)")
