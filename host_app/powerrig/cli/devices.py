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

    errors: dict[str, str] = {}
    found = find_interposers(extra=args.port, all_ports=args.all_ports, errors=errors)
    dead = [p for p in dict.fromkeys(args.port) if p in errors]
    for p in dead:                    # a port the user named is said to be dead, never silently dropped
        print(f"powerrig: error: --port {p}: no interposer answers there ({errors[p]})", file=sys.stderr)
    if args.json:
        print(json.dumps(found))
        return 1 if dead else 0
    if not found and not dead:
        print("no interposer found (probed serial ports and running simulators); "
              "check the USB cable (or try --all-ports), or start a virtual rig with `powerrig sim start`", file=sys.stderr)
        return 1
    for d in found:
        print(f"{d['port']}  {d['board']}  serial {d['serial']}  firmware {d['firmware']}")
    return 1 if dead else 0
