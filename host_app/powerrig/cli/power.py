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
    p.add_argument("--port", required=True,
                   help="serial port of the interposer, or `sim` for your running virtual rig (`powerrig sim start`)")
    p.add_argument("--serial", required=True, help="serial number of the drive in the slot (checked with nvme-cli)")
    p.add_argument("--device", default=None, help="the drive's controller, e.g. /dev/nvme0 (a virtual rig names its own)")
    p.add_argument("--off-ms", type=float, default=100.0, help="cycle: how long power stays off (default 100)")
    p.add_argument("--seconds", type=float, default=None, help="off: restore after this long (default: at Ctrl-C)")
    p.add_argument("--actions", default=None,
                   help='sequence: JSON list, e.g. \'[{"output": "12V", "level": 0, "after_us": 1000}, '
                        '{"output": "12V", "level": 1, "after_us": 50000}]\', or @FILE')
    p.add_argument("--watchdog-ms", type=int, default=1000,
                   help="the interposer restores power after this long without word from the host (10..60000)")
    p.add_argument("--json", action="store_true", help="print one JSON object (edges with sample indices, "
                                                        "hold-up and inrush figures) instead of text")
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
    from powerrig.cli._ports import resolve_port
    from powerrig.dut import destructive, runners
    from powerrig.interposer.client import Interposer

    if not 10 <= args.watchdog_ms <= 60000:
        raise OptionError(f"--watchdog-ms must be within 10..60000, not {args.watchdog_ms}")
    if args.seconds is not None and not 0 < args.seconds < 1e6:
        raise OptionError(f"--seconds must be a positive number of seconds, not {args.seconds:g}")
    actions = _actions(args)
    port = resolve_port(args.port, need_rig="a power action (the drive it switches)")
    rig, controller = rig_for_port(port, args.device)
    nvme, _fio = runners(rig)
    with Interposer.open(port) as dev:
        try:
            if args.action == "cycle":
                done = _cycle(dev, nvme, controller, args.serial, actions, args.watchdog_ms)
            else:
                done = {"edges": destructive.power(nvme, controller, args.serial, dev, actions, args.watchdog_ms)}
            done = {"action": args.action, **done}
            print(json.dumps(done) if args.json else "\n".join(said(done)), flush=True)
            if args.action == "off":
                _hold(args.seconds)
        finally:
            if dev.power_status().get("enabled"):
                destructive.power_release(dev)    # the safe state, power actions off for the session
    return 0


def _cycle(dev, nvme, controller: str, serial: str, actions: list[dict], watchdog_ms: int) -> dict:
    """The cut and restore measured as the desktop app's power panel and a power-loss sweep measure them
    (powerrig.sweep.power_loss): a raw 4 us burst around the restore gives the hold-up after the cut and
    the inrush at the restore. The guard's session first; the edges as the interposer executed them."""
    from powerrig.dut import destructive
    from powerrig.sweep.plan import PowerLoss
    from powerrig.sweep.power_loss import BURST_WAIT_S, arm_burst, burst_figures, run_sequence

    destructive.power_session(nvme, controller, serial, dev, watchdog_ms)
    span_s = sum(a.get("after_us", 0) for a in actions) / 1e6
    burst = arm_burst(dev, actions[-1]["after_us"], PowerLoss.inrush_trigger_w, BURST_WAIT_S + span_s)
    edges, _utc, _rtt = run_sequence(dev, actions, 5.0 + span_s)
    figures = burst_figures(burst, True, PowerLoss.holdup_threshold_v, edges)
    return {"edges": edges, "holdup_threshold_v": PowerLoss.holdup_threshold_v, **figures}


SAMPLE_MS = 0.004           # one interposer sample: the edges' indices are samples on its clock


def said(done: dict) -> list[str]:
    """The action in words: each edge at its time from the first (ms on the interposer's clock), and for
    a cycle the hold-up and inrush, or why one is missing."""
    from powerrig.sweep.power_loss import edge_name

    edges = done["edges"]
    first = edges[0]["index"] if edges else 0
    out = [f"power {done['action']}: {len(edges)} edge(s) executed on the interposer's clock"]
    for e in edges:
        late = (e["index"] - e["requested"]) * SAMPLE_MS if e.get("requested") is not None else 0.0
        note = f" ({late:+.3f} ms from its plan)" if abs(late) >= SAMPLE_MS else ""
        out.append(f"  {(e['index'] - first) * SAMPLE_MS:9.3f} ms  {edge_name(e)}"
                   f"{note}")
    if done["action"] != "cycle":
        return out
    if done.get("holdup_s") is not None:
        out.append(f"hold-up: {done['holdup_s'] * 1e3:.3f} ms (from the cut until the drive side's 12 V fell "
                   f"below {done['holdup_threshold_v']:g} V)")
    else:
        out.append(f"hold-up: not measured ({done.get('holdup_reason') or done.get('burst_error') or 'no reason given'})")
    if done.get("inrush_peak_a") is not None:
        charge = done.get("inrush_charge_c")
        out.append(f"inrush:  {done['inrush_peak_a']:.2f} A peak on 12 V"
                   + (f", {charge * 1e3:.3f} mC while it settles" if charge is not None else ""))
    else:
        out.append(f"inrush:  not measured ({done.get('burst_error') or 'no rise found after the restore'})")
    return out


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
