"""Neumaier-compensated sums: totals over 10-hour runs without floating-point drift (DESIGN.md
principle 3). One algorithm, two forms: ``KahanSum`` for Python floats in tight loops, and
``CompensatedSums`` for a vector of running totals (one per rail) fed numpy partial sums.
"""
from __future__ import annotations

import numpy as np


class KahanSum:
    """Compensated sum of Python floats (cheap enough for per-piece loops)."""

    __slots__ = ("s", "c")

    def __init__(self):
        self.s = 0.0
        self.c = 0.0

    def add(self, x: float) -> None:
        t = self.s + x
        if abs(self.s) >= abs(x):
            self.c += (self.s - t) + x
        else:
            self.c += (x - t) + self.s
        self.s = t

    @property
    def value(self) -> float:
        return self.s + self.c


class CompensatedSums:
    """n running totals, each fed a numpy array of per-block partial sums."""

    def __init__(self, n: int):
        self.s = np.zeros(n)
        self.c = np.zeros(n)

    def add(self, part: np.ndarray) -> None:
        t = self.s + part
        self.c += np.where(np.abs(self.s) >= np.abs(part), (self.s - t) + part, (part - t) + self.s)
        self.s = t

    @property
    def value(self) -> np.ndarray:
        return self.s + self.c
