"""The part of a capture an export covers: --from/--to seconds to sample ids, checked."""
from __future__ import annotations

import math

from powerrig.core.errors import CaptureError


def sample_range(cap, from_s: float | None, to_s: float | None) -> tuple[int, int]:
    """Sample ids [start, stop) for seconds from the capture's start; one-line errors for bad ranges."""
    dur = cap.duration_s
    for label, v in (("--from", from_s), ("--to", to_s)):
        if v is not None and (not math.isfinite(v) or v < 0):
            raise CaptureError(f"{label} {v} is not a time in the capture; give seconds from its start (0 .. {dur:g})")
    start = 0 if from_s is None else int(math.floor(from_s / cap.interval_s + 1e-9))
    stop = cap.length if to_s is None else int(math.ceil(to_s / cap.interval_s - 1e-9))
    stop = min(stop, cap.length)
    if start >= cap.length:
        raise CaptureError(f"--from {from_s:g} s is past the end of the capture ({dur:g} s long)")
    if stop <= start:
        raise CaptureError(f"empty range: --to must be after --from and inside the capture (0 .. {dur:g} s)")
    return start, stop
