"""Energy per command (a power-state change, a format, a flush, a log read): the energy above the
steady level before the command, up to the moment the rails settle within a band around the level
they settle to, and that settle time beside the NVMe worst case (old EXLAT + new ENLAT).

A command's window never counts a neighbour: the level before is taken after the last event that
changed the load (a workload starting or stopping, another command), and the window after ends where
the next one begins; a window cut short says by what. A command during which the load itself changed
has no energy of its own (NaN, with the reason), and an energy below zero always carries why."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from powerrig.analysis.level_before import level_window, too_short

PRE_S = 0.5          # steady level before: mean of this long before the command (level_before.MIN_PRE_S at least)
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
    cut_short: str | None = None   # what ended the window before POST_S (the next event), or None
    note: str | None = None        # why the energy is NaN or below zero, when it is

    def to_dict(self) -> dict:
        return asdict(self)


def _noise_w(x: np.ndarray) -> float:
    """The level's noise (W, one sigma) from successive differences, robust to a step inside it: the
    median absolute deviation of the differences, scaled to a standard deviation, over sqrt 2."""
    d = np.diff(x[~np.isnan(x)])
    if len(d) < 2:
        return 0.0
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2))


def command_energy(p: np.ndarray, first: int, start: float, stop: float, interval_s: float,
                   pre: int, latency_s: float = math.nan, name: str = "", kind: str = "",
                   argv=None, pre_from: float | None = None, end_at: float | None = None,
                   before_by: str = "", cut_by: str = "", inside: str = "") -> CommandEnergy:
    """p: total power for sample ids [first, first+len(p)); start/stop: fractional command edges;
    pre: intervals of steady level before start held at the beginning of p. ``pre_from``: the level
    before starts no earlier than this sample id (the end of the last event that changed the load,
    ``before_by`` names it); ``end_at``: the window ends there (the next event, ``cut_by``);
    ``inside``: an event that changed the load while the command ran (then no energy is its own)."""
    a = int(math.floor(start)) - first
    lo, short = level_window(a, pre, None if pre_from is None else pre_from - first, interval_s)
    held = p[lo:a] if a > lo else p[:0]
    before = float(np.nanmean(held)) if len(held) and not np.isnan(held).all() else math.nan
    if short is not None:
        before = math.nan
    noise_w = _noise_w(held) if not math.isnan(before) else 0.0
    end = len(p)
    cut = None
    if end_at is not None and int(math.floor(end_at)) - first < end:
        end = max(a + 1, int(math.floor(end_at)) - first, int(math.ceil(stop)) - first)
        cut = f"cut at {(end_at - start) * interval_s * 1e3:.1f} ms by {cut_by or 'the next event'}"
    post = p[a:end]
    tail = post[int(len(post) * 0.75):]
    after = float(np.nanmean(tail)) if len(tail) and not np.isnan(tail).all() else math.nan
    band = max(BAND_MIN_W, BAND_FRAC * abs(after)) if not math.isnan(after) else math.nan
    outside = np.flatnonzero(np.abs(post - after) > band) if not math.isnan(band) else np.array([], int)
    settle_n = int(outside[-1]) + 1 if len(outside) else 0
    settle_n = max(settle_n, int(math.ceil(stop)) - first - a)     # at least until the command returned
    seg = post[:settle_n]
    energy = float(np.nansum(seg - before)) * interval_s if not math.isnan(before) else math.nan
    note = None
    if inside:
        energy, note = math.nan, f"{inside} changed the load while the command ran: no energy of its own"
    elif short is not None:
        note = too_short(before_by, short)
    elif math.isnan(before):
        note = (f"no level before: {before_by} ended at the command's start" if before_by
                else "no samples before the command")
    elif energy < 0:
        noise_j = 2 * noise_w * settle_n * interval_s + BAND_MIN_W * 0.01 * settle_n * interval_s
        if -energy <= noise_j:      # nothing above the level: 0, not a noise-signed figure
            energy, note = 0.0, (f"{energy * 1e3:.3f} mJ, inside the level's noise (+-{noise_j * 1e3:.2f} mJ): "
                                 "nothing above the level before")
        elif kind == "power_state" or name.startswith("set-feature power"):
            note = f"the new state draws less than the old ({before:.3f} W -> {after:.3f} W)"
        else:
            note = (f"the rails fell below the level before ({before:.3f} W -> {after:.3f} W): the drive drew "
                    "less after the command than before it (a background task of the drive ended)")
    return CommandEnergy(name, kind, start * interval_s, (stop - start) * interval_s, before, after, energy,
                         settle_n * interval_s, latency_s, argv, cut, note)
