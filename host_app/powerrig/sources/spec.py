"""One string names the source a recording or a sweep measures with, so plans and the command line
say it the same way:

    interposer                       the rig's interposer (the default)
    n6705c:RESOURCE[,12V=1,3V3=2]    an N6705C-class analyzer at a VISA resource, rail=channel
    n6705c:sim                       the virtual rig's simulated N6705C (its ``reference``)
    joulescope:12V=SERIAL,3V3=SERIAL one Joulescope per rail (pyjoulescope_driver)
"""
from __future__ import annotations

from powerrig.core.errors import InstrumentError
from powerrig.sources.n6705c import N6705CSource
from powerrig.sources.joulescope import JoulescopeSource

KINDS = ("interposer", "n6705c", "joulescope")


def parse_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """(kind, address, {rail: value}); a wrong spec is one line saying the accepted forms."""
    spec = (spec or "interposer").strip()
    kind, _, rest = spec.partition(":")
    if kind not in KINDS:
        raise InstrumentError(f"unknown measurement source {spec!r}; use interposer, n6705c:RESOURCE[,12V=1,3V3=2] "
                              "or joulescope:12V=SERIAL,3V3=SERIAL")
    parts = [p.strip() for p in rest.split(",") if p.strip()] if rest else []
    address = ""
    if parts and "=" not in parts[0]:
        address = parts.pop(0)
    mapping = {}
    for p in parts:
        rail, eq, value = p.partition("=")
        if not eq or not rail or not value:
            raise InstrumentError(f"measurement source {spec!r}: {p!r} is not RAIL=VALUE (e.g. 12V=1)")
        mapping[rail] = value
    if kind == "n6705c" and not address:
        raise InstrumentError(f"measurement source {spec!r} names no VISA resource; e.g. "
                              "n6705c:TCPIP::10.0.0.5::5025::SOCKET,12V=1,3V3=2")
    if kind == "joulescope" and not mapping:
        raise InstrumentError(f"measurement source {spec!r} names no unit per rail; e.g. joulescope:12V=003512,3V3=003688")
    return kind, address, mapping


def open_source(spec: str, rig_info: dict | None = None, backend: str | None = None):
    """An open source other than the interposer (the caller opens that one, on its port)."""
    kind, address, mapping = parse_spec(spec)
    if kind == "interposer":
        raise InstrumentError("the interposer is opened on its port, not as an instrument source")
    if kind == "n6705c":
        if address == "sim":
            if not rig_info or not rig_info.get("reference"):
                raise InstrumentError("n6705c:sim needs a virtual rig (rig.port = \"sim:PROFILE\"); give a VISA "
                                      "resource for a real analyzer")
            address, backend = rig_info["reference"], backend or "@py"
        try:
            channels = {r: int(c) for r, c in mapping.items()} or None
        except ValueError:
            raise InstrumentError(f"measurement source {spec!r}: channels are numbers 1..4 (12V=1)") from None
        return N6705CSource.open(address, channels, backend)
    return JoulescopeSource.open(mapping)
