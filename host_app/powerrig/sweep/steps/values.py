"""The value checks every part of a plan uses: a wrong value raises Bad with the key path and one line
saying what is wrong and how to fix it (sweep/plan.py turns it into PlanError with the line number).
Values that reach another program's command line or job file are checked by that program's door
(powerrig.dut.commands)."""
from __future__ import annotations

import math

from powerrig.core.bounds import PLAN, key_of, problem
from powerrig.core.errors import InstrumentError
from powerrig.dut.commands import UnsafeArgument, check_device, check_job_name, fio_value
from powerrig.dut.fio import RW_MODES, parse_size
from powerrig.sources.spec import parse_spec

MIN_BS, MAX_BS = 512, 16 * 2**20


class Bad(Exception):
    """A plan value is wrong: ``path`` the key path, ``reason`` one line."""

    def __init__(self, path: tuple, reason: str):
        super().__init__(reason)
        self.path, self.reason = path, reason


def type_name(v) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(v), type(v).__name__)


def want(path, v, types, what):
    if isinstance(v, bool) and bool not in types:
        raise Bad(path, f"must be {what}, not {type_name(v)}")
    if not isinstance(v, types):
        raise Bad(path, f"must be {what}, not {type_name(v)} {v!r}")
    return v


def source(path, v):
    """A measurement source spec (powerrig.sources.spec), checked before anything runs."""
    v = string(path, v)
    try:
        parse_spec(v)
    except InstrumentError as e:
        raise Bad(path, str(e)) from None
    return v


def string(path, v):
    return want(path, v, (str,), "a string")


KIND_BOUNDS: dict = {}     # a step kind's own keys' bounds ("dwell.hold_s": Bound), added by its registration


def _bound(path):
    """The floor and ceiling of the number at ``path``, from the one table (powerrig.core.bounds) or a
    step kind's own (KIND_BOUNDS)."""
    key = key_of(path)
    while key not in PLAN and key not in KIND_BOUNDS and "." in key:    # a table of names: [rig.supply_channels]
        key = key.rsplit(".", 1)[0]
    return PLAN[key] if key in PLAN else KIND_BOUNDS[key]


def integer(path, v):
    want(path, v, (int,), "an integer")
    why = problem(_bound(path), v)
    if why:
        raise Bad(path, why)
    return v


def number(path, v):
    want(path, v, (int, float), "a number")
    why = problem(_bound(path), v)
    if why:
        raise Bad(path, why)
    return float(v)


def finite(path, v) -> None:
    """nan and inf are valid TOML but no duration or percentage: nan compares false with every bound
    (it would pass a range check and crash the run hours later), inf never ends a sleep."""
    if not math.isfinite(v):
        raise Bad(path, f"{v!r} is not a finite number: give a number such as 2 or 0.5")


def boolean(path, v):
    return want(path, v, (bool,), "true or false")


def block_size(path, v) -> int:
    want(path, v, (str, int), 'a block size ("4k", "128k" or bytes)')
    try:
        b = parse_size(v)
    except ValueError:
        raise Bad(path, f"{v!r} is not a block size (write 4k, 128k, 1m or bytes)") from None
    if not MIN_BS <= b <= MAX_BS or b % 512:
        raise Bad(path, f"{v!r} is out of range: a block size is a multiple of 512 B from 512 B to 16 MiB")
    return b


def size(path, v) -> str:
    want(path, v, (str, int), 'a size ("10g", "50%" or bytes)')
    door(path, fio_value, "size", v)              # it goes into fio's job file as it is written
    try:
        parse_size(v, 100)
    except ValueError:
        raise Bad(path, f"{v!r} is not a size (write 10g, 50% or bytes)") from None
    return str(v)


def known(path, d: dict, keys) -> None:
    for k in d:
        if k not in keys:
            raise Bad(path + (k,), f"unknown key (known here: {', '.join(sorted(keys))})")


def table(path, v) -> dict:
    return want(path, v, (dict,), "a table")


def no_repeats(path: tuple, values: list, show, fix: str) -> None:
    seen: dict = {}
    for k, v in enumerate(values):
        if v in seen:
            raise Bad(path + (k,), f"{show(v)} is listed twice (at [{seen[v]}] and [{k}]): {fix}")
        seen[v] = k


def unique_names(path: tuple, what: str, specs) -> None:
    """Every table of one kind has its own name (its steps' keys are made from it)."""
    names = [x.name for x in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise Bad(path, f"{what} names must be unique ({', '.join(dup)} repeats)")


# -- values that reach another program's command line or job file: checked by that door ---------------
def door(path, check, *args):
    """Run one of powerrig.dut.commands' checks; its refusal becomes this key's one-line error."""
    try:
        return check(*args)
    except UnsafeArgument as e:
        raise Bad(path, str(e)) from None


def device(path, v) -> str:
    """A controller or namespace path: nvme-cli's positional argument and fio's filename, so read by
    fio_value as fio reads it (no '#', ';' or edge blank, which fio cuts: one name for guard and fio)."""
    string(path, v)
    door(path, check_device, "path", v)
    if ":" in v:
        raise Bad(path, f"{v!r} holds ':', which fio reads as a list of files: name the device as "
                        "/dev/nvmeXnY or by a /dev/disk/by-id link")
    return door(path, fio_value, "filename", v)


def fio_section(path, name: str) -> str:
    """A step's name is a fio job section: checked like one (not 'global', fio's own)."""
    return door(path, check_job_name, "workload name", name)


def step_name(path, d: dict, what: str) -> str:
    """The name every step table needs (its steps' keys and fio's job section are made from it)."""
    if "name" not in d:
        raise Bad(path + ("name",), f"missing: a {what} step needs a name")
    return fio_section(path + ("name",), string(path + ("name",), d["name"]))


def pct_range(path, v) -> tuple:
    want(path, v, (list,), "[from %, to %]")
    if len(v) != 2:
        raise Bad(path, "must be [from %, to %]")
    a, b = (number(path + (k,), x) for k, x in enumerate(v))
    if b <= a:
        raise Bad(path, f"range [{a:g}, {b:g}] is empty (to % must exceed from %)")
    return (a, b)


def rw_mode(path, v) -> str:
    string(path, v)
    if v not in RW_MODES:
        raise Bad(path, f"{v!r} is not a fio rw mode ({', '.join(sorted(RW_MODES))})")
    return v


def ms_range(path, v) -> tuple[float, float]:
    """A number of ms (a chosen point) or [from, to] (a random point in it, per cycle)."""
    if isinstance(v, list):
        if len(v) != 2:
            raise Bad(path, "must be a number of ms (a chosen point) or [from, to] (a random point in it)")
        lo, hi = (number(path + (k,), x) for k, x in enumerate(v))
        if hi < lo:
            raise Bad(path, f"[{lo:g}, {hi:g}] is empty: to must not be below from")
        return lo, hi
    x = number(path, v)
    return x, x


def plan_power_states(path, d: dict, planned) -> tuple:
    """A table's ``power_states``: an array of the plan's own power states, each once ((): all of them)."""
    pss = want(path + ("power_states",), d.get("power_states", []), (list,), "an array of power state numbers")
    for k, ps in enumerate(pss):
        if integer(path + ("power_states", k), ps) not in planned:
            raise Bad(path + ("power_states", k), f"PS{ps} is not one of the plan's power_states "
                                                  f"({', '.join(f'PS{p}' for p in planned)}): add it there")
    no_repeats(path + ("power_states",), list(pss), lambda ps: f"PS{ps}", "list each power state once")
    return tuple(pss)
