"""`powerrig power off|on|cycle|sequence --port PORT --serial SN`: switch the drive's power on the interposer.

Every action goes through powerrig.dut.destructive.power (the drive's serial checked, nothing mounted,
never the host's own drive) and only then is enabled on the interposer for this session. `off` holds
the power off while the command runs (--seconds, or until Ctrl-C) and restores it when it ends: the
interposer's watchdog restores it too if this host goes silent. docs/power-loss.md.
"""
from __future__ import annotations

import json
import sys
import time

from powerrig.cli._options import OptionError

# the first edge 2 ms ahead: the interposer refuses one already past when it reads its clock (a first
# action "now" can be), and 2 ms is its planning horizon, so the edge lands on its sample
LEAD_US = 2000
ALL_ON = [{"output": "12V", "level": 1, "after_us": LEAD_US}, {"output": "3V3", "level": 1},
          {"output": "PERST", "level": 0}, {"output": "PWRDIS", "level": 0}]


def register(sub) -> None:
    p = sub.add_parser("power", help="cut, restore or sequence the drive's power on the interposer (guarded)",
                       description="Timed power actions on the interposer, after the drive guard passed for the "
                                   "drive named by --serial. off holds power off while it runs; on restores; "
                                   "cycle cuts for --off-ms; sequence runs --actions.")
    p.add_argument("action", choices=("off", "on", "cycle", "sequence"))
    p.add_argument("--port", required=True, help="serial port of the interposer (a virtual rig's pty works)")
    p.add_argument("--serial", required=True, help="serial number of the drive in the slot (checked with nvme-cli)")
    p.add_argument("--device", default=None, help="the drive's controller, e.g. /dev/nvme0 (a virtual rig names its own)")
    p.add_argument("--off-ms", type=float, default=100.0, help="cycle: how long power stays off (default 100)")
    p.add_argument("--seconds", type=float, default=None, help="off: restore after this long (default: at Ctrl-C)")
    p.add_argument("--actions", default=None,
                   help='sequence: JSON list, e.g. \'[{"output": "12V", "level": 0, "after_us": 1000}, '
                        '{"output": "12V", "level": 1, "after_us": 50000}]\', or @FILE')
    p.add_argument("--watchdog-ms", type=int, default=1000,
                   help="the interposer restores power after this long without word from the host (10..60000)")
    p.set_defaults(func=cmd_power)


def _actions(args) -> list[dict]:
    if args.action == "off":
        return [{"output": "12V", "level": 0, "after_us": LEAD_US}]
    if args.action == "on":
        return list(ALL_ON)
    if args.action == "cycle":
        if not 0 < args.off_ms <= 60000:
            raise OptionError(f"--off-ms must be within 0..60000 ms, not {args.off_ms:g}")
        return [{"output": "12V", "level": 0, "after_us": LEAD_US},
                {"output": "12V", "level": 1, "after_us": int(args.off_ms * 1000)}]
    if not args.actions:
        raise OptionError("sequence needs --actions (a JSON list of {output, level, at | after_us}, or @FILE)")
    text = args.actions
    try:
        if text.startswith("@"):
            with open(text[1:]) as f:
                text = f.read()
        seq = json.loads(text)
    except (OSError, ValueError) as e:
        raise OptionError(f"--actions is not a readable JSON list ({str(e).splitlines()[0]}); see --help") from None
    if not isinstance(seq, list):
        raise OptionError("--actions must be a JSON list of {output, level, at | after_us}")
    return seq


def rig_for_port(port: str, device: str | None) -> tuple[dict, str]:
    """The rig description for dut.runners and the controller: a virtual rig registered on this port
    names its own nvme-cli, sysfs tree and controller; a real one uses this host's, and --device."""
    from powerrig.core import rig_registry

    for st in rig_registry.running():
        if st.get("port") == port:
            return {"nvme": st["nvme"], "host": st["host"]}, device or st["controller"]
    if not device:
        raise OptionError(f"--device is needed for the interposer on {port}: name the drive's controller, "
                          "e.g. --device /dev/nvme0")
    return {}, device


def cmd_power(args) -> int:
    from powerrig.dut import destructive, runners
    from powerrig.interposer.client import Interposer

    if not 10 <= args.watchdog_ms <= 60000:
        raise OptionError(f"--watchdog-ms must be within 10..60000, not {args.watchdog_ms}")
    if args.seconds is not None and not 0 < args.seconds < 1e6:
        raise OptionError(f"--seconds must be a positive number of seconds, not {args.seconds:g}")
    actions = _actions(args)
    rig, controller = rig_for_port(args.port, args.device)
    nvme, _fio = runners(rig)
    with Interposer.open(args.port) as dev:
        try:
            edges = destructive.power(nvme, controller, args.serial, dev, actions, args.watchdog_ms)
            print(json.dumps({"action": args.action, "edges": edges}), flush=True)
            if args.action == "off":
                _hold(args.seconds)
        finally:
            if dev.power_status().get("enabled"):
                destructive.power_release(dev)    # the safe state, power actions off for the session
    return 0


def _hold(seconds: float | None) -> None:
    """Keep the session (and power off) until ``seconds`` pass or Ctrl-C."""
    try:
        if seconds is None:
            print("powerrig power: 12 V is off; Ctrl-C restores it", file=sys.stderr, flush=True)
            while True:
                time.sleep(0.5)
        time.sleep(seconds)
    except KeyboardInterrupt:
        pass
