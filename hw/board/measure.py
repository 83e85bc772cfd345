"""The measurement section of one rail: INA240A2 across the shunt's sense pins, a zero-drift buffer
after the voltage divider, an RC into each input of one AD7380 (channel A = current, B = voltage,
both sampled at the same instant), and the shared reference.

Values come from hw/rails.toml (shunt, divider) so the board and the firmware's scaling cannot differ;
tests/test_hw_board.py checks the netlist against rails.toml.
"""
from __future__ import annotations

from common import NC, Net, cap, part, res
from symbols import AD7380_PINS

DIVIDER_PARTS = {100e3: "R_100K_P", 200e3: "R_200K_P", 499e3: "R_499K_P"}


def _ohms(v: float) -> str:
    return f"{v / 1e3:g}k"


def rail_channel(nets, k: int, rail: dict, sense_p: Net, sense_n: Net, drive: Net, adc_bus: dict) -> None:
    name = rail["name"]
    # current: INA240A2 (gain 50), REF1 = REF2 = GND: unidirectional, 0 A = 0 V
    csa = part("INA240A2", "INA240A2")
    csa["+"] += sense_p
    csa["-"] += sense_n
    csa["V+"] += nets.v3v3a
    csa["GND"] += nets.gnd
    csa["REF1"] += nets.gnd
    csa["REF2"] += nets.gnd
    csa_out = Net(f"CSA_{name}")
    csa[8] += csa_out
    cap("C_100N", nets.v3v3a, nets.gnd, "100n")
    ain_i = Net(f"AIN_I_{name}")
    res("R_33R2", csa_out, ain_i, "33.2")
    cap("C_2N2_C0G", ain_i, nets.gnd, "2.2n")
    # voltage: divider at the drive side of the shunt (the drive's voltage), buffered
    top, bottom = rail["divider_top_ohm"], rail["divider_bottom_ohm"]
    vdiv = Net(f"VDIV_{name}")
    res(DIVIDER_PARTS[top], drive, vdiv, _ohms(top))
    res(DIVIDER_PARTS[bottom], vdiv, nets.gnd, _ohms(bottom))
    buf = part("OPA333", "OPA333")
    vbuf = Net(f"VBUF_{name}")
    buf["+"] += vdiv
    buf["-"] += vbuf
    buf[1] += vbuf                      # output pin
    buf["V+"] += nets.v3v3a
    buf["V-"] += nets.gnd
    cap("C_100N", nets.v3v3a, nets.gnd, "100n")
    ain_v = Net(f"AIN_V_{name}")
    res("R_33R2", vbuf, ain_v, "33.2")
    cap("C_2N2_C0G", ain_v, nets.gnd, "2.2n")
    # ADC k: A = current, B = voltage; inputs referred to AGND; 1-wire SDOA; external reference
    adc = part("AD7380", "AD7380")
    adc["AINA+"] += ain_i
    adc["AINA-"] += nets.gnd
    adc["AINB+"] += ain_v
    adc["AINB-"] += nets.gnd
    adc["REFIO"] += nets.vref
    cap("C_1U", adc["REFCAP"], nets.gnd, "1u")
    cap("C_1U", adc["REGCAP"], nets.gnd, "1u")
    adc["VCC"] += nets.v3v3a
    adc["VLOGIC"] += nets.v3v3
    for num, pin_name, _type in AD7380_PINS:    # both GND pins (by number: SKiDL's name match is ambiguous)
        if pin_name == "GND":
            adc[int(num)] += nets.gnd
    adc["EP"] += nets.gnd
    cap("C_100N", nets.v3v3a, nets.gnd, "100n")
    cap("C_100N", nets.v3v3, nets.gnd, "100n")
    adc["SCLK"] += adc_bus["sclk"]
    adc["~{CS}"] += adc_bus["cs"]
    adc["SDI"] += adc_bus["sdi"]
    adc["SDOA"] += adc_bus["sdo"][k]
    adc["SDOB"] += NC                   # 1-wire mode: both results leave on SDOA


def reference(nets) -> None:
    ref = part("ADR4525", "ADR4525")
    ref["IN"] += nets.v3v3a
    ref["OUT"] += nets.vref
    ref["GND"] += nets.gnd
    for p in ref.pins:
        if p.name == "NC":
            p += NC
    cap("C_1U", nets.v3v3a, nets.gnd, "1u")
    cap("C_1U", nets.vref, nets.gnd, "1u")


def analog_supply(nets) -> None:
    ldo = part("LP5907", "LP5907-3.3")
    ldo["IN"] += nets.vbus
    ldo["EN"] += nets.vbus
    ldo["OUT"] += nets.v3v3a
    ldo["GND"] += nets.gnd
    for p in ldo.pins:
        if p.name == "NC":
            p += NC
    cap("C_1U", nets.vbus, nets.gnd, "1u")
    cap("C_1U", nets.v3v3a, nets.gnd, "1u")
