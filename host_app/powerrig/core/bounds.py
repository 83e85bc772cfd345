"""Every number a plan or a command-line option takes, with its floor and ceiling, in one table.

A value past them is a typo, and one that fails late: ``reply_timeout_s = 1e10`` overflows the
serial layer's wait when the run starts, ``waf_every_s = 1e300`` overflows the sampler thread's wait
and the step is stored without its WAF data, ``--port 70000`` listens on another port (70000 mod
65536). So each is refused before anything runs, in one line naming the key and its range; NaN and
the infinities are never a value. docs/sweeps.md, docs/web.md and docs/results.md list them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

DAY_S = 86_400.0
WEEK_S = 7 * DAY_S


@dataclass(frozen=True)
class Bound:
    lo: float
    hi: float
    unit: str = ""
    integer: bool = False


def _i(lo, hi, unit=""):
    return Bound(lo, hi, unit, True)


# keys of a plan, as `[table] key` (an array of tables by its name: every [[workload]] alike)
PLAN = {
    "rig.interval_us": _i(100, 1_000_000, "us"),
    "rig.reconnect_s": Bound(0.0, DAY_S, "s"),
    "rig.reply_timeout_s": Bound(0.1, 3600.0, "s"),     # an emulated board far slower than real time: minutes
    "rig.supply_channels": _i(1, 4),
    "timing.settle_s": Bound(0.0, DAY_S, "s"),
    "timing.idle_s": Bound(0.0, DAY_S, "s"),
    "timing.measure_s": Bound(0.1, WEEK_S, "s"),
    "timing.repetitions": _i(1, 10_000),
    "timing.cooldown_s": Bound(0.0, DAY_S, "s"),
    "steady_state.rounds": _i(2, 100),
    "steady_state.max_rounds": _i(2, 1000),
    "steady_state.range_pct": Bound(0.0, 100.0, "%"),
    "steady_state.slope_pct": Bound(0.0, 100.0, "%"),
    "checks.self_reported_tolerance_pct": Bound(0.1, 100.0, "%"),
    "checks.max_lost_pct": Bound(0.0, 100.0, "%"),
    "checks.power_limit_w": Bound(0.01, 655.35, "W"),
    "limits.max_steps": _i(1, 10_000_000),
    "limits.max_hours": Bound(0.001, 24 * 366.0, "h"),
    "power_states": _i(0, 31),
    "workload.iodepth": _i(1, 4096),
    "workload.numjobs": _i(1, 256),
    "workload.rwmixread": _i(0, 100, "%"),
    "workload.runtime_s": Bound(0.1, WEEK_S, "s"),
    "workload.waf_every_s": Bound(0.5, 3600.0, "s"),
    "workload.ranges": Bound(0.0, 100.0, "%"),
    "workload.streams.range": Bound(0.0, 100.0, "%"),
    "workload.streams.rate_iops": _i(1, 100_000_000),
    "power_loss.cycles": _i(1, 100_000),
    "power_loss.iodepth": _i(1, 4096),
    "power_loss.cut_ms": Bound(0.0, 60_000.0, "ms"),
    "power_loss.off_ms": Bound(1.0, 60_000.0, "ms"),
    "power_loss.ready_timeout_s": Bound(0.1, 3600.0, "s"),
    "power_loss.holdup_threshold_v": Bound(0.1, 12.0, "V"),
    "power_loss.inrush_trigger_w": Bound(0.1, 1000.0, "W"),
    "power_loss.seed": _i(0, 2**31 - 1),
    "power_loss.fsync_every": _i(1, 1_000_000, "writes"),
    "margin.settle_s": Bound(0.0, 600.0, "s"),
    "margin.agree_pct": Bound(0.1, 20.0, "%"),
    "margin.current_limit_a": Bound(0.01, 20.0, "A"),
}
# [[perst_stress]] and [[hotplug]] take [[power_loss]]'s keys; a stream's iodepth and mix are a workload's
for _t in ("perst_stress", "hotplug"):
    PLAN.update({f"{_t}.{k.split('.', 1)[1]}": b for k, b in list(PLAN.items()) if k.startswith("power_loss.")})
PLAN.update({"workload.streams.iodepth": PLAN["workload.iodepth"],
             "workload.streams.rwmixread": PLAN["workload.rwmixread"]})
PLAN.update({f"preparation.job.{k.split('.', 1)[1]}": b for k, b in list(PLAN.items()) if k.startswith("workload.")})

# a results row's id: the schema's Integer, 32-bit on PostgreSQL (an id past it is no run, not an SQL error)
ROW_ID = _i(1, 2**31 - 1)

# command-line options, by command and option
OPTIONS = {
    "--seconds": Bound(0.001, WEEK_S, "s"),
    "--interval-us": _i(1, 1_000_000, "us"),
    "--reply-timeout": Bound(0.001, 3600.0, "s"),
    "--port": _i(1, 65_535),
    "--threads": _i(1, 64),
}


def key_of(path: tuple) -> str:
    """The table key of a plan path: ("workload", 2, "streams", 0, "range", 1) -> "workload.streams.range"."""
    return ".".join(p for p in path if isinstance(p, str))


def show(x) -> str:
    """A number as a person writes it: 1000000, 0.1, 1e+10."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:g}" if isinstance(x, float) else str(x)


def problem(b: Bound, v) -> str | None:
    """Why ``v`` is not a value within ``b`` (None: it is)."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"{v!r} is not a finite number: give a number such as 2 or 0.5"
    if b.integer and (isinstance(v, bool) or not isinstance(v, int)):
        return f"{show(v)} is not a whole number"
    if not b.lo <= v <= b.hi:
        unit = f" {b.unit}" if b.unit else ""
        return f"{show(v)} is out of range {show(b.lo)}..{show(b.hi)}{unit}"
    return None
