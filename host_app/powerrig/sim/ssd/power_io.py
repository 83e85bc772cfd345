"""The virtual SSD's data as fio's verify sees it, and what a power edge does to the I/O (issue 29).

Why: the sweep's power-loss step runs the impersonated fio with verify options against the virtual
SSD and cuts its 12 V on the virtual interposer; for that test to prove anything the drive must lose
exactly what its model says, and keep the truth. The drive keeps no data, only which verify pattern
(fio's ``randseed``: the block headers' seed) each byte range holds (``PatternMedia``); a verify pass
reads that back block by block.

A 12 V cut (``PoweredDrive`` calls ``before_edge`` first): every run fails at the cut (fio sees I/O
errors); the writes each sequential verify job had acknowledged within the write cache's flush time
go into the drive's ``WriteCache`` with their acknowledgement times, so its PLP flush (the same code
the benchmark's cycles use) decides which reach the media; ``after_edge`` writes the cached blocks
to the media except the ones it lost. Writes in flight (issued, not acknowledged) never reach the
media. PERST# or PWRDIS asserted fails the runs too (the controller is gone; power and the cache stay:
what the cache holds settles, unless a cut follows within its flush time, as in a surprise removal). While the controller is not ready (``PoweredDrive.ready_at``) every request to
the endpoint fails as a missing device, the way nvme-cli and fio see a drive being enumerated.
"""
from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass

import numpy as np

MAX_TRUTH = 100_000          # cut records kept (a 10 000-cycle sweep's)


class PatternMedia:
    """Per namespace: sorted, non-overlapping [start, end) byte ranges and the pattern each holds."""

    def __init__(self):
        self.segments: dict[int, list[tuple[int, int, str]]] = {}

    def write(self, ns: int, start: int, end: int, pattern: str) -> None:
        if end <= start:
            return
        segs = self.segments.setdefault(ns, [])
        out = []
        for a, b, p in segs:
            if b <= start or a >= end:
                out.append((a, b, p))
                continue
            if a < start:
                out.append((a, start, p))
            if b > end:
                out.append((end, b, p))
        bisect.insort(out, (start, end, pattern))
        self.segments[ns] = out

    def bad_blocks(self, ns: int, start: int, size: int, bs: int, pattern: str) -> list[int]:
        """Offsets of the bs-blocks in [start, start + size) not wholly holding ``pattern``."""
        end = start + size
        good = np.zeros(max(0, math.ceil(size / bs)), dtype=bool)
        for a, b, p in self.segments.get(ns, []):
            if p != pattern or b <= start or a >= end:
                continue
            first = math.ceil((max(a, start) - start) / bs)        # blocks wholly inside [a, b)
            last = (min(b, end) - start) // bs
            if last > first:
                good[first:last] = True
        return (start + np.flatnonzero(~good) * bs).tolist()


@dataclass
class VerifyWrite:
    """One sequential write job with fio verify headers, as the drive serves it."""
    run_id: int
    job: int                 # its index in the run
    ns: int
    offset: int              # bytes into the namespace
    bs: int
    pattern: str
    fsync: int = 0           # fio fsync=N: a flush after every N writes (what it covered is on the media)


class PowerLossIO:
    """Verify media and power edges for one VirtualSSD; ``attach`` puts it behind a PoweredDrive."""

    def __init__(self, ssd, clock=None):
        self.ssd = ssd
        self.clock = clock or ssd.clock
        self.media = PatternMedia()
        self.writes: dict[int, list[VerifyWrite]] = {}
        self.drive = None                            # the PoweredDrive, once attached
        self.truth: list[dict] = []       # per cut (and PERST#/PWRDIS): acknowledged, lost offsets, which job
        self._cut: dict[int, dict] = {}              # run id -> {job: acknowledged} of runs a cut ended
        self._held: dict = {}              # (ns, offset) -> (pattern, bs, truth record): acknowledged, in the cache
        self._lock = threading.RLock()

    def attach(self, powered_drive) -> "PowerLossIO":
        self.drive = powered_drive
        powered_drive.listeners.append(self)
        return self

    # ---- readiness ------------------------------------------------------------------------------
    def ready(self, t: float | None = None) -> bool:
        if self.drive is None or not self.drive.truth:
            return True
        at = self.drive.ready_at()
        return at is not None and (self.clock() if t is None else t) >= at

    # ---- the endpoint's I/O -----------------------------------------------------------------------
    def started(self, run_id: int, verify: dict[int, dict], jobs) -> None:
        """A run began; ``verify`` {job index: {"ns", "offset", "pattern"}} of its verify write jobs."""
        with self._lock:
            self.writes[run_id] = [VerifyWrite(run_id, k, int(v["ns"]), int(v["offset"]), int(jobs[k].bs),
                                               str(v["pattern"]), int(v.get("fsync") or 0))
                                   for k, v in sorted(verify.items())]

    def ended(self, run_id: int, write_bytes: list[float]) -> None:
        """A run was collected (stop_io): without a cut everything it acknowledged is on the media."""
        with self._lock:
            ws = self.writes.pop(run_id, [])
            if self._cut.pop(run_id, None) is not None:
                return                         # the edge that ended it already placed what it wrote
            for w in ws:
                self.media.write(w.ns, w.offset, w.offset + int(write_bytes[w.job] // w.bs) * w.bs, w.pattern)

    def verify(self, ns: int, offset: int, size: int, bs: int, pattern: str) -> list[int]:
        with self._lock:
            self._settle_held()         # the cache flushed them long ago (cache_flush_ms), no cut since
            return self.media.bad_blocks(ns, offset, size, bs, pattern)

    def _settle_held(self, lost: set | None = None) -> None:
        """The writes a reset left in the cache reach the media, except the ones a cut ``lost``."""
        for (ns, off), (pattern, bs, rec) in sorted(self._held.items()):
            if lost is not None and (ns, off) in lost:
                rec["lost_offsets"].append(off)
                rec["lost_offsets"].sort()
            else:
                self.media.write(ns, off, off + bs, pattern)
        self._held.clear()

    # ---- power edges (PoweredDrive.set_output) ---------------------------------------------------------
    def before_edge(self, name: str, level: int, t: float, cache) -> None:
        """The controller goes away (a cut, PERST#, PWRDIS): every run fails at ``t``; each verify job's
        acknowledged writes older than the cache's flush time are on the media, the newer ones go into
        the drive's WriteCache (and ``_held``) with their acknowledgement times: a cut now or later
        decides with the PLP flush which of them survive; without one they settle."""
        cut = name == "12V" and level == 0 and self.drive.level.get("12V") == 1
        gone = cut or (name in ("PERST", "PWRDIS") and level == 1)
        if not gone:
            return
        flush_s = self.drive.spec.cache_flush_ms * 1e-3
        with self._lock:
            for rid, (written, rates) in self.ssd.abort_io(t, power_lost=cut).items():
                acked = {}
                for w in self.writes.get(rid, []):
                    wb, rate = float(written[w.job]), float(rates[w.job])
                    n = int(wb // w.bs)
                    acked[w.job] = n
                    first = n
                    while first > 0 and rate > 0 and t - (wb - first * w.bs) / rate > t - flush_s:
                        first -= 1                   # write first-1 completed within the flush time
                    if w.fsync:                      # the last completed flush put every write before it there
                        first = max(first, n // w.fsync * w.fsync)
                    self.media.write(w.ns, w.offset, w.offset + first * w.bs, w.pattern)
                    rec = {"t": t, "output": name, "run": rid, "job": w.job, "ns": w.ns, "acknowledged": n,
                           "lost_offsets": []}
                    self._keep(rec)
                    for i in range(first, n):        # still in the cache
                        key = (w.ns, w.offset + i * w.bs)
                        cache.write(key, w.pattern, t - (wb - (i + 1) * w.bs) / rate)
                        self._held[key] = (w.pattern, w.bs, rec)
                self._cut[rid] = acked

    def _keep(self, rec: dict) -> None:
        self.truth.append(rec)
        del self.truth[:-MAX_TRUTH]

    def after_edge(self, rec: dict, lost: list) -> None:
        if rec["output"] != "12V" or rec["level"] != 0 or "holdup_s" not in rec:
            return                           # only a cut decides what the cache keeps
        with self._lock:
            for _key, (_p, _bs, r) in self._held.items():
                r.update(weak_plp=rec.get("weak_plp"), holdup_s=rec.get("holdup_s"))
            self._settle_held({key for key, _token in lost})
