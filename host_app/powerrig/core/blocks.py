"""IntervalBlock: decoded interval data as numpy arrays, the unit that flows from the link onward.

One row per device interval (default 1 ms). Columns per rail (2-D arrays, rows x rails, in SI units):
  v, i     mean voltage (V) and current (A) over the interval
  p        mean of instantaneous V*I (W): exact, never mean(V) * mean(I)
  p_min, p_max   lowest / highest instantaneous (4 us) power in the interval (W)
  p_peak   highest 100 us sliding-window mean power among windows ending in the interval (W);
           NaN where no full window existed yet (stream start, after an overrun)
Digital inputs: dig_or (bits seen high during the interval), dig_and (bits high throughout);
bit 0 activity LED, bit 1 PERST#, bit 2 marker.
Gaps (lost frames, device overruns) are rows with valid=False and NaN in every float column, so
the time axis stays uniform and nothing is silently dropped.
clip (optional, rows x rails, u8): the ADC range saturated in the interval, CLIP_I (current at full
scale) | CLIP_V (voltage); None where the source cannot tell (imports, other instruments).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from powerrig.core.names import DIGITAL_FIELDS, RAIL_FIELDS, GapReason

FIELDS = RAIL_FIELDS   # the per-rail columns, in schema order
CLIP_I = 1             # clip bit: the interval's current reached the channel's full scale
CLIP_V = 2             # ... its voltage did


@dataclass
class IntervalBlock:
    first_index: int              # raw sample index (4 us ticks) of the first row's interval start
    interval_samples: int         # raw samples per interval
    sample_period_s: float        # raw sample period (4e-6)
    rails: tuple[str, ...]
    v: np.ndarray
    i: np.ndarray
    p: np.ndarray
    p_min: np.ndarray
    p_max: np.ndarray
    p_peak: np.ndarray
    dig_or: np.ndarray
    dig_and: np.ndarray
    valid: np.ndarray
    flags: dict = field(default_factory=dict)
    clip: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.valid)

    @property
    def interval_s(self) -> float:
        return self.interval_samples * self.sample_period_s

    @property
    def index(self) -> np.ndarray:
        """Raw sample index of each row's interval start."""
        return self.first_index + np.arange(len(self), dtype=np.int64) * self.interval_samples

    @property
    def end_index(self) -> int:
        return self.first_index + len(self) * self.interval_samples

    def total_power(self) -> np.ndarray:
        """Sum of mean power over the rails, per row (W)."""
        return self.p.sum(axis=1)

    def rail(self, name: str) -> int:
        try:
            return self.rails.index(name)
        except ValueError:
            raise KeyError(f"rail {name!r} not in this stream; it has {', '.join(self.rails)}") from None

    @classmethod
    def gap(cls, first_index: int, n: int, interval_samples: int, sample_period_s: float,
            rails: tuple[str, ...], reason: str) -> "IntervalBlock":
        """n rows of NaN standing for intervals that were lost (reason: a GapReason)."""
        reason = GapReason(reason)
        nan = np.full((n, len(rails)), np.nan)
        return cls(first_index, interval_samples, sample_period_s, rails, nan, nan.copy(), nan.copy(),
                   nan.copy(), nan.copy(), nan.copy(), np.zeros(n, np.uint8), np.zeros(n, np.uint8),
                   np.zeros(n, bool), {"gap": reason})

    @classmethod
    def concat(cls, blocks: list["IntervalBlock"]) -> "IntervalBlock":
        """Join consecutive blocks (they must be contiguous in sample index)."""
        if not blocks:
            raise ValueError("no blocks to join")
        b0 = blocks[0]
        for a, b in zip(blocks, blocks[1:]):
            if b.first_index != a.end_index:
                raise ValueError(f"blocks not contiguous: {a.end_index} then {b.first_index}")
        cat = {f: np.concatenate([getattr(b, f) for b in blocks]) for f in FIELDS + DIGITAL_FIELDS + ("valid",)}
        if any(b.clip is not None for b in blocks):
            cat["clip"] = np.concatenate([np.zeros((len(b), len(b.rails)), np.uint8) if b.clip is None else b.clip
                                          for b in blocks])
        return cls(b0.first_index, b0.interval_samples, b0.sample_period_s, b0.rails, **cat)


QUANTITY_OF_CLIP = {CLIP_I: "current", CLIP_V: "voltage"}


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) of every run of True in a 1-D bool array."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], np.asarray(mask, bool).view(np.int8), [0]))))
    return [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2])]


def clipped_counts(records, rails, start: int, stop: int) -> dict[str, dict]:
    """{rail: {"current": n, "voltage": n, "intervals": n (either)}} for the clip records' intervals in
    [start, stop). A record: {"rail", "quantity", "sample_id", "runs": [[offset, n], ...]}."""
    if not records:            # most captures: every phase of an analysis asks (1,800 in a 10-hour one)
        return {r: {"current": 0, "voltage": 0, "intervals": 0} for r in rails}
    spans: dict[str, dict[str, list]] = {r: {"current": [], "voltage": []} for r in rails}
    for rec in records:
        for off, n in rec["runs"]:
            a, b = max(start, rec["sample_id"] + off), min(stop, rec["sample_id"] + off + n)
            if b > a:
                spans.setdefault(rec["rail"], {"current": [], "voltage": []})[rec["quantity"]].append((a, b))
    out = {}
    for rail, by_q in spans.items():
        union, end = 0, start
        for a, b in sorted(by_q["current"] + by_q["voltage"]):
            union += max(0, b - max(a, end))
            end = max(end, b)
        out[rail] = {q: sum(b - a for a, b in v) for q, v in by_q.items()} | {"intervals": union}
    return out
