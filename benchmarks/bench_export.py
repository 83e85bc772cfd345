"""Speed and memory of `powerrig export --sigrok` (and --csv) on long captures at 1 ms.

    .venv/bin/python benchmarks/bench_export.py [--minutes 15 60] [--tmp DIR] [--csv]

For each length: a synthetic capture (alternating idle/active halves of a minute, a PHASE event per
active half) is written to JLS, then exported; prints intervals per second, the .sr size and the
peak traced memory of the export (tracemalloc: numpy buffers and zip writes). A flat peak over
lengths means the export streams. Timed twice per length: with and without tracemalloc (which slows
allocation-heavy code). Prints figures; asserts nothing.
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

from powerrig.testing import synthetic as S
from powerrig.capture import CaptureWriter
from powerrig.export.sigrok import export_sigrok
from powerrig.export.table import export_csv


def make_capture(path: Path, minutes: float) -> int:
    seconds = minutes * 60
    model = S.clock(0)
    with CaptureWriter(path, metadata={"device": {"device": "bench"}},
                       timeline=S.alternating_timeline(seconds, model), clock=model) as w:
        for b in S.interval_blocks(seconds):
            w.write(b)
    return int(round(seconds * 1000))


def run(minutes_list, tmp: Path, with_csv: bool) -> None:
    print(f"{'capture':>10} {'intervals':>10} {'export s':>9} {'intervals/s':>12} {'.sr MB':>7} {'peak MB':>8}")
    for minutes in minutes_list:
        cap = tmp / f"bench_{minutes:g}min.jls"
        n = make_capture(cap, minutes)
        out = tmp / f"bench_{minutes:g}min.sr"
        t0 = time.perf_counter()
        export_sigrok(cap, out)
        dt = time.perf_counter() - t0
        tracemalloc.start()
        export_sigrok(cap, out)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{minutes:>8g} m {n:>10} {dt:>9.2f} {n / dt:>12,.0f} {out.stat().st_size / 1e6:>7.1f} "
              f"{peak / 1e6:>8.1f}")
        if with_csv:
            csv_out = tmp / f"bench_{minutes:g}min.csv"
            t0 = time.perf_counter()
            export_csv(cap, csv_out)
            dt = time.perf_counter() - t0
            print(f"{'csv':>10} {n:>10} {dt:>9.2f} {n / dt:>12,.0f} {csv_out.stat().st_size / 1e6:>7.1f}")
            csv_out.unlink()
        cap.unlink()
        out.unlink()
    print(f"process max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB "
          "(includes writing the captures)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, nargs="+", default=[15, 60])
    ap.add_argument("--tmp", help="folder for the captures (default: a temporary folder)")
    ap.add_argument("--csv", action="store_true", help="also time the CSV export")
    a = ap.parse_args()
    if a.tmp:
        run(a.minutes, Path(a.tmp), a.csv)
    else:
        with tempfile.TemporaryDirectory() as d:
            run(a.minutes, Path(d), a.csv)


if __name__ == "__main__":
    main()
