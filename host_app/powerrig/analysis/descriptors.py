"""Power state descriptors from nvme-cli id-ctrl JSON (any version seen in the field), in watts.

Limits for the checks come from here: MP per state (PCM-1, PCM-3), IDLP and ACTP (NVMe figures),
ENLAT/EXLAT (command settle times). Counter-style values arrive as ints, floats or strings.
"""
from __future__ import annotations

import math
from typing import Mapping

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


NOT_REPORTED_SRC = "a latency of 0 is not reported: libnvme nvme-types-base.h struct nvme_id_psd"


def transition_limit_s(exlat_us: Mapping[int, int], enlat_us: int, new: int) -> tuple[float | None, str]:
    """EXLAT(old) + ENLAT(new) in s (``exlat_us``: each state that may have been left, the worst taken),
    or None and why when a term is 0: not reported, so the sum bounds nothing (NVMe base spec, Power
    State Descriptor)."""
    zero = [f"PS{o}" for o, v in sorted(exlat_us.items()) if not v]
    unknown = " (the state left is unknown)" if len(exlat_us) > 1 else ""
    gone = [f"EXLAT of {', '.join(zero)}{unknown}"] if zero else []
    if not enlat_us:
        gone.append(f"ENLAT of PS{new}")
    if gone:
        which = f"does not report {gone[0]}" if len(gone) == 1 else f"reports neither {gone[0]} nor {gone[1]}"
        return None, f"no limit: the drive {which} ({NOT_REPORTED_SRC})"
    return (max(exlat_us.values()) + enlat_us) * 1e-6, ""
