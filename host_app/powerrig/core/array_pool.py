"""Chunk arrays read into again once nothing holds them: a long pass over a capture then reuses the
same memory instead of asking the kernel for fresh pages (each a fault and 4 KB of zeros: ~40 ms of
the ~0.45 CPU s a 2-hour analysis takes, docs/scale.md).

An array is taken back only when its reference count says the caller's chunk is its last holder:
a view kept by a phase for its percentiles, or any other reference, keeps it out of the pool."""
from __future__ import annotations

import sys
from collections import deque

import numpy as np

# the references an array has inside ``give_back`` when nothing else holds it: the chunk's dict, the
# loop's name and getrefcount's own argument
_FREE = 3


class ArrayPool:
    """Arrays of one shape to fill again; ``take`` on the reading thread, ``give_back`` on the
    consuming one (deque appends and pops are atomic)."""

    def __init__(self, keep: int = 32):
        self._free: deque[np.ndarray] = deque(maxlen=keep)

    def take(self, n: int, dtype) -> np.ndarray:
        """An array of n values of ``dtype``: one given back, else a new one (contents undefined)."""
        for _ in range(len(self._free)):
            try:
                a = self._free.popleft()
            except IndexError:
                break
            if len(a) == n and a.dtype == dtype:
                return a
        return np.empty(n, dtype)

    def give_back(self, cols: dict) -> int:
        """Keep the chunk's arrays that nothing else refers to; returns how many were kept."""
        kept = 0
        for a in cols.values():
            if sys.getrefcount(a) <= _FREE and a.flags.owndata:     # (a view owns no data)
                self._free.append(a)
                kept += 1
        return kept
