"""Channel definitions from hw/rails.toml: the single source of code-to-SI scaling.

The host converts ADC codes with these scales, the simulator's front end quantizes with them and
the firmware's default calibration is generated from them (``python -m powerrig.core.rails
--emit-firmware``), so the three can never drift apart.
"""
from __future__ import annotations

import argparse
import os
import sys
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from powerrig_fw.reduce import CODE_MAX  # the firmware clamps codes to +-CODE_MAX (a V*I fits a small int)


def default_rails_path() -> Path | None:
    """$POWERRIG_RAILS when set, else None: the packaged definition (see packaged_rails)."""
    env = os.environ.get("POWERRIG_RAILS")
    return Path(env) if env else None


def packaged_rails() -> Traversable:
    """The rails definition shipped in the package: a copy of hw/rails.toml (a link to it in a
    checkout), so an installed powerrig needs no checkout to scale its channels."""
    return resources.files("powerrig").joinpath("rails.toml")


@dataclass(frozen=True)
class Rail:
    name: str
    nominal_v: float
    shunt_ohm: float
    amp_gain: float
    divider_ratio: float
    expected_max_a: float
    optional: bool
    v_lsb: float  # volts per ADC code at the rail
    i_lsb: float  # amps per ADC code at the rail

    @property
    def v_full_scale(self) -> float:
        return self.v_lsb * CODE_MAX

    @property
    def i_full_scale(self) -> float:
        return self.i_lsb * CODE_MAX


@dataclass(frozen=True)
class RailConfig:
    adc_part: str
    adc_bits: int
    vref_v: float
    sample_period_us: int
    peak_window_us: int
    rails: tuple[Rail, ...]

    def rail(self, name: str) -> Rail:
        for r in self.rails:
            if r.name == name:
                return r
        known = ", ".join(r.name for r in self.rails)
        raise KeyError(f"unknown rail {name!r}; this rig has {known}")

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rails]


def _require(table: dict, key: str, where: str):
    if key not in table:
        raise ValueError(f"{where}: missing '{key}' in rails file; add it (see hw/rails.toml)")
    return table[key]


def load_rails(path: str | os.PathLike | None = None) -> RailConfig:
    """Parse a rails file: the given one, $POWERRIG_RAILS, or the packaged definition."""
    path = Path(path) if path else (default_rails_path() or packaged_rails())
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"rails file {path} not found; set POWERRIG_RAILS or restore hw/rails.toml") from None
    adc = _require(doc, "adc", str(path))
    vref = float(_require(adc, "vref_v", "[adc]"))
    bits = int(_require(adc, "bits", "[adc]"))
    code_lsb_v = vref / (1 << (bits - 1))
    rails = []
    for i, r in enumerate(_require(doc, "rail", str(path))):
        where = f"[[rail]] #{i + 1}"
        shunt, gain, div = (float(_require(r, k, where)) for k in ("shunt_ohm", "amp_gain", "divider_ratio"))
        rails.append(Rail(
            name=str(_require(r, "name", where)),
            nominal_v=float(_require(r, "nominal_v", where)),
            shunt_ohm=shunt, amp_gain=gain, divider_ratio=div,
            expected_max_a=float(r.get("expected_max_a", 0.0)),
            optional=bool(r.get("optional", False)),
            v_lsb=code_lsb_v / div,
            i_lsb=code_lsb_v / (gain * shunt),
        ))
    return RailConfig(str(adc.get("part", "")), bits, vref, int(_require(adc, "sample_period_us", "[adc]")),
                      int(_require(adc, "peak_window_us", "[adc]")), tuple(rails))


@lru_cache(maxsize=None)
def rails() -> RailConfig:
    """The rig's rail configuration (cached)."""
    return load_rails()


def firmware_defaults_source(cfg: RailConfig) -> str:
    """Python source for firmware/powerrig_fw/rails_default.py (MicroPython-compatible)."""
    lines = [
        '"""Default channel calibration, generated from hw/rails.toml by `make firmware-defaults`.',
        "",
        "Do not edit: change hw/rails.toml and regenerate; a test checks the two agree.",
        '"""',
        "",
        f"SAMPLE_PERIOD_US = {cfg.sample_period_us}",
        f"PEAK_WINDOW_US = {cfg.peak_window_us}",
        f"ADC_PART = {cfg.adc_part!r}",
        f"ADC_BITS = {cfg.adc_bits}",
        "",
        "# name, volts per code, amps per code, optional",
        "RAILS = (",
    ]
    for r in cfg.rails:
        lines.append(f"    ({r.name!r}, {r.v_lsb!r}, {r.i_lsb!r}, {r.optional!r}),")
    lines.append(")")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m powerrig.core.rails", description=__doc__.splitlines()[0])
    ap.add_argument("--emit-firmware", action="store_true", help="print firmware/powerrig_fw/rails_default.py")
    args = ap.parse_args(argv)
    cfg = rails()
    if args.emit_firmware:
        sys.stdout.write(firmware_defaults_source(cfg))
    else:
        for r in cfg.rails:
            print(f"{r.name:>4}: V fs {r.v_full_scale:7.3f} V  lsb {r.v_lsb * 1e6:8.2f} uV | "
                  f"I fs {r.i_full_scale:7.3f} A  lsb {r.i_lsb * 1e6:8.2f} uA")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
