"""Phases from the timeline: each workload phase, each idle window, each power-state dwell.

Events carry host UTC; ``to_sample_id`` (the capture's clock track) places them on the sample axis
as fractional sample ids, so a phase edge sits at its true 4 us position inside an interval and
energy counts the partly covered edge intervals by their covered fraction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from powerrig.core.timeline import FIO, NVME, PHASE, POWER_STATE, Event
from powerrig.core.names import PhaseKind

# phase kinds under their short names (powerrig.core.names.PhaseKind)
WORKLOAD = PhaseKind.WORKLOAD
IDLE = PhaseKind.IDLE
DWELL = PhaseKind.DWELL
CAPTURE = PhaseKind.CAPTURE
IDLE_WINDOW = PhaseKind.IDLE_WINDOW
WAF_INTERVAL = PhaseKind.WAF_INTERVAL
WINDOW = PhaseKind.WINDOW
# a PHASE whose meta holds one of these is a comparison window over other phases (the drive's own power
# report, the span after a Power Limit was set), not a workload of its own: it is measured, not checked
WINDOW_KEYS = ("self_report_w", "referee_claim", "limit_w")

IDLP_SETTLE_S = 10.0            # NVMe IDLP: measure after 10 s of idle ...
IDLP_WINDOW_S = 30.0            # ... for 30 s


@dataclass
class Phase:
    name: str
    kind: PhaseKind
    start: float                # fractional sample id
    stop: float
    power_state: int | None = None
    meta: dict = field(default_factory=dict)
    event: Event | None = None
    parent: str | None = None   # the phase a derived window belongs to

    @property
    def length(self) -> float:
        return self.stop - self.start


def power_state_of(e: Event) -> int | None:
    for src in (e.meta, e.result):
        for key in ("power_state", "ps", "value"):
            v = src.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return int(v) & 0x1F
    m = re.search(r"(?:ps|power.?state)\s*(\d+)", e.name, re.I)
    return int(m.group(1)) if m else None


def is_idle_phase(e: Event) -> bool:
    """A phase of no I/O (named idle, or fio with rw idle): the report and the desktop app shade these as idle."""
    if e.meta.get("idle") or e.meta.get("rw") in ("idle", "none"):
        return True
    return not any(k in e.meta for k in ("rw", "bs", "iodepth")) and e.name.lower().startswith("idle")


def phases_from_events(events: list[Event], to_sample_id: Callable, length: int, interval_s: float,
                       min_idle_s: float = 1.0, initial_power_state: int | None = None) -> list[Phase]:
    """All phases of a capture, clipped to [0, length); the whole capture comes first."""
    def place(e: Event) -> tuple[float, float]:
        a = float(to_sample_id(e.t_start))
        b = float(to_sample_id(e.t_end if e.t_end is not None else e.t_start))
        return max(0.0, min(length, a)), max(0.0, min(length, b))

    out = [Phase("capture", CAPTURE, 0.0, float(length), initial_power_state)]
    if not events:
        return out      # nothing says what the drive was doing: no idle or workload is claimed

    # power-state dwells: from each confirmed change to the next
    changes = sorted((e for e in events if e.kind == POWER_STATE and e.ok), key=lambda e: e.t_start)
    dwells: list[Phase] = []
    for n, e in enumerate(changes):
        a = place(e)[1]
        b = place(changes[n + 1])[0] if n + 1 < len(changes) else float(length)
        ps = power_state_of(e)
        if b > a:
            dwells.append(Phase(f"PS{ps} dwell {n + 1}" if ps is not None else f"dwell {n + 1}", DWELL, a, b, ps,
                                {"power_state": ps}, e))

    def state_at(x: float) -> int | None:
        for d in dwells:
            if d.start <= x < d.stop:
                return d.power_state
        if dwells and x < dwells[0].start or not dwells:
            return initial_power_state
        return None

    # workload phases (PHASE events; a fio run with no phases inside stands for one)
    phase_events = [e for e in events if e.kind == PHASE]
    spans = [(e, *place(e)) for e in phase_events]
    for e in events:
        if e.kind == FIO and e.t_end is not None:
            a, b = place(e)
            if not any(pa < b and pb > a for _, pa, pb in spans):
                spans.append((e, a, b))
    spans.sort(key=lambda s: s[1])
    work, idle_named, windows_cmp = [], [], []
    for e, a, b in spans:
        if b <= a:
            continue
        ps = e.meta.get("power_state")
        ps = int(ps) if isinstance(ps, (int, float)) else state_at((a + b) / 2)
        meta = dict(e.meta)
        meta.update({k: v for k, v in e.result.items() if k in ("bw_bytes", "iops", "io_bytes", "total_ios")
                     and k not in meta})
        if any(k in e.meta for k in WINDOW_KEYS):
            windows_cmp.append(Phase(e.name, WINDOW, a, b, ps, meta, e))
            continue
        ph = Phase(e.name, IDLE if is_idle_phase(e) else WORKLOAD, a, b, ps, meta, e)
        (idle_named if ph.kind == IDLE else work).append(ph)

    # idle windows: what no workload covers, at least min_idle_s long
    idle = list(idle_named)
    min_len = min_idle_s / interval_s
    cursor, n = 0.0, 0
    for ph in work + [Phase("end", WORKLOAD, float(length), float(length))]:
        if ph.start - cursor >= min_len and not any(i.start < ph.start and i.stop > cursor for i in idle_named):
            n += 1
            idle.append(Phase(f"idle {n}", IDLE, cursor, ph.start, state_at((cursor + ph.start) / 2)))
        cursor = max(cursor, ph.stop)

    # the IDLP / PWR-6 window of each idle phase: 30 s starting after 10 s of idle
    windows = []
    for ph in idle:
        a = ph.start + IDLP_SETTLE_S / interval_s
        b = min(ph.stop, a + IDLP_WINDOW_S / interval_s)
        if b > a:
            windows.append(Phase(f"{ph.name} (idle window)", IDLE_WINDOW, a, b, ph.power_state,
                                 {"complete": b - a >= IDLP_WINDOW_S / interval_s - 1e-6}, parent=ph.name))
    out += sorted(work + idle, key=lambda p: p.start) + dwells + windows + windows_cmp
    return out


def commands(events: list[Event], to_sample_id: Callable, length: int) -> list[tuple[Event, float, float]]:
    """NVMe commands and power-state changes placed on the sample axis, in time order."""
    out = []
    for e in sorted(events, key=lambda e: e.t_start):
        if e.kind in (NVME, POWER_STATE):
            a = float(to_sample_id(e.t_start))
            b = float(to_sample_id(e.t_end if e.t_end is not None else e.t_start))
            if 0 <= a < length:
                out.append((e, a, min(b, length)))
    return out
