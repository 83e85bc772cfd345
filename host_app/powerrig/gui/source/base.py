"""What a plot source answers: per-pixel min/mean/max of each signal over a time range."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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


def signal_names(rails, fields=("p", "v", "i")) -> list[str]:
    """Capture signal names of the plotted columns (p_12V, v_12V, i_12V, ..., p_total)."""
    return [f"{f}_{r}" for r in rails for f in fields] + ["p_total"]


def unit_of(signal: str) -> str:
    return {"v": "V", "i": "A"}.get(signal.split("_", 1)[0], "W")
