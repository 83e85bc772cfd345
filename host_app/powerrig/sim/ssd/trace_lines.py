"""Trace text built as byte rows with numpy: a line per row, its numbers written digit by digit into
columns, the unused columns NUL and dropped when the rows are joined.

The virtual drive host writes two kernel lines per I/O (half a million I/Os a step at 7 GB/s in
128 KiB blocks); formatting them one f-string at a time cost ~3 s of CPU a step. Here a group of
lines that differ only in their numbers (one job's reads in one span) is a handful of array
operations. The text is the same the per-line f-strings wrote (sim/ssd/drive_trace.py).
"""
from __future__ import annotations

import numpy as np

NUL = 0


def const(s: str, n: int) -> np.ndarray:
    """``n`` rows of the same bytes."""
    return np.broadcast_to(np.frombuffer(s.encode(), np.uint8), (n, len(s.encode())))


def decimal(v: np.ndarray, width: int | None = None, min_width: int = 1, pad: int = NUL) -> np.ndarray:
    """Non-negative integers as right-aligned decimal digits in ``width`` columns (default: the widest's),
    the leading places before the last ``min_width`` ``pad`` (a space, as printf's %5lu) and the rest NUL."""
    v = np.array(v, np.int64)
    width = width or max(len(str(int(v.max()))) if len(v) else 1, min_width)
    out = np.empty((width, len(v)), np.uint8)          # a column a digit, filled from the right
    for k in range(width - 1, -1, -1):
        out[k] = v % 10 + 48
        v //= 10
    return _blank(out, min_width, pad).T


def _blank(d: np.ndarray, min_width: int, pad: int) -> np.ndarray:
    """Leading zeros (all but the last place) made ``pad`` within the last ``min_width`` places, NUL before."""
    width = len(d)
    lead = np.ones(d.shape[1], bool)
    for k in range(width - 1):
        lead &= d[k] == 48
        d[k][lead] = pad if k >= width - min_width else NUL
    return d


def stamp(s: np.ndarray) -> np.ndarray:
    """Seconds as the kernel's "%5lu.%06lu" (microseconds, rounded)."""
    us = np.round(np.asarray(s, float) * 1e6).astype(np.int64)
    return np.hstack([decimal(us // 1_000_000, None, 5, 32), const(".", len(us)),
                      decimal(us % 1_000_000 + 1_000_000, 7)[:, 1:]])


def rows(parts: list) -> np.ndarray:
    """Columns (arrays of n rows, or str for the same bytes in every row) side by side."""
    n = next(len(p) for p in parts if not isinstance(p, str))
    return np.hstack([const(p, n) if isinstance(p, str) else p for p in parts])


def join(blocks: list[np.ndarray], order: np.ndarray | None = None) -> bytes:
    """Row blocks (of any widths) stacked, taken in ``order``, NUL columns dropped: the text's bytes
    (UTF-8; kept as bytes: the endpoint writes them to a file as they are)."""
    w = max((b.shape[1] for b in blocks), default=0)
    m = np.concatenate([b if b.shape[1] == w else np.pad(b, ((0, 0), (0, w - b.shape[1]))) for b in blocks]) \
        if blocks else np.zeros((0, 0), np.uint8)
    if order is not None:
        m = np.take(m, order, axis=0)
    flat = m.ravel()
    return flat[flat != NUL].tobytes()
