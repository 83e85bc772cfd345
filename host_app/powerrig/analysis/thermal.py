"""Thermal throttling from smart-log readings: a phase that throttled says nothing about the drive's
power at full speed, so its verdicts are marked invalid (Micron TN-FD-15: watch temperature)."""
from __future__ import annotations

from powerrig.analysis.descriptors import number
from powerrig.core.timeline import Event

THROTTLE_COUNTERS = ("thm_temp1_trans_count", "thm_temp2_trans_count", "thm_temp1_total_time",
                     "thm_temp2_total_time", "warning_temp_time", "critical_comp_time")


def find_key(doc, key):
    """First value of ``key`` anywhere in nested dicts/lists (tool outputs nest differently by version)."""
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for v in doc.values():
            r = find_key(v, key)
            if r is not None:
                return r
    elif isinstance(doc, list):
        for v in doc:
            r = find_key(v, key)
            if r is not None:
                return r
    return None


def smart_readings(events: list[Event]) -> list[tuple[float, dict]]:
    """(host UTC, {counter: value, 'temperature_c': ...}) for every smart-log seen, in time order."""
    out = []
    for e in events:
        if not e.ok or not isinstance(e.result, dict):
            continue
        vals = {k: number(find_key(e.result, k)) for k in THROTTLE_COUNTERS}
        vals = {k: v for k, v in vals.items() if v is not None}
        if not vals:
            continue
        t = number(find_key(e.result, "temperature"))
        if t is not None:
            vals["temperature_c"] = t - 273.15 if t > 200 else t     # smart-log reports kelvin
        out.append((e.t_end if e.t_end is not None else e.t_start, vals))
    out.sort(key=lambda r: r[0])
    return out


def throttled_between(readings, t0: float, t1: float) -> str | None:
    """A reason string when a throttle counter rose across [t0, t1] (nearest readings outside it)."""
    before = [r for r in readings if r[0] <= t0]
    after = [r for r in readings if r[0] >= t1]
    inside = [r for r in readings if t0 < r[0] < t1]
    if not (before or inside) or not (after or inside):
        return None
    a = before[-1][1] if before else inside[0][1]
    b = after[0][1] if after else inside[-1][1]
    rose = counters_rose(a, b)
    if rose:
        return "thermal throttling during the phase (" + ", ".join(f"{k} {a[k]:g} -> {b[k]:g}" for k in rose) + ")"
    return None


def counters_rose(a: dict, b: dict) -> list[str]:
    """The throttle counters that rose from reading ``a`` to reading ``b`` ({counter: value})."""
    return [k for k in THROTTLE_COUNTERS if k in a and k in b and b[k] > a[k]]


def throttle_state(before: dict | None, now: dict, critical_warning: int = 0) -> str:
    """The drive's throttling now, for a panel, from two readings ({counter: value}, as
    :func:`smart_readings` gives): time or transitions into TMT2 (heavy) or TMT1 (light) since the
    last read, else the critical-warning temperature bit (0x02), else none."""
    rose = counters_rose(before, now) if before is not None else []
    if {"thm_temp2_trans_count", "thm_temp2_total_time"} & set(rose):
        return "heavy throttling (TMT2)"
    if {"thm_temp1_trans_count", "thm_temp1_total_time"} & set(rose):
        return "light throttling (TMT1)"
    if critical_warning & 0x02:
        return "over its temperature threshold"
    return "none"
