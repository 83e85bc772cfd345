"""Rail switching and protection, one chain per supply: host pin -> TVS -> (12 V: PTC) -> switch with
controlled slew -> Kelvin shunt -> drive pin.

The switch is on by default (a pull-up or the UVLO divider on its enable, so the drive powers up with
the host as if the interposer were not there); the MCU drives the enable through 1 k (pins.RAIL_*_EN:
high = on, low = rail cut, floating while the MCU boots = on). The eFuse's dV/dt capacitor and the load switch's CT set the
ramp so the drive's inrush is limited and measurable; the eFuse's fault output reaches the MCU.
"""
from __future__ import annotations

from common import NC, Net, cap, part, power_flag, res


def mcu_enable(nets, enable: Net, gpio_net: Net) -> None:
    """The GPIO overrides the enable's pull-up through 1 k (3.3 V in = on, 0 V = off)."""
    res("R_1K", gpio_net, enable, "1k")


def rail_12v(nets, host: Net, sw: Net, cut: Net, fault: Net) -> None:
    tvs = part("TVS_12V")
    tvs["A1"] += nets.gnd
    tvs["A2"] += host
    cap("C_10U", host, nets.gnd, "10u")
    fused = Net("+12V_FUSED")
    ptc = part("FUSE_10A")
    ptc[1] += host
    ptc[2] += fused
    power_flag(host)
    power_flag(fused)
    u = part("TPS26630")
    u["IN"] += fused
    u["IN_SYS"] += fused
    u["OUT"] += sw
    u["GND"] += nets.gnd
    uvlo = Net("EN_12V")
    res("R_UVLO_TOP", fused, uvlo, "887k")
    res("R_UVLO_BOT", uvlo, nets.gnd, "100k")
    u["UVLO"] += uvlo
    mcu_enable(nets, uvlo, cut)
    u["~{SHDN}"] += nets.v3v3          # the eFuse runs only while the rig's MCU side is powered
    u["MODE"] += nets.gnd              # latch off after a fault: the MCU sees FLT# and decides
    u["OVP"] += nets.gnd               # no over-voltage cut-off (the TVS clamps)
    u["PGTH"] += nets.gnd
    cap("C_DVDT", u["dVdT"], nets.gnd, "22n")
    res("R_ILIM", u["ILIM"], nets.gnd, "18k")
    u["~{FLT}"] += fault
    for name in ("B_GATE", "DRV", "PGOOD", "IMON"):
        u[name] += NC
    for p in u.pins:
        if p.name == "NC":
            p += NC


def load_switch(nets, host: Net, sw: Net, cut: Net, rail: str, tvs_key: str) -> None:
    tvs = part(tvs_key)
    tvs["A1"] += nets.gnd
    tvs["A2"] += host
    cap("C_10U", host, nets.gnd, "10u")
    power_flag(host)
    u = part("TPS22917")
    u["VIN"] += host
    u["VOUT"] += sw
    u["GND"] += nets.gnd
    res("R_1K", u["QOD"], sw, "1k")   # quick output discharge (~1 ms into the drive's bulk): a cut rail reaches 0 V
    cap("C_CT", u["CT"], nets.gnd, "1n")
    on = Net(f"EN_{rail}")
    res("R_100K", host, on, "100k")
    u["ON"] += on
    mcu_enable(nets, on, cut)


def shunt(key: str, sw: Net, drive: Net, sense_p: Net, sense_n: Net, value: str):
    """Four-terminal shunt: force pins 1/4 carry the current, sense pins 2/3 go only to the amplifier."""
    r = part(key, value)
    r[1] += sw
    r[4] += drive
    r[2] += sense_p
    r[3] += sense_n
    return r
