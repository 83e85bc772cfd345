"""Find interposers: probe serial ports (and running simulators) with a short describe."""
from __future__ import annotations

from serial.tools import list_ports

from powerrig.core import rig_registry
from powerrig.core.errors import PowerrigError
from powerrig.interposer.client import Interposer

RP2_USB_VID = 0x2E8A   # Raspberry Pi: MicroPython on the RP2350 enumerates with this vendor id


def candidate_ports(extra: list[str] | None = None, all_ports: bool = False) -> list[str]:
    """Ports worth a describe: USB serial ports of RP2 boards (or every port with all_ports), live
    virtual rigs, and any named explicitly. Other instruments on the bench are left alone."""
    ports = [p.device for p in list_ports.comports() if all_ports or p.vid == RP2_USB_VID]
    ports += [r["port"] for r in rig_registry.running()]      # live virtual rigs only: a stale pty may be someone's terminal
    ports += list(extra or [])
    seen, out = set(), []
    for p in ports:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def probe(port: str, timeout: float = 0.5, errors: dict | None = None) -> dict | None:
    """The interposer's identity at ``port``, or None; ``errors[port]`` then says why (for ports the
    user named: a dead one must be said, not dropped)."""

    try:
        with Interposer.open(port, timeout=timeout) as dev:
            d = dev.description
            return {"port": port, "board": d.get("board"), "serial": d.get("serial"), "firmware": d.get("firmware")}
    except PowerrigError as e:
        if errors is not None:
            errors[port] = str(e)
        return None


def find_interposers(extra: list[str] | None = None, all_ports: bool = False, errors: dict | None = None) -> list[dict]:
    return [d for p in candidate_ports(extra, all_ports) if (d := probe(p, errors=errors))]
