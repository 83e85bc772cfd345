"""DC power analyzer (Keysight N6705C class): per-channel source, V and I readings, timed arrays.

A channel's digitizer runs ``points`` samples ``tint`` apart after a trigger; the host stamps the
trigger with its own clock (``t_trigger``), which is how reference readings land on the capture's
clock. Channels are numbered 1..4 as on the front panel.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from powerrig.core.errors import InstrumentError
from powerrig.instruments.scpi import ScpiInstrument

MIN_TINT_S = 20.48e-6        # the N6705C digitizer's fastest sample interval
MAX_POINTS = 512 * 1024


@dataclass
class Acquisition:
    """One timed array per channel: volts and amps, sample k at ``t_trigger + k * tint`` (host UTC)."""
    t_trigger: float
    tint: float
    volts: dict[int, np.ndarray]
    amps: dict[int, np.ndarray]

    @property
    def t_end(self) -> float:
        n = len(next(iter(self.volts.values()))) if self.volts else 0
        return self.t_trigger + n * self.tint


def _chan(chs) -> str:
    return "(@" + ",".join(str(c) for c in chs) + ")"


class PowerAnalyzer(ScpiInstrument):
    kind = "power analyzer"

    def measure(self, ch: int) -> tuple[float, float]:
        """(volts, amps) averaged over the instrument's default aperture."""
        return self.query_float(f"MEAS:VOLT? {_chan([ch])}"), self.query_float(f"MEAS:CURR? {_chan([ch])}")

    def set_source(self, ch: int, volts: float, amps: float) -> None:
        """Supply ``volts``; set the load current to ``amps`` (an SMU channel in current priority, or the
        fixture's electronic load on the simulator)."""
        if volts < 0 or amps < 0:
            raise InstrumentError(f"channel {ch}: setpoints must be positive (got {volts} V, {amps} A)")
        self.write(f"VOLT {volts:.6g},{_chan([ch])}")
        self.write(f"CURR {amps:.6g},{_chan([ch])}")

    def supply(self, ch: int, volts: float, limit_a: float) -> None:
        """Feed a load (the drive's slot) at ``volts`` with whatever current it draws, up to ``limit_a``,
        output on. An SMU channel is put in voltage priority first (FUNC VOLT, CURR:LIM); a DC power
        module has no priority modes (it rejects FUNC) and its CURR is its current limit."""
        if not 0 < volts <= 20 or limit_a <= 0:
            raise InstrumentError(f"channel {ch}: supply setpoints out of range (got {volts} V, limit {limit_a} A)")
        try:
            self.write(f"FUNC VOLT,{_chan([ch])}")
            self.write(f"CURR:LIM {limit_a:.6g},{_chan([ch])}")
        except InstrumentError:
            self.write(f"CURR {limit_a:.6g},{_chan([ch])}")
        self.write(f"VOLT {volts:.6g},{_chan([ch])}")
        self.output(ch, True)

    def output(self, ch: int, on: bool) -> None:
        self.write(f"OUTP {'ON' if on else 'OFF'},{_chan([ch])}")

    def acquire(self, chs: list[int], seconds: float, points: int = 1024) -> Acquisition:
        """Digitize V and I of ``chs`` for ``seconds``; blocks until the arrays are fetched."""
        points = int(min(max(points, 2), MAX_POINTS))
        tint = max(MIN_TINT_S, seconds / points)
        c = _chan(chs)
        self.write(f"SENS:SWE:TINT {tint:.6g},{c}")
        self.write(f"SENS:SWE:POIN {points},{c}")
        self.write(f"SENS:FUNC:VOLT ON,{c}")
        self.write(f"SENS:FUNC:CURR ON,{c}")
        self.write(f"TRIG:ACQ:SOUR BUS,{c}")
        tint = self.query_float(f"SENS:SWE:TINT? {_chan(chs[:1])}")      # what the instrument chose
        self.write(f"INIT:ACQ {c}")
        t_trigger = self._trigger()
        old = self.res.timeout
        self.res.timeout = max(old, int((points * tint + 5.0) * 1000))
        try:
            volts = {ch: np.asarray(self.query_floats(f"FETC:ARR:VOLT? {_chan([ch])}")) for ch in chs}
            amps = {ch: np.asarray(self.query_floats(f"FETC:ARR:CURR? {_chan([ch])}")) for ch in chs}
        finally:
            self.res.timeout = old
        for ch in chs:
            if len(volts[ch]) != points or len(amps[ch]) != points:
                raise InstrumentError(f"{self.identity.model}: channel {ch} returned {len(volts[ch])}/{len(amps[ch])} "
                                      f"points, {points} were asked; the acquisition was cut short")
        return Acquisition(t_trigger, tint, volts, amps)

    # ---- long comparisons: the N6705C's continuous data logger ---------------------------------------
    def elog_start(self, chs: list[int], period_s: float) -> float:
        """Start continuous logging of V and I; returns the host time of the trigger."""
        c = _chan(chs)
        self.write(f"SENS:ELOG:PER {period_s:.6g},{c}")
        self.write(f"SENS:ELOG:FUNC:VOLT ON,{c}")
        self.write(f"SENS:ELOG:FUNC:CURR ON,{c}")
        self.write(f"TRIG:ELOG:SOUR BUS,{c}")
        self.write(f"INIT:ELOG {c}")
        return self._trigger()

    def _trigger(self) -> float:
        """Send *TRG and return its host time: stamped around the write alone, because the error check
        that follows can take tens of ms on a TCP link (Nagle + delayed ACK) and would bias the stamp."""
        t0 = time.time()
        self._io("*TRG", self.res.write, "*TRG")
        t1 = time.time()
        self.check("*TRG")
        return (t0 + t1) / 2

    def elog_fetch(self, ch: int, max_records: int = 1000) -> tuple[np.ndarray, np.ndarray]:
        """The records logged since the last fetch: (volts, amps), one pair per period, as logged: a
        period with no reading keeps its marker (9.91E37, 9.9E37) for the caller to mark, so one overload
        never costs the fetch's other records."""
        vals = np.asarray(self.query_values(f"FETC:ELOG? {max_records},{_chan([ch])}"), dtype=np.float64)
        if len(vals) % 2:
            raise InstrumentError(f"{self.identity.model}: FETC:ELOG? returned an odd number of values")
        return vals[0::2], vals[1::2]

    def elog_stop(self, chs: list[int]) -> None:
        self.write(f"ABOR:ELOG {_chan(chs)}")
