"""What every section shares: the SKiDL set-up for KiCad 9, the one way to make a part (from the
catalog, so it carries footprint, manufacturer, MPN and the source that backs it), and the board-wide nets."""
from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"
for _v in ("", "6", "7", "8", "9", "10"):        # SKiDL looks up every KiCad version's variable
    os.environ.setdefault(f"KICAD{_v}_SYMBOL_DIR", "/usr/share/kicad/symbols")
    os.environ.setdefault(f"KICAD{_v}_FOOTPRINT_DIR", "/usr/share/kicad/footprints")

import skidl  # noqa: E402
import builtins  # noqa: E402

from skidl import KICAD9, Net, Part, set_default_tool  # noqa: E402,F401

NC = builtins.NC                                # SKiDL puts its no-connect net into builtins

from catalog import SOURCES, spec  # noqa: E402
from part_sources import source  # noqa: E402

set_default_tool(KICAD9)                        # SKiDL 3 defaults to KiCad 10
if str(LIB) not in skidl.lib_search_paths[KICAD9]:
    skidl.lib_search_paths[KICAD9].append(str(LIB))
skidl.footprint_search_paths[KICAD9].append(str(LIB))


def part(key: str, value: str | None = None, ref: str | None = None) -> Part:
    lib, sym, fp, mfr, mpn, desc = spec(key)
    p = Part(lib, sym, footprint=fp, value=value or sym, **({"ref": ref} if ref else {}))
    p.fields["Manufacturer"] = mfr
    p.fields["MPN"] = mpn
    p.fields["Description"] = desc
    p.fields["Catalog"] = key
    cited, _note = source(key, lib, sym, mfr, SOURCES)
    if cited:
        p.fields["Source"] = cited
    return p


def cap(key: str, a: Net, b: Net, value: str) -> Part:
    c = part(key, value)
    c[1] += a
    c[2] += b
    return c


def res(key: str, a: Net, b: Net, value: str) -> Part:
    r = part(key, value)
    r[1] += a
    r[2] += b
    return r


class Nets:
    """Board-wide nets, made once per circuit."""

    def __init__(self):
        self.gnd = Net("GND")
        self.v3v3 = Net("+3V3")        # Pico 2's 3.3 V: logic, the gates, pull-ups
        self.v3v3a = Net("+3V3A")      # quiet LDO: amplifiers, ADCs, reference
        self.vbus = Net("VBUS")        # USB 5 V from the Pico 2's connector
        self.vref = Net("VREF_2V5")    # ADR4525: every ADC's REFIO (ratiometric: one scale for all rails)


def power_flag(net: Net) -> None:
    """KiCad ERC wants a PWR_FLAG on a net powered only through passive pins (a connector, a fuse)."""
    f = Part("power", "PWR_FLAG", footprint="")
    f[1] += net
