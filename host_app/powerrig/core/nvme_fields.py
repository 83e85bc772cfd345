"""nvme-cli's fields, read and written one way for the whole package.

The drive-control runner (powerrig.dut.nvme), the analysis (power state limits from a capture's
id-ctrl) and the nvme-cli impersonation (powerrig.sim.tools.nvme_cli) all use this module, so every
spelling nvme-cli 1.x to 2.16 prints is understood in one place. It depends on nothing in powerrig
but the error base, so any layer may import it.

Spellings accepted (see docs/drive-control.md): numbers as ints, floats, numeric strings
("N", "N.000000"), comma-grouped strings ("3,200,631,791,616") and hex ("0x1f"); key case and
spacing; power-state descriptors with a raw ``flags`` byte (before 2.6) or ``max_power_scale`` and
``non-operational_state`` (2.6+); and the power scales printed decoded (2.x: ``idle_scale``,
``active_scale``) or as the raw descriptor byte (1.x: ``idle_scale`` and ``active_work_scale`` with
the scale in bits 7:6).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from powerrig.core.errors import ToolError
from powerrig.core.nvme_numbers import (KELVIN_OFFSET, KELVIN_OFFSET_NVME_CLI, SCALE_W,  # noqa: F401 (re-exported)
                                        encode_power, parse_int)

def to_int(value, what: str) -> int:
    """parse_int, with the ToolError a user sees when nvme-cli printed something else."""
    try:
        return parse_int(value)
    except (ValueError, TypeError):
        raise ToolError(f"nvme-cli printed {what} as {value!r}, which is not a number "
                        "(unsupported nvme-cli output)") from None


def number(value) -> float | None:
    """A number in any nvme-cli spelling as a float, or None (absent or not a number)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    s = str(value).strip().replace(",", "")
    try:
        return float(int(s, 16)) if s.lower().startswith("0x") else float(s)
    except ValueError:
        return None


def load_json(text: str, what: str) -> dict:
    """The JSON object in nvme-cli's stdout; tolerate text before it (plugin notices) and after it."""
    start = text.find("{")
    if start < 0:
        raise ToolError(f"nvme-cli {what}: no JSON in its output (got {text.strip()[:60]!r}); "
                        "is this nvme-cli with -o json support?")
    try:
        obj, _ = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as e:
        raise ToolError(f"nvme-cli {what}: malformed JSON output ({e})") from None
    if not isinstance(obj, dict):
        raise ToolError(f"nvme-cli {what}: expected a JSON object")
    return obj


class Keys:
    """Case-insensitive access to a JSON object; ``need`` raises a ToolError naming a missing field."""

    def __init__(self, d: dict, what: str):
        self.d = {str(k).lower(): v for k, v in d.items()}
        self.what = what

    def get(self, *names, default=None):
        for n in names:
            if n.lower() in self.d:
                return self.d[n.lower()]
        return default

    def need(self, *names):
        v = self.get(*names)
        if v is None:
            raise ToolError(f"nvme-cli {self.what}: required field {names[0]!r} missing from its output "
                            "(unsupported nvme-cli version or a truncated reply)")
        return v


# -- power state descriptors ----------------------------------------------------------------------
def scale_code(value, raw: bool = False) -> int:
    """A power scale as printed: decoded (0..3, nvme-cli 2.x) or the raw descriptor byte with the scale
    in bits 7:6 (nvme-cli 1.x). A value above 3 can only be a raw byte."""
    v = parse_int(value)
    return (v >> 6) & 3 if raw or v > 3 else v


@dataclass(frozen=True)
class PowerStateDescriptor:
    ps: int
    max_power_w: float
    non_operational: bool
    entry_latency_us: int
    exit_latency_us: int
    idle_power_w: float | None       # None when the drive does not report it
    active_power_w: float | None
    active_workload: int             # APW: 0 none, 1 and 2 as defined by the spec
    relative_read_throughput: int = 0
    relative_write_throughput: int = 0

    @property
    def worst_transition_us(self) -> int:
        return self.entry_latency_us + self.exit_latency_us


def parse_psd(i: int, d: dict) -> PowerStateDescriptor:
    """One entry of id-ctrl ``psds`` in any nvme-cli spelling, in watts and microseconds."""
    k = Keys(d, f"id-ctrl psd {i}")
    flags = k.get("flags")
    mxps = k.get("max_power_scale")
    nops = k.get("non-operational_state", "non_operational_state")
    if mxps is None or nops is None:
        if flags is None:
            raise ToolError(f"nvme-cli id-ctrl psd {i}: required field 'max_power_scale' (or 'flags') missing")
        flags = to_int(flags, "psd flags")
        mxps = flags & 1 if mxps is None else mxps
        nops = (flags >> 1) & 1 if nops is None else nops
    mp = to_int(k.need("max_power"), "max_power") * (0.0001 if to_int(mxps, "max_power_scale") else 0.01)
    aws = k.get("active_work_scale")          # present only in 1.x, whose scales are raw bytes
    raw = aws is not None and k.get("active_scale") is None

    def scale(name, value):
        try:
            return scale_code(value, raw)
        except (ValueError, TypeError):
            raise ToolError(f"nvme-cli printed {name} as {value!r}, which is not a number") from None

    idle_scale = SCALE_W.get(scale("idle_scale", k.get("idle_scale", default=0)))
    if k.get("active_scale") is not None:
        act_scale_code = scale("active_scale", k.get("active_scale"))
        apw = to_int(k.get("active_power_work", default=0), "active_power_work")
    elif aws is not None:
        aws = to_int(aws, "active_work_scale")
        act_scale_code, apw = (aws >> 6) & 3, aws & 7
    else:
        act_scale_code, apw = 0, 0
    act_scale = SCALE_W.get(act_scale_code)
    idle, act = k.get("idle_power"), k.get("active_power")
    return PowerStateDescriptor(
        ps=i, max_power_w=round(mp, 6), non_operational=bool(to_int(nops, "non-operational_state")),
        entry_latency_us=to_int(k.need("entry_lat"), "entry_lat"),
        exit_latency_us=to_int(k.need("exit_lat"), "exit_lat"),
        idle_power_w=round(to_int(idle, "idle_power") * idle_scale, 6) if idle is not None and idle_scale else None,
        active_power_w=round(to_int(act, "active_power") * act_scale, 6) if act is not None and act_scale else None,
        active_workload=apw, relative_read_throughput=to_int(k.get("read_tput", default=0), "read_tput"),
        relative_write_throughput=to_int(k.get("write_tput", default=0), "write_tput"))


def celsius(kelvin: float) -> float:
    """powerrig's Celsius: K - 273.15 (the SI offset); nvme-cli's own text uses K - 273."""
    return kelvin - KELVIN_OFFSET


def celsius_nvme_cli(kelvin: int) -> int:
    """Celsius as nvme-cli prints it (``temperature : 38 C``): K - 273, an integer."""
    return int(kelvin) - KELVIN_OFFSET_NVME_CLI
