"""`powerrig devices`: list serial ports that answer like an interposer."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    d = sub.add_parser("devices", help="list serial ports that answer like an interposer")
    d.add_argument("--port", action="append", default=[], help="also probe this port (repeatable)")
    d.add_argument("--all-ports", action="store_true",
                   help="probe every serial port, not only RP2 boards (may disturb other instruments)")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_devices)


def cmd_devices(args) -> int:
    from powerrig.interposer.discovery import find_interposers

    found = find_interposers(extra=args.port, all_ports=args.all_ports)
    if args.json:
        print(json.dumps(found))
        return 0
    if not found:
        print("no interposer found (probed serial ports and running simulators); "
              "check the USB cable (or try --all-ports), or start a virtual rig with `powerrig sim start`", file=sys.stderr)
        return 1
    for d in found:
        print(f"{d['port']}  {d['board']}  serial {d['serial']}  firmware {d['firmware']}")
    return 0
