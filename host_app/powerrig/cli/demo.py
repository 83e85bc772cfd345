"""`powerrig demo [--quick]`: what `make demo` runs once set up (the D5-P5336 study on the virtual rig)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("demo", help="the D5-P5336 power-state study on the virtual rig (what `make demo` runs)",
                       description="Run the D5-P5336 power-state study as a sweep on a virtual rig into your "
                                   "results store and print it beside the published figures.")
    p.add_argument("--quick", action="store_true",
                   help="3 s measurement windows instead of the plan's 8 s (about a minute instead of two)")
    p.set_defaults(func=run)


def run(args) -> int:
    from powerrig.demo import main

    return main(["--quick"] if args.quick else [])
