"""`powerrig selftest`: check a board before trusting it (reference, ADC noise, digital inputs, link).

Prints one line per check with ok/CHECK and exits 1 when a check fails, so bring-up scripts can
stop on it (docs/hardware-bringup.md). --json prints the device's report with the host's link figure.
"""
from __future__ import annotations

import json
import sys

NOISE_LIMIT_CODES = 20.0     # rms codes: ~0.03 % of full scale; the AD7380 datasheet's is about 2
# and at least this much: a working converter's own noise (about 1-2.5 codes rms on an idle input, the
# emulated RP2040's good board 1.2-2.5) never reads one code 1000 times; an input shorted to a rail or a
# dead converter returning one code does (0 codes rms), and passed the upper limit alone (issue 43)
NOISE_FLOOR_CODES = 0.3


def register(sub) -> None:
    p = sub.add_parser("selftest", help="self-test an interposer: reference, ADC noise, digital inputs, link",
                       description="Ask the interposer for its self-test (stop any stream first) and measure "
                                   "the link. Exit 0 when every check passes, 1 otherwise.")
    p.add_argument("--port", required=True, help="serial port of the interposer, or `sim` for a virtual one")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=cmd_selftest)


def checks(report: dict) -> list[tuple[str, bool, str]]:
    """(name, passed, detail) per check of a selftest report."""
    out = []
    v = report["vref"]
    if v["volts"] is None:
        out.append(("reference", True, f"nominal {v['nominal']} V ({v['note']})"))
    else:
        out.append(("reference", bool(v["within_tolerance"]), f"{v['volts']:.4f} V, nominal {v['nominal']} V"))
    adc = report["adc"]
    for c in adc["channels"]:
        name = f"{c['rail']} {c['signal']}"
        stuck = c["noise_codes"] < NOISE_FLOOR_CODES or c["max"] <= c["min"]
        detail = f"{c['noise_codes']:.2f} codes rms, mean {c['mean_code']:.1f}, range {c['min']}..{c['max']}"
        if stuck:
            detail += (f": below the {NOISE_FLOOR_CODES} codes a working converter's own noise gives; a stuck "
                       f"input (shorted to a rail, open to a fixed level, or a dead converter): check its wiring")
        elif c["noise_codes"] > NOISE_LIMIT_CODES:
            detail += f": over the {NOISE_LIMIT_CODES:g} codes limit (an open or noisy input)"
        out.append((f"noise {name}", not stuck and c["noise_codes"] <= NOISE_LIMIT_CODES, detail))
    out.append(("ADC blocks", adc["dropped"] == 0, f"{adc['samples']} samples, {adc['dropped']} lost"))
    if adc.get("drive_active"):      # firmware before 0.2 did not wait for an idle drive nor say so
        out.append(("drive idle", False, "the drive stayed active for 3 s, so the noise figures include its "
                                         "load: stop its I/O (or pull it) and rerun"))
    elif "drive_active" in adc:
        out.append(("drive idle", True, f"drive idle for the samples (waited {adc['waited_s']:.2f} s for it)"))
    d = report["digital"]
    bits = ", ".join(f"{n}={(d['now'] >> k) & 1}" for k, n in enumerate(d["names"]))
    out.append(("digital inputs", True, bits))
    link = report["link"]
    bps, budget = link["bytes_per_s"], link["budget_bps"]
    out.append(("link", bool(bps) and (budget is None or bps >= budget // 10),
                f"{bps} B/s round-trip echo (streaming budget {budget} B/s)"))
    out.append(("firmware", True, f"{report['firmware']} build {report['build']} protocol {report['protocol']}"))
    return out


def cmd_selftest(args) -> int:
    from powerrig.interposer.client import Interposer
    from powerrig.cli._ports import resolve_port

    with Interposer.open(resolve_port(args.port)) as dev:
        report = dev.selftest()
    results = checks(report)
    if args.json:
        report["checks"] = [{"name": n, "ok": ok, "detail": d} for n, ok, d in results]
        print(json.dumps(report))
    else:
        print(f"{report['board']} serial {report['serial']}")
        for name, ok, detail in results:
            print(f"  {'ok   ' if ok else 'CHECK'}  {name:<16} {detail}")
    failed = [n for n, ok, _ in results if not ok]
    if failed and not args.json:
        print(f"self-test: {len(failed)} check(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0
