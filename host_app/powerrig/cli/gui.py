"""`powerrig gui [--sim [--profile NAME]] [--port PORT] [--capture FILE]`: the desktop app."""
from __future__ import annotations

from pathlib import Path

from powerrig.core.errors import PowerrigError


class GuiStartError(PowerrigError):
    pass


def register(sub) -> None:
    p = sub.add_parser("gui", help="the desktop app: live plot, multimeter, drive and workload control, captures")
    p.add_argument("--sim", action="store_true", help="start a virtual rig (interposer, SSD, nvme-cli, fio) and connect")
    p.add_argument("--profile", default=None,
                   help="with --sim: the virtual drive (d5-p5336, the default, an enterprise drive without APST; "
                        "client-apst, a client drive with APST and non-operational states; micron-fdp)")
    p.add_argument("--port", default=None, help="connect to the interposer on this port at start")
    p.add_argument("--capture", default=None, help="open this capture (.jls) at start")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.profile is not None:
        from powerrig.sim.ssd.profile import available
        if not args.sim:
            raise GuiStartError("--profile names the virtual drive of --sim; add --sim, or leave --profile out")
        if args.profile not in available():
            raise GuiStartError(f"--profile {args.profile}: no such virtual drive; choose one of "
                                f"{', '.join(available())}")
    if args.capture and not Path(args.capture).is_file():
        raise GuiStartError(f"--capture {args.capture}: no such file; give a .jls written by `powerrig record`")
    try:
        from powerrig.gui.app import main
    except ImportError as e:
        raise GuiStartError(f"the desktop app needs PySide6 and pyqtgraph ({e}); pip install 'powerrig[gui]'") from None
    return main(sim=args.sim, capture=args.capture, port=args.port, profile=args.profile)
