#!/usr/bin/env python3
"""Build one variant of the interposer from code: netlist, schematic, BOM rows, SKiDL ERC.

    .venv-hw/bin/python hw/board/build.py --variant edsff|u2 --out hw/out/edsff [--rails hw/rails.toml]

Writes OUT/powerrig-VARIANT.net (KiCad netlist), OUT/powerrig-VARIANT.kicad_sch (KiCad 9 schematic,
SKiDL's generator), OUT/bom-VARIANT.json (one row per part: ref, value, footprint, manufacturer,
MPN) and OUT/skidl_erc.txt. `make hw` (hw/make_hw.py) runs both variants, KiCad's ERC, the BOM and
the PCB on top of this.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import connectors  # noqa: E402
import footprints  # noqa: E402
import measure  # noqa: E402
import mcu  # noqa: E402
import power  # noqa: E402
import symbols  # noqa: E402
from common import Net, res  # noqa: E402

SHUNT_PARTS = {0.005: "SHUNT_5M", 0.01: "SHUNT_10M", 0.05: "SHUNT_50M"}


def build(variant: str, doc: dict) -> None:
    nets = common.Nets()
    host, drive, sig = connectors.connectors(nets, variant)
    pico, gp = mcu.pico(nets)
    mcu.temperature_sensor(nets, gp)
    mcu.sideband(nets, gp, sig)
    measure.reference(nets)
    measure.analog_supply(nets)
    bus = {"sclk": gp["ADC_SCLK"], "cs": gp["ADC_CS"], "sdi": gp["ADC_SDI"],
           "sdo": [gp["ADC_SDO0"], gp["ADC_SDO1"], gp["ADC_SDO2"]]}
    fault = gp["RAIL_FAULT"]
    for rail in doc["rail"]:
        name = rail["name"]
        sw = Net(f"+{name}_SW")
        cut = gp[f"RAIL_{name}_EN"]
        if name == "12V":
            power.rail_12v(nets, host[name], sw, cut, fault)
        else:
            power.load_switch(nets, host[name], sw, cut, name, "TVS_3V3" if name == "3V3" else "TVS_5V")
        sp, sn = Net(f"ISNS_{name}_P"), Net(f"ISNS_{name}_N")
        if rail["shunt_ohm"] not in SHUNT_PARTS:
            raise SystemExit(f"hw/rails.toml: no shunt part for {rail['shunt_ohm']} ohm on rail {name}; "
                             f"use one of {sorted(SHUNT_PARTS)} or add it to hw/board/catalog.py and build.py")
        power.shunt(SHUNT_PARTS[rail["shunt_ohm"]], sw, drive[name], sp, sn, f"{rail['shunt_ohm'] * 1e3:g}m")
        measure.rail_channel(nets, rail["adc"], rail, sp, sn, drive[name], bus)
    # a rail the variant's connector does not carry (5 V on EDSFF) still has its channel: it reads 0
    for name, n in host.items():
        if not any(p.part.ref.startswith("J") for p in n.pins):
            res("R_100K", n, nets.gnd, "100k")


def bom_rows(circuit) -> list[dict]:
    from catalog import NOT_BOUGHT, SOURCES, UNVERIFIED, spec
    from part_sources import source
    rows = []
    for p in sorted(circuit.parts, key=lambda q: q.ref):
        key = p.fields.get("Catalog", "")
        if p.ref.startswith("#") or key in NOT_BOUGHT:
            continue
        lib, sym, _fp, mfr, _mpn, _desc = spec(key)
        cited, note = source(key, lib, sym, mfr, SOURCES)
        rows.append({"ref": p.ref, "value": str(p.value), "footprint": p.footprint,
                     "manufacturer": p.fields.get("Manufacturer", ""), "mpn": p.fields.get("MPN", ""),
                     "description": p.fields.get("Description", ""), "source": cited,
                     "check": UNVERIFIED.get(key, "") or note})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", choices=sorted(connectors.PARTS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rails", type=Path, default=HERE.parent / "rails.toml")
    ap.add_argument("--no-schematic", action="store_true", help="netlist and BOM only (the tests' mutations)")
    a = ap.parse_args(argv)
    a.out = a.out.resolve()
    doc = tomllib.loads(a.rails.read_text())
    common.LIB.mkdir(exist_ok=True)
    (common.LIB / "powerrig.kicad_sym").write_text(symbols.library())
    footprints.write(common.LIB)
    a.out.mkdir(parents=True, exist_ok=True)
    import os
    os.chdir(a.out)                      # SKiDL writes its logs and a library cache into the cwd
    import skidl
    build(a.variant, doc)
    import builtins
    circuit = builtins.default_circuit
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        skidl.ERC()
    (a.out / "skidl_erc.txt").write_text(log.getvalue())
    stem = f"powerrig-{a.variant}"
    skidl.generate_netlist(file_=str(a.out / f"{stem}.net"))
    (a.out / f"bom-{a.variant}.json").write_text(json.dumps(bom_rows(circuit), indent=0))
    if not a.no_schematic:
        import schematic
        schematic.write(circuit, a.out / f"{stem}.kicad_sch", stem, f"powerrig interposer ({a.variant})",
                        [common.LIB, schematic.KICAD_SYMBOLS])
    return 0


if __name__ == "__main__":
    sys.exit(main())
