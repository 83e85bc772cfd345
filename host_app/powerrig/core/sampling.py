"""What a measurement source can resolve: its sample interval, whether it gives exact 100 us peaks,
and its stated accuracy. Written into every capture's metadata (``source``) so each check can say
when the data does not meet its sampling requirement instead of passing silently.

Lives at the bottom of the package: the sources declare it, the capture stores it, the analysis reads
it, and none of those layers may import another sideways.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

INTERPOSER_SAMPLE_S = 4e-6      # the interposer's ADC: one V and I sample per rail every 4 us


@dataclass(frozen=True)
class Accuracy:
    """Stated accuracy of one rail: +-(gain % of reading + offset) for volts and amps."""
    v_gain_pct: float
    v_offset: float
    i_gain_pct: float
    i_offset: float

    def power_w(self, volts: float, amps: float) -> float:
        """Worst-case error of V*I (W) at this reading: the two relative errors add."""
        dv = abs(volts) * self.v_gain_pct / 100 + self.v_offset
        di = abs(amps) * self.i_gain_pct / 100 + self.i_offset
        return abs(volts) * di + abs(amps) * dv + dv * di


@dataclass(frozen=True)
class Sampling:
    """A source's sampling: ``sample_s`` between the V and I samples its intervals are built from,
    ``peak_exact``: it measures the 100 us window mean itself (OCP PCM-2), ``accuracy`` per rail."""
    source: str
    sample_s: float
    peak_exact: bool
    accuracy: dict = field(default_factory=dict)     # rail -> Accuracy
    notes: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["accuracy"] = {r: asdict(a) for r, a in self.accuracy.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Sampling":
        acc = {r: Accuracy(**a) for r, a in (d.get("accuracy") or {}).items()}
        return cls(str(d.get("source", "?")), float(d.get("sample_s", math.nan)), bool(d.get("peak_exact")), acc,
                   str(d.get("notes", "")))

    def power_error_w(self, rail_means: dict) -> float:
        """Stated error (W) of the summed power at these rail means {rail: (V, A)}; rails the source states
        nothing for count as unknown (NaN)."""
        total = 0.0
        for rail, (v, a) in rail_means.items():
            acc = self.accuracy.get(rail)
            if acc is None:
                return math.nan
            total += acc.power_w(v, a)
        return total


# The interposer (calibrated): the calibration's verify limit, 0.1 % of reading, plus about one ADC code.
INTERPOSER = Sampling("powerrig interposer", INTERPOSER_SAMPLE_S, True,
                      {r: Accuracy(0.1, 2e-3, 0.1, 2e-3) for r in ("12V", "3V3", "5V")},
                      "4 us V and I per rail; 100 us window peaks computed on the device")


def sampling_of(metadata: dict) -> Sampling:
    """The capture's source sampling; captures from before sources were recorded are the interposer's."""
    d = metadata.get("source") if isinstance(metadata, dict) else None
    return Sampling.from_dict(d) if isinstance(d, dict) and "sample_s" in d else INTERPOSER
