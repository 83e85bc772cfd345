"""A scaled-down flash translation layer, so write amplification is an outcome, not an input.

Pages are the mapping unit; reclaim units (RUs, erase blocks or superblocks) hold ``ru_pages`` pages.
Host writes go to an open RU chosen by placement handle: one shared handle for a conventional drive,
one handle per stream with FDP. When free RUs run low, greedy garbage collection picks the closed RU
with the fewest valid pages and rewrites those pages into a GC RU of the same handle. Media writes
(host + GC) over host writes is the WAF; nothing else sets it.

The drive is scaled down (thousands of pages, not billions) because WAF of a steady workload depends
on ratios (over-provisioning, RU size to stream range, mixing of streams), not on absolute size.
Updates are numpy slices per chunk of pages, so simulating a few drive fills takes well under a second.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FREE, OPEN, CLOSED = 0, 1, 2


@dataclass
class FtlStats:
    host_pages: int = 0
    media_pages: int = 0
    gc_pages: int = 0          # valid pages copied by garbage collection (each is a read plus a program)
    erased_rus: int = 0

    @property
    def waf(self) -> float:
        return self.media_pages / self.host_pages if self.host_pages else float("nan")

    def since(self, earlier: "FtlStats") -> "FtlStats":
        return FtlStats(self.host_pages - earlier.host_pages, self.media_pages - earlier.media_pages,
                        self.gc_pages - earlier.gc_pages, self.erased_rus - earlier.erased_rus)


class Ftl:
    """Page-mapped FTL with greedy GC over reclaim units and placement handles.

    ``handles`` is the number of placement handles (1 = conventional drive). With ``isolate_gc``
    (the FDP "initially isolated" reclaim unit handle type) GC copies stay with their handle, so a
    stream's data never mixes with another's.
    """

    def __init__(self, logical_pages: int, ru_pages: int = 128, over_provisioning: float = 0.12,
                 handles: int = 1, isolate_gc: bool = True):
        if logical_pages <= 0 or ru_pages <= 0:
            raise ValueError("logical_pages and ru_pages must be positive")
        self.logical_pages = logical_pages
        self.ru_pages = ru_pages
        self.handles = handles
        self.isolate_gc = isolate_gc
        # a host chunk or one victim's copies need at most one new RU each
        self.reserve = 2
        n_ru = int(np.ceil(logical_pages * (1.0 + over_provisioning) / ru_pages)) + self.reserve
        self.n_ru = n_ru
        self.l2p = np.full(logical_pages, -1, dtype=np.int64)
        self.p2l = np.full(n_ru * ru_pages, -1, dtype=np.int64)
        self.valid = np.zeros(n_ru, dtype=np.int64)
        self.state = np.zeros(n_ru, dtype=np.int8)
        self.owner = np.full(n_ru, -1, dtype=np.int64)     # handle whose data the RU holds
        self.free: list[int] = list(range(n_ru))
        self.open: dict[tuple[int, bool], tuple[int, int]] = {}  # (handle, is_gc) -> (ru, fill)
        self.stats = FtlStats()

    # -- placement ------------------------------------------------------------------------------
    def _open_ru(self, handle: int, gc: bool) -> tuple[int, int]:
        key = (handle, gc)
        cur = self.open.get(key)
        if cur is not None and cur[1] < self.ru_pages:
            return cur
        if cur is not None:
            self.state[cur[0]] = CLOSED
        if not self.free:
            raise RuntimeError("FTL out of free reclaim units (over-provisioning too small for the reserve)")
        ru = self.free.pop(0)
        self.state[ru] = OPEN
        self.owner[ru] = handle
        self.open[key] = (ru, 0)
        return self.open[key]

    def _program(self, lpns: np.ndarray, handle: int, gc: bool) -> None:
        """Write logical pages in order into the handle's open RU(s), invalidating old copies."""
        i = 0
        n = len(lpns)
        while i < n:
            ru, fill = self._open_ru(handle, gc)
            k = min(self.ru_pages - fill, n - i)
            chunk = lpns[i:i + k]
            old = self.l2p[chunk]
            old = old[old >= 0]
            if len(old):
                self.p2l[old] = -1
                np.subtract.at(self.valid, old // self.ru_pages, 1)
            ppn = ru * self.ru_pages + fill + np.arange(k)
            self.l2p[chunk] = ppn
            self.p2l[ppn] = chunk
            self.valid[ru] += k
            self.open[(handle, gc)] = (ru, fill + k)
            self.stats.media_pages += k
            i += k

    # -- garbage collection ---------------------------------------------------------------------
    def _collect(self) -> None:
        if len(self.free) >= self.reserve:
            return
        while len(self.free) < self.reserve:
            closed = np.flatnonzero(self.state == CLOSED)
            if not len(closed):
                raise RuntimeError("FTL has no closed reclaim unit to collect")
            victim = int(closed[np.argmin(self.valid[closed])])
            if self.valid[victim] >= self.ru_pages:
                raise RuntimeError("FTL garbage collection cannot make progress (every RU is full of valid data)")
            pages = self.p2l[victim * self.ru_pages:(victim + 1) * self.ru_pages]
            live = pages[pages >= 0].copy()
            handle = int(self.owner[victim]) if self.isolate_gc else 0
            self.state[victim] = FREE   # taken out before copying so it cannot be picked again
            if len(live):
                self._program(live, handle, gc=True)
                self.stats.gc_pages += len(live)
            self.p2l[victim * self.ru_pages:(victim + 1) * self.ru_pages] = -1
            self.valid[victim] = 0
            self.owner[victim] = -1
            self.free.append(victim)
            self.stats.erased_rus += 1

    def write(self, lpns: np.ndarray, handle: int = 0) -> None:
        """Host write of logical pages (in order) through a placement handle."""
        if not 0 <= handle < self.handles:
            raise ValueError(f"placement handle {handle} out of range (0..{self.handles - 1})")
        lpns = np.asarray(lpns, dtype=np.int64)
        self._collect()
        self._program(lpns, handle, gc=False)
        self.stats.host_pages += len(lpns)


@dataclass(frozen=True)
class WriteStream:
    """One writer: sequential overwrites of its own LBA range, at a relative rate."""
    first_page: int
    pages: int
    rate: float = 1.0      # relative bytes per second against the other streams (0 = cold data)
    random: bool = False   # random overwrites within the range instead of sequential


def run_streams(ftl: Ftl, streams: list[WriteStream], handles: list[int] | None = None, fills: float = 6.0,
                measure_fills: float = 3.0, chunk_pages: int = 4, seed: int = 1) -> FtlStats:
    """Precondition by filling every range once, then interleave the streams; WAF over the last fills.

    The interleaving draws the next stream with probability proportional to its rate, so each stream
    progresses at its own speed through its range and wraps around: sequential overwrites, as fio's
    ``rw=write`` with ``time_based`` does. ``handles[k]`` is stream k's placement handle (default 0
    for all: a conventional drive). "fills" count the host writes in units of the active streams' pages.
    """
    rng = np.random.default_rng(seed)
    handles = handles or [0] * len(streams)
    for k, s in enumerate(streams):  # precondition: one sequential fill per stream
        for start in range(0, s.pages, 64):
            n = min(64, s.pages - start)
            ftl.write(s.first_page + start + np.arange(n), handles[k])
    pos = np.zeros(len(streams), dtype=np.int64)
    rates = np.array([s.rate for s in streams], dtype=float)
    p = rates / rates.sum()
    active = sum(s.pages for s in streams if s.rate > 0)
    n_chunks = int(fills * active / chunk_pages)
    measure_from = n_chunks - int(measure_fills * active / chunk_pages)
    picks = rng.choice(len(streams), size=n_chunks, p=p)
    # random offsets drawn at once (one draw per chunk cost more than the FTL work for random mixes)
    draws = rng.random((n_chunks, chunk_pages)) if any(s.random for s in streams) else None
    start_stats = None
    steps = np.arange(chunk_pages)
    for i, k in enumerate(picks):
        if i == measure_from:
            start_stats = FtlStats(**vars(ftl.stats))
        s = streams[k]
        if s.random:
            lpns = s.first_page + (draws[i] * s.pages).astype(np.int64)
        else:
            lpns = s.first_page + (pos[k] + steps) % s.pages
            pos[k] = (pos[k] + chunk_pages) % s.pages
        ftl.write(lpns, handles[k])
    return ftl.stats.since(start_stats or FtlStats())
