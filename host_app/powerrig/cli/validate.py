"""`powerrig validate --port PORT --reference VISA_RESOURCE`: interposer vs reference on the running
drive, per rail, pass/fail against the error budget."""
from __future__ import annotations

import json
import sys

from powerrig.cli.calibrate import add_reference_args, parse_channels, sim_rig
from powerrig.core.errors import InstrumentError


def register(sub) -> None:
    p = sub.add_parser("validate", help="compare the interposer with a SCPI reference on the running drive")
    add_reference_args(p)
    p.add_argument("--windows", type=int, default=5, help="number of comparison windows (default 5)")
    p.add_argument("--seconds", type=float, default=1.0, help="length of each window (default 1 s)")
    p.add_argument("--limit", type=float, default=0.25, help="allowed difference in %% of reading (default 0.25)")
    p.add_argument("--floor-codes", type=float, default=4.0, help="plus this many ADC codes (default 4)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from powerrig.calibration.procedure import validate
    from powerrig.instruments import open_analyzer
    from powerrig.interposer.client import Interposer

    channels = parse_channels(args.channels)
    if args.windows < 1 or not 0.05 <= args.seconds <= 60:
        raise InstrumentError("--windows must be >= 1 and --seconds within 0.05..60")
    port, reference = sim_rig(args.port, args.reference)
    with open_analyzer(reference, args.visa_backend or None, "validate (V and I of every rail)") as ref:
        with Interposer.open(port) as dev:
            out = validate(dev, ref, channels, windows=args.windows, seconds=args.seconds, limit_pct=args.limit,
                           floor_codes=args.floor_codes,
                           progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(out))
    else:
        for r, x in out["rails"].items():
            print(f"{r:<4} ref {x['v_ref']:8.4f} V {x['i_ref']:8.4f} A {x['p_ref']:8.4f} W | interposer - ref "
                  f"{x['dv'] * 1e3:+8.3f} mV (limit {x['dv_limit'] * 1e3:.3f}) {x['di'] * 1e3:+8.3f} mA "
                  f"(limit {x['di_limit'] * 1e3:.3f}) {x['dp'] * 1e3:+8.2f} mW  {'pass' if x['pass'] else 'FAIL'}")
        print("validate: " + ("pass" if out["pass"] else "FAIL"))
    return 0 if out["pass"] else 1
