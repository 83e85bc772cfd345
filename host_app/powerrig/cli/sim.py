"""`powerrig sim ...`: the virtual rig (interposer on a pty, virtual SSD, impersonated nvme/fio)."""
from __future__ import annotations

import importlib


def register(sub) -> None:
    p = sub.add_parser("sim", help="the simulated rig", description="Run parts of the virtual rig.")
    s = p.add_subparsers(dest="sim_command", metavar="PART")

    i = s.add_parser("interposer", help="a virtual interposer on a pseudo-terminal",
                     description="Start a virtual interposer running the real firmware logic on a pty. "
                                 "Prints the device path alone on the first line, then streams until "
                                 "SIGINT/SIGTERM.")
    i.add_argument("--seed", type=int, default=1, help="board and noise seed (default 1)")
    i.add_argument("--drift-ppm", type=float, default=35.0, help="crystal error vs the host clock (default 35)")
    i.add_argument("--jitter-ms", type=float, default=1.0, help="USB latency jitter, max ms (default 1)")
    i.add_argument("--corrupt", type=float, default=0.0, help="probability per byte of flipping a DATA frame bit")
    i.add_argument("--drop", type=float, default=0.0, help="probability of dropping each DATA frame")
    i.add_argument("--stall-at", type=float, default=-1.0, help="stall the firmware this many s after start")
    i.add_argument("--stall-in-stream", type=float, default=-1.0,
                   help="stall the firmware this many s after its first stream started")
    i.add_argument("--stall-for", type=float, default=0.0, help="... for this many seconds")
    i.add_argument("--seconds", type=float, default=None, help="exit after this many seconds")
    i.add_argument("--truth", default=None, help="write ground truth JSON (and .npz) here on exit")
    i.add_argument("--state-dir", default=None, help="where the virtual board keeps its calibration")
    i.add_argument("--uncalibrated", action="store_true", help="start without the factory calibration")
    i.set_defaults(func=_interposer)

    st = s.add_parser("start", help="start a whole virtual rig (interposer + SSD) in the background",
                      description="Start a virtual rig in the background and say what it is: the interposer's "
                                  "port (`--port sim` finds it), the drive, the nvme and fio commands that reach it "
                                  "and its reference meter (`--reference sim`). --json: one JSON line instead.")
    st.add_argument("--profile", default="d5-p5336", help="drive profile (default d5-p5336)")
    st.add_argument("--drive", choices=("virtual", "qemu"), default="virtual",
                    help="virtual: the modelled SSD of --profile (default); qemu: the real Linux NVMe driver, "
                         "nvme-cli and fio against QEMU's NVMe controller in a throw-away guest, its power "
                         "following the controller's command trace")
    st.add_argument("--seed", type=int, default=1)
    st.add_argument("--drift-ppm", type=float, default=35.0)
    st.add_argument("--uncalibrated", action="store_true",
                    help="leave the interposer without its factory calibration (to try `powerrig calibrate`)")
    st.add_argument("--json", action="store_true", help="print the rig's state as one JSON line (for scripts)")
    st.set_defaults(func=_start)
    ls = s.add_parser("list", help="list your running virtual rigs",
                      description="Your running virtual rigs, oldest first (--json: one JSON line each).")
    ls.add_argument("--json", action="store_true", help="one JSON line per rig (for scripts)")
    ls.set_defaults(func=_list)
    sp = s.add_parser("stop", help="stop a virtual rig")
    sp.add_argument("id", nargs="?", help="rig id (from `sim start` or `sim list`)")
    sp.add_argument("--all", action="store_true", help="stop every virtual rig of yours")
    sp.set_defaults(func=_stop)

    for tool in ("nvme", "fio"):
        t = s.add_parser(tool, help=f"impersonate {tool} against the virtual SSD", add_help=False,
                         prefix_chars="\0")
        t.add_argument("args", nargs="*")
        t.set_defaults(func=_tool(tool))


def _interposer(args) -> int:
    from powerrig.cli import _options as opt
    from powerrig.sim.interposer.board import serve

    args.seconds = opt.seconds(args.seconds, hint=" (leave it out to run until Ctrl-C)")   # core/bounds.py's
    return serve(args)


def _tool(name: str):
    def run(args) -> int:
        mod = importlib.import_module(f"powerrig.sim.tools.{name}_cli")
        return mod.main(list(args.args))
    return run


def _start(args) -> int:
    import json

    from powerrig.sim import rig

    profile = rig.QEMU_DRIVE if args.drive == "qemu" else args.profile
    state = rig.start(profile, args.seed, args.drift_ppm, calibrated=not args.uncalibrated)
    if args.json:
        print(json.dumps(state), flush=True)
        return 0
    print(f"virtual rig {state['id']} started: {describe(state)}")
    for line in details(state):
        print(f"  {line}")
    print(f"  `--port sim` uses it (the newest of your rigs); `powerrig sim stop {state['id']}` ends it", flush=True)
    return 0


def describe(state: dict) -> str:
    """One line: the drive and where the interposer is."""
    serial = f", serial {state['serial']}" if state.get("serial") else ""
    return f"drive {state.get('profile', '?')}{serial}, interposer on {state.get('port', '?')}"


def details(state: dict) -> list[str]:
    """The commands and resources a user types after `sim start`."""
    from shlex import join

    out = []
    for key, label in (("nvme", "nvme-cli"), ("fio", "fio"), ("controller", "controller"),
                       ("namespaces", "namespaces"), ("reference", "reference meter"), ("log", "log")):
        v = state.get(key)
        if v:
            out.append(f"{label + ':':<17}{join(v) if key in ('nvme', 'fio') else ', '.join(v) if isinstance(v, list) else v}")
    return out


def _list(args) -> int:
    import json
    import time

    from powerrig.sim import rig

    rigs = rig.running()
    if args.json:
        for r in rigs:
            print(json.dumps(r))
        return 0
    if not rigs:
        print("no virtual rigs of yours are running (start one with `powerrig sim start`)")
        return 0
    for r in rigs:
        age = time.time() - float(r.get("started", time.time()))
        owner = f"; ends with its owner, pid {r['owner']}" if r.get("owner") else ""
        print(f"{r['id']}  {describe(r)}  (up {age / 60:.0f} min{owner})")
        for line in details(r):
            print(f"    {line}")
    return 0


def _stop(args) -> int:
    from powerrig.sim import processes      # not sim.rig: signals and the registry, not numpy and the whole rig

    if not args.id and not args.all and not processes.running():
        return 0                     # nothing to stop: the state the user asked for already holds
    stopped = processes.stop(args.id, args.all)
    print(f"stopped {len(stopped)} virtual rig(s)" + (f": {', '.join(stopped)}" if stopped else ""))
    return 0
