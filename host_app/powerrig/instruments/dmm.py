"""Precision DMM (Keysight 34465A / Keithley DAQ6510 class): one quantity at a time, NPLC-timed.

A DMM reads one channel (the rail voltage, or the current through its own shunt), so it serves
`powerrig validate --channel`; calibrating every channel at once needs a power analyzer.
"""
from __future__ import annotations

from powerrig.core.errors import InstrumentError
from powerrig.instruments.scpi import ScpiInstrument

FUNCTIONS = {"v": "VOLT:DC", "i": "CURR:DC"}


class Dmm(ScpiInstrument):
    kind = "DMM"

    def configure(self, quantity: str, nplc: float = 10.0, rng: str = "AUTO") -> None:
        """``quantity`` is "v" or "i"; ``nplc`` integration time in power-line cycles."""
        if quantity not in FUNCTIONS:
            raise InstrumentError(f"a DMM measures 'v' or 'i', not {quantity!r}")
        f = FUNCTIONS[quantity]
        self.write(f"CONF:{f} {rng}")
        self.write(f"SENS:{f}:NPLC {nplc:g}")

    def read(self) -> float:
        return self.query_float("READ?")
