"""What the analysis reads, spelled as a Protocol (AnalysisSource): CaptureReader is one; ArraySource
wraps in-memory IntervalBlocks (tests, notebooks, data imported from other instruments). The
analysis depends on this shape only, never on the capture package or the link."""
from __future__ import annotations

from typing import Iterable, Iterator, Protocol, runtime_checkable

import numpy as np

from powerrig.core.blocks import QUANTITY_OF_CLIP, IntervalBlock
from powerrig.core.names import RAIL_FIELDS, TOTAL_POWER, rail_signal
from powerrig.core.clock import ClockModel


@runtime_checkable
class AnalysisSource(Protocol):
    """Fixed-rate interval signals (named with schema.rail_signal and schema.TOTAL_POWER) and the
    clock that places host-UTC events on them. Sample ids count intervals from the source's start."""
    rails: tuple[str, ...]
    interval_s: float
    length: int                  # intervals

    def has(self, name: str) -> bool:
        """Is there a signal of this name?"""

    def chunks(self, names: Iterable[str], start: int | None = None, stop: int | None = None,
               chunk: int = 1 << 20, pool=None) -> Iterator[tuple[int, dict]]:
        """(first sample id, {name: array}) pieces of at most ``chunk`` intervals covering [start, stop).
        ``pool`` (core.array_pool.ArrayPool): arrays the caller gave back, to read into; a source that
        hands out views of its own memory ignores it."""

    def sample_id(self, utc):
        """Fractional sample id(s) of host UTC time(s); raises when there is no clock."""

    def utc(self, sample_id):
        """Host UTC of fractional sample id(s)."""

    # optional: clipped(start, stop) -> {rail: {"current", "voltage", "intervals"}}, the intervals of
    # [start, stop) whose readings a channel's range clipped (a source without it cannot tell)


class ArraySource:
    def __init__(self, block: IntervalBlock, clock: ClockModel | None = None):
        self.rails = tuple(block.rails)
        self.interval_s = block.interval_s
        self.interval_samples = block.interval_samples
        self.first_index = block.first_index
        self.length = len(block)
        self.clock_model = clock
        self.cols = {}
        for k, r in enumerate(self.rails):
            for f in RAIL_FIELDS:
                self.cols[rail_signal(f, r)] = getattr(block, f)[:, k]
        self.cols[TOTAL_POWER] = block.p.sum(axis=1)
        self.clip = None if block.clip is None else np.where(block.valid[:, None], block.clip, 0)

    @classmethod
    def from_blocks(cls, blocks, clock: ClockModel | None = None) -> "ArraySource":
        return cls(IntervalBlock.concat(list(blocks)), clock)

    def has(self, name: str) -> bool:
        return name in self.cols

    def chunks(self, names, start=None, stop=None, chunk: int = 1 << 20, pool=None) -> Iterator[tuple[int, dict]]:
        start = 0 if start is None else max(0, int(start))
        stop = self.length if stop is None else min(self.length, int(stop))
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            yield s, {n: self.cols[n][s:e] for n in names}

    def clipped(self, start=None, stop=None) -> dict[str, dict]:
        """{rail: {"current", "voltage", "intervals"}} clipped in [start, stop) (all 0 without clip bits)."""
        start = 0 if start is None else max(0, int(start))
        stop = self.length if stop is None else min(self.length, int(stop))
        out = {}
        for k, r in enumerate(self.rails):
            c = np.zeros(0, np.uint8) if self.clip is None else self.clip[start:max(start, stop), k]
            out[r] = {q: int(np.count_nonzero(c & bit)) for bit, q in QUANTITY_OF_CLIP.items()}
            out[r]["intervals"] = int(np.count_nonzero(c))
        return out

    def sample_id(self, utc):
        if self.clock_model is None:
            raise ValueError("no clock model: cannot place events")
        return (self.clock_model.index(utc) - self.first_index) / self.interval_samples

    def utc(self, sample_id):
        return self.clock_model.utc(self.first_index + np.asarray(sample_id, dtype=np.float64) * self.interval_samples)
