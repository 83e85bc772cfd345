"""Power state descriptors from nvme-cli id-ctrl JSON (any version seen in the field), in watts.

Limits for the checks come from here: MP per state (PCM-1, PCM-3), IDLP and ACTP (NVMe figures),
ENLAT/EXLAT (command settle times). Counter-style values arrive as ints, floats or strings.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

IP_SCALE = {0: None, 1: 1e-4, 2: 1e-2}   # IPS / APS: 0 not reported


def number(v) -> float | None:
    """An nvme-cli number in any of its spellings: 3, 3.0, "3", "3.000000", "3,200", "0x3"."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip().replace(",", "")
    try:
        return float(int(s, 16)) if s.lower().startswith("0x") else float(s)
    except ValueError:
        return None


@dataclass(frozen=True)
class PowerState:
    index: int
    max_power_w: float
    non_operational: bool
    entry_latency_us: float
    exit_latency_us: float
    idle_power_w: float | None       # IDLP, None when not reported
    active_power_w: float | None     # ACTP, None when not reported
    active_power_workload: int | None


def power_states(id_ctrl: dict | None) -> dict[int, PowerState]:
    """{state index: PowerState} from an id-ctrl document; empty when none is available."""
    if not id_ctrl:
        return {}
    out = {}
    for k, d in enumerate(id_ctrl.get("psds") or []):
        flags = int(number(d.get("flags")) or 0)
        mxps = d.get("max_power_scale")
        mxps = int(number(mxps)) if mxps is not None else flags & 1
        nops = d.get("non-operational_state")
        nops = bool(int(number(nops))) if nops is not None else bool(flags & 2)
        mp = (number(d.get("max_power")) or 0.0) * (1e-4 if mxps else 1e-2)
        ips = IP_SCALE.get(int(number(d.get("idle_scale")) or 0))
        aps = IP_SCALE.get(int(number(d.get("active_scale")) or 0))
        idlp = number(d.get("idle_power"))
        actp = number(d.get("active_power"))
        apw = d.get("active_power_work", d.get("active_work_scale"))
        out[k] = PowerState(k, mp, nops, number(d.get("entry_lat")) or 0.0, number(d.get("exit_lat")) or 0.0,
                            idlp * ips if ips and idlp is not None else None,
                            actp * aps if aps and actp is not None else None,
                            int(number(apw)) if number(apw) is not None else None)
    return out


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
