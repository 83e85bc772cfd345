"""nvme-cli's numbers: how it prints them (parse_int), its power encoding and its Celsius offset.

Apart from nvme_fields (which re-exports them) because the impersonated nvme-cli needs only these,
and it is a process started several times per sweep step: this module imports ``re`` and nothing
else, where nvme_fields' dataclasses pull in inspect and ast (docs/scale.md).
"""
from __future__ import annotations

import re

# IPS/APS (and MXPS) scale codes: 0 not reported, 1 = 0.0001 W, 2 = 0.01 W
SCALE_W = {1: 0.0001, 2: 0.01}
KELVIN_OFFSET_NVME_CLI = 273          # nvme-cli prints Celsius as K - 273
KELVIN_OFFSET = 273.15                # powerrig's Celsius (docs/drive-control.md)


def parse_int(value) -> int:
    """A number as nvme-cli prints it or as its options take it; ValueError if it is none."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} is not a finite number")
        return int(round(value))
    if isinstance(value, str):
        s = value.strip().replace(",", "").replace("_", "")
        if s.lower().startswith(("0x", "-0x")):
            return int(s, 16)
        if re.fullmatch(r"[+-]?\d+", s):
            return int(s)
        f = float(s)                       # "12.000000", "960197124096.0", "1e3"
        if f != f or f in (float("inf"), float("-inf")):
            raise ValueError(f"{value!r} is not a finite number")
        return int(round(f))
    raise ValueError(f"{value!r} is not a number")


def encode_power(watts: float) -> tuple[int, int]:
    """(value, MXPS) for a max power in watts: 0.01 W units when exact, else 0.0001 W units."""
    cw = watts * 100
    return (int(round(cw)), 0) if abs(cw - round(cw)) < 1e-6 else (int(round(watts * 10000)), 1)
