"""Sweep plans: a TOML file naming the rig, the drive, the preparation and the steps.

A plan is read whole and checked before anything runs: every key is known, every value has the
right type and range, and (``check_drive``) every power state exists on the drive, its serial is the
one the plan names and nothing on it is mounted. A bad plan raises PlanError with one line naming
the key path, the line (where it can be found) and the reason. ``Plan.resolved()`` holds every value
the sweep uses, defaults included; it is stored with the results and hashed so a resumed sweep never
mixes two plans.

    name = "d5-p5336 power states"
    power_states = [0, 1, 2]
    [rig]       port = "sim:d5-p5336" | "sim:qemu" | "rig:ID" | "/dev/ttyACM0" | "rfc2217://host:port"
    [drive]     controller, namespace, serial
    [preparation] kind = "none" | "format" | "precondition" | "fio"  (+ [preparation.job])
    [timing]    settle_s, idle_s, measure_s, repetitions, cooldown_s, io_log, block_trace, command_trace
    [steady_state] rounds, max_rounds, range_pct, slope_pct, metrics
    [checks]    self_reported_power, self_reported_tolerance_pct, max_lost_pct, power_limit_w
    the steps: one kind each in sweep/steps/ (its module's docstring gives its table and keys):
    idle_steps, [[workload]], [[margin]], [[power_loss]], [[perst_stress]], [[hotplug]], ...
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from powerrig.core.errors import PowerrigError
from powerrig.dut.commands import check_program, check_value
from powerrig.dut.guard import GuardRefused, in_use, resolve
from powerrig.dut.remote import RemoteError, drive_host
from powerrig.interposer.rfc2217 import check_url
from powerrig.results import schema as S
from powerrig.sim.ssd import profile as profiles
from powerrig.sweep.steps import Step, kind_of, kinds, parse_kinds
from powerrig.sweep.steps import values as V
from powerrig.sweep.steps.base import IN_EACH_STATE, ParseContext
from powerrig.sweep.steps.margin import Margin
from powerrig.sweep.steps.power_loss import PowerLoss, power_loss_cycle_s
from powerrig.sweep.steps.values import Bad, no_repeats
from powerrig.sweep.steps.workload import WorkloadStream, Workload, parse_workload, writes
from powerrig.sweep.margin import DEFAULT_SUPPLY_CHANNELS, MARGIN_LIMITS, MARGIN_NOMINAL

__all__ = ["Plan", "PlanError", "Step", "Workload", "WorkloadStream", "PowerLoss", "Margin", "power_loss_cycle_s",
           "DEFAULT_SUPPLY_CHANNELS", "MARGIN_LIMITS", "MARGIN_NOMINAL", "parse", "load", "check_drive", "quick",
           "line_of"]     # the step kinds' specs, where the faces and tests have always found them

MIN_BS, MAX_BS = V.MIN_BS, V.MAX_BS
MAX_STEPS = 1000               # a plan past these is almost always a typo ([0, 0, ...], repetitions = 10000);
MAX_HOURS = 72.0               # [limits] max_steps / max_hours raise them on purpose
MAX_IODEPTH = 4096
MAX_NUMJOBS = 256
PREP_KINDS = ("none", "format", "precondition", "fio")
STEADY_METRICS = ("bandwidth", "power")


class PlanError(PowerrigError):
    """A plan is malformed or does not fit the rig/drive; nothing has run."""


# -- the plan model ---------------------------------------------------------------------------
@dataclass(frozen=True)
class RigSpec:
    port: str                      # serial port, rfc2217://host:port, or sim:PROFILE
    interval_us: int = 1000
    nvme: tuple = ("nvme",)        # argv prefix (e.g. ["sudo", "nvme"]); a drive in another machine: drive.host
    fio: tuple = ("fio",)
    reconnect_s: float = 60.0      # how long to wait for a vanished interposer before giving up
    source: str = "interposer"     # what measures the rails (powerrig.sources.spec): n6705c:RESOURCE, ...
    supply: str = ""               # the programmable supply feeding the slot ([[margin]]): a VISA resource, or
                                   # "reference": a virtual rig's simulated N6705C
    supply_channels: tuple = ()    # ((rail, channel), ...) of that supply; () : 12V=1, 3V3=2
    reply_timeout_s: float = 2.0   # how long the interposer may take to answer a command (an emulated
                                   # board far slower than real time needs minutes, docs/emulator.md)

    @property
    def sim_profile(self) -> str | None:
        return self.port[4:] if self.port.startswith("sim:") else None

    @property
    def running_rig(self) -> str | None:
        return self.port[4:] if self.port.startswith("rig:") else None


@dataclass(frozen=True)
class DriveSpec:
    controller: str = "/dev/nvme0"
    namespace: str = "/dev/nvme0n1"
    serial: str = ""
    host: str = ""                     # "" (this host) or ssh://user@host:port, where nvme-cli and fio run


@dataclass(frozen=True)
class Preparation:
    kind: str = "none"
    job: Workload | None = None


@dataclass(frozen=True)
class Timing:
    settle_s: float = 2.0          # after a power-state change, before anything is measured
    idle_s: float = 3.0            # idle window before each workload (and the length of idle steps)
    measure_s: float = 10.0        # workload runtime unless the workload names its own
    repetitions: int = 1
    cooldown_s: float = 0.0        # after a throttled step, before its one retry (0: no retry)
    io_log: bool = False           # workload edges from fio's per-I/O logs (exact, a log line per I/O;
                                   # for fio without job_start, e.g. 3.33); else its windowed bandwidth logs
    block_trace: bool = False      # on a drive host: edges moved to the kernel's first block issue and last
                                   # completion within fio's (tracefs, as root; dut/blocktrace.py)
    command_trace: bool = True     # on a drive host or virtual rig: admin commands placed on the kernel's nvme
                                   # tracepoints, I/O traced per command (dut/nvmetrace.py)


@dataclass(frozen=True)
class SteadyState:
    rounds: int = 5                # measurement window (SNIA PTS)
    max_rounds: int = 25
    range_pct: float = 20.0        # (max - min) <= 20 % of the window mean
    slope_pct: float = 10.0        # |slope| x (rounds - 1) <= 10 % of the mean
    metrics: tuple = STEADY_METRICS


@dataclass(frozen=True)
class Checks:
    """Datasheet checks beyond the ones every step gets (MP, IDLP, ACTP, ENLAT + EXLAT)."""
    self_reported_power: bool = False      # read the drive's own power (log 0x25) beside the interposer's
    self_reported_tolerance_pct: float = 10.0
    max_lost_pct: float | None = None      # a step whose recording lost more (gaps: link, overloads) is invalid
    power_limit_w: float | None = None     # Power Limit compliance (feature 23h, guarded): set during a second run
                                           # of each workload, measured after, the old limit restored (issue 38)


@dataclass(frozen=True)
class Limits:
    """How big a plan may be before --check calls it a mistake; [limits] raises them on purpose."""
    max_steps: int = MAX_STEPS
    max_hours: float = MAX_HOURS


@dataclass(frozen=True)
class Plan:
    name: str
    rig: RigSpec
    drive: DriveSpec
    power_states: tuple
    workloads: tuple
    description: str = ""
    idle_steps: bool = True        # an idle step in each power state
    apst: str = "disable"          # "disable" for static-state steps (restored after), or "keep"
    preparation: Preparation = Preparation()
    timing: Timing = Timing()
    steady: SteadyState = SteadyState()
    source: str = ""
    path: str = ""
    checks: Checks = Checks()
    limits: Limits = None
    power_loss: tuple = ()         # [[power_loss]], [[perst_stress]] and [[hotplug]] (steps/power_loss.py)
    margin: tuple = ()
    more: tuple = ()               # ((table, specs), ...): the kinds without a field above (steps/)

    def steps(self) -> list[Step]:
        """Every step in the order it runs: in each power state and repetition the kinds of the first
        stage (idle, workloads ...), then per repetition each later stage's (margins, then the power cuts)."""
        out = []
        every = kinds()
        for ps in self.power_states:
            for rep in range(self.timing.repetitions):
                out += [(k, rep, s) for k in every if k.stage == IN_EACH_STATE for s in k.steps(self, ps, rep)]
        for stage in sorted({k.stage for k in every} - {IN_EACH_STATE}):
            for rep in range(self.timing.repetitions):
                out += [(k, rep, s) for k in every if k.stage == stage for s in k.steps(self, None, rep)]
        return [Step(index=n, repetition=rep, kind=k.name, **s) for n, (k, rep, s) in enumerate(out)]

    def resolved(self) -> dict:
        """Every value the sweep uses, defaults included (stored with the results)."""
        d = asdict(self)
        d.pop("source")
        d.pop("path")
        d.pop("limits")            # a gate on the plan, not a value the sweep uses: it leaves the hash alone
        for table, specs in d.pop("more"):
            d[table] = specs       # a newer kind's tables, under its name, only in the plans that have them
        for k in kinds():
            k.resolved(d)          # each kind's part (a kind a plan does not use leaves its hash as it was)
        for k in ("supply", "supply_channels"):
            if not d["rig"][k]:
                d["rig"].pop(k)
        if d["checks"]["max_lost_pct"] is None:
            d["checks"].pop("max_lost_pct")   # unset: plans keep the hash they had before the key
        if d["rig"]["reply_timeout_s"] == 2.0:
            d["rig"].pop("reply_timeout_s")   # the default: plans keep the hash they had before the key
        for k in ("io_log", "block_trace"):
            if not d["timing"][k]:
                d["timing"].pop(k)       # likewise plans without per-I/O logs or block tracing: a stored sweep still resumes
        if d["timing"]["command_trace"]:
            d["timing"].pop("command_trace")     # the default: plans keep the hash they had before the key
        return json.loads(json.dumps(d))

    @property
    def hash(self) -> str:
        return hashlib.sha256(json.dumps(self.resolved(), sort_keys=True).encode()).hexdigest()[:16]

    def runtime_of(self, w: Workload) -> float | None:
        if w.runtime_s is not None:
            return w.runtime_s
        return None if w.size else self.timing.measure_s

    def estimate_s(self) -> float:
        """Rough length of the sweep, for the ETA before the first step has finished."""
        return sum(self.timing.settle_s + self.timing.idle_s + kind_of(s).estimate_s(self, s) for s in self.steps())

    def longest_s(self) -> float:
        """The most the sweep can take: steady-state workloads at max_rounds (``--check`` shows it beside
        the estimate; [limits] max_hours holds the estimate, as stored plans were checked)."""
        return sum(self.timing.settle_s + self.timing.idle_s + kind_of(s).longest_s(self, s) for s in self.steps())


# -- parsing ----------------------------------------------------------------------------------
BASE_TOP = {"name", "description", "power_states", "apst", "rig", "drive", "preparation", "timing", "steady_state",
            "checks", "limits"}
LIMITS = {"max_steps", "max_hours"}
CHECKS = {"self_reported_power", "self_reported_tolerance_pct", "max_lost_pct", "power_limit_w"}
RIG = {"port", "interval_us", "nvme", "fio", "reconnect_s", "source", "supply", "supply_channels", "reply_timeout_s"}
DRIVE = {"controller", "namespace", "serial", "host"}
PREP = {"kind", "job"}
TIMING = {"settle_s", "idle_s", "measure_s", "repetitions", "cooldown_s", "io_log", "block_trace", "command_trace"}
STEADY = {"rounds", "max_rounds", "range_pct", "slope_pct", "metrics"}


def _argv(path, v) -> tuple:
    if isinstance(v, str):
        return _program(path, tuple(v.split()))
    V.want(path, v, (list,), "a command (a string or an array of strings)")
    for k, a in enumerate(v):
        V.string(path + (k,), a)
    if not v:
        raise Bad(path, "must not be empty")
    return _program(path, tuple(v))


def _program(path, words: tuple) -> tuple:
    """nvme/fio program prefix: one program, optionally after sudo/doas/nice/ionice, and no option
    word (an option in a prefix reaches the tool unchecked: a read became a write); no ssh (use
    drive.host)."""
    return tuple(V.door(path, check_program, "program", list(words)))


def _drive_host(path, v) -> str:
    """ssh://[user@]host[:port][?Option=value]: user and host never read as options, options allow-listed."""
    try:
        drive_host(v)
    except RemoteError as e:
        raise Bad(path, str(e)) from None
    return v


def _rfc2217_url(path, v: str) -> None:
    """rfc2217://host:port with pyserial's options (?ign_set_control for ser2net): the link's own check."""
    try:
        check_url(v)
    except PowerrigError as e:
        raise Bad(path, str(e)) from None


def _port(path, v) -> str:
    """The interposer's port: no control or invisible character (a terminal would show another name,
    or act on it), then one of the forms a rig is reached by."""
    V.string(path, v)
    V.door(path, check_value, "serial port", v)
    if v.startswith("rig:"):
        if not re.fullmatch(r"rig:[0-9a-f]{8}", v):
            raise Bad(path, f"{v!r} is not a running rig's id (rig:ID, from `powerrig sim list`)")
    elif v.startswith("sim:"):
        if v[4:] not in profiles.available() and v[4:] != "qemu":
            raise Bad(path, f"no drive profile {v[4:]!r} for the virtual rig (available: "
                            f"{', '.join(profiles.available())}, or qemu: the real NVMe stack in a QEMU guest)")
    elif v.startswith("rfc2217://"):
        _rfc2217_url(path, v)
    elif not v.startswith("/dev/") and not re.fullmatch(r"COM\d+", v):
        raise Bad(path, f"{v!r} is not a serial port, rfc2217://host:port, sim:PROFILE or rig:ID")
    return v


def _supply(path, v, port) -> str:
    """The margin supply: a VISA resource, or "reference" (the simulated N6705C of a virtual rig)."""
    v = V.string(path, v)
    if v == "reference" and not str(port).startswith(("sim:", "rig:")):
        raise Bad(path, '"reference" is a virtual rig\'s simulated supply: with a real rig give the supply\'s VISA '
                        "resource, e.g. TCPIP::192.168.1.20::5025::SOCKET")
    if any(ord(c) < 32 for c in v):
        raise Bad(path, "holds a control character: give the VISA resource as `powerrig devices` or the supply shows it")
    return v


def _supply_channels(path, v) -> tuple:
    """{"12V" = 1, "3V3" = 2}: the supply's output channel feeding each rail (as calibrate's --channels)."""
    V.table(path, v)
    V.known(path, v, set(MARGIN_LIMITS))
    return tuple((r, V.integer(path + (r,), c)) for r, c in v.items())


def _build(d: dict, text: str, path: str) -> Plan:
    V.known((), d, BASE_TOP | {k.table for k in kinds()})
    name = V.string(("name",), d.get("name", Path(path).stem if path else "sweep"))
    if "rig" not in d:
        raise Bad(("rig",), "missing: the plan must name its rig ([rig] port = ...)")
    r = V.table(("rig",), d["rig"])
    V.known(("rig",), r, RIG)
    if "port" not in r:
        raise Bad(("rig", "port"), "missing: a serial port, rfc2217://host:port or sim:PROFILE")
    rig = RigSpec(_port(("rig", "port"), r["port"]),
                  V.integer(("rig", "interval_us"), r.get("interval_us", 1000)),
                  _argv(("rig", "nvme"), r.get("nvme", ["nvme"])), _argv(("rig", "fio"), r.get("fio", ["fio"])),
                  V.number(("rig", "reconnect_s"), r.get("reconnect_s", 60.0)),
                  V.source(("rig", "source"), r.get("source", "interposer")),
                  _supply(("rig", "supply"), r.get("supply", ""), r["port"]),
                  _supply_channels(("rig", "supply_channels"), r.get("supply_channels", {})),
                  V.number(("rig", "reply_timeout_s"), r.get("reply_timeout_s", 2.0)))
    dr = V.table(("drive",), d.get("drive", {}))
    V.known(("drive",), dr, DRIVE)
    drive = DriveSpec(*(V.string(("drive", k), dr.get(k, v)) for k, v in
                        (("controller", "/dev/nvme0"), ("namespace", "/dev/nvme0n1"), ("serial", ""),
                         ("host", ""))))
    V.device(("drive", "controller"), drive.controller)
    V.device(("drive", "namespace"), drive.namespace)
    if drive.host:
        _drive_host(("drive", "host"), drive.host)
    p = V.table(("preparation",), d.get("preparation", {}))
    V.known(("preparation",), p, PREP)
    kind = V.string(("preparation", "kind"), p.get("kind", "none"))
    if kind not in PREP_KINDS:
        raise Bad(("preparation", "kind"), f"{kind!r} is not one of {', '.join(PREP_KINDS)}")
    job = None
    if kind == "fio":
        if "job" not in p:
            raise Bad(("preparation", "job"), 'missing: kind = "fio" needs a [preparation.job] workload')
        job = parse_workload(("preparation", "job"), p["job"], "prepare")
    elif "job" in p:
        raise Bad(("preparation", "job"), f'only kind = "fio" takes a job (kind is {kind!r})')
    if kind != "none" and not drive.serial:
        raise Bad(("drive", "serial"), f"preparation {kind!r} writes the whole drive: name its serial number")
    t = V.table(("timing",), d.get("timing", {}))
    V.known(("timing",), t, TIMING)
    dt = Timing()
    timing = Timing(V.number(("timing", "settle_s"), t.get("settle_s", dt.settle_s)),
                    V.number(("timing", "idle_s"), t.get("idle_s", dt.idle_s)),
                    V.number(("timing", "measure_s"), t.get("measure_s", dt.measure_s)),
                    V.integer(("timing", "repetitions"), t.get("repetitions", dt.repetitions)),
                    V.number(("timing", "cooldown_s"), t.get("cooldown_s", dt.cooldown_s)),
                    V.boolean(("timing", "io_log"), t.get("io_log", dt.io_log)),
                    V.boolean(("timing", "block_trace"), t.get("block_trace", dt.block_trace)),
                    V.boolean(("timing", "command_trace"), t.get("command_trace", dt.command_trace)))
    s = V.table(("steady_state",), d.get("steady_state", {}))
    V.known(("steady_state",), s, STEADY)
    ds = SteadyState()
    metrics = s.get("metrics", list(ds.metrics))
    V.want(("steady_state", "metrics"), metrics, (list,), "an array")
    for k, m in enumerate(metrics):
        if V.string(("steady_state", "metrics", k), m) not in STEADY_METRICS:
            raise Bad(("steady_state", "metrics", k), f"{m!r} is not one of {', '.join(STEADY_METRICS)}")
    steady = SteadyState(V.integer(("steady_state", "rounds"), s.get("rounds", ds.rounds)),
                         V.integer(("steady_state", "max_rounds"), s.get("max_rounds", ds.max_rounds)),
                         V.number(("steady_state", "range_pct"), s.get("range_pct", ds.range_pct)),
                         V.number(("steady_state", "slope_pct"), s.get("slope_pct", ds.slope_pct)),
                         tuple(metrics))
    if steady.max_rounds < steady.rounds:
        raise Bad(("steady_state", "max_rounds"), f"{steady.max_rounds} is below rounds ({steady.rounds})")
    pss = V.want(("power_states",), d.get("power_states", [0]), (list,), "an array of power state numbers")
    pss = tuple(V.integer(("power_states", k), v) for k, v in enumerate(pss))
    if not pss:
        raise Bad(("power_states",), "must name at least one power state")
    ctx = ParseContext(d, rig, drive)
    for k in parse_kinds():
        ctx.parsed[k.name] = k.parse_all(ctx)
    if not any(k.has_steps(ctx.parsed[k.name]) for k in kinds()):
        raise Bad(("workload",), "the plan has no steps: add a [[workload]] or set idle_steps = true")
    apst = V.string(("apst",), d.get("apst", "disable"))
    if apst not in ("disable", "keep"):
        raise Bad(("apst",), f"{apst!r} is not disable or keep")
    c = V.table(("checks",), d.get("checks", {}))
    V.known(("checks",), c, CHECKS)
    checks = Checks(V.boolean(("checks", "self_reported_power"), c.get("self_reported_power", False)),
                    V.number(("checks", "self_reported_tolerance_pct"), c.get("self_reported_tolerance_pct", 10.0)),
                    V.number(("checks", "max_lost_pct"), c["max_lost_pct"]) if "max_lost_pct" in c else None,
                    V.number(("checks", "power_limit_w"), c["power_limit_w"]) if "power_limit_w" in c else None)
    fields: dict = {"workloads": (), "power_loss": (), "margin": ()}
    more = []
    for k in parse_kinds():
        got = ctx.parsed[k.name]
        if k.plan_field:
            fields[k.plan_field] = fields.get(k.plan_field, ()) + got if isinstance(got, tuple) else got
        elif got:
            more.append((k.table, got))
    plan = Plan(name, rig, drive, pss, description=V.string(("description",), d.get("description", "")), apst=apst,
                preparation=Preparation(kind, job), timing=timing, steady=steady, source=text, path=path,
                checks=checks, limits=_limits(d), more=tuple(more), **fields)
    _check_size(plan, d)
    _check_column_limits(plan)
    return plan


def _limits(d: dict) -> Limits:
    t = V.table(("limits",), d.get("limits", {}))
    V.known(("limits",), t, LIMITS)
    return Limits(V.integer(("limits", "max_steps"), t.get("max_steps", MAX_STEPS)),
                  V.number(("limits", "max_hours"), t.get("max_hours", MAX_HOURS)))


def _check_size(plan: Plan, d: dict) -> None:
    """What would only fail hours into a run fails here: a power state listed twice (its steps would
    repeat keys already stored), a steady-state metric twice, an interval the capture cannot hold (at
    the first step), and a plan past the step or duration limits (every single duration included:
    one of them alone could outlast the run)."""
    no_repeats(("power_states",), list(plan.power_states), lambda ps: f"PS{ps}",
                "list each power state once (timing.repetitions repeats steps)")
    no_repeats(("steady_state", "metrics"), list(plan.steady.metrics), str, "list each metric once")
    keys = [s.key for s in plan.steps()]
    if len(set(keys)) != len(keys):       # a guard for any future way of repeating a step
        dup = next(k for k in keys if keys.count(k) > 1)
        raise Bad(("workload",), f"step {dup} would run twice; names of workloads and power states must be unique")
    if 1_000_000 % plan.rig.interval_us:     # the capture's sample rate is intervals per second, a whole number
        raise Bad(("rig", "interval_us"), f"{plan.rig.interval_us} us does not divide one second: a capture needs a "
                                           "whole number of intervals per second (100, 200, 250, 500, 1000 ...)")
    lim = plan.limits
    if len(keys) > lim.max_steps:
        raise Bad(("power_states",), f"the plan has {len(keys)} steps, over the limit of {lim.max_steps}: check "
                                      "power_states, workloads and timing.repetitions, or raise it on purpose with "
                                      f"[limits] max_steps = {len(keys)}")
    cap = lim.max_hours * 3600
    t = plan.timing
    singles = [(("timing", k), getattr(t, k)) for k in ("settle_s", "idle_s", "measure_s", "cooldown_s")]
    singles += [(("rig", "reconnect_s"), plan.rig.reconnect_s)]
    singles += [x for k in kinds() for x in k.durations(plan)]
    for path, v in singles:
        if v > cap:
            raise Bad(path, f"{v:g} s is longer than the whole-plan limit of {lim.max_hours:g} h; give seconds, or "
                             f"raise it on purpose with [limits] max_hours")
    est = plan.estimate_s()
    if est > cap:
        raise Bad(("timing", "repetitions"), f"the plan takes about {est / 3600:.1f} h, over the limit of {lim.max_hours:g} h: "
                                f"check the durations and repetitions, or raise it on purpose with [limits] max_hours = "
                                f"{math.ceil(est / 3600)}")


def _check_column_limits(plan: Plan) -> None:
    """Every text a plan puts into the results database fits its column: the limits are the schema's
    own column lengths, so `--check` refuses what the database (PostgreSQL's varchar) would."""
    def fits(path, value: str, *columns) -> None:
        for col in columns:
            if col.type.length is not None and len(value) > col.type.length:
                raise Bad(path, f"{len(value)} characters ({value[:24]!r}...) is over the {col.type.length} that "
                                 f"the results database holds ({col.table.name}.{col.name}): shorten it")

    fits(("name",), plan.name, S.plans.c.name)
    if not plan.rig.sim_profile:
        fits(("rig", "port"), plan.rig.port, S.runs.c.station)
    top_ps, top_rep = max(plan.power_states), plan.timing.repetitions - 1
    for k in kinds():
        k.fits(plan, fits, S, top_ps, top_rep)


def _fmt_path(path: tuple) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def line_of(text: str, path: tuple) -> int | None:
    """Best-effort line number (1-based) of a key path in the TOML text: tomllib keeps no positions."""
    lines = text.splitlines()
    # the header of the innermost table (or array of tables) that holds the key
    start, end = 0, len(lines)
    header_parts: list[str] = []
    target_key = None
    parts = list(path)
    # walk: for each string key followed by an int (array of tables) or a dict key, narrow the region
    i = 0
    while i < len(parts):
        k = parts[i]
        if not isinstance(k, str):
            i += 1
            continue
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        dotted = ".".join(header_parts + [k])
        if isinstance(nxt, int):
            hdr = re.compile(rf"^\s*\[\[\s*{re.escape(dotted)}\s*\]\]")
            hits = [n for n in range(start, end) if hdr.match(lines[n])]
            if nxt < len(hits):
                start = hits[nxt] + 1
                end = next((n for n in range(start, len(lines)) if re.match(r"^\s*\[", lines[n])), len(lines))
                header_parts.append(k)
                i += 2
                continue
        hdr = re.compile(rf"^\s*\[\s*{re.escape(dotted)}\s*\]")
        hit = next((n for n in range(start, end) if hdr.match(lines[n])), None)
        if hit is not None and i < len(parts) - 1:
            start = hit + 1
            end = next((n for n in range(start, len(lines)) if re.match(r"^\s*\[", lines[n])), len(lines))
            header_parts.append(k)
            i += 1
            continue
        target_key = k
        break
    if target_key is None:
        return start if start else None
    key = re.compile(rf"^\s*{re.escape(target_key)}\s*=")
    if not header_parts and start == 0:
        end = next((n for n in range(len(lines)) if re.match(r"^\s*\[", lines[n])), len(lines))
    hit = next((n for n in range(start, end) if key.match(lines[n])), None)
    if hit is not None:
        return hit + 1
    return start if start else None


def parse(text: str, path: str = "<plan>") -> Plan:
    """A validated Plan from TOML text; PlanError (one line) otherwise."""
    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"plan {path}: not valid TOML: {e}") from None
    try:
        return _build(d, text, path)
    except Bad as b:
        ln = line_of(text, b.path)
        where = f" (line {ln})" if ln else ""
        raise PlanError(f"plan {path}: {_fmt_path(b.path)}{where}: {b.reason}") from None


def load(path: str | Path) -> Plan:
    p = Path(path)
    if not p.is_file():
        raise PlanError(f"no plan file {p} (see fixtures/plans/ for ready-made plans)")
    return parse(p.read_text(), str(p))


# -- checks against the drive and the rig (before anything runs) --------------------------------
def check_drive(plan: Plan, ident, host=None) -> None:
    """Refuse a plan that does not fit the drive: a power state it lacks, a serial that differs,
    a destructive preparation on a mounted drive. ``ident`` is a ControllerId (nvme id-ctrl)."""
    have = ident.npss
    for k, ps in enumerate(plan.power_states):
        if ps > have:
            ln = line_of(plan.source, ("power_states",))
            raise PlanError(f"plan {plan.path}: power_states[{k}]{f' (line {ln})' if ln else ''}: the drive "
                            f"{ident.mn.strip()} has no PS{ps} (it has PS0..PS{have})")
        if ident.state(ps).non_operational and any(True for _ in plan.workloads):
            ln = line_of(plan.source, ("power_states",))
            raise PlanError(f"plan {plan.path}: power_states[{k}]{f' (line {ln})' if ln else ''}: PS{ps} is "
                            "non-operational (no I/O there); measure it with idle steps only")
    sn = ident.sn.strip()
    if plan.drive.serial and plan.drive.serial.strip() != sn:
        ln = line_of(plan.source, ("drive", "serial"))
        raise PlanError(f"plan {plan.path}: drive.serial{f' (line {ln})' if ln else ''}: the drive at "
                        f"{plan.drive.controller} has serial {sn!r}, the plan names {plan.drive.serial!r} "
                        "(wrong drive in the slot?)")
    if plan.preparation.kind != "none" or any(writes(w) for w in plan.workloads):
        ln = line_of(plan.source, ("drive", "controller"))
        where = f"plan {plan.path}: drive.controller{f' (line {ln})' if ln else ''}"
        try:
            uses = in_use(resolve(plan.drive.controller, host), host)
        except GuardRefused as e:
            raise PlanError(f"{where}: {e}") from None
        if uses:
            raise PlanError(f"{where}: {plan.drive.controller} has mounted filesystems "
                            f"({', '.join(m for _d, m in uses)}); this plan writes to it: unmount them or use "
                            "another drive")


QUICK_TIMING = {"settle_s": 0.5, "idle_s": 1.5, "measure_s": 3.0}


def quick(plan: Plan) -> Plan:
    """The plan with short windows (`powerrig sweep --quick`, `powerrig demo --quick`): to try a plan or
    see the whole flow in about a third of the time. Its hash differs (the timing is hashed), so a quick
    run is never resumed or compared as the plan's own; a workload that names its own runtime keeps it."""
    return dataclasses.replace(plan, timing=dataclasses.replace(plan.timing, **QUICK_TIMING))
