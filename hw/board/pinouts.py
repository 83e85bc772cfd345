"""Connector pin lists: SFF-TA-1009 on the SFF-TA-1002 1C edge (EDSFF E1.S / E3.S, x4) and SFF-8639 (U.2).

Each pin has a role that decides how the interposer treats it:
  12V, 3V3AUX, 5V   a supply: host pin -> protection -> switch -> Kelvin shunt -> drive pin (measured)
  GND               common ground
  PERST0#, PERST1#  reset to the drive: host's AND NOT the MCU's hold (74LVC2G08), monitored
  PWRDIS            power disable to the drive: host's OR the MCU's (74LVC1G32)
  LED               activity/LED from the drive: passed through to the host and monitored
  pass              everything else (lanes, REFCLK, SMBus, presence, dual-port, reserved): a straight
                    host-to-drive net, same pin on both sides
Pin numbers: the pins a source found here confirms are transcribed, with the source, into
hw/board/pinout_sources.toml and tests/test_hw_board.py checks these tables against it; the pins no
such source confirms are listed in hw/README.md ("Pin tables: sources and what is unverified").
"""
from __future__ import annotations


def _edsff_1c() -> list[tuple[str, str, str]]:
    # Only A6 = MFG is stated by a source found here, and that one a non-authoritative note (secondary in
    # hw/board/pinout_sources.toml); every other position is this project's reading of SFF-TA-1009 and
    # is unknown (hw/README.md).
    side_b = ["12V", "12V", "12V", "GND", "3.3VAUX", "PWRDIS",
              "GND", "PETp0", "PETn0", "GND", "PETp1", "PETn1", "GND", "REFCLK0+", "REFCLK0-", "GND",
              "PETp2", "PETn2", "GND", "PETp3", "PETn3", "GND", "SMBCLK", "SMBDAT", "SMBRST#", "ALERT#", "LED1#", "GND"]
    side_a = ["12V", "12V", "12V", "GND", "PRSNT0#", "MFG",
              "GND", "PERp0", "PERn0", "GND", "PERp1", "PERn1", "GND", "REFCLK1+", "REFCLK1-", "GND",
              "PERp2", "PERn2", "GND", "PERp3", "PERn3", "GND", "PERST0#", "PERST1#", "DUALPORTEN#", "CLKREQ#", "IFDET#", "GND"]
    return ([(f"B{k + 1}", n, role(n)) for k, n in enumerate(side_b)]
            + [(f"A{k + 1}", n, role(n)) for k, n in enumerate(side_a)])


def _sff8639() -> list[tuple[str, str, str]]:
    # PCIe x4 on SFF-8639 (U.2): lane 0 and the sideband on the E pins, lanes 1-2 on S17-S28, lane 3
    # on E17-E22; S1-S14 are the two SAS ports (unused by NVMe, passed through). What public sources
    # say of each pin, and how much that is worth (confirmed, secondary, conflict), is in
    # hw/board/pinout_sources.toml and hw/README.md.
    s = ["GND", "SAS0_RX+", "SAS0_RX-", "GND", "SAS0_TX-", "SAS0_TX+", "GND",                 # S1-S7 SAS port A
         "GND", "SAS1_RX+", "SAS1_RX-", "GND", "SAS1_TX-", "SAS1_TX+", "GND",                 # S8-S14 SAS port B
         "RSVD", "GND", "PETp1", "PETn1", "GND", "PERn1", "PERp1", "GND",                     # S15-S22
         "PETp2", "PETn2", "GND", "PERn2", "PERp2", "GND"]                                    # S23-S28
    e = ["REFCLK1+", "REFCLK1-", "3.3VAUX", "PERST1#", "PERST0#", "RSVD", "REFCLK0+", "REFCLK0-", "GND",
         "PETp0", "PETn0", "GND", "PERn0", "PERp0", "GND", "RSVD",                           # E1-E16
         "PETp3", "PETn3", "GND", "PERn3", "PERp3", "GND", "SMBCLK", "SMBDAT", "DUALPORTEN#"]   # E17-E25
    p = ["UNVERIFIED", "RSVD", "PWRDIS", "IFDET#", "GND", "GND", "5V", "5V", "5V", "PRSNT#", "LED", "GND",
         "12V", "12V", "12V"]                                                        # P1-P15 (P7, P13 precharge)
    pins = [(f"S{k + 1}", n) for k, n in enumerate(s)] + [(f"E{k + 1}", n) for k, n in enumerate(e)] \
        + [(f"P{k + 1}", n) for k, n in enumerate(p)]
    return [(num, name, role(name)) for num, name in pins]


def role(name: str) -> str:
    if name in ("12V", "5V", "GND", "PWRDIS", "PERST0#", "PERST1#"):
        return name
    if name in ("3.3VAUX",):
        return "3V3AUX"
    if name in ("LED1#", "LED"):
        return "LED"
    return "pass"


PINOUTS = {"edsff": _edsff_1c(), "u2": _sff8639()}
RAIL_ROLES = {"12V": "12V", "3V3AUX": "3V3", "5V": "5V"}   # connector role -> rails.toml rail name


def net_name(pin: str, name: str) -> str:
    """KiCad-safe net name of a pass-through signal; reserved pins keep their own net per pin."""
    if name in ("RSVD", "MFG", "UNVERIFIED"):
        return f"{name}_{pin}"
    return name.replace("#", "_N").replace("+", "_P").replace("-", "_N").replace(".", "V")
