"""Where the steady level a command's energy stands on begins: before the command, never before the
last event that changed the load, and only if that leaves at least MIN_PRE_S: a workload's tail decays
in less (a smart-log 3 ms after fio stopped read -0.4 mJ against 5.506 W of a decaying write tail).
One rule for the energy of any command (analysis.command_energy, analysis.admin_energy)."""
from __future__ import annotations

import math

MIN_PRE_S = 0.05     # a level needs this long after the last load change


def level_window(a: int, pre: int, pre_from: float | None, interval_s: float) -> tuple[int, float | None]:
    """The first sample of the level before sample ``a`` (at most ``pre`` samples, none before
    ``pre_from``) and, when the last load change leaves some but less than MIN_PRE_S of them, how long
    (seconds) it does leave: then there is no level to stand on, only a tail."""
    lo = max(0, a - pre)
    if pre_from is not None:
        lo = max(lo, int(math.ceil(pre_from)))
    held_s = (a - lo) * interval_s
    short = pre_from is not None and lo > a - pre and 0 < held_s < MIN_PRE_S
    return lo, held_s if short else None


def too_short(by: str, held_s: float) -> str:
    """The one line that says why a command has no level before it."""
    return (f"no steady level before: {by or 'the last load change'} ended {held_s * 1e3:.1f} ms before "
            f"the command (a level needs {MIN_PRE_S * 1e3:.0f} ms)")
