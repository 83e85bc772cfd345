"""The RP2350 (Pico 2 module) and what it talks to: the ADCs' SPI (with SDI for the register set-up),
the digital inputs (activity LED, PERST# at the drive, marker), the rail cuts, PERST#/PWRDIS drive,
the board temperature sensor and the reference self-test.

GPIO numbers here are the hardware's; firmware/board/pins.py must match them, and
tests/test_hw_board.py compares the two from the netlist.
"""
from __future__ import annotations

from common import NC, Net, cap, part, res

# net name -> Pico 2 GPIO (the board's truth; pins.py is checked against it)
GPIO = {
    "ADC_SCLK": 2, "ADC_CS": 3, "ADC_SDO0": 4, "ADC_SDO1": 5, "ADC_SDO2": 6, "ADC_SDI": 7,
    "DIG0": 10, "DIG1": 11, "DIG2": 12,              # activity LED, PERST# at the drive, marker
    "RAIL_12V_EN": 13, "RAIL_3V3_EN": 14, "PERST_DRIVE": 15, "PWRDIS_DRIVE": 16, "RAIL_5V_EN": 17,
    "RAIL_FAULT": 18,
    "TEMP_SDA": 20, "TEMP_SCL": 21,
    "VREF_SENSE": 26,
}


def pico(nets) -> tuple[object, dict[str, Net]]:
    m = part("PICO2", "Pico 2")
    gp = {name: Net(name) for name in GPIO}
    for name, n in GPIO.items():
        pin = f"GPIO{n}" if n < 26 else f"GPIO{n}_ADC{n - 26}"
        m[pin] += gp[name]
    m["3V3"] += nets.v3v3
    m["VBUS"] += nets.vbus
    m["AGND"] += nets.gnd
    for p in m.pins:
        if p.name == "GND":
            p += nets.gnd
        elif not p.is_connected():
            p += NC
    return m, gp


def clamped_input(nets, src: Net, dst: Net) -> None:
    """1 k in series and a Schottky pair to the rails: a drive-side signal can never push current
    into an unpowered or powered RP2350 pin beyond what the 1 k allows."""
    res("R_1K", src, dst, "1k")
    d = part("BAT54S")
    d["A"] += nets.gnd
    d["K"] += nets.v3v3
    d["COM"] += dst


def temperature_sensor(nets, gp: dict[str, Net]) -> None:
    t = part("TMP117", "TMP117")
    t["V+"] += nets.v3v3
    t["GND"] += nets.gnd
    t["SDA"] += gp["TEMP_SDA"]
    t["SCL"] += gp["TEMP_SCL"]
    t["ADD0"] += nets.gnd               # I2C address 0x48
    t["ALERT"] += NC
    res("R_4K7", nets.v3v3, gp["TEMP_SDA"], "4k7")
    res("R_4K7", nets.v3v3, gp["TEMP_SCL"], "4k7")
    cap("C_100N", nets.v3v3, nets.gnd, "100n")


def sideband(nets, gp: dict[str, Net], sig: dict[str, Net]) -> None:
    """PERST0#/PERST1# to the SSD = host's AND NOT PERST_DRIVE (an N-MOSFET inverts it into
    PERST_ALLOW); PWRDIS to the SSD = host's OR PWRDIS_DRIVE. With the MCU in reset the pull-downs
    on both GPIOs make the interposer transparent."""
    allow = Net("PERST_ALLOW")
    q = part("2N7002")
    q["G"] += gp["PERST_DRIVE"]
    q["D"] += allow
    q["S"] += nets.gnd
    res("R_100K", gp["PERST_DRIVE"], nets.gnd, "100k")
    g = part("74LVC2G08")
    g[1] += sig["PERST0_N_HOST"]
    g[2] += allow
    g[7] += sig["PERST0_N_SSD"]
    g[5] += sig["PERST1_N_HOST"]
    g[6] += allow
    g[3] += sig["PERST1_N_SSD"]
    g["VCC"] += nets.v3v3
    g["GND"] += nets.gnd
    cap("C_100N", nets.v3v3, nets.gnd, "100n")
    res("R_10K", nets.v3v3, allow, "10k")
    res("R_100K", sig["PERST0_N_HOST"], nets.gnd, "100k")     # no host: reset held
    res("R_100K", sig["PERST1_N_HOST"], nets.gnd, "100k")
    o = part("74LVC1G32")
    o[1] += sig["PWRDIS_HOST"]
    o[2] += gp["PWRDIS_DRIVE"]
    o[4] += sig["PWRDIS_SSD"]
    o["VCC"] += nets.v3v3
    o["GND"] += nets.gnd
    cap("C_100N", nets.v3v3, nets.gnd, "100n")
    res("R_100K", sig["PWRDIS_HOST"], nets.gnd, "100k")
    res("R_100K", gp["PWRDIS_DRIVE"], nets.gnd, "100k")
    # monitored inputs: activity LED (drive's open drain, passed to the host), PERST# as the drive sees it, marker
    clamped_input(nets, sig["LED"], gp["DIG0"])
    clamped_input(nets, sig["PERST0_N_SSD"], gp["DIG1"])
    marker = Net("MARKER_IN")
    hdr = part("HDR_MARKER", "MARKER")
    hdr[1] += marker
    hdr[2] += nets.gnd
    res("R_100K", marker, nets.gnd, "100k")
    clamped_input(nets, marker, gp["DIG2"])
    res("R_10K", nets.v3v3, gp["RAIL_FAULT"], "10k")          # eFuse FLT# is open drain
    res("R_1K", nets.vref, gp["VREF_SENSE"], "1k")            # self-test: RP2350 ADC0 reads the 2.5 V
