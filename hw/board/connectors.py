"""The two connectors of a variant (host side, drive side) wired by pin role (pinouts.py): supplies
split into a host net and a drive net (the switch and the shunt sit between), sideband through the
gates, the rest straight through."""
from __future__ import annotations

from common import Net, part, power_flag
from pinouts import PINOUTS, RAIL_ROLES, net_name

PARTS = {"edsff": ("EDSFF_EDGE", "EDSFF_RCPT"), "u2": ("U2_PLUG", "U2_RCPT")}


def connectors(nets, variant: str) -> tuple[dict[str, Net], dict[str, Net], dict[str, Net]]:
    """Returns (host rail nets, drive rail nets, sideband nets) keyed by rails.toml rail / signal name."""
    host_key, drive_key = PARTS[variant]
    jh, jd = part(host_key, "HOST"), part(drive_key, "DRIVE")
    host = {r: Net(f"+{r}_HOST") for r in ("12V", "3V3", "5V")}
    drive = {r: Net(f"+{r}_DRIVE") for r in ("12V", "3V3", "5V")}
    sig = {n: Net(n) for n in ("PERST0_N_HOST", "PERST0_N_SSD", "PERST1_N_HOST", "PERST1_N_SSD",
                               "PWRDIS_HOST", "PWRDIS_SSD", "LED")}
    passed: dict[str, Net] = {}
    for num, name, role in PINOUTS[variant]:
        if role in RAIL_ROLES:
            jh[num] += host[RAIL_ROLES[role]]
            jd[num] += drive[RAIL_ROLES[role]]
        elif role == "GND":
            jh[num] += nets.gnd
            jd[num] += nets.gnd
        elif role in ("PERST0#", "PERST1#"):
            k = role[5]
            jh[num] += sig[f"PERST{k}_N_HOST"]
            jd[num] += sig[f"PERST{k}_N_SSD"]
        elif role == "PWRDIS":
            jh[num] += sig["PWRDIS_HOST"]
            jd[num] += sig["PWRDIS_SSD"]
        elif role == "LED":
            jh[num] += sig["LED"]
            jd[num] += sig["LED"]
        else:
            n = passed.setdefault(net_name(num, name), Net(net_name(num, name)))
            jh[num] += n
            jd[num] += n
    return host, drive, sig
