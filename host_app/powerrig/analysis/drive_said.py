"""What the drive said during a capture, read from its timeline: a SMART critical warning raised (any
smart-log or SMART get-log whose critical_warning byte is not zero, decoded per NVMe Base 2.3 Figure
207, SMART / Health Information log byte 0), the drive removed and back (the presence watcher's
NOTE events, dut/presence.py), a controller reset (a NOTE or an nvme-cli reset). Each becomes a
``Said`` with its host time, so the sweep stores it as a verdict of its step and the reports mark it
on the trace: a step whose drive went away or warned is never shown as an ordinary "done"."""
from __future__ import annotations

from dataclasses import dataclass

from powerrig.analysis.thermal import find_key
from powerrig.core.timeline import NOTE, NVME, Event

# NVMe Base 2.3, Figure 207 (SMART / Health Information log page), byte 0: Critical Warning bits
CRITICAL_WARNING_BITS = {0: "available spare below threshold", 1: "temperature over or under a threshold",
                         2: "NVM subsystem reliability degraded", 3: "media read-only",
                         4: "volatile memory backup failed", 5: "persistent memory region read-only"}
REMOVED, BACK, RESET, WARNING = "drive removed", "drive back", "controller reset", "critical warning"


@dataclass(frozen=True)
class Said:
    kind: str          # one of REMOVED, BACK, RESET, WARNING
    t_utc: float       # host UTC
    text: str          # one line, for a report
    value: int | None = None   # the critical warning byte


def warning_text(byte: int) -> str:
    bits = [CRITICAL_WARNING_BITS.get(b, f"bit {b}") for b in range(8) if byte >> b & 1]
    return f"critical warning 0x{byte:02x}: " + ", ".join(bits)


def _warning_byte(e: Event) -> int | None:
    v = find_key(e.result, "critical_warning") if isinstance(e.result, dict) else None
    if isinstance(v, dict):                    # nvme-cli 2.x JSON: {"value": n, ...}
        v = v.get("value")
    try:
        return int(v) if v is not None and not isinstance(v, bool) else None
    except (TypeError, ValueError):
        return None


def said(events: list[Event]) -> list[Said]:
    """Everything the drive said, in time order; a critical warning once when it is first seen and again
    only when its bits change (a poll every second repeats the same byte)."""
    out: list[Said] = []
    last = 0
    for e in sorted(events, key=lambda e: e.t_start):
        if e.kind == NOTE and e.name in (REMOVED, BACK):
            out.append(Said(e.name, e.t_start, f"{e.name} ({(e.meta or {}).get('controller', 'the controller')})"))
        elif (e.kind == NOTE and e.name.startswith(RESET)) or (e.kind == NVME and e.name in ("reset", "subsystem-reset")):
            out.append(Said(RESET, e.t_start, f"{RESET} ({e.name})"))
        elif e.kind == NVME and ("smart" in e.name) and e.ok:
            b = _warning_byte(e)
            if b is None:
                continue
            if b and b != last:
                out.append(Said(WARNING, e.t_end or e.t_start, warning_text(b), b))
            last = b
    return out
