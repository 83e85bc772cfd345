"""What a plot source answers: per-pixel min/mean/max of each signal over a time range."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from powerrig.core.names import TOTAL_POWER, rail_signal


@dataclass
class Summary:
    """``n`` points spanning a time range. ``t`` is each point's start (s from capture start);
    ``mean``/``min``/``max`` map a signal name to an array of n values (NaN where there is no data)."""
    t: np.ndarray
    step_s: float
    mean: dict = field(default_factory=dict)
    min: dict = field(default_factory=dict)
    max: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.t)


class TimeSource:
    """What both sources share: ``length`` intervals of ``interval_s`` from the capture's start."""
    length: int
    interval_s: float

    @property
    def duration_s(self) -> float:
        return self.length * self.interval_s

    def extent(self) -> tuple[float, float]:
        return 0.0, self.duration_s


def signal_names(rails, fields=("p", "v", "i")) -> list[str]:
    """Capture signal names of the plotted columns (p_12V, v_12V, i_12V, ..., p_total)."""
    return [rail_signal(f, r) for r in rails for f in fields] + [TOTAL_POWER]


def unit_of(signal: str) -> str:
    return {"v": "V", "i": "A"}.get(signal.split("_", 1)[0], "W")
