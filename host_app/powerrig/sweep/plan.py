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
    [[workload]] name, rw, bs, iodepth, numjobs, rwmixread, ranges, runtime_s | size, streams, fdp
    [[power_loss]] name, cycles, bs, iodepth, size, cut_ms, off_ms, ready_timeout_s, holdup_threshold_v,
                   inrush_trigger_w, seed, fsync_every   (surprise power loss during verified writes:
                   docs/power-loss.md)
    [[perst_stress]] the same keys: PERST# asserted for off_ms (default a random 10..100) under verified writes
    [[hotplug]]      the same keys: a surprise removal (PERST#, 12 V, 3.3 V off) for off_ms (default 500), then
                     insertion with the spec's timing (power, PERST# released 100 ms later), link read after
    [[margin]]  name, rail ("12V" | "3V3"), volts, workload, settle_s, agree_pct, current_limit_a: the rail
                supplied at each voltage by the lab supply [rig] supply names (docs/power-loss.md#margining)
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from powerrig.dut.fio import RW_MODES, parse_size
from powerrig.core.errors import PowerrigError

MIN_BS, MAX_BS = 512, 16 * 2**20
MAX_STEPS = 1000               # a plan past these is almost always a typo ([0, 0, ...], repetitions = 10000);
MAX_HOURS = 72.0               # [limits] max_steps / max_hours raise them on purpose
MAX_IODEPTH = 4096
MAX_NUMJOBS = 256
PREP_KINDS = ("none", "format", "precondition", "fio")
STEADY_METRICS = ("bandwidth", "power")


class PlanError(PowerrigError):
    """A plan is malformed or does not fit the rig/drive; nothing has run."""


# -- value checks -----------------------------------------------------------------------------
class _Bad(Exception):
    def __init__(self, path: tuple, reason: str):
        super().__init__(reason)
        self.path, self.reason = path, reason


def _type_name(v) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(v), type(v).__name__)


def _want(path, v, types, what):
    if isinstance(v, bool) and bool not in types:
        raise _Bad(path, f"must be {what}, not {_type_name(v)}")
    if not isinstance(v, types):
        raise _Bad(path, f"must be {what}, not {_type_name(v)} {v!r}")
    return v


def _source(path, v):
    """A measurement source spec (powerrig.sources.spec), checked before anything runs."""
    from powerrig.core.errors import InstrumentError
    from powerrig.sources.spec import parse_spec
    v = _str(path, v)
    try:
        parse_spec(v)
    except InstrumentError as e:
        raise _Bad(path, str(e)) from None
    return v


def _str(path, v):
    return _want(path, v, (str,), "a string")


def _bound(path):
    """The floor and ceiling of the number at ``path``, from the one table (powerrig.core.bounds)."""
    from powerrig.core.bounds import PLAN, key_of
    key = key_of(path)
    while key not in PLAN and "." in key:        # a table of names: [rig.supply_channels] 12V = 1
        key = key.rsplit(".", 1)[0]
    return PLAN[key]


def _int(path, v):
    from powerrig.core.bounds import problem
    _want(path, v, (int,), "an integer")
    why = problem(_bound(path), v)
    if why:
        raise _Bad(path, why)
    return v


def _num(path, v):
    from powerrig.core.bounds import problem
    _want(path, v, (int, float), "a number")
    why = problem(_bound(path), v)
    if why:
        raise _Bad(path, why)
    return float(v)


def _finite(path, v) -> None:
    """nan and inf are valid TOML but no duration or percentage: nan compares false with every bound
    (it would pass a range check and crash the run hours later), inf never ends a sleep."""
    if not math.isfinite(v):
        raise _Bad(path, f"{v!r} is not a finite number: give a number such as 2 or 0.5")


def _bool(path, v):
    return _want(path, v, (bool,), "true or false")


def _bs(path, v) -> int:
    _want(path, v, (str, int), 'a block size ("4k", "128k" or bytes)')
    try:
        b = parse_size(v)
    except ValueError:
        raise _Bad(path, f"{v!r} is not a block size (write 4k, 128k, 1m or bytes)") from None
    if not MIN_BS <= b <= MAX_BS or b % 512:
        raise _Bad(path, f"{v!r} is out of range: a block size is a multiple of 512 B from 512 B to 16 MiB")
    return b


def _size(path, v) -> str:
    _want(path, v, (str, int), 'a size ("10g", "50%" or bytes)')
    from powerrig.dut.commands import fio_value
    _door(path, fio_value, "size", v)              # it goes into fio's job file as it is written
    try:
        parse_size(v, 100)
    except ValueError:
        raise _Bad(path, f"{v!r} is not a size (write 10g, 50% or bytes)") from None
    return str(v)


def _known(path, d: dict, keys) -> None:
    for k in d:
        if k not in keys:
            raise _Bad(path + (k,), f"unknown key (known here: {', '.join(sorted(keys))})")


def _table(path, v) -> dict:
    return _want(path, v, (dict,), "a table")


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
class Stream:
    """One fio job of a workload (several streams run together in one fio process)."""
    rw: str
    bs: int
    iodepth: int
    rwmixread: int | None = None
    range_pct: tuple | None = None     # (from %, to %) of the namespace
    namespace: str | None = None       # another namespace (FDP: one per placement handle)
    rate_iops: int | None = None
    fdp: bool = False                  # writes carry the namespace's FDP placement handle (fio fdp=1)


@dataclass(frozen=True)
class Workload:
    name: str
    rw: str = "read"
    bs: int = 131072
    iodepth: int = 128
    numjobs: int = 1
    rwmixread: int | None = None
    runtime_s: float | None = None     # None: the plan's measure_s (unless size is given)
    size: str | None = None
    streams: tuple = ()                # explicit streams; else one per range, else one
    steady_state: bool = False
    waf_every_s: float | None = None   # sample write-amplification counters this often
    fdp: bool = False                  # every stream's writes carry FDP placement handles

    def all_streams(self) -> tuple[Stream, ...]:
        if self.streams:
            return self.streams
        return (Stream(self.rw, self.bs, self.iodepth, self.rwmixread, fdp=self.fdp),)


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
class PowerLoss:
    """Surprise power loss during writes: each cycle writes fio verify headers (a new seed), cuts 12 V
    ``cut_ms`` after the writes are seen flowing (a [from, to] range: a random point in it), restores
    it ``off_ms`` later (a number or a range, as cut_ms), waits for the controller and classifies every
    block fio's verify finds wrong. ``kind`` "perst": PERST# asserted instead of the cut (a reset
    under load; power stays, so nothing acknowledged may be lost either); "hotplug": a surprise
    removal and an insertion with the CEM timing (sweep/power_loss.py)."""
    name: str
    cycles: int = 10
    bs: int = 131072
    iodepth: int = 8
    size: str = "100%"                 # the region the writes run through, from the namespace's start
    cut_ms: tuple = (0.0, 500.0)       # (from, to); equal: a chosen point
    off_ms: tuple = (10.0, 10.0)
    ready_timeout_s: float = 30.0
    holdup_threshold_v: float = 9.0    # hold-up: from the cut until the drive side falls through this
    inrush_trigger_w: float = 40.0     # the raw burst around each restore triggers on 12 V above this
    seed: int = 29                     # with the step's key and the cycle: each cycle's randseed and random points
    kind: str = "cut"                  # "cut" ([[power_loss]]), "perst" ([[perst_stress]]), "hotplug" ([[hotplug]])
    fsync_every: int | None = None     # a flush (fio fsync=N) after every N writes; unset: none, the hash as before

    @property
    def prefix(self) -> str:
        """Its steps' key prefix and its measurements' phase prefix."""
        return {"perst": "perst-stress", "hotplug": "hot-plug"}.get(self.kind, "power-loss")


# Margining limits: 12 V from 10.8 to 13.2 V (+-10 %, issue 29; past the CEM's +5 %/-8 % operating
# tolerance on purpose: a margin test shows how far outside it the drive still works) and 3.3 Vaux
# within its +-9 % (PCIe CEM). A plan asking for more is refused: it could damage the drive.
MARGIN_LIMITS = {"12V": (10.8, 13.2), "3V3": (3.003, 3.597)}
MARGIN_NOMINAL = {"12V": 12.0, "3V3": 3.3}
DEFAULT_SUPPLY_CHANNELS = (("12V", 1), ("3V3", 2))


@dataclass(frozen=True)
class Margin:
    """Rail margining: the lab supply feeding the slot ([rig] supply) sets ``rail`` to each of ``volts``;
    after ``settle_s`` the interposer's reading must agree within ``agree_pct`` (else the supply does
    not feed the slot), then ``workload`` (a [[workload]] of the plan) runs; nominal is restored after
    every point (sweep/margin.py)."""
    name: str
    rail: str = "12V"
    volts: tuple = (10.8, 12.0, 13.2)
    workload: str = ""
    settle_s: float = 1.0
    agree_pct: float = 2.0
    current_limit_a: float = 10.0


@dataclass(frozen=True)
class Step:
    index: int
    key: str                       # stable id: the same plan gives the same keys (resume)
    name: str
    power_state: int
    workload: Workload | None      # None: an idle step (or a power-loss step)
    repetition: int
    power_loss: PowerLoss | None = None
    margin: Margin | None = None
    margin_v: float | None = None      # this step's supply voltage


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
    limits: "Limits" = None
    power_loss: tuple = ()
    margin: tuple = ()

    def steps(self) -> list[Step]:
        out = []
        for ps in self.power_states:
            for rep in range(self.timing.repetitions):
                if self.idle_steps:
                    out.append((ps, None, rep))
                for w in self.workloads:
                    out.append((ps, w, rep))
        steps = [Step(k, *self.step_key_name(ps, w, rep), ps, w, rep) for k, (ps, w, rep) in enumerate(out)]
        for rep in range(self.timing.repetitions):       # margins before the power cuts
            for m in self.margin:
                w = next(x for x in self.workloads if x.name == m.workload)
                for v in m.volts:
                    key, name = self.margin_key_name(m, v, rep)
                    steps.append(Step(len(steps), key, name, self.power_states[0], w, rep, margin=m, margin_v=v))
        for rep in range(self.timing.repetitions):       # after the measurements: they cut the drive's power
            for pl in self.power_loss:
                key, name = self.power_loss_key_name(pl, rep)
                steps.append(Step(len(steps), key, name, self.power_states[0], None, rep, pl))
        return steps

    def power_loss_key_name(self, pl: PowerLoss, rep: int) -> tuple[str, str]:
        return (f"{pl.prefix}/{pl.name}/r{rep + 1}",
                f"{pl.prefix.replace('-', ' ')} {pl.name}" + (f" #{rep + 1}" if self.timing.repetitions > 1 else ""))

    def margin_key_name(self, m: Margin, volts: float, rep: int) -> tuple[str, str]:
        return (f"margin/{m.name}/{m.rail}-{volts:.3f}V/r{rep + 1}",
                f"margin {m.name} {m.rail} {volts:.3f} V" + (f" #{rep + 1}" if self.timing.repetitions > 1 else ""))

    def step_key_name(self, ps: int, w: Workload | None, rep: int) -> tuple[str, str]:
        """A step's stable key and its display name."""
        wname = w.name if w else "idle"
        return (f"ps{ps}/{wname}/r{rep + 1}",
                f"PS{ps} {wname}" + (f" #{rep + 1}" if self.timing.repetitions > 1 else ""))

    def resolved(self) -> dict:
        """Every value the sweep uses, defaults included (stored with the results)."""
        d = asdict(self)
        d.pop("source")
        d.pop("path")
        d.pop("limits")            # a gate on the plan, not a value the sweep uses: it leaves the hash alone
        if not d["power_loss"]:
            d.pop("power_loss")    # plans without power-loss steps keep the hash they had before it existed
        for pl in d.get("power_loss", []):
            if pl["fsync_every"] is None:
                pl.pop("fsync_every")          # unset: plans keep the hash they had before the key
        if not d["margin"]:
            d.pop("margin")        # ... and without margin steps, nor a supply
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
        t = 0.0
        for s in self.steps():
            t += self.timing.settle_s + self.timing.idle_s
            if s.power_loss is not None:
                t += s.power_loss.cycles * power_loss_cycle_s(s.power_loss)
            if s.margin is not None:
                t += s.margin.settle_s
            if s.workload is not None:
                rt = self.runtime_of(s.workload) or self.timing.measure_s
                t += rt * (self.steady.rounds if s.workload.steady_state else 1)
        return t


def power_loss_cycle_s(pl: PowerLoss) -> float:
    """Rough length of one cycle: fio's start and first status (1 s), the cut, the off time, the
    controller's enumeration and two verify passes (a few fio starts)."""
    return 2.5 + pl.cut_ms[1] / 1000 + pl.off_ms[1] / 1000 + 0.5


# -- parsing ----------------------------------------------------------------------------------
TOP = {"name", "description", "power_states", "idle_steps", "apst", "rig", "drive", "preparation", "timing",
       "steady_state", "workload", "checks", "limits", "power_loss", "perst_stress", "hotplug",
       "margin"}
MARGIN = {"name", "rail", "volts", "workload", "settle_s", "agree_pct", "current_limit_a"}
PULSE_TABLES = (("power_loss", "cut"), ("perst_stress", "perst"), ("hotplug", "hotplug"))
DEFAULT_OFF_MS = {"cut": (10.0, 10.0), "perst": (10.0, 100.0), "hotplug": (500.0, 500.0)}
POWER_LOSS = {"name", "cycles", "bs", "iodepth", "size", "cut_ms", "off_ms", "ready_timeout_s", "holdup_threshold_v",
              "inrush_trigger_w", "seed", "fsync_every"}
MAX_CYCLES = 100_000
MAX_OFF_MS = 60_000.0
LIMITS = {"max_steps", "max_hours"}
CHECKS = {"self_reported_power", "self_reported_tolerance_pct", "max_lost_pct", "power_limit_w"}
RIG = {"port", "interval_us", "nvme", "fio", "reconnect_s", "source", "supply", "supply_channels", "reply_timeout_s"}
DRIVE = {"controller", "namespace", "serial", "host"}
PREP = {"kind", "job"}
TIMING = {"settle_s", "idle_s", "measure_s", "repetitions", "cooldown_s", "io_log", "block_trace", "command_trace"}
STEADY = {"rounds", "max_rounds", "range_pct", "slope_pct", "metrics"}
WORKLOAD = {"name", "rw", "bs", "iodepth", "numjobs", "rwmixread", "ranges", "runtime_s", "size", "streams",
            "steady_state", "waf_every_s", "fdp"}
STREAM = {"rw", "bs", "iodepth", "rwmixread", "range", "namespace", "rate_iops", "fdp"}


def _argv(path, v) -> tuple:
    if isinstance(v, str):
        return _program(path, tuple(v.split()))
    _want(path, v, (list,), "a command (a string or an array of strings)")
    for k, a in enumerate(v):
        _str(path + (k,), a)
    if not v:
        raise _Bad(path, "must not be empty")
    return _program(path, tuple(v))


# -- values that reach another program's command line or job file: checked by that door ---------------
def _door(path, check, *args):
    """Run one of powerrig.dut.commands' checks; its refusal becomes this key's one-line error."""
    from powerrig.dut.commands import UnsafeArgument
    try:
        return check(*args)
    except UnsafeArgument as e:
        raise _Bad(path, str(e)) from None


def _program(path, words: tuple) -> tuple:
    """nvme/fio program prefix: one program, optionally after sudo/doas/nice/ionice, and no option
    word (an option in a prefix reaches the tool unchecked: a read became a write); no ssh (use
    drive.host)."""
    from powerrig.dut.commands import check_program
    return tuple(_door(path, check_program, "program", list(words)))


def _device(path, v) -> str:
    """A controller or namespace path: nvme-cli's positional argument and fio's filename, so read by
    fio_value as fio reads it (no '#', ';' or edge blank, which fio cuts: one name for guard and fio)."""
    from powerrig.dut.commands import check_device, fio_value
    _str(path, v)
    _door(path, check_device, "path", v)
    if ":" in v:
        raise _Bad(path, f"{v!r} holds ':', which fio reads as a list of files: name the device as "
                         "/dev/nvmeXnY or by a /dev/disk/by-id link")
    return _door(path, fio_value, "filename", v)


def _fio_section(path, name: str) -> str:
    """A workload name is a fio job section: checked like one (not 'global', fio's own)."""
    from powerrig.dut.commands import check_job_name
    return _door(path, check_job_name, "workload name", name)


def _drive_host(path, v) -> str:
    """ssh://[user@]host[:port][?Option=value]: user and host never read as options, options allow-listed."""
    from powerrig.dut.remote import RemoteError, drive_host
    try:
        drive_host(v)
    except RemoteError as e:
        raise _Bad(path, str(e)) from None
    return v


def _rfc2217_url(path, v: str) -> None:
    """rfc2217://host:port with pyserial's options (?ign_set_control for ser2net): the link's own check."""
    from powerrig.interposer.rfc2217 import check_url
    try:
        check_url(v)
    except PowerrigError as e:
        raise _Bad(path, str(e)) from None


def _port(path, v) -> str:
    """The interposer's port: no control or invisible character (a terminal would show another name,
    or act on it), then one of the forms a rig is reached by."""
    from powerrig.dut.commands import check_value
    _str(path, v)
    _door(path, check_value, "serial port", v)
    if v.startswith("rig:"):
        if not re.fullmatch(r"rig:[0-9a-f]{8}", v):
            raise _Bad(path, f"{v!r} is not a running rig's id (rig:ID, from `powerrig sim list`)")
    elif v.startswith("sim:"):
        from powerrig.sim import profile as profiles
        if v[4:] not in profiles.available() and v[4:] != "qemu":
            raise _Bad(path, f"no drive profile {v[4:]!r} for the virtual rig (available: "
                             f"{', '.join(profiles.available())}, or qemu: the real NVMe stack in a QEMU guest)")
    elif v.startswith("rfc2217://"):
        _rfc2217_url(path, v)
    elif not v.startswith("/dev/") and not re.fullmatch(r"COM\d+", v):
        raise _Bad(path, f"{v!r} is not a serial port, rfc2217://host:port, sim:PROFILE or rig:ID")
    return v


def _range(path, v) -> tuple:
    _want(path, v, (list,), "[from %, to %]")
    if len(v) != 2:
        raise _Bad(path, "must be [from %, to %]")
    a, b = (_num(path + (k,), x) for k, x in enumerate(v))
    if b <= a:
        raise _Bad(path, f"range [{a:g}, {b:g}] is empty (to % must exceed from %)")
    return (a, b)


def _rw(path, v) -> str:
    _str(path, v)
    if v not in RW_MODES:
        raise _Bad(path, f"{v!r} is not a fio rw mode ({', '.join(sorted(RW_MODES))})")
    return v


def _workload(path, d, default_name=None) -> Workload:
    _table(path, d)
    _known(path, d, WORKLOAD)
    name = _str(path + ("name",), d["name"]) if "name" in d else default_name
    if not name:
        raise _Bad(path + ("name",), "a workload needs a name")
    _fio_section(path + ("name",), name)
    rw = _rw(path + ("rw",), d.get("rw", "read"))
    bs_v = d.get("bs", "128k")
    bs_list = None
    if isinstance(bs_v, list):
        bs_list = [_bs(path + ("bs", k), b) for k, b in enumerate(bs_v)]
        bs = bs_list[0] if bs_list else 131072
    else:
        bs = _bs(path + ("bs",), bs_v)
    qd = _int(path + ("iodepth",), d.get("iodepth", 128))
    nj = _int(path + ("numjobs",), d.get("numjobs", 1))
    mix = _int(path + ("rwmixread",), d["rwmixread"]) if "rwmixread" in d else None
    rt = _num(path + ("runtime_s",), d["runtime_s"]) if "runtime_s" in d else None
    size = _size(path + ("size",), d["size"]) if "size" in d else None
    if rt is not None and size is not None:
        raise _Bad(path + ("size",), "give runtime_s or size, not both")
    fdp = _bool(path + ("fdp",), d.get("fdp", False))
    streams = []
    if "ranges" in d:
        rs = _want(path + ("ranges",), d["ranges"], (list,), "an array of [from %, to %]")
        if bs_list is not None and len(bs_list) != len(rs):
            raise _Bad(path + ("bs",), f"{len(bs_list)} block sizes for {len(rs)} ranges (give one each, or one)")
        for k, r in enumerate(rs):
            streams.append(Stream(rw, bs_list[k] if bs_list else bs, qd, mix, _range(path + ("ranges", k), r), fdp=fdp))
    elif bs_list is not None:
        raise _Bad(path + ("bs",), "a list of block sizes needs ranges (one stream per range)")
    if "streams" in d:
        if streams:
            raise _Bad(path + ("streams",), "give ranges or streams, not both")
        ss = _want(path + ("streams",), d["streams"], (list,), "an array of tables")
        for k, s in enumerate(ss):
            p = path + ("streams", k)
            _table(p, s)
            _known(p, s, STREAM)
            streams.append(Stream(_rw(p + ("rw",), s.get("rw", rw)), _bs(p + ("bs",), s.get("bs", bs)),
                                  _int(p + ("iodepth",), s.get("iodepth", qd)),
                                  _int(p + ("rwmixread",), s["rwmixread"]) if "rwmixread" in s else mix,
                                  _range(p + ("range",), s["range"]) if "range" in s else None,
                                  _device(p + ("namespace",), s["namespace"]) if "namespace" in s else None,
                                  _int(p + ("rate_iops",), s["rate_iops"]) if "rate_iops" in s else None,
                                  _bool(p + ("fdp",), s.get("fdp", fdp))))
    if rw in ("rw", "readwrite", "randrw") and mix is None and not streams:
        mix = 50
    return Workload(name, rw, bs, qd, nj, mix, rt, size, tuple(streams),
                    _bool(path + ("steady_state",), d.get("steady_state", False)),
                    _num(path + ("waf_every_s",), d["waf_every_s"]) if "waf_every_s" in d else None, fdp)


def _ms_range(path, v) -> tuple[float, float]:
    """A number of ms (a chosen point) or [from, to] (a random point in it, per cycle)."""
    if isinstance(v, list):
        if len(v) != 2:
            raise _Bad(path, "must be a number of ms (a chosen point) or [from, to] (a random point in it)")
        lo, hi = (_num(path + (k,), x) for k, x in enumerate(v))
        if hi < lo:
            raise _Bad(path, f"[{lo:g}, {hi:g}] is empty: to must not be below from")
        return lo, hi
    x = _num(path, v)
    return x, x


def _power_loss(path, d, kind: str) -> PowerLoss:
    """One [[power_loss]] (kind "cut") or [[perst_stress]] (kind "perst") table, every value in range
    (one-line errors naming the key)."""
    _table(path, d)
    _known(path, d, POWER_LOSS)
    df = PowerLoss("", off_ms=DEFAULT_OFF_MS[kind])
    if "name" not in d:
        raise _Bad(path + ("name",), f"missing: a {path[0]} step needs a name")
    name = _fio_section(path + ("name",), _str(path + ("name",), d["name"]))
    lo, hi = _ms_range(path + ("cut_ms",), d.get("cut_ms", list(df.cut_ms)))
    off = _ms_range(path + ("off_ms",), d.get("off_ms", list(df.off_ms)))
    return PowerLoss(name, _int(path + ("cycles",), d.get("cycles", df.cycles)),
                     _bs(path + ("bs",), d.get("bs", df.bs)),
                     _int(path + ("iodepth",), d.get("iodepth", df.iodepth)),
                     _size(path + ("size",), d.get("size", df.size)), (lo, hi), off,
                     _num(path + ("ready_timeout_s",), d.get("ready_timeout_s", df.ready_timeout_s)),
                     _num(path + ("holdup_threshold_v",), d.get("holdup_threshold_v", df.holdup_threshold_v)),
                     _num(path + ("inrush_trigger_w",), d.get("inrush_trigger_w", df.inrush_trigger_w)),
                     _int(path + ("seed",), d.get("seed", df.seed)), kind,
                     _int(path + ("fsync_every",), d["fsync_every"]) if "fsync_every" in d else None)


def _supply(path, v, port) -> str:
    """The margin supply: a VISA resource, or "reference" (the simulated N6705C of a virtual rig)."""
    v = _str(path, v)
    if v == "reference" and not str(port).startswith(("sim:", "rig:")):
        raise _Bad(path, '"reference" is a virtual rig\'s simulated supply: with a real rig give the supply\'s VISA '
                         "resource, e.g. TCPIP::192.168.1.20::5025::SOCKET")
    if any(ord(c) < 32 for c in v):
        raise _Bad(path, "holds a control character: give the VISA resource as `powerrig devices` or the supply shows it")
    return v


def _supply_channels(path, v) -> tuple:
    """{"12V" = 1, "3V3" = 2}: the supply's output channel feeding each rail (as calibrate's --channels)."""
    _table(path, v)
    _known(path, v, set(MARGIN_LIMITS))
    return tuple((r, _int(path + (r,), c)) for r, c in v.items())


def _margin(path, d, workloads) -> Margin:
    """One [[margin]] table: every voltage within the rail's margin limits (MARGIN_LIMITS), the workload
    one of the plan's."""
    _table(path, d)
    _known(path, d, MARGIN)
    df = Margin("")
    if "name" not in d:
        raise _Bad(path + ("name",), "missing: a margin step needs a name")
    name = _fio_section(path + ("name",), _str(path + ("name",), d["name"]))
    rail = _str(path + ("rail",), d.get("rail", df.rail))
    if rail not in MARGIN_LIMITS:
        raise _Bad(path + ("rail",), f"{rail!r} cannot be margined: give {' or '.join(MARGIN_LIMITS)}")
    lo, hi = MARGIN_LIMITS[rail]
    vs = _want(path + ("volts",), d.get("volts", list(df.volts) if rail == "12V" else [3.003, 3.3, 3.597]), (list,),
               "an array of voltages")
    if not vs:
        raise _Bad(path + ("volts",), "must name at least one voltage")
    volts = []
    for k, v in enumerate(vs):
        _want(path + ("volts", k), v, (int, float), "a voltage")
        _finite(path + ("volts", k), v)
        if not lo - 1e-9 <= v <= hi + 1e-9:
            raise _Bad(path + ("volts", k), f"{v:g} V is outside {rail}'s margin range {lo:g}..{hi:g} V "
                                            f"({'+-10 %' if rail == '12V' else '+-9 %, PCIe CEM 3.3 Vaux'}); give a "
                                            "voltage within it")
        volts.append(float(v))
    _no_repeats(path + ("volts",), volts, lambda x: f"{x:g} V", "list each voltage once")
    if "workload" not in d:
        raise _Bad(path + ("workload",), "missing: the [[workload]] (by name) to run at each voltage")
    wl = _str(path + ("workload",), d["workload"])
    if wl not in [w.name for w in workloads]:
        raise _Bad(path + ("workload",), f"no [[workload]] named {wl!r} in the plan (it has: "
                                         f"{', '.join(w.name for w in workloads) or 'none'})")
    return Margin(name, rail, tuple(volts), wl, _num(path + ("settle_s",), d.get("settle_s", df.settle_s)),
                  _num(path + ("agree_pct",), d.get("agree_pct", df.agree_pct)),
                  _num(path + ("current_limit_a",), d.get("current_limit_a", df.current_limit_a)))


def _build(d: dict, text: str, path: str) -> Plan:
    _known((), d, TOP)
    name = _str(("name",), d.get("name", Path(path).stem if path else "sweep"))
    if "rig" not in d:
        raise _Bad(("rig",), "missing: the plan must name its rig ([rig] port = ...)")
    r = _table(("rig",), d["rig"])
    _known(("rig",), r, RIG)
    if "port" not in r:
        raise _Bad(("rig", "port"), "missing: a serial port, rfc2217://host:port or sim:PROFILE")
    rig = RigSpec(_port(("rig", "port"), r["port"]),
                  _int(("rig", "interval_us"), r.get("interval_us", 1000)),
                  _argv(("rig", "nvme"), r.get("nvme", ["nvme"])), _argv(("rig", "fio"), r.get("fio", ["fio"])),
                  _num(("rig", "reconnect_s"), r.get("reconnect_s", 60.0)),
                  _source(("rig", "source"), r.get("source", "interposer")),
                  _supply(("rig", "supply"), r.get("supply", ""), r["port"]),
                  _supply_channels(("rig", "supply_channels"), r.get("supply_channels", {})),
                  _num(("rig", "reply_timeout_s"), r.get("reply_timeout_s", 2.0)))
    dr = _table(("drive",), d.get("drive", {}))
    _known(("drive",), dr, DRIVE)
    drive = DriveSpec(*(_str(("drive", k), dr.get(k, v)) for k, v in
                        (("controller", "/dev/nvme0"), ("namespace", "/dev/nvme0n1"), ("serial", ""),
                         ("host", ""))))
    _device(("drive", "controller"), drive.controller)
    _device(("drive", "namespace"), drive.namespace)
    if drive.host:
        _drive_host(("drive", "host"), drive.host)
    p = _table(("preparation",), d.get("preparation", {}))
    _known(("preparation",), p, PREP)
    kind = _str(("preparation", "kind"), p.get("kind", "none"))
    if kind not in PREP_KINDS:
        raise _Bad(("preparation", "kind"), f"{kind!r} is not one of {', '.join(PREP_KINDS)}")
    job = None
    if kind == "fio":
        if "job" not in p:
            raise _Bad(("preparation", "job"), 'missing: kind = "fio" needs a [preparation.job] workload')
        job = _workload(("preparation", "job"), p["job"], "prepare")
    elif "job" in p:
        raise _Bad(("preparation", "job"), f'only kind = "fio" takes a job (kind is {kind!r})')
    if kind != "none" and not drive.serial:
        raise _Bad(("drive", "serial"), f"preparation {kind!r} writes the whole drive: name its serial number")
    t = _table(("timing",), d.get("timing", {}))
    _known(("timing",), t, TIMING)
    dt = Timing()
    timing = Timing(_num(("timing", "settle_s"), t.get("settle_s", dt.settle_s)),
                    _num(("timing", "idle_s"), t.get("idle_s", dt.idle_s)),
                    _num(("timing", "measure_s"), t.get("measure_s", dt.measure_s)),
                    _int(("timing", "repetitions"), t.get("repetitions", dt.repetitions)),
                    _num(("timing", "cooldown_s"), t.get("cooldown_s", dt.cooldown_s)),
                    _bool(("timing", "io_log"), t.get("io_log", dt.io_log)),
                    _bool(("timing", "block_trace"), t.get("block_trace", dt.block_trace)),
                    _bool(("timing", "command_trace"), t.get("command_trace", dt.command_trace)))
    s = _table(("steady_state",), d.get("steady_state", {}))
    _known(("steady_state",), s, STEADY)
    ds = SteadyState()
    metrics = s.get("metrics", list(ds.metrics))
    _want(("steady_state", "metrics"), metrics, (list,), "an array")
    for k, m in enumerate(metrics):
        if _str(("steady_state", "metrics", k), m) not in STEADY_METRICS:
            raise _Bad(("steady_state", "metrics", k), f"{m!r} is not one of {', '.join(STEADY_METRICS)}")
    steady = SteadyState(_int(("steady_state", "rounds"), s.get("rounds", ds.rounds)),
                         _int(("steady_state", "max_rounds"), s.get("max_rounds", ds.max_rounds)),
                         _num(("steady_state", "range_pct"), s.get("range_pct", ds.range_pct)),
                         _num(("steady_state", "slope_pct"), s.get("slope_pct", ds.slope_pct)),
                         tuple(metrics))
    if steady.max_rounds < steady.rounds:
        raise _Bad(("steady_state", "max_rounds"), f"{steady.max_rounds} is below rounds ({steady.rounds})")
    pss = _want(("power_states",), d.get("power_states", [0]), (list,), "an array of power state numbers")
    pss = tuple(_int(("power_states", k), v) for k, v in enumerate(pss))
    if not pss:
        raise _Bad(("power_states",), "must name at least one power state")
    ws = _want(("workload",), d.get("workload", []), (list,), "an array of tables ([[workload]])")
    workloads = tuple(_workload(("workload", k), w) for k, w in enumerate(ws))
    names = [w.name for w in workloads]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _Bad(("workload",), f"workload names must be unique ({', '.join(dup)} repeats)")
    if not drive.serial:
        for k, w in enumerate(workloads):
            if _writes(w):
                raise _Bad(("drive", "serial"), f"workload {w.name!r} writes to the drive: name its serial number "
                                                "(nvme id-ctrl shows it) so the sweep cannot write to the wrong drive")
    power_loss = ()
    for table, what in PULSE_TABLES:
        pls = _want((table,), d.get(table, []), (list,), f"an array of tables ([[{table}]])")
        these = tuple(_power_loss((table, k), x, what) for k, x in enumerate(pls))
        names = [x.name for x in these]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise _Bad((table,), f"{table} names must be unique ({', '.join(dup)} repeats)")
        if these and rig.source != "interposer":
            raise _Bad(("rig", "source"), f"{rig.source!r} cannot switch the drive's power: a [[{table}]] step needs "
                                          'the interposer (source = "interposer")')
        if these and not drive.serial:
            raise _Bad(("drive", "serial"), f"{table} {these[0].name!r} switches the drive's power and writes to it: "
                                            "name its serial number (nvme id-ctrl shows it)")
        power_loss += these
    ms = _want(("margin",), d.get("margin", []), (list,), "an array of tables ([[margin]])")
    margin = tuple(_margin(("margin", k), x, workloads) for k, x in enumerate(ms))
    names = [x.name for x in margin]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _Bad(("margin",), f"margin names must be unique ({', '.join(dup)} repeats)")
    if margin and not rig.supply:
        raise _Bad(("rig", "supply"), f"margin {margin[0].name!r} needs the programmable supply that feeds the slot: "
                                      'name it with [rig] supply = "VISA resource" (a virtual rig: "reference")')
    if margin and not drive.serial:
        raise _Bad(("drive", "serial"), f"margin {margin[0].name!r} runs the drive outside its nominal voltage: name "
                                        "its serial number (nvme id-ctrl shows it)")
    idle = _bool(("idle_steps",), d.get("idle_steps", True))
    if not workloads and not idle and not power_loss:
        raise _Bad(("workload",), "the plan has no steps: add a [[workload]] or set idle_steps = true")
    apst = _str(("apst",), d.get("apst", "disable"))
    if apst not in ("disable", "keep"):
        raise _Bad(("apst",), f"{apst!r} is not disable or keep")
    c = _table(("checks",), d.get("checks", {}))
    _known(("checks",), c, CHECKS)
    checks = Checks(_bool(("checks", "self_reported_power"), c.get("self_reported_power", False)),
                    _num(("checks", "self_reported_tolerance_pct"), c.get("self_reported_tolerance_pct", 10.0)),
                    _num(("checks", "max_lost_pct"), c["max_lost_pct"]) if "max_lost_pct" in c else None,
                    _num(("checks", "power_limit_w"), c["power_limit_w"]) if "power_limit_w" in c else None)
    plan = Plan(name, rig, drive, pss, workloads, _str(("description",), d.get("description", "")), idle, apst,
                Preparation(kind, job), timing, steady, text, path, checks, _limits(d), power_loss, margin)
    _check_size(plan, d)
    _check_column_limits(plan)
    return plan


@dataclass(frozen=True)
class Limits:
    """How big a plan may be before --check calls it a mistake; [limits] raises them on purpose."""
    max_steps: int = MAX_STEPS
    max_hours: float = MAX_HOURS


def _limits(d: dict) -> Limits:
    t = _table(("limits",), d.get("limits", {}))
    _known(("limits",), t, LIMITS)
    return Limits(_int(("limits", "max_steps"), t.get("max_steps", MAX_STEPS)),
                  _num(("limits", "max_hours"), t.get("max_hours", MAX_HOURS)))


def _check_size(plan: Plan, d: dict) -> None:
    """What would only fail hours into a run fails here: a power state listed twice (its steps would
    repeat keys already stored), a steady-state metric twice, an interval the capture cannot hold (at
    the first step), and a plan past the step or duration limits (every single duration included:
    one of them alone could outlast the run)."""
    _no_repeats(("power_states",), list(plan.power_states), lambda ps: f"PS{ps}",
                "list each power state once (timing.repetitions repeats steps)")
    _no_repeats(("steady_state", "metrics"), list(plan.steady.metrics), str, "list each metric once")
    keys = [s.key for s in plan.steps()]
    if len(set(keys)) != len(keys):       # a guard for any future way of repeating a step
        dup = next(k for k in keys if keys.count(k) > 1)
        raise _Bad(("workload",), f"step {dup} would run twice; names of workloads and power states must be unique")
    if 1_000_000 % plan.rig.interval_us:     # the capture's sample rate is intervals per second, a whole number
        raise _Bad(("rig", "interval_us"), f"{plan.rig.interval_us} us does not divide one second: a capture needs a "
                                           "whole number of intervals per second (100, 200, 250, 500, 1000 ...)")
    lim = plan.limits
    if len(keys) > lim.max_steps:
        raise _Bad(("power_states",), f"the plan has {len(keys)} steps, over the limit of {lim.max_steps}: check "
                                      "power_states, workloads and timing.repetitions, or raise it on purpose with "
                                      f"[limits] max_steps = {len(keys)}")
    cap = lim.max_hours * 3600
    t = plan.timing
    singles = [(("timing", k), getattr(t, k)) for k in ("settle_s", "idle_s", "measure_s", "cooldown_s")]
    singles += [(("rig", "reconnect_s"), plan.rig.reconnect_s)]
    singles += [(("workload", k, "runtime_s"), w.runtime_s) for k, w in enumerate(plan.workloads) if w.runtime_s]
    for path, v in singles:
        if v > cap:
            raise _Bad(path, f"{v:g} s is longer than the whole-plan limit of {lim.max_hours:g} h; give seconds, or "
                             f"raise it on purpose with [limits] max_hours")
    est = plan.estimate_s()
    if est > cap:
        raise _Bad(("timing", "repetitions"), f"the plan takes about {est / 3600:.1f} h, over the limit of {lim.max_hours:g} h: "
                                f"check the durations and repetitions, or raise it on purpose with [limits] max_hours = "
                                f"{math.ceil(est / 3600)}")


def _no_repeats(path: tuple, values: list, show, fix: str) -> None:
    seen: dict = {}
    for k, v in enumerate(values):
        if v in seen:
            raise _Bad(path + (k,), f"{show(v)} is listed twice (at [{seen[v]}] and [{k}]): {fix}")
        seen[v] = k


def _check_column_limits(plan: Plan) -> None:
    """Every text a plan puts into the results database fits its column: the limits are the schema's
    own column lengths, so `--check` refuses what the database (PostgreSQL's varchar) would."""
    from powerrig.results import schema as S
    from powerrig.sweep.measure import MEASURE, SELF_REPORT

    def fits(path, value: str, *columns) -> None:
        for col in columns:
            if col.type.length is not None and len(value) > col.type.length:
                raise _Bad(path, f"{len(value)} characters ({value[:24]!r}...) is over the {col.type.length} that "
                                 f"the results database holds ({col.table.name}.{col.name}): shorten it")

    fits(("name",), plan.name, S.plans.c.name)
    if not plan.rig.sim_profile:
        fits(("rig", "port"), plan.rig.port, S.runs.c.station)
    top_ps, top_rep = max(plan.power_states), plan.timing.repetitions - 1
    for k, w in enumerate(plan.workloads):
        key, name = plan.step_key_name(top_ps, w, top_rep)
        fits(("workload", k, "name"), w.name, S.steps.c.workload)
        fits(("workload", k, "name"), key, S.steps.c.key)
        fits(("workload", k, "name"), name, S.steps.c.name)
        fits(("workload", k, "name"), f"{SELF_REPORT}{MEASURE}{w.name}", S.phases.c.name, S.measurements.c.phase)
    for pl in plan.power_loss:
        table = next(t for t, kind in PULSE_TABLES if kind == pl.kind)
        k = [x.name for x in plan.power_loss if x.kind == pl.kind].index(pl.name)
        key, name = plan.power_loss_key_name(pl, top_rep)
        fits((table, k, "name"), pl.name, S.steps.c.workload)
        fits((table, k, "name"), key, S.steps.c.key)
        fits((table, k, "name"), name, S.steps.c.name)
        fits((table, k, "name"), f"{pl.prefix}:{pl.name}", S.measurements.c.phase)
    for k, m in enumerate(plan.margin):
        key, name = plan.margin_key_name(m, max(m.volts), top_rep)
        fits(("margin", k, "name"), key, S.steps.c.key)
        fits(("margin", k, "name"), name, S.steps.c.name)
        fits(("margin", k, "name"), f"margin:{m.name}", S.measurements.c.phase)


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
    except _Bad as b:
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
    if plan.preparation.kind != "none" or any(_writes(w) for w in plan.workloads):
        from powerrig.dut.guard import GuardRefused, in_use, resolve

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


def _writes(w: Workload) -> bool:
    return any(not s.rw.endswith("read") for s in w.all_streams())


QUICK_TIMING = {"settle_s": 0.5, "idle_s": 1.5, "measure_s": 3.0}


def quick(plan: Plan) -> Plan:
    """The plan with short windows (`powerrig sweep --quick`, `powerrig demo --quick`): to try a plan or
    see the whole flow in about a third of the time. Its hash differs (the timing is hashed), so a quick
    run is never resumed or compared as the plan's own; a workload that names its own runtime keeps it."""
    import dataclasses

    return dataclasses.replace(plan, timing=dataclasses.replace(plan.timing, **QUICK_TIMING))
