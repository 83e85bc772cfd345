"""`powerrig calibrate --port PORT --reference VISA_RESOURCE`: fit, write and certify the interposer's
gain and offset per channel against a reference meter."""
from __future__ import annotations

import sys

from powerrig.core.errors import InstrumentError


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="calibrate the interposer against a SCPI reference (N6705C class)",
                       description="Steps every rail over its range with the reference's outputs, measures both "
                                   "on one clock, fits gain and offset per channel, writes them to the interposer "
                                   "(persisted) and a certificate; verifies on fresh points afterwards.")
    add_reference_args(p)
    p.add_argument("--out", default=None, help="folder for the certificate (default: a new folder under "
                                                "~/.local/share/powerrig/calibration)")
    p.add_argument("--seconds", type=float, default=0.3, help="measurement window per point (default 0.3 s)")
    p.add_argument("--max-residual", type=float, default=0.05,
                   help="refuse a fit whose residual exceeds this %% of full scale (default 0.05)")
    p.add_argument("--verify-limit", type=float, default=0.1,
                   help="after writing, every channel must agree with the reference within this %% (default 0.1)")
    p.add_argument("--reference-due", default=None, help="the reference's own calibration due date, for the certificate")
    p.add_argument("--dry-run", action="store_true", help="fit and report, write nothing to the interposer")
    p.add_argument("--temperature-pass", action="store_true",
                   help="second pass of the two-temperature calibration: with the board >= 10 K from the first "
                        "pass (its temperature is the stored t_ref_c), fit each gain's temperature coefficient")
    p.set_defaults(func=run)


def add_reference_args(p) -> None:
    p.add_argument("--port", required=True,
                   help="the interposer's serial port (see `powerrig devices`), or `sim` for your running virtual rig")
    p.add_argument("--reference", required=True,
                   help="VISA resource of the reference, e.g. TCPIP::192.168.1.20::5025::SOCKET or USB0::...::INSTR; "
                        "`sim`: the simulated N6705C of your running virtual rig (`powerrig sim list` prints it)")
    p.add_argument("--channels", default="12V=1,3V3=2,5V=3",
                   help="which reference channel measures which rail (default 12V=1,3V3=2,5V=3)")
    p.add_argument("--visa-backend", default="@py", help="pyvisa backend (default @py, pyvisa-py; '' for the system VISA)")


def parse_channels(text: str) -> dict[str, int]:
    out = {}
    for part in filter(None, (x.strip() for x in text.split(","))):
        rail, sep, ch = part.partition("=")
        if not sep or not ch.strip().isdigit():
            raise InstrumentError(f"--channels {text!r}: each entry is RAIL=N, e.g. 12V=1,3V3=2")
        if rail in out:
            raise InstrumentError(f"--channels {text!r}: rail {rail} is listed twice")
        out[rail.strip()] = int(ch)
    return out


def run(args) -> int:
    from pathlib import Path

    from powerrig.calibration.certificate import certificate, write_certificate
    from powerrig.calibration.procedure import calibrate
    from powerrig.core import paths
    from powerrig.instruments import open_analyzer
    from powerrig.interposer.client import Interposer

    channels = parse_channels(args.channels)
    if not 0.01 <= args.seconds <= 60:
        raise InstrumentError("--seconds must be within 0.01..60")
    port, reference = sim_rig(args.port, args.reference)
    out = Path(args.out) if args.out else paths.new_file(paths.calibration_dir(), "calibration", "")
    with open_analyzer(reference, args.visa_backend or None,
                       "calibrating every channel (it supplies and measures each rail)") as ref:
        with Interposer.open(port) as dev:
            first = dev.calibration().get("t_ref_c", 25.0) if args.temperature_pass else None
            res = calibrate(dev, ref, channels, seconds=args.seconds, max_residual_fs=args.max_residual / 100,
                            verify_limit_pct=args.verify_limit, write=not args.dry_run,
                            progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True), first_pass_temp_c=first)
            cert = certificate(res, dev.description, ref, args.reference_due)
    js, page = write_certificate(cert, out)
    print(f"{'channel':<8} {'gain':>10} {'offset':>12} {'fit residual':>12} {'max error before':>17} {'after writing':>14}")
    print(f"{'':<8} {'':>10} {'(V or A)':>12} {'(% of FS)':>12} {'(% of reading)':>17} {'(% of reading)':>14}")
    for ch, f in res.fits.items():
        after = res.after.get(ch, {}).get("max_abs_pct")
        print(f"{ch:<8} {f.gain:10.6f} {f.offset:+12.3e} {f.residual_fs * 100:11.4f}% "
              f"{res.before[ch]['max_abs_pct']:16.4f}% " + (f"{after:13.4f}%" if after is not None else "    not written"))
    print(("calibration written and verified" if res.written else "dry run: nothing written") + f"; certificate {page} ({js.name})")
    return 0


def sim_rig(port: str, reference: str) -> tuple[str, str]:
    """`--port sim` and `--reference sim`: your running virtual rig's interposer and its simulated
    N6705C (the reference alone is only the rig's, so it needs the rig's interposer beside it)."""
    from powerrig.cli._ports import SIM_PORT, resolve_port, started_rig

    if reference == SIM_PORT:
        rig = started_rig()
        if rig is None:
            raise InstrumentError("--reference sim: no virtual rig of yours is running; run `powerrig sim start` first")
        if port not in (SIM_PORT, rig["port"]):
            raise InstrumentError(f"--reference sim is the reference of the virtual rig on {rig['port']}; "
                                  f"calibrate that interposer (--port sim), not {port}")
        reference = rig["reference"]
    return resolve_port(port, need_rig="calibrate (the reference meter on its rails)"), reference
