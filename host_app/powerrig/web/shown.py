"""Stored figures as people read them on the web page: a measurement's notes (stored as JSON) as rows of
a small table with units and sensible digits, and what a measurement's name means."""
from __future__ import annotations

import json
import math

# a notes key's unit, by how its name ends (the sweep names its figures so: before_w, command_s, ...)
UNITS = (("_mib_s", "MiB/s"), ("_pct", "%"), ("_ms", "ms"), ("_us", "us"), ("_mj", "mJ"), ("_w", "W"),
         ("_s", "s"), ("_j", "J"), ("_a", "A"), ("_v", "V"), ("_c", "C"))

MEANINGS = {
    "power.mean": "mean power of the step's measured phase at the slot (both rails), W",
    "power.idle": "mean power of the step's idle window (the drive idle in this power state), W",
    "power.max_1s": "highest mean over any 1 s window of the phase (OCP's maximum average power), W",
    "power.max_100ms": "highest mean over any 100 ms window of the phase (given beside the 1 s and 100 us "
                       "maxima: published descriptions of OCP's requirement disagree on the window), W",
    "power.peak_100us": "highest mean over any 100 us window of the phase (OCP PCM-2's peak), W",
    "referee.avg_power": "the drive's own average interval power (log 25h AIPWR) against the slot's mean over "
                         "the same span, error in % of the slot's",
    "referee.max_power": "the drive's maximum interval power (MIPWR) against the slot's largest mean over the "
                         "drive's own sampling interval, %",
    "referee.histogram": "the drive's 250 mW histogram against the slot's: earth mover's distance, W",
    "referee.measured": "whether the drive flags its numbers 'estimated, not measured'",
    "referee.ipm_lag": "how late the drive's SMART interval power (IPM) follows the slot's last second, s",
    "referee.power_limit": "seconds from a Power Limit's set until the slot's 100 ms means stay under it",
    "referee.rail_split": "the drive's total against the sum of the slot's rails, W",
    "referee.idle_power": "the power state's IDLP (id-ctrl) against the slot's idle mean, %",
    "referee.active_power": "the power state's ACTP against the slot's largest 10 s mean under its workload, %",
    "referee.olec": "SMART lifetime energy (OLEC) over the run against the slot's integrated energy, Wh",
    "referee.ocp_lifetime": "OCP C0h lifetime power consumed over the run against the slot's energy, Wh",
    "referee.ocp_peak": "OCP C0h peak power capability against the slot's 100 us maximum, %",
    "referee.ocp_max_avg": "OCP C0h current maximum average power against the slot's largest 1 s mean (PCM-1), W",
    "energy": "energy of the phase, J",
    "throughput.mib_s": "data moved per second by the workload (fio), MiB/s",
    "throughput.iops": "I/O operations per second by the workload (fio)",
    "efficiency.mib_s_per_w": "throughput per watt: MiB/s divided by the phase's mean power",
    "efficiency.iops_per_w": "I/O operations per second per watt",
    "efficiency.j_per_gib": "energy per GiB moved, J/GiB (lower is better)",
    "efficiency.ready_idle_gb_per_w": "ready-idle capacity per watt: the drive's capacity in GB divided by its "
                                      "idle power in this state (SNIA Emerald's ready-idle metric: how much "
                                      "storage one watt keeps online and ready; higher is better)",
    "waf.cumulative": "write amplification: NAND writes over host writes since the step began",
    "steady_state.rounds": "rounds until SNIA PTS steady state held",
    "OCP PCM-1": "OCP: maximum 1 s average power against the drive's maximum (PS0 MP)",
    "OCP PCM-2": "OCP: peak power over 100 us windows against the slot's peak limit",
    "OCP PCM-3": "OCP: average power over the phase against the power state's limit",
    "OCP PWR-6": "OCP: idle power against the idle limit",
    "apst.entry_latency_s": "an APST move the drive's table gives: from when it was due (idle since the last traced "
                            "I/O, or since entering the state, + ITPT) to the rails leaving the old level, s",
    "apst.rails_settle_s": "the same APST move: from when it was due to the rails settled at the new level, judged "
                           "against EXLAT(old) + ENLAT(new), s",
    "apst.unpredicted_s": "a rails step in idle the APST table does not give (before ITPT, from a state it moves "
                          "nowhere, later than due, or to another state's IDLP): the idle time before it, s; "
                          "marginal, for a reader's eye (the rails cannot tell it from the drive's own idle work)",
    "NVMe IDLP": "NVMe idle power (IDLP) the drive states for this power state, against the measured idle",
    "NVMe ACTP": "NVMe active power (ACTP) the drive states, against the measured active power",
}


def meaning(name: str) -> str:
    """What a measurement is, or "" for a name without an entry."""
    return MEANINGS.get(name, "")


def meanings(measurements: list[dict]) -> list[tuple[str, str]]:
    """(name, meaning) of each measurement name on a page that has an entry, in the page's order."""
    names = dict.fromkeys(m["name"] for m in measurements)
    return [(n, MEANINGS[n]) for n in names if n in MEANINGS]


def _unit(key: str) -> str:
    return next((u for end, u in UNITS if key.endswith(end)), "")


def number(v: float) -> str:
    """Four significant digits, no exponent for everyday sizes: 0.2462, 5.498, 1234, 0.0001234."""
    if not math.isfinite(v):
        return "-"
    if v == 0 or 1e-4 <= abs(v) < 1e6:
        digits = max(0, 3 - int(math.floor(math.log10(abs(v))))) if v else 0
        return f"{v:.{digits}f}"
    return f"{v:.3e}"


def _value(key: str, v) -> str:
    if isinstance(v, bool) or v is None:
        return {True: "yes", False: "no", None: "-"}[v]
    if isinstance(v, (int, float)):
        text = number(float(v)) if isinstance(v, float) else str(v)
        unit = _unit(key)
        return f"{text} {unit}" if unit else text
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return str(v)


def notes_rows(notes: str | None) -> list[tuple[str, str]]:
    """A measurement's notes as (label, text) rows: a JSON object's keys in words with their values and
    units, a JSON list's items each a row with no label, anything else as it is."""
    if not notes:
        return []
    try:
        doc = json.loads(notes)
    except ValueError:
        return [("", notes)]
    if isinstance(doc, dict):
        return [(k.replace("_", " "), _value(k, v)) for k, v in doc.items()]
    if isinstance(doc, list):
        return [("", _value("", v)) for v in doc]
    return [("", _value("", doc))]
