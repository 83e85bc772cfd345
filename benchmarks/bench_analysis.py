"""Speed and memory of the analysis, against the way a user would otherwise write it (pandas).

    .venv/bin/python benchmarks/bench_analysis.py [--minutes-4us 15] [--hours 10] [--tmp DIR]

Prints figures; asserts nothing. 1) OCP PCM-1 (1 s) and PCM-2 (100 us) highest windows over raw
4 us power, streamed in chunks; pandas rolling windows on a subset, scaled. 2) A long capture at
1 ms written to JLS and analysed in full (phases, energy, windows, checks); pandas on a subset.
3) Peak traced memory of the analysis for two capture lengths (flat = does not grow with length).
Beside 2), in the same run, the floor: the time to read every byte of the capture file once, warm
(page cache) and cold (dropped first), and the analysis's ratio to it. Each warm analysis follows a
warm read of its own and the ratio is the median of those pairs: a shared host's speed moves by a
third from minute to minute, and a read timed minutes before the analyses measured another machine.
The last line is a JSON object.
The analysis picks its threads from the cores the load leaves free (analysis.pipeline.helper_threads):
the line "analysis threads" says which.

The long capture is analysed COLD (the file dropped from the page cache with posix_fadvise
DONTNEED after an fsync, so it is read from disk as a capture opened the next day would be) and
WARM (read again, from the page cache, as right after recording or on a second report). A figure
taken straight after writing is neither: the writer's dirty pages are still being flushed while
the analysis reads, which is why one run here once showed 4.87 s where a warm run shows much less.
The pandas baselines read warm and are timed warm: one untimed first call, then the median of
--pandas-runs calls (a process's first call pays one-time costs, and scaling a subset's figure to the
whole capture would multiply them); the same work is also timed once COLD (the file dropped first),
and the cold analysis is held to that. The analysis gets the same untimed first call (on the short
capture): its one-time cost, numba loading the compiled kernels, is printed apart. Wall and CPU
seconds are both printed: on a machine shared with other jobs the wall figures move with their load
from minute to minute, CPU seconds much less.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

from hostinfo import machine
from powerrig.testing import synthetic as S
from powerrig.analysis import analyse
from powerrig.analysis.pipeline import free_cores, helper_threads
from powerrig.analysis.windows import SlidingMax
from powerrig.capture import CaptureReader, CaptureWriter

CHUNK = 1 << 22


def raw_chunks(n, seed=1):
    rng = np.random.default_rng(seed)
    base = rng.normal(10.0, 0.5, CHUNK).astype(np.float32)   # one noise block reused: generation is not timed work
    for s in range(0, n, CHUNK):
        m = min(CHUNK, n - s)
        x = base[:m] + np.float32(s % 7)
        yield x


def warm_median(run, runs: int) -> tuple[float, float, float]:
    """(first call's wall s, median wall s, median CPU s of ``runs`` calls after it) of ``run()``.

    The first call in a process pays one-time costs (pandas' first rolling mean over 20 M rows took
    1.0-1.3 s more than the next ones here, whatever was called before on small data). A baseline measured on a subset
    and scaled to the whole multiplies that cost, so the comparison uses the warm calls, as the warm
    figure of analyse() is taken after its cold run."""
    t = time.perf_counter()
    run()
    first = time.perf_counter() - t
    walls, cpus = [], []
    for _ in range(runs):
        c, t = time.process_time(), time.perf_counter()
        run()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return first, float(np.median(walls)), float(np.median(cpus))


def bench_4us(minutes: float, pandas_runs: int) -> None:
    n = int(minutes * 60 / 4e-6)
    t_ours = c_ours = 0.0
    sm = SlidingMax([25, 250_000])
    for x in raw_chunks(n):
        c, t = time.process_time(), time.perf_counter()
        sm.feed(x)
        t_ours += time.perf_counter() - t
        c_ours += time.process_time() - c
    sub = min(n, 20_000_000)
    x = np.concatenate(list(raw_chunks(sub)))
    got = []

    def pandas_pcm():
        s = pd.Series(x)
        got[:] = [s.rolling(25).mean().max(), s.rolling(250_000).mean().max()]
    first, t_pd, c_pd = (v * n / sub for v in warm_median(pandas_pcm, pandas_runs))
    p2, p1 = got
    print(f"PCM-1 + PCM-2 over {minutes:g} min of 4 us data ({n / 1e6:.0f} M samples)")
    print(f"  powerrig  {t_ours:7.2f} s   {n / t_ours / 1e6:7.1f} M samples/s   (peak {sm.results[0].value:.3f} W, "
          f"1 s max {sm.results[1].value:.3f} W)")
    print(f"  pandas    {t_pd:7.2f} s   {n / t_pd / 1e6:7.1f} M samples/s   (rolling on {sub / 1e6:.0f} M, scaled; "
          f"median of {pandas_runs} after a first call of {first:.2f} s scaled; {p2:.3f} / {p1:.3f} W)")
    print(f"  speed-up  {t_pd / t_ours:5.1f}x wall; CPU {c_ours:.2f} s vs {c_pd:.2f} s = {n / c_ours / 1e6:.1f} M samples/s "
          f"of CPU, {c_pd / c_ours:.1f}x")


def write_capture(path: Path, hours: float) -> float:
    seconds = hours * 3600
    model = S.clock(0, utc0=1.7e9, drift_ppm=20.0)
    tl = S.alternating_timeline(seconds, model, first_index=0)
    t = time.perf_counter()
    with CaptureWriter(path, timeline=tl, clock=model,
                       metadata={"drive": {"id_ctrl": S.id_ctrl(), "power_state": 0}}) as w:
        for b in S.interval_blocks(seconds, rows_per_block=60_000):
            w.write(b)
    return time.perf_counter() - t


def reading_path(path: Path) -> str:
    """How CaptureReader reads this capture's float signals: from its pages (capture/direct_read.py) or
    through pyjls (POWERRIG_DIRECT_READ=0, a host without the CRC instruction)."""
    with CaptureReader(path) as cap:
        cap.samples("p_total", 0, 1)
        return "direct_read" if cap._direct else "pyjls"


def drop_from_page_cache(path: Path) -> bool:
    """Write the file's dirty pages to disk and drop it from the page cache (a cold read follows)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_floor(path: Path, cold: bool) -> tuple[float, float]:
    """(wall s, CPU s) to read every byte of the capture once, 8 MB at a time into one buffer: from the
    page cache (warm), or from disk after dropping it (cold). The floor any analysis of the file stands
    on; the analysis reads only the signals it needs, so it may even go below it."""
    if cold:
        drop_from_page_cache(path)
    buf = bytearray(8 << 20)
    with open(path, "rb", buffering=0) as f:
        c, t = time.process_time(), time.perf_counter()
        while f.readinto(buf):
            pass
        return time.perf_counter() - t, time.process_time() - c


def analyse_file(path: Path, cpu: list | None = None):
    """(wall s, analysis, intervals); appends the process CPU seconds (both threads) to ``cpu``."""
    with CaptureReader(path) as cap:
        c = time.process_time()
        t = time.perf_counter()
        an = analyse(cap, cap.events, cap.metadata)
        dt = time.perf_counter() - t
        if cpu is not None:
            cpu.append(time.process_time() - c)
        return dt, an, cap.length


def pandas_baseline(path: Path, rows: int) -> None:
    """What a user would write: load the series, rolling windows, per-phase groupby (first ``rows``)."""
    with CaptureReader(path) as cap:
        df = pd.DataFrame({n: cap.samples(n, 0, rows).astype(np.float64) for n in ("p_12V", "p_3V3", "p_total")})
        df.index = pd.to_timedelta(np.arange(rows), unit="ms")
        df["p_total"].rolling("1s").mean().max()
        df["p_total"].rolling("10s").mean().max()
        phase = (np.arange(rows) // 30_000)
        df.groupby(phase).agg(["mean", "std", "min", "max", "sum"])
        df.groupby(phase)["p_total"].quantile([0.01, 0.05, 0.5, 0.95, 0.99])


def pandas_same_work(path: Path, an, rows: int) -> list:
    """The same computations as analyse(), written the pandas way, over the first ``rows`` intervals:
    for every phase the analysis found there (capture, power-state dwells, workloads, idles), per rail
    and total: mean, std, min, max, energy, percentiles and intervals lost; the highest 1 s, 10 s and
    100 ms rolling means with where they lie; the highest 100 us peak with where it lies, and the
    highest instantaneous power (every figure a PhaseResult holds; until 30 Nov the 100 ms window,
    the instantaneous maximum, the peak's place and the lost intervals were left out)."""
    with CaptureReader(path) as cap:
        names = ("p_12V", "p_3V3", "p_total", "p_peak_12V", "p_peak_3V3", "p_max_12V", "p_max_3V3")
        df = pd.DataFrame({n: cap.samples(n, 0, rows).astype(np.float64) for n in names})
        df.index = pd.to_timedelta(np.arange(rows), unit="ms")
        out = []
        for ph in an.phases:
            a, b = round(ph.phase.start), round(ph.phase.stop)     # the analysis's intervals (seconds cut short took one of the next phase)
            if a >= rows:
                continue
            seg = df.iloc[a:min(b, rows)]
            stats = seg[["p_12V", "p_3V3", "p_total"]].agg(["mean", "std", "min", "max", "sum"])
            q = seg[["p_12V", "p_3V3", "p_total"]].quantile([0.01, 0.05, 0.5, 0.95, 0.99])
            lost = seg["p_total"].isna().sum()
            r1 = seg["p_total"].rolling("1s").mean()
            r10 = seg["p_total"].rolling("10s").mean()
            r100ms = seg["p_total"].rolling("100ms").mean()
            peak = seg["p_peak_12V"] + seg["p_peak_3V3"]
            inst = (seg["p_max_12V"] + seg["p_max_3V3"]).max()
            out.append((stats, q, lost, r1.max(), r1.idxmax(), r10.max(), r10.idxmax(), r100ms.max(),
                        r100ms.idxmax(), peak.max(), peak.idxmax(), inst))
    return out


def traced_peak(path: Path) -> float:
    tracemalloc.start()
    analyse_file(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 1e6


def make_tmp_folder(ap: argparse.ArgumentParser, tmp: str | None) -> None:
    """The --tmp folder of a benchmark: created when missing; a file there, or a folder that cannot be
    created, is a one-line usage error (the benchmarks sharing bench_analysis's captures use this too)."""
    if tmp and not os.path.isdir(tmp):
        if os.path.exists(tmp):
            ap.error(f"--tmp {tmp} is a file, not a folder; name a folder for the capture files")
        try:
            os.makedirs(tmp)
        except OSError as e:
            ap.error(f"--tmp {tmp} does not exist and cannot be created ({e.strerror}); name a writable folder")
        print(f"created folder {tmp} for the capture files")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes-4us", type=float, default=15.0)
    ap.add_argument("--hours", type=float, default=10.0)
    ap.add_argument("--warm-runs", type=int, default=5,
                    help="warm analyses of the long capture, each after a warm read (the medians are shown)")
    ap.add_argument("--pandas-runs", type=int, default=3,
                    help="timed pandas runs after an untimed first one (the median is shown)")
    ap.add_argument("--skip-4us", action="store_true", help="skip the PCM-1/PCM-2 4 us benchmark")
    ap.add_argument("--tmp", default=None, help="folder for the capture files (several GB for 10 h)")
    args = ap.parse_args()
    make_tmp_folder(ap, args.tmp)
    if not args.skip_4us:
        bench_4us(args.minutes_4us, args.pandas_runs)
    print(f"host: {machine()}")
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        long = Path(d) / "long.jls"
        short = Path(d) / "short.jls"
        tw = write_capture(long, args.hours)
        size = os.path.getsize(long) / 1e9
        read_cold = read_floor(long, cold=True)
        read_floor(long, cold=False)                       # (back in the page cache)
        read_warm = sorted(read_floor(long, cold=False) for _ in range(3))[1]
        print(f"\nread floor of the {size:.2f} GB capture: warm {read_warm[0]:.2f} s ({size / read_warm[0]:.2f} GB/s, "
              f"CPU {read_warm[1]:.2f} s; median of 3), cold {read_cold[0]:.2f} s ({size / read_cold[0]:.2f} GB/s, CPU "
              f"{read_cold[1]:.2f} s); load average {os.getloadavg()[0]:.1f}")
        print(f"analysis threads: {1 + helper_threads()} ({free_cores():.1f} cores free by the load average)")
        reader = reading_path(long)
        print(f"reading: {reader} (the analysis's and pandas' reads alike)")
        write_capture(short, args.hours / 10)
        t_first, t_again = analyse_file(short)[0], analyse_file(short)[0]
        print(f"first analysis in this process: {t_first - t_again:.2f} s more than the next (one-time: numba "
              f"loads the compiled kernels), {args.hours / 10:g} h capture, left out of the figures below")
        dropped = drop_from_page_cache(long)
        cpu_cold, cpu_warm = [], []
        load_cold = os.getloadavg()[0]
        tc, an, rows = analyse_file(long, cpu_cold)
        warm, reads = [], []
        for _ in range(args.warm_runs):            # each analysis beside a read of its own minute
            reads.append(read_floor(long, cold=False)[0])
            warm.append(analyse_file(long, cpu_warm)[0])
        ratios = [a / r for a, r in zip(warm, reads)]
        ratio = float(np.median(ratios))
        ta = float(np.median(warm))
        cw = float(np.median(cpu_warm))
        print(f"\n{args.hours:g} h capture at 1 ms ({rows / 1e6:.1f} M intervals, {len(an.phases)} phases, "
              f"{len(an.checks)} checks, file {size:.2f} GB)")
        print(f"  write     {tw:7.2f} s   {rows / tw / 1e6:7.2f} M intervals/s")
        print(f"  analyse   {tc:7.2f} s   {rows / tc / 1e6:7.2f} M intervals/s  COLD "
              f"({'dropped from the page cache' if dropped else 'could not drop the page cache: not cold'}; "
              f"CPU {cpu_cold[0]:.2f} s)")
        print(f"  analyse   {ta:7.2f} s   {rows / ta / 1e6:7.2f} M intervals/s  WARM (median of {args.warm_runs}: "
              f"{', '.join(f'{w:.2f}' for w in warm)} s; CPU {cw:.2f} s both threads = {rows / cw / 1e6:.2f} M "
              f"intervals/s of CPU; load average {os.getloadavg()[0]:.1f})")
        sub = min(rows, int(min(1.0, args.hours) * 3600 * 1000))     # pandas on the first hour, scaled
        scale = rows / sub
        _, tp, _ = warm_median(lambda: pandas_baseline(long, sub), args.pandas_runs)
        tp *= scale
        print(f"  pandas    {tp:7.2f} s   simple: whole-series rolling 1 s/10 s, fixed 30 s groupby (less work "
              f"than analyse; 1 h, scaled): analyse is {tp / ta:.1f}x faster")
        first, ts, cs = (v * scale for v in warm_median(lambda: pandas_same_work(long, an, sub), args.pandas_runs))
        drop_from_page_cache(long)
        c0, t0 = time.process_time(), time.perf_counter()
        pandas_same_work(long, an, sub)
        tsc, csc = (time.perf_counter() - t0) * scale, (time.process_time() - c0) * scale
        print(f"  pandas    {ts:7.2f} s   same work: per phase stats, percentiles, lost, rolling 1 s/10 s/100 ms with position, "
              f"100 us peak with position, instantaneous max (1 h, scaled; median of {args.pandas_runs} after a first call of {first:.2f} s scaled; "
              f"CPU {cs:.2f} s; cold, once: {tsc:.2f} s, CPU {csc:.2f} s): analyse is {ts / ta:.1f}x faster warm, "
              f"{tsc / tc:.1f}x cold; in CPU time {cs / cw:.1f}x warm, {csc / cpu_cold[0]:.1f}x cold "
              f"(cold analysis against warm pandas: {cs / cpu_cold[0]:.1f}x)")
        print(f"  floor     analyse warm {ta:.2f} s; the median of {len(ratios)} pairs, each analysis against the warm read "
              f"of the file just before it: {ratio:.2f}x ({', '.join(f'{x:.2f}' for x in ratios)}x; "
              f"reads {', '.join(f'{r:.2f}' for r in reads)} s); cold {tc:.2f} s = {tc / read_cold[0]:.2f}x the cold "
              f"read ({read_cold[0]:.2f} s)")
        summary = {"hours": args.hours, "file_gb": round(size, 3), "intervals": rows,
                   "read_warm_s": round(read_warm[0], 3), "read_warm_cpu_s": round(read_warm[1], 3),
                   "read_cold_s": round(read_cold[0], 3), "read_cold_cpu_s": round(read_cold[1], 3),
                   "analyse_warm_s": round(ta, 3), "analyse_warm_cpu_s": round(cw, 3),
                   "analyse_cold_s": round(tc, 3), "analyse_cold_cpu_s": round(cpu_cold[0], 3),
                   "analyse_to_warm_read": round(ratio, 2),
                   "analyse_to_warm_read_pairs": [round(x, 2) for x in ratios],
                   "read_warm_pairs_s": [round(r, 3) for r in reads],
                   "analyse_cold_to_cold_read": round(tc / read_cold[0], 2),
                   "pandas_same_work_s": round(ts, 3), "pandas_same_work_cpu_s": round(cs, 3),
                   "pandas_cold_s": round(tsc, 3), "pandas_cold_cpu_s": round(csc, 3),
                   "pandas_wall_x_warm": round(ts / ta, 2), "pandas_wall_x_cold": round(tsc / tc, 2),
                   "pandas_cpu_x_warm": round(cs / cw, 2), "pandas_cpu_x_cold": round(csc / cpu_cold[0], 2),
                   "pandas_warm_cpu_x_cold_analysis": round(cs / cpu_cold[0], 2), "first_analysis_extra_s": round(t_first - t_again, 3),
                   "analysis_threads": 1 + helper_threads(), "load_cold": round(load_cold, 2), "reader": reader}
        m_short = traced_peak(short)
        m_long = traced_peak(long)
        print(f"\npeak traced memory of analyse(): {args.hours / 10:g} h {m_short:.0f} MB, {args.hours:g} h "
              f"{m_long:.0f} MB")
        summary.update(peak_mb_long=round(m_long, 1), peak_mb_short=round(m_short, 1),
                       load_average=[round(x, 2) for x in os.getloadavg()], machine=machine())
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
