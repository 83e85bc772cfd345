"""Range saturation in a phase: readings at a channel's full scale are clipped, so the phase's power
and energy are lower bounds and its verdicts cannot be trusted (the capture's clip records, written
where the interposer's records are decoded: powerrig.interposer.frames.clipped)."""
from __future__ import annotations

import math

from powerrig_fw.reduce import CODE_MAX  # the device clamps codes to +-CODE_MAX: full scale = lsb * CODE_MAX

UNITS = {"current": ("i_lsb", "A"), "voltage": ("v_lsb", "V")}


def full_scale(metadata: dict | None, rail: str, quantity: str) -> str:
    """"  1.0 A" from the recording device's description (lsb x CODE_MAX), or "" when it is not known."""
    key, unit = UNITS[quantity]
    for r in ((metadata or {}).get("device") or {}).get("rails") or []:
        if isinstance(r, dict) and r.get("name") == rail and isinstance(r.get(key), (int, float)):
            x = r[key] * CODE_MAX
            return f" {x:.1f} {unit}" if x < 10 else f" {x:.0f} {unit}"
    return ""


def phase_clipped(source, start: float, stop: float) -> dict[str, dict]:
    """{rail: counts} of the rails with clipped intervals in the phase [start, stop) (sample ids);
    {} for a source that cannot tell (data imported from other instruments)."""
    counts = getattr(source, "clipped", None)
    if counts is None:
        return {}
    return {r: c for r, c in counts(int(math.floor(start)), int(math.ceil(stop))).items() if c["intervals"]}


def clipped_why(clipped: dict[str, dict], intervals: int, metadata: dict | None) -> str | None:
    """One line for the verdict: which channel was at full scale in how many of the phase's intervals."""
    parts = []
    for rail, c in clipped.items():
        for quantity in ("current", "voltage"):
            if c.get(quantity):
                parts.append(f"{rail} {quantity} at the channel's{full_scale(metadata, rail, quantity)} full scale "
                             f"in {c[quantity]} of {intervals} intervals")
    if not parts:
        return None
    return "; ".join(parts) + ": readings clipped, energy and power are lower bounds"
