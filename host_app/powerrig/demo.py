"""`make demo`: the main job on the simulated rig, end to end, with nothing but this checkout.

The D5-P5336 power-state sweep (sequential 128 KiB reads and writes at QD128 in PS0, PS1 and PS2,
plus idle) on a virtual rig, through the same sweep engine, recorder, runners and results store a
lab uses; it prints each power state beside the published figures. See powerrig.sweep.demo.
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from powerrig.sweep.demo import main as sweep_demo

    return sweep_demo(argv)


if __name__ == "__main__":
    sys.exit(main())
