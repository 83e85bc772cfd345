"""Where the wall time of a warm 10-hour analysis goes between its two threads.

    .venv/bin/python benchmarks/bench_analysis_threads.py [--hours 10] [--runs 3] [--tmp DIR]
                                                          [--what-if] [--chunk-seconds S]

Why: analyse() reads a chunk ahead on one thread (pyjls) and computes the pass on the main thread
(the percentiles and histogram binning of finished phases too); on 2 cores the wall time is set by
how well those overlap, not only by their CPU. Prints, for the capture of bench_analysis
(36 M intervals, 1,801 phases), the median of --runs warm analyses in two set-ups:

1. as shipped: wall seconds and each thread's CPU seconds;
2. the signals already in memory (the reader's work removed): what the computing alone costs.

With --what-if, two more (as shipped otherwise; their results are wrong and thrown away): the
floor the rest of the pass sets when parts cost nothing at all,

3. the per-sample arithmetic of the pass removed (piece summaries, maxima, histogram binning);
4. the percentile selections removed as well: what reading and the per-phase bookkeeping cost.

--chunk-seconds writes the capture with JLS data chunks of that many seconds instead of the
recorder's one (fewer system calls to read; a killed recording would lose up to one chunk).

Figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from bench_analysis import make_tmp_folder, write_capture
from hostinfo import machine
from powerrig.analysis import analyse, pipeline, stats
from powerrig.capture import CaptureReader, layout

SIGNALS = ["p_12V", "p_3V3", "p_total", "p_peak_12V", "p_peak_3V3", "p_max_12V", "p_max_3V3"]
_cpu: dict[str, float] = {}
_run = threading.Thread.run


def _counted_run(self) -> None:
    """Thread.run that adds the thread's CPU seconds under its name (without the pool's suffix)."""
    try:
        _run(self)
    finally:
        name = self.name.split("_")[0]
        _cpu[name] = _cpu.get(name, 0.0) + time.thread_time()


class _InMemory:
    """The capture's signals read once into memory; chunks are views (no reading, no copying)."""

    def __init__(self, cap: CaptureReader):
        self.cap = cap
        self.data = {n: cap.samples(n) for n in SIGNALS}

    def __getattr__(self, name):
        return getattr(self.cap, name)

    def chunks(self, names, start=None, stop=None, chunk=1 << 20, pool=None):
        if not set(names) <= set(self.data):
            yield from self.cap.chunks(names, start, stop, chunk, pool)
            return
        start, stop = self.cap._range(start, stop)
        for s in range(start, stop, chunk):
            e = min(stop, s + chunk)
            yield s, {n: self.data[n][s:e] for n in names}


class _NoSums(stats.Segments):
    """Piece summaries that compute nothing (what-if only): every piece whole, all values 1."""

    def __init__(self, x, bounds):
        self.x, self.bounds, self.nanmask = x, bounds, None
        self.n = np.diff(bounds)
        self.lost = np.zeros(len(self.n), np.int64)
        self.total = self.m2 = self.n.astype(np.float64)
        self.min = self.max = np.ones(len(self.n), x.dtype)


def _no_maxima(self):
    """_Chunk.maxima computing nothing (what-if only): each piece's peak 1 W at its first interval."""
    ones = np.ones(len(self.bounds) - 1)
    return (ones, self.bounds[:-1].astype(np.int64), ones) if self.peaks else (None, None, ones)


def _no_percentiles(self, qs=stats.PERCENTILES) -> dict[str, float]:
    return {f"p{q:g}": 0.0 for q in qs}


@contextlib.contextmanager
def _swapped(*swaps):
    """Attributes replaced for the duration, (owner, name, replacement) each; restored even on error."""
    saved = [(o, n, getattr(o, n)) for o, n, _ in swaps]
    try:
        for o, n, v in swaps:
            setattr(o, n, v)
        yield
    finally:
        for o, n, v in saved:
            setattr(o, n, v)


def _removed(percentiles: bool):
    """The pass with its per-sample arithmetic (and the percentiles) replaced by no-ops, then restored."""
    swaps = [(pipeline, "Segments", _NoSums), (pipeline._Chunk, "maxima", _no_maxima),
             (stats.SeriesStats, "_bin", lambda self, v: None)]
    if percentiles:
        swaps.append((stats.SeriesStats, "percentiles", _no_percentiles))
    return _swapped(*swaps)


def measure(source, runs: int) -> tuple[float, dict[str, float]]:
    """(median wall s, median CPU s per thread) of ``runs`` analyses."""
    walls, cpus = [], []
    for _ in range(runs):
        _cpu.clear()
        c, t = time.thread_time(), time.perf_counter()
        analyse(source, source.events, source.metadata)
        walls.append(time.perf_counter() - t)
        _cpu["main"] = time.thread_time() - c
        cpus.append(dict(_cpu))
    keys = list(cpus[0])
    return statistics.median(walls), {k: statistics.median(d.get(k, 0.0) for d in cpus) for k in keys}


def show(label: str, wall: float, cpu: dict[str, float], rows: int) -> None:
    threads = ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
    print(f"  {label:<38} {wall:5.2f} s = {rows / wall / 1e6:5.1f} M intervals/s; CPU s: {threads}; "
          f"sum {sum(cpu.values()):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=3, help="warm analyses per set-up (the median is shown)")
    ap.add_argument("--tmp", default=None, help="folder for the capture file (2 GB for 10 h)")
    ap.add_argument("--chunk-seconds", type=float, default=None,
                    help="JLS data chunk length of the capture written (default: the recorder's)")
    ap.add_argument("--what-if", action="store_true",
                    help="also measure with parts of the pass computing nothing (the floor the rest sets)")
    args = ap.parse_args()
    if args.chunk_seconds is not None and args.chunk_seconds <= 0:
        ap.error(f"--chunk-seconds {args.chunk_seconds:g} must be > 0; give the chunk length in seconds, e.g. 8")
    make_tmp_folder(ap, args.tmp)
    threading.Thread.run = _counted_run
    recorder_chunk = layout.samples_per_chunk
    per_chunk = recorder_chunk if args.chunk_seconds is None else \
        (lambda rate: recorder_chunk(int(round(rate * args.chunk_seconds))))
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        path = Path(d) / "long.jls"
        with _swapped((layout, "samples_per_chunk", per_chunk)):
            write_capture(path, args.hours)
        with CaptureReader(path) as cap:
            analyse(cap, cap.events, cap.metadata)                 # warm: from the page cache
            spd = int(cap._r.signals[1].samples_per_data)
            print(f"{args.hours:g} h capture at 1 ms ({cap.length / 1e6:.1f} M intervals, JLS chunks of {spd} "
                  f"intervals); medians of {args.runs} warm analyses\nhost: {machine()}")
            show(f"as shipped ({1 + pipeline.helper_threads()} threads)", *measure(cap, args.runs), cap.length)
            show("signals in memory", *measure(_InMemory(cap), args.runs), cap.length)
            if args.what_if:
                print("  what-if, results wrong (as shipped, parts computing nothing):")
                with _removed(percentiles=False):
                    show("no summaries, maxima, binning", *measure(cap, args.runs), cap.length)
                with _removed(percentiles=True):
                    show("... and no percentiles", *measure(cap, args.runs), cap.length)


if __name__ == "__main__":
    main()
