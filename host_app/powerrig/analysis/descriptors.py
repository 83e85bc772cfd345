"""Power state descriptors from nvme-cli id-ctrl JSON (any version seen in the field), in watts.

Limits for the checks come from here: MP per state (PCM-1, PCM-3), IDLP and ACTP (NVMe figures),
ENLAT/EXLAT (command settle times). Counter-style values arrive as ints, floats or strings.
"""
from __future__ import annotations

import math

from powerrig.core.nvme_fields import PowerStateDescriptor as PowerState, number, parse_psd  # noqa: F401


def power_states(id_ctrl: dict | None) -> dict[int, PowerState]:
    """{state index: PowerState} from id-ctrl: nvme-cli's JSON (any version: parsed by the drive-control
    parser, the one reading of id-ctrl in powerrig) or the runner's parsed form (``power_states``)."""
    if not id_ctrl:
        return {}
    if "power_states" in id_ctrl:
        return {int(p["ps"]): PowerState(**p) for p in id_ctrl["power_states"]}
    return {i: parse_psd(i, d) for i, d in enumerate(id_ctrl.get("psds") or [])}


def ocp_peak_limit(map_w: float) -> float:
    """OCP PCM-3: peak power limit for a maximum average power MAP (W)."""
    if map_w <= 25.0:
        return 1.5 * map_w
    if map_w <= 29.0:
        return 37.5
    return 1.3 * map_w


def transition_latency_us(states: dict[int, PowerState], old: int | None, new: int | None) -> float:
    """Worst-case transition time (NVMe): EXLAT of the old state + ENLAT of the new one."""
    if old not in states or new not in states:
        return math.nan
    return states[old].exit_latency_us + states[new].entry_latency_us
