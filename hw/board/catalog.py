"""Every part the interposer uses: KiCad symbol, footprint, manufacturer and part number in one table.

Why one table: the BOM (hw/bom.csv) is generated from the parts the circuit instantiates, and every
instance comes from here, so no part can reach the board without a footprint, a manufacturer and an
MPN. Symbols and footprints are KiCad 9's own libraries (Debian kicad-symbols / kicad-footprints)
except the few in hw/board/lib (written by symbols.py / footprints.py) that KiCad does not have.
"""
from __future__ import annotations

# key: (symbol library, symbol, footprint, manufacturer, MPN, description)
CATALOG = {
    # --- measurement ---
    "AD7380": ("powerrig", "AD7380", "Package_CSP:LFCSP-16-1EP_3x3mm_P0.5mm_EP1.3x1.3mm", "Analog Devices",
               "AD7380BCPZ-RL7", "dual 16-bit 4 MSPS simultaneous-sampling SAR ADC"),
    "INA240A2": ("Amplifier_Current", "INA240A2PW", "Package_SO:TSSOP-8_4.4x3mm_P0.65mm", "Texas Instruments",
                 "INA240A2PWR", "current-sense amplifier, gain 50, PWM rejection"),
    "ADR4525": ("Reference_Voltage", "ADR4525", "Package_SO:SOIC-8_3.9x4.9mm_P1.27mm", "Analog Devices",
                "ADR4525BRZ", "2.5 V reference, 0.02 %, 2 ppm/K, shared by every ADC"),
    "TMP117": ("Sensor_Temperature", "TMP117xxDRV", "Package_SON:WSON-6-1EP_2x2mm_P0.65mm_EP1x1.6mm", "Texas Instruments",
               "TMP117AIDRVR", "board temperature sensor +-0.1 K, between the shunts"),
    "SHUNT_5M": ("Device", "R_Shunt", "Resistor_SMD:R_Shunt_Isabellenhuette_BVR4026", "Isabellenhuette",
                 "BVR-Z-R005-1.0", "shunt 5 mOhm 1 % 4-terminal manganin <=10 ppm/K 5 W"),
    "SHUNT_10M": ("Device", "R_Shunt", "Resistor_SMD:R_Shunt_Isabellenhuette_BVR4026", "Isabellenhuette",
                  "BVR-Z-R010-1.0", "shunt 10 mOhm 1 % 4-terminal manganin <=10 ppm/K 5 W"),
    "SHUNT_50M": ("Device", "R_Shunt", "Resistor_SMD:R_Shunt_Isabellenhuette_BVR4026", "Isabellenhuette",
                  "BVR-Z-R050-1.0", "shunt 50 mOhm 1 % 4-terminal manganin <=10 ppm/K 5 W"),
    # divider resistors: 0.05 %, 5 ppm/K thin film (the ratio's drift is calibrated with the board sensor)
    "R_499K_P": ("Device", "R", "Resistor_SMD:R_0805_2012Metric", "Vishay", "TNPU0805499KAZEN00", "499 kOhm 0.05 % 5 ppm/K thin film"),
    "R_200K_P": ("Device", "R", "Resistor_SMD:R_0805_2012Metric", "Vishay", "TNPU0805200KAZEN00", "200 kOhm 0.05 % 5 ppm/K thin film"),
    "R_100K_P": ("Device", "R", "Resistor_SMD:R_0805_2012Metric", "Vishay", "TNPU0805100KAZEN00", "100 kOhm 0.05 % 5 ppm/K thin film"),
    "R_33R2": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Vishay", "TNPW040233R2BEED", "33.2 Ohm 0.1 % anti-alias"),
    "C_2N2_C0G": ("Device", "C", "Capacitor_SMD:C_0603_1608Metric", "Murata", "GRM1885C1H222JA01D", "2.2 nF C0G 50 V anti-alias"),
    # --- rail switching ---
    "TPS26630": ("Power_Management", "TPS26630RGE", "Package_DFN_QFN:Texas_RGE0024H_VQFN-24-1EP_4x4mm_P0.5mm_EP2.7x2.7mm_ThermalVias",
                 "Texas Instruments", "TPS26630RGER", "eFuse 4.5-60 V 6 A, dV/dt slew, UVLO enable, fault output"),
    "TPS22917": ("Power_Management", "TPS22917DBV", "Package_TO_SOT_SMD:SOT-23-6", "Texas Instruments",
                 "TPS22917DBVR", "load switch 1-5.5 V 2 A, CT slew, quick output discharge"),
    "2N7002": ("Transistor_FET", "2N7002", "Package_TO_SOT_SMD:SOT-23", "Nexperia", "2N7002,215", "N-MOSFET 60 V: MCU pulls an enable low"),
    "74LVC2G08": ("74xGxx", "74LVC2G08", "Package_SO:TSSOP-8_3x3mm_P0.65mm", "Nexperia", "74LVC2G08DP,125",
                  "dual AND: PERST0#/PERST1# to the drive = host AND NOT hold"),
    "74LVC1G32": ("74xGxx", "74LVC1G32", "Package_TO_SOT_SMD:SOT-23-5", "Nexperia", "74LVC1G32GV,125",
                  "OR: PWRDIS to the drive = host OR MCU"),
    # --- protection ---
    "TVS_12V": ("Diode", "SMAJ15A", "Diode_SMD:D_SMA", "Littelfuse", "SMAJ15A", "TVS 15 V 400 W, 12 V input"),
    "TVS_5V": ("Diode", "SMAJ5.0A", "Diode_SMD:D_SMA", "Littelfuse", "SMAJ5.0A", "TVS 5 V 400 W, 5 V input"),
    "TVS_3V3": ("Device", "D_TVS", "Diode_SMD:D_SMA", "Littelfuse", "SMAJ3.3A", "TVS 3.3 V 400 W, 3.3 Vaux input"),
    "FUSE_10A": ("Device", "Fuse", "Fuse:Fuse_2920_7451Metric", "Littelfuse", "2920L500/15MR", "PTC 5 A hold 15 V: 12 V backstop behind the eFuse"),
    "BAT54S": ("Diode", "BAT54S", "Package_TO_SOT_SMD:SOT-23", "Nexperia", "BAT54S,215", "dual Schottky clamp on MCU inputs"),
    # --- MCU and supplies ---
    "PICO2": ("MCU_Module", "RaspberryPi_Pico", "Module:RaspberryPi_Pico_SMD", "Raspberry Pi", "SC1631",
              "Pico 2 (RP2350A) module, USB to the host"),
    "LP5907": ("Regulator_Linear", "LP5907MFX-3.3", "Package_TO_SOT_SMD:SOT-23-5", "Texas Instruments", "LP5907MFX-3.3/NOPB",
               "3.3 V 250 mA low-noise LDO for the analog section"),
    # --- passives ---
    "R_1K": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Yageo", "RC0402FR-071KL", "1 kOhm 1 %"),
    "R_10K": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Yageo", "RC0402FR-0710KL", "10 kOhm 1 %"),
    "R_100K": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Yageo", "RC0402FR-07100KL", "100 kOhm 1 %"),
    "R_4K7": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Yageo", "RC0402FR-074K7L", "4.7 kOhm 1 %"),
    "R_ILIM": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Yageo", "RC0402FR-0718KL", "18 kOhm 1 %: eFuse limit ~8 A"),
    "R_UVLO_TOP": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Yageo", "RC0402FR-07887KL", "887 kOhm 1 %: UVLO 10.5 V"),
    "R_UVLO_BOT": ("Device", "R", "Resistor_SMD:R_0402_1005Metric", "Yageo", "RC0402FR-07100KL", "100 kOhm 1 %: UVLO 10.5 V"),
    "C_100N": ("Device", "C", "Capacitor_SMD:C_0402_1005Metric", "Murata", "GRM155R71C104KA88D", "100 nF 16 V X7R"),
    "C_1U": ("Device", "C", "Capacitor_SMD:C_0402_1005Metric", "Murata", "GRM155R61A105KE15D", "1 uF 10 V X5R"),
    "C_10U": ("Device", "C", "Capacitor_SMD:C_0805_2012Metric", "Murata", "GRM21BR61E106KA73L", "10 uF 25 V X5R"),
    "C_DVDT": ("Device", "C", "Capacitor_SMD:C_0402_1005Metric", "Murata", "GRM155R71H223KA12D", "22 nF 50 V X7R: eFuse slew ~1 ms"),
    "C_CT": ("Device", "C", "Capacitor_SMD:C_0402_1005Metric", "Murata", "GRM155R71H102KA01D", "1 nF 50 V X7R: load switch slew"),
    # --- connectors (symbols and footprints in hw/board/lib) ---
    "EDSFF_EDGE": ("powerrig", "EDSFF_1C", "powerrig:EDSFF_1C_CardEdge", "PCB fabricator", "(this PCB's gold fingers)",
                   "EDSFF 1C card edge into the host slot, hard gold 30 uin, bevelled"),
    "EDSFF_RCPT": ("powerrig", "EDSFF_1C", "powerrig:EDSFF_1C_Receptacle", "Amphenol ICC", "10135580-101LF",
                   "EDSFF 1C straddle-mount receptacle for the drive (SFF-TA-1002)"),
    "U2_PLUG": ("powerrig", "SFF8639", "powerrig:SFF8639_Plug", "Amphenol ICC", "U10-J-2-68-22-00-B0",
                "SFF-8639 68-pin plug into the host's U.2 receptacle"),
    "U2_RCPT": ("powerrig", "SFF8639", "powerrig:SFF8639_Receptacle", "Amphenol ICC", "U10B082502T",
                "SFF-8639 68-pin receptacle for the drive"),
    "HDR_MARKER": ("Connector_Generic", "Conn_01x02", "Connector_PinHeader_2.54mm:PinHeader_1x02_P2.54mm_Vertical",
                   "Amphenol ICC", "68000-102HLF", "marker input (external trigger) header"),
}


# Parts that are not bought: the EDSFF card edge is the PCB's own gold fingers (ordered with the PCB:
# hard gold, bevel). The BOM leaves them out; hw/README.md says so.
NOT_BOUGHT = {"EDSFF_EDGE"}

# Parts whose MPN (and land pattern) no source found here confirms: the BOM carries the reason in its
# `check` column and hw/README.md lists them. Each footprint named here is a generated stand-in
# (hw/board/footprints.py: pads at the connector pitch in pin order, not the vendor's drawing).
_NO_SOURCE = ("MPN not confirmed: no datasheet, catalogue page or design using this part number was found "
              "(searches listed in hw/README.md); choose the part from the vendor's catalogue; "
              "land pattern is a generated stand-in")
UNVERIFIED = {
    "EDSFF_RCPT": _NO_SOURCE,
    "U2_PLUG": _NO_SOURCE,
    "U2_RCPT": _NO_SOURCE,
    "PICO2": "KiCad's symbol is the Pico's (RP2040); the design assumes the Pico 2 keeps that module pinout: "
             "check against the Pico 2 datasheet",
    "AD7380": "pin numbers from a secondary source (hw/board/pinout_sources.toml); exposed-pad size of the "
              "LFCSP footprint not checked against ADI's package drawing",
}


# Citations for parts whose backing is not simply the datasheet KiCad's own symbol names (that one is
# looked up by part_sources.py and lands in the BOM's source column).
SOURCES = {
    "AD7380": "pin numbers: hw/board/pinout_sources.toml (ad7380-kicad-poc); the dual AD738x in the 16-lead "
              "3 x 3 mm LFCSP: https://analogdevicesinc.github.io/hdl/2023_R2/projects/ad738x_fmc/index.html",
    "PICO2": "KiCad 9 symbol MCU_Module:RaspberryPi_Pico, datasheet https://datasheets.raspberrypi.com/pico/pico-datasheet.pdf "
             "(the Pico's, RP2040)",
}


def spec(key: str) -> tuple[str, str, str, str, str, str]:
    """The catalog entry, with a one-line error naming the fix when a key is missing."""
    try:
        return CATALOG[key]
    except KeyError:
        raise KeyError(f"part {key!r} is not in hw/board/catalog.py; add it with footprint, manufacturer and MPN") from None
CATALOG["OPA333"] = ("Amplifier_Operational", "OPA333xxDBV", "Package_TO_SOT_SMD:SOT-23-5", "Texas Instruments",
                     "OPA333AIDBVR", "zero-drift buffer: divider to the ADC's switched-capacitor input")
