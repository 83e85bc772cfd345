"""The protocol every measurement source follows, and the pieces sources share.

The recorder, the sweep engine and the desktop app use exactly these members of the interposer:
``description`` (who measured), ``clock`` (a ClockModel or something with ``.model()``), ``sampling``
(what it can resolve), ``stream(interval_us, rails)`` -> a stream with ``start()``, ``blocks(seconds,
stop)``, ``stop()``, ``summary()``, ``stats``, ``interval_us`` and ``rails``, and ``close()``.
"""
from __future__ import annotations

import threading
from typing import Iterator, Protocol

import numpy as np

from powerrig.core.blocks import IntervalBlock
from powerrig.core.clock import ClockModel
from powerrig.core.sampling import Sampling
from powerrig.interposer.client import StreamStats as SourceStats   # the recorder reads these counters


class MeasurementStream(Protocol):
    interval_us: int
    rails: tuple

    def start(self) -> None: ...
    def blocks(self, seconds: float | None = None, stop: threading.Event | None = None) -> Iterator[IntervalBlock]: ...
    def stop(self) -> None: ...
    def summary(self) -> dict: ...


class MeasurementSource(Protocol):
    description: dict
    sampling: Sampling

    @property
    def clock(self): ...
    def stream(self, interval_us: int | None = None, rails: list[str] | None = None) -> MeasurementStream: ...
    def close(self) -> None: ...


class ClosingSource:
    """``with source:`` closes the instrument however the block ends, as ``with Interposer.open(...)`` does."""

    def close(self) -> None:  # pragma: no cover - every source defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class HostClock:
    """A source stamped by the host at its trigger: sample index k is at t0 + k * period. ``model()`` is
    None until the stream has started (the capture writer places nothing before that)."""

    def __init__(self):
        self._model: ClockModel | None = None

    def set(self, t0: float, period_s: float) -> None:
        self._model = ClockModel(index_ref=0, utc_ref=t0, period_s=period_s)

    def model(self) -> ClockModel | None:
        return self._model


def means_block(first_index: int, rails: tuple, volts: np.ndarray, amps: np.ndarray,
                period_s: float) -> IntervalBlock:
    """An IntervalBlock from per-interval mean V and I (rows x rails) of a source that gives no
    instantaneous samples: p = V*I of the means, and p_min, p_max, p_peak = p, the lower bounds the
    data supports (the 100 us peak is at least the interval's mean; a check on it says the sampling
    requirement was not met, powerrig.analysis.checks)."""
    p = volts * amps
    n = len(p)
    return IntervalBlock(first_index, 1, period_s, rails, volts, amps, p, p.copy(), p.copy(), p.copy(),
                         np.zeros(n, np.uint8), np.zeros(n, np.uint8), np.isfinite(p).all(axis=1))
