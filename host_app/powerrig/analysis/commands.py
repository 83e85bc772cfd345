"""Energy per command (a power-state change, a format, a flush, a log read): the energy above the
steady level before the command, up to the moment the rails settle within a band around the level
they settle to, and that settle time beside the NVMe worst case (old EXLAT + new ENLAT)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PRE_S = 0.5          # steady level before: mean of this long before the command
POST_S = 2.0         # look this long after the command for the new level and settling
BAND_FRAC = 0.05     # settled: within 5 % of the new level ...
BAND_MIN_W = 0.1     # ... or 0.1 W, whichever is wider


@dataclass
class CommandEnergy:
    name: str
    kind: str
    start_s: float
    duration_s: float
    before_w: float
    after_w: float
    energy_above_j: float       # integral of (P - before) from command start until settled
    settle_s: float             # command start -> last interval outside the band
    latency_limit_s: float      # EXLAT + ENLAT for power-state changes, else NaN
    argv: list | None = None

    def to_dict(self) -> dict:
        from dataclasses import asdict
        return asdict(self)


def command_energy(p: np.ndarray, first: int, start: float, stop: float, interval_s: float,
                   pre: int, latency_s: float = math.nan, name: str = "", kind: str = "",
                   argv=None) -> CommandEnergy:
    """p: total power for sample ids [first, first+len(p)); start/stop: fractional command edges;
    pre: intervals of steady level before start held at the beginning of p."""
    a = int(math.floor(start)) - first
    before = float(np.nanmean(p[max(0, a - pre):a])) if a > 0 else math.nan
    post = p[a:]
    tail = post[int(len(post) * 0.75):]
    after = float(np.nanmean(tail)) if len(tail) and not np.isnan(tail).all() else math.nan
    band = max(BAND_MIN_W, BAND_FRAC * abs(after)) if not math.isnan(after) else math.nan
    outside = np.flatnonzero(np.abs(post - after) > band) if not math.isnan(band) else np.array([], int)
    settle_n = int(outside[-1]) + 1 if len(outside) else 0
    settle_n = max(settle_n, int(math.ceil(stop)) - first - a)     # at least until the command returned
    seg = post[:settle_n]
    energy = float(np.nansum(seg - before)) * interval_s if not math.isnan(before) else math.nan
    return CommandEnergy(name, kind, start * interval_s, (stop - start) * interval_s, before, after, energy,
                         settle_n * interval_s, latency_s, argv)
