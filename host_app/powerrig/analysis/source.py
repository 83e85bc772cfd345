"""What the analysis reads: anything with rails, interval_s, length, has(name), chunks(...) and
sample_id(utc). CaptureReader is one; ArraySource wraps in-memory IntervalBlocks (tests, notebooks,
data imported from other instruments)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from powerrig.samples import IntervalBlock
from powerrig.timebase import ClockModel


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
            for f in ("v", "i", "p", "p_min", "p_max", "p_peak"):
                self.cols[f"{f}_{r}"] = getattr(block, f)[:, k]
        self.cols["p_total"] = block.p.sum(axis=1)

    @classmethod
    def from_blocks(cls, blocks, clock: ClockModel | None = None) -> "ArraySource":
        return cls(IntervalBlock.concat(list(blocks)), clock)

    def has(self, name: str) -> bool:
        return name in self.cols

    def chunks(self, names, start=None, stop=None, chunk: int = 1 << 20) -> Iterator[tuple[int, dict]]:
        start = 0 if start is None else max(0, int(start))
        stop = self.length if stop is None else min(self.length, int(stop))
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            yield s, {n: self.cols[n][s:e] for n in names}

    def sample_id(self, utc):
        if self.clock_model is None:
            raise ValueError("no clock model: cannot place events")
        return (self.clock_model.index(utc) - self.first_index) / self.interval_samples

    def utc(self, sample_id):
        return self.clock_model.utc(self.first_index + np.asarray(sample_id, dtype=np.float64) * self.interval_samples)
