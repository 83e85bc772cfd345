"""Reference meters over SCPI (pyvisa): the bench instruments powerrig is checked against.

    with open_reference("TCPIP::10.0.0.5::5025::SOCKET") as ref:
        print(ref.identity, ref.measure(1))

``open_reference`` identifies the instrument with ``*IDN?`` and returns the driver for its class,
or refuses an instrument it does not support before sending it anything else.
"""
from __future__ import annotations

import re

from powerrig.core.errors import InstrumentError
from powerrig.instruments.dmm import Dmm
from powerrig.instruments.power_analyzer import Acquisition, PowerAnalyzer
from powerrig.instruments.scpi import Identity, ScpiInstrument, identify, open_resource

SUPPORTED = (
    (re.compile(r"^N67\d\d[A-Z]?$"), PowerAnalyzer),         # N6705C, N6715C, N6781A-class mainframes
    (re.compile(r"^(344\d\d[A-Z]?|DAQ6510|DMM6500|DMM7510)$"), Dmm),
)


def driver_for(identity: Identity):
    for pattern, cls in SUPPORTED:
        if pattern.match(identity.model.upper()):
            return cls
    raise InstrumentError(f"{identity} is not a supported reference meter; supported: N6705C-class DC power "
                          "analyzers and 34465A / DAQ6510-class DMMs")


def open_reference(resource: str, backend: str | None = None, timeout_ms: int = 5000) -> ScpiInstrument:
    res = open_resource(resource, backend, timeout_ms)
    try:
        ident = identify(res, resource)
        cls = driver_for(ident)
        inst = cls(res, ident, resource)
        inst.write("*CLS")
        return inst
    except BaseException:
        res.close()
        raise


def open_analyzer(resource: str, backend: str | None, needs: str) -> PowerAnalyzer:
    """open_reference, refused (and closed) unless it is a DC power analyzer; ``needs`` says what for."""
    ref = open_reference(resource, backend)
    if not isinstance(ref, PowerAnalyzer):
        ref.close()
        raise InstrumentError(f"{ref.identity} is a {ref.kind}; {needs} needs a DC power analyzer (N6705C class)")
    return ref


__all__ = ["Acquisition", "Dmm", "Identity", "PowerAnalyzer", "ScpiInstrument", "driver_for", "open_analyzer",
           "open_reference"]
