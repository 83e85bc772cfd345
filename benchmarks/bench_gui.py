"""The desktop app's figures: live plot paint time and lag, long-capture zoom times, memory over time.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_gui.py [--seconds 20] [--interval-us 100]
        [--hours 1] [--minutes 1,10] [--poll-ms 5000] [--tmp DIR]

1. Live: a virtual rig streams at ``--interval-us``; for ``--seconds`` the live plot follows it.
   Paint time = the plot's synchronous repaint after new data is set (p50/p95, wall clock, and the GUI
   thread's CPU time in it); lag, once the frame is painted = the newest plotted point's sample time
   behind the newest interval received, and behind the device's clock now (via the clock model: this
   one includes the link's own block latency).
2. File: a synthetic capture of ``--hours`` at 1 ms (10 h = 36 M intervals) is written once into
   --tmp; time to answer a full zoom-out (one summary per pixel, 1500 px) and a zoom into 1 s, from
   the source alone and in the window (range set -> summary on a worker -> painted).
3. Memory: the GUI process's resident memory after each of ``--minutes`` of streaming (default 1
   minute only; pass 1,10 for the issue's figure), also after malloc_trim (heap pages glibc kept);
   --tracemalloc prints the Python allocations that grew between the first and last mark; --smaps
   which memory mappings grew (library pages, glibc heap and arenas, CPython arenas, other anonymous).
   --poll-ms polls the drive faster than the app's 5 s: every poll is an event on the plot, so memory
   that grows per event shows ten times sooner at 500.
--profile FILE: cProfile of the GUI thread during the live measurement.
Figures are printed, never asserted.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def status_kb() -> dict[str, int]:
    """The kB fields of /proc/self/status (VmRSS, RssAnon, RssFile, ...)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        k, _, v = line.partition(":")
        if v.strip().endswith(" kB"):
            out[k] = int(v.split()[0])
    return out


def rss_mb() -> float:
    kb = status_kb().get("VmRSS")
    return kb / 1024 if kb is not None else float("nan")


def libc():
    """glibc through ctypes, or None (another C library: the allocator figures are left out)."""
    try:
        lib = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return lib if hasattr(lib, "malloc_trim") and hasattr(lib, "malloc_info") else None


def rss_after_trim_mb() -> float:
    """RSS once glibc gave its free heap pages back (malloc_trim): what is left is really in use."""
    lib = libc()
    if lib is None:
        return float("nan")
    lib.malloc_trim(0)
    return rss_mb()


def rss_by_mapping() -> dict[str, int]:
    """Resident kB by owner, to say *where* a growth of RSS lives: each file by path (library code and
    data pages, touched lazily, so bounded by the file), the kernel's split of the anonymous rest, and
    inside it what glibc's malloc holds (arenas, free chunks kept, blocks mmapped on their own) and
    what CPython's object allocator holds (pymalloc arenas, mmapped past malloc)."""
    out: dict[str, int] = {}
    key = "?"
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(None, 5)
        if head and "-" in head[0] and not head[0].endswith(":"):
            name = head[5].strip() if len(head) > 5 else ""
            lo = int(head[0].split("-")[0], 16)
            if name:
                key = "file " + name if name.startswith("/") else name
            elif lo % (64 << 20) == 0:
                key = "anon: glibc thread arena (64 MiB aligned)"
            else:
                key = "anon: the rest (mmapped malloc blocks, pymalloc arenas, library mmaps, stacks)"
        elif line.startswith("Rss:"):
            out[key] = out.get(key, 0) + int(line.split()[1])
    out.update({"total " + k: v for k, v in status_kb().items() if k in ("RssAnon", "RssFile", "RssShmem")})
    out.update(_malloc_kb())
    out.update(_pymalloc_kb())
    return out


def _malloc_kb() -> dict[str, int]:
    """glibc malloc_info totals (kB): memory its arenas took from the system, the free chunks it keeps
    there, and the blocks it mmapped on their own."""
    lib = libc()
    if lib is None:
        return {}
    lib.fopen.restype = ctypes.c_void_p
    lib.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.fclose.argtypes = [ctypes.c_void_p]
    lib.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    with tempfile.NamedTemporaryFile("r", suffix=".xml") as f:
        fp = lib.fopen(f.name.encode(), b"w")
        lib.malloc_info(0, fp)
        lib.fclose(fp)
        xml = f.read()
    tail = xml[xml.rindex("</heap>"):] if "</heap>" in xml else xml

    def total(pattern: str) -> int:
        return sum(int(v) for v in re.findall(pattern, tail)) // 1024
    return {"malloc: arenas from the system": total(r'<system type="current" size="(\d+)"'),
            "malloc: free chunks kept in arenas": total(r'<total type="(?:fast|rest)" count="\d+" size="(\d+)"'),
            "malloc: blocks mmapped on their own": total(r'<total type="mmap" count="\d+" size="(\d+)"')}


def _pymalloc_kb() -> dict[str, int]:
    """CPython's object allocator (sys._debugmallocstats, written to fd 2): arenas held, bytes used."""
    if not hasattr(sys, "_debugmallocstats"):
        return {}
    sys.stderr.flush()
    with tempfile.TemporaryFile("w+") as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read()
    out = {}
    m = re.search(r"# arenas allocated current\s*=\s*([\d,]+)", text)
    size = re.search(r"(\d+) arenas \* (\d+) bytes/arena", text)
    if m and size:
        out["pymalloc: arenas held"] = int(size.group(1)) * int(size.group(2)) // 1024
    m = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", text)
    if m:
        out["pymalloc: bytes in use"] = int(m.group(1).replace(",", "")) // 1024
    return out


def report_mapping_growth(first: dict[str, int], last: dict[str, int], span: str) -> None:
    """The mappings whose resident size changed between two snapshots, largest first."""
    diff = {k: last.get(k, 0) - first.get(k, 0) for k in set(first) | set(last)}
    total = sum(v for k, v in diff.items() if k.startswith("total "))
    print(f"  where memory changed {span} (kB; RSS {total:+d} kB; smaps by mapping, malloc_info, "
          f"sys._debugmallocstats):")
    for k, d in sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:14]:
        if d:
            print(f"    {d:+7d}  {k}  (now {last.get(k, 0)} kB)")


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q / 100 * len(v)))] if v else float("nan")


def run_loop(seconds: float) -> None:
    """Qt's own event loop for ``seconds`` (as the app runs: no polling sleeps adding latency)."""
    from PySide6.QtCore import QEventLoop, QTimer
    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def spin(app, seconds: float, cond=None) -> None:
    """Run Qt's event loop until ``cond()`` (checked after each batch of events) or ``seconds``."""
    if cond is None:
        run_loop(seconds)
        return
    from PySide6.QtCore import QEventLoop
    end = time.monotonic() + seconds
    while time.monotonic() < end and not cond():
        # block until an event arrives (a worker's result, a timer): no polling sleep adding latency
        app.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)


def report_profile(prof, wall_s: float, path: str) -> None:
    """Where the GUI thread's time went: the top functions by own and cumulative time."""
    import io
    import pstats
    prof.dump_stats(path)
    out = io.StringIO()
    st = pstats.Stats(prof, stream=out)
    total = sum(v[2] for v in st.stats.values())
    print(f"GUI thread profile ({wall_s:.1f} s wall, {total:.2f} s in Python-visible calls), saved to {path}:")
    st.sort_stats("cumulative").print_stats(30)
    st.sort_stats("tottime").print_stats(20)
    print(out.getvalue())


def bench_live(app, tmp: Path, seconds: float, interval_us: int, minutes: list[float],
               profile: str | None = None, trace: bool = False, smaps: bool = False,
               poll_ms: int | None = None) -> None:
    from powerrig.gui.services import Services
    from powerrig.gui.main_window import MainWindow

    svc = Services(capture_dir=tmp / "captures")
    svc.recording.interval_us = interval_us
    if poll_ms:
        svc.drive.POLL_MS = poll_ms
    win = MainWindow(svc)
    win.resize(1500, 900)
    win.show()
    lv = win.live_view
    paints, lags, dev_lags, paint_cpu = [], [], [], []
    orig = lv._paint

    def timed_paint(src, s):
        orig(src, s)
        t0, c0 = time.perf_counter(), time.thread_time()
        lv.plot.viewport().repaint()          # the synchronous paint of the plot
        paints.append((time.perf_counter() - t0) * 1e3)
        paint_cpu.append((time.thread_time() - c0) * 1e3)     # the GUI thread's own CPU time in it
        live = svc.recording.live
        if src is live and lv.following:
            # honest lag, once the frame is on screen: the newest plotted point's sample time against
            # (a) the newest interval the host holds and (b) the device's "now" from the clock model
            end = lv.plotted_end_s()
            if end is not None:
                lags.append(max(0.0, live.duration_s - end))
                try:
                    dev_lags.append(max(0.0, float(live.sample_id(time.time())) * live.interval_s - end))
                except ValueError:
                    pass
    lv._paint = timed_paint
    svc.connection.connect_sim()
    spin(app, 60, lambda: svc.recording.live is not None and svc.recording.live.duration_s > 1.0)
    if svc.recording.live is None:
        raise SystemExit("bench_gui: the virtual rig sent no data")
    paints.clear()
    paint_cpu.clear()
    lags.clear()
    dev_lags.clear()
    prof = None
    if profile:
        import cProfile
        prof = cProfile.Profile()         # the GUI thread only (cProfile follows the thread enabling it)
        prof.enable()
    t_spin = time.perf_counter()
    spin(app, seconds)
    wall = time.perf_counter() - t_spin
    if prof is not None:
        prof.disable()
        report_profile(prof, wall, profile)
    print(f"live plot at {interval_us} us, {seconds:g} s, {len(paints)} paints:")
    print(f"  paint p50 {statistics.median(paints):.1f} ms  p95 {pct(paints, 95):.1f} ms (wall); "
          f"CPU of the GUI thread in it p50 {statistics.median(paint_cpu):.1f} ms  p95 {pct(paint_cpu, 95):.1f} ms "
          f"(the rest is waiting: for a core, or for the GIL held by the recording thread)")
    print(f"  lag of the newest plotted point behind the newest interval received, p50 "
          f"{statistics.median(lags) * 1e3:.0f} ms  p95 {pct(lags, 95) * 1e3:.0f} ms")
    if dev_lags:
        print(f"  lag behind the device's clock (includes the link's block latency), p50 "
              f"{statistics.median(dev_lags) * 1e3:.0f} ms  p95 {pct(dev_lags, 95) * 1e3:.0f} ms")
    print(f"  live source memory {svc.recording.live.memory_bytes() / 2**20:.1f} MiB (fixed)")
    del lv._paint                    # the app's own paint again: the timing lists must not grow the process
    t_start = time.monotonic()
    snaps, maps = [], []
    if trace and minutes:
        import tracemalloc
        tracemalloc.start(8)
    for m in minutes:
        spin(app, max(0.0, t_start + m * 60 - time.monotonic()))
        print(f"  RSS after {m:g} min of streaming: {rss_mb():.0f} MB, {rss_after_trim_mb():.0f} MB after "
              f"malloc_trim ({svc.recording.live.duration_s:.0f} s of device time received, {svc.core.pending} jobs pending)",
              flush=True)
        if smaps:
            maps.append(rss_by_mapping())
            if len(maps) > 1:
                report_mapping_growth(maps[-2], maps[-1], "since the previous mark")
        if trace:
            import gc
            import tracemalloc
            gc.collect()
            snaps.append(tracemalloc.take_snapshot())
            print(f"    Python heap (tracemalloc) {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB", flush=True)
    if len(maps) > 2:
        report_mapping_growth(maps[0], maps[-1], f"between {minutes[0]:g} and {minutes[-1]:g} min")
    if len(snaps) > 1:
        print(f"  what grew between {minutes[0]:g} and {minutes[-1]:g} min (tracemalloc, top 15):")
        for st in snaps[-1].compare_to(snaps[0], "traceback")[:15]:
            print(f"    {st.size_diff / 1024:+.0f} KiB {st.count_diff:+d} blocks")
            for line in st.traceback.format()[-6:]:
                print("      " + line)
    win.close()


def bench_file(tmp: Path, hours: float) -> Path:
    from powerrig.capture.writer import CaptureWriter
    from powerrig.gui.source import FileSource
    from powerrig.testing import synthetic as S

    path = tmp / f"bench-gui-{hours:g}h.jls"
    if not path.exists():
        t0 = time.perf_counter()
        part = path.with_name(path.stem + ".part.jls")
        with CaptureWriter(part, metadata={"device": {"device": "bench"}}) as w:
            for b in S.interval_blocks(hours * 3600, rows_per_block=200_000):
                w.write(b)
        part.rename(path)
        print(f"wrote {path} ({hours:g} h at 1 ms) in {time.perf_counter() - t0:.0f} s")
    src = FileSource(path)
    try:
        for label, (a, b) in (("full zoom-out", (0.0, src.duration_s)),
                              ("zoom into 1 s", (src.duration_s / 2, src.duration_s / 2 + 1.0))):
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                src.summaries(a, b, 1500, ["p_total", "p_12V"])
                times.append((time.perf_counter() - t0) * 1e3)
            print(f"{hours:g} h capture ({src.length:,} intervals), {label}: median {statistics.median(times):.1f} ms "
                  f"(2 signals, 1500 points)")
    finally:
        src.close()
    return path


def bench_file_view(app, tmp: Path, path: Path) -> None:
    """The same zooms in the window: from setting the x range to the frame painted (summary on the
    worker + the band items + the synchronous repaint)."""
    from powerrig.gui.services import Services
    from powerrig.gui.main_window import MainWindow
    from powerrig.gui.source import FileSource

    svc = Services(capture_dir=tmp / "captures")
    win = MainWindow(svc)
    win.resize(1500, 900)
    win.show()
    lv = win.live_view
    src = FileSource(path)
    svc.captures.source = src                      # as File > Open does, without the analysis table's pass
    svc.captures.source_changed.emit(src)
    spin(app, 60, lambda: lv.last_summary is not None)
    dur = src.duration_s
    for label, (a, b) in (("full zoom-out", (0.0, dur)), ("zoom into 1 s", (dur / 2, dur / 2 + 1.0))):
        times = []
        for k in range(6):
            lv._set_x(0.0, 10.0) if k % 2 else None         # from elsewhere, so every redraw is a new range
            spin(app, 10, lambda: not lv._in_flight)
            n0 = lv.paints
            t0 = time.perf_counter()
            lv._set_x(a, b)
            spin(app, 30, lambda: lv.paints > n0 and not lv._in_flight)
            lv.plot.viewport().repaint()
            times.append((time.perf_counter() - t0) * 1e3)
        print(f"{dur / 3600:g} h capture in the window, {label}: redraw median {statistics.median(times):.1f} ms, "
              f"max {max(times):.1f} ms (range set -> summary -> painted)")
    win.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--interval-us", type=int, default=100)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--minutes", default="1", help="comma-separated: RSS after each (e.g. 1,10)")
    ap.add_argument("--tmp", default=None, help="folder for the synthetic capture (kept for reuse)")
    ap.add_argument("--skip-live", action="store_true")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="trace Python allocations over --minutes and print what grew (slows everything)")
    ap.add_argument("--profile", default=None, metavar="FILE",
                    help="cProfile the GUI thread during the live measurement; stats to FILE, summary printed")
    ap.add_argument("--smaps", action="store_true",
                    help="at each of --minutes, say which memory mappings (libraries, heap, arenas) grew")
    ap.add_argument("--poll-ms", type=int, default=None,
                    help="poll the drive this often (the app: every 5000 ms); each poll is an event on the plot")
    ap.add_argument("--skip-file", action="store_true")
    a = ap.parse_args()
    tmp = Path(a.tmp or tempfile.mkdtemp(prefix="powerrig-bench-gui-"))
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("POWERRIG_SIM_DIR", str(tmp / "sim"))
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp / "settings"))
    app = QApplication(sys.argv[:1])
    if not a.skip_file:
        bench_file_view(app, tmp, bench_file(tmp, a.hours))
    if not a.skip_live:
        bench_live(app, tmp, a.seconds, a.interval_us, [float(m) for m in a.minutes.split(",") if m],
                   a.profile, a.tracemalloc, a.smaps, a.poll_ms)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
