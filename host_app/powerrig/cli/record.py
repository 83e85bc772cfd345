"""`powerrig record --port PORT --out FILE [--seconds N] [--interval-us US]`: stream to a capture."""
from __future__ import annotations

import sys
import time

from powerrig.errors import CaptureError


def register(sub) -> None:
    p = sub.add_parser("record", help="record the interposer's stream to a capture file (.jls)")
    p.add_argument("--port", required=True,
                   help="serial port of the interposer (or a simulator's pty), or `sim` to start a virtual one")
    p.add_argument("--out", required=True, help="capture file to write (.jls)")
    p.add_argument("--seconds", type=float, default=None, help="stop after this much device time (default: until Ctrl-C)")
    p.add_argument("--interval-us", type=int, default=None, help="interval length in us (default: the device's)")
    p.add_argument("--rails", default=None, help="comma-separated rails (default: all the device has)")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from powerrig.capture import CaptureWriter
    from powerrig.interposer import Interposer

    out = Path(args.out)
    if args.seconds is not None and args.seconds <= 0:
        raise CaptureError("--seconds must be positive")
    if out.suffix.lower() != ".jls":
        raise CaptureError(f"--out {out} must end in .jls")
    rails = args.rails.split(",") if args.rails else None
    t0 = time.monotonic()
    last = 0.0
    rows = 0
    interrupted = False
    from powerrig.cli._ports import resolve_port

    with Interposer.open(resolve_port(args.port)) as dev:
        desc = dev.describe()
        meta = {"device": desc, "calibration": desc.get("calibration"), "port": args.port,
                "command": ["powerrig", "record", *sys.argv[2:]]}
        with dev.stream(interval_us=args.interval_us, rails=rails) as st:
            cap = CaptureWriter(out, metadata=meta, clock=st.clock)
            try:
                for block in st.blocks(seconds=args.seconds):
                    cap.write(block)
                    rows += len(block)
                    now = time.monotonic()
                    if now - last >= 1.0:
                        last = now
                        done = f"/{args.seconds:g}" if args.seconds else ""
                        print(f"\rrecording {rows * block.interval_s:8.1f}{done} s  gaps {cap.gaps}  "
                              f"lost {cap.gap_intervals * block.interval_s:.3f} s", end="", file=sys.stderr, flush=True)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                summary = st.summary()
                cap.update_metadata(stream=summary)
                cap.close(stats=summary)
    print(file=sys.stderr)
    lost = summary.get("gap_intervals", 0)
    mw = summary.get("mean_power_w", {}).get("total", float("nan"))
    print(f"{out}: {rows} intervals ({time.monotonic() - t0:.1f} s wall), mean {mw:.3f} W, "
          f"gaps {summary.get('gaps', 0)} ({lost} intervals lost), crc errors {summary.get('crc_errors', 0)}"
          + (" (stopped by Ctrl-C)" if interrupted else ""))
    return 0
