"""analyse(): every figure of a capture in one streaming pass over its power signals.

The pass reads the capture in chunks (memory flat in capture length; the next chunk is read, cut,
summarised and its window sums made on a second thread while the phases take this one's figures: the
two halves of the work are about equal). Each chunk is cut once at every phase edge and each piece
summarised once, in one compiled pass (sum, squared deviations, min, max: kernels.py); every phase merges the pieces it covers, so nested
and overlapping phases cost almost nothing extra (a phase with exact percentiles keeps views of its
values and sorts them once, when it ends). The 1 s and
10 s sliding windows are computed once per chunk over the whole signal and each phase takes the best
window starting in its range; 100 us peaks and instantaneous maxima come from per-piece maxima. Commands are then read back around themselves; checks, efficiency,
steady state and write amplification are computed from the phase results.
"""
from __future__ import annotations

import bisect
import functools
import logging
import math
import os
import queue
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from powerrig.analysis import checks as C
from powerrig.analysis.clipping import clipped_why, phase_clipped
from powerrig.analysis.command_energy import POST_S, PRE_S, CommandEnergy, command_energy
from powerrig.analysis.descriptors import power_states, transition_latency_us
from powerrig.analysis.efficiency import curves, phase_efficiency
from powerrig.analysis.kernels import piece_max_of_sum
from powerrig.analysis.phases import IDLE_WINDOW, WAF_INTERVAL, WORKLOAD, Phase, commands, phases_from_events, power_state_of
from powerrig.analysis.result import CheckResult, PhaseResult, WindowFigure
from powerrig.analysis.stats import Segments, SeriesStats
from powerrig.analysis.steady_state import steady_state
from powerrig.analysis.thermal import smart_readings, throttled_between
from powerrig.analysis.waf import waf_samples, waf_series
from powerrig.analysis.windows import WindowMax, WindowSums
from powerrig.core.array_pool import ArrayPool
from powerrig.core.errors import CaptureError, PowerrigError
from powerrig.core.sampling import sampling_of
from powerrig.core.timeline import FIO, NOTE, PHASE, POWER_STATE, Event

logger = logging.getLogger(__name__)


class NothingToAnalyse(PowerrigError, ValueError):
    """The source holds no intervals (a ValueError too, as before, for callers that catch that)."""


@dataclass
class Analysis:
    info: dict
    phases: list[PhaseResult]
    checks: list[CheckResult]
    commands: list[CommandEnergy]
    efficiency: list[dict]
    curves: dict
    steady_state: list[dict]
    waf: list[dict]
    warnings: list[str] = field(default_factory=list)

    def table(self) -> list[dict]:
        """The per-phase table (derived windows left out)."""
        return [r.row() for r in self.phases if r.kind not in ("idle_window", WAF_INTERVAL)]

    def idle_active(self) -> dict:
        """Mean watts over all idle time and over all workload time (energy-weighted), and over the idle
        windows (``idle_settled``: from 10 s into each idle phase, as NVMe's IDLP is measured; an idle
        phase right after a workload also holds the drive's decay from it, which a datasheet's idle
        figure does not), with ``idle_windows``, how many there were."""
        out = {}
        for key, kind in (("idle", "idle"), (WORKLOAD, WORKLOAD), ("idle_settled", IDLE_WINDOW)):
            rs = [r for r in self.phases if r.kind == kind and r.rails["total"]["intervals"]]
            e = sum(r.energy_j for r in rs)
            t = sum(r.duration_s - r.lost_s for r in rs)
            out[key] = e / t if t > 0 else math.nan
            if kind == IDLE_WINDOW:
                out["idle_windows"] = len(rs)
        return out


PEAK_WINDOW_S = 100e-6


class _PhaseAcc:
    """State of one phase during the pass."""

    def __init__(self, phase: Phase, names: list[str], interval_s: float, has_peak: bool):
        self.phase = phase
        self.lo = int(math.ceil(phase.start))           # full intervals [lo, hi)
        self.hi = int(math.floor(phase.stop))
        self.edges = []                                  # (sample id, weight) of partly covered intervals
        if self.lo > self.hi:                            # inside one interval
            self.edges = [(int(math.floor(phase.start)), phase.stop - phase.start)]
            self.lo = self.hi = int(math.floor(phase.start))
        else:
            if phase.start < self.lo:
                self.edges.append((self.lo - 1, self.lo - phase.start))
            if phase.stop > self.hi:
                self.edges.append((self.hi, phase.stop - self.hi))
        self.first = min([self.lo] + [e[0] for e in self.edges])
        self.last = max([self.hi] + [e[0] + 1 for e in self.edges])
        self.stats = {n: SeriesStats(interval_s) for n in names}
        n1 = max(1, int(round(1.0 / interval_s)))
        self.windows = [WindowMax(n1), WindowMax(10 * n1), WindowMax(window_100ms(n1, interval_s))]
        self.peak = -math.inf
        self.peak_at = -1
        self.inst_max = -math.inf
        self.has_peak = has_peak
        # the device's peak of an interval covers windows reaching 100 us back: when that reaches
        # before the phase, the first interval's peak belongs to the phase before
        self.peak_from = self.lo + 1 if (self.lo - phase.start) * interval_s < PEAK_WINDOW_S else self.lo
        self.summary: dict | None = None

    def finish(self) -> None:
        """Reduce to figures and drop the buffers (kept values, histograms, window tails)."""
        if self.summary is None:
            self.summary = {n: s.to_dict() for n, s in self.stats.items()}
            self.stats = {}


def analyse(source, events: list[Event] | None = None, metadata: dict | None = None,
            chunk: int = 1 << 20, min_idle_s: float = 1.0) -> Analysis:
    """All figures of a capture. ``source``: a CaptureReader or an ArraySource.

    Stages: place the events on the samples (clock), derive the phases, one streaming pass that gives
    every phase its figures, then the figures built from phase results (validity, checks, commands,
    efficiency, steady state, write amplification) and the capture summary."""
    events = list(events or [])
    metadata = metadata or {}
    warnings: list[str] = []
    dt = source.interval_s
    rails = list(source.rails)
    length = source.length
    if length == 0:
        raise NothingToAnalyse("the capture holds no intervals: nothing to analyse")
    drive = metadata.get("drive") or {}
    states = _power_states(drive, metadata, warnings)
    if not events:
        warnings.append("the capture has no events: only whole-capture figures; no phases, commands or verdicts per workload")
    events_placed, to_sid = _place_events(source, events, warnings)
    phases, waf_rows = _phases(events_placed, to_sid, length, dt, min_idle_s, drive)
    results = _phase_pass(source, phases, rails, dt, chunk)
    _mark_invalid(results, events_placed, to_sid, source, metadata)
    whole = clipped_why(results[0].clipped, length, metadata)
    if whole:
        warnings.append("range saturated: " + whole)
    checked = C.checked_phases(results, dt)
    chks = C.run_checks(results, states, dt, sampling_of(metadata), checked)
    cmds = _commands(source, events_placed, to_sid, states, length) if to_sid else []
    # each run once: a fio job's phase under the sweep's phase over it is not a second row or round
    eff = [e for e in (phase_efficiency(r) for r in checked if r.kind == WORKLOAD) if e]
    ss = _steady(_rounds(results, dt))
    _attach_waf_power(results, waf_rows)
    info = _capture_info(results[0], rails, dt, length, states, source, warnings)
    return Analysis(info, [r for r in results if r.kind != WAF_INTERVAL], chks, cmds, eff, curves(eff), ss,
                    waf_rows, warnings)


def _power_states(drive: dict, metadata: dict, warnings: list[str]) -> dict:
    """The drive's power state descriptors from id-ctrl (limits MP, IDLP, ACTP), or {} with a warning."""
    states = power_states(drive.get("id_ctrl") or metadata.get("id_ctrl"))
    if not states:
        warnings.append("no id-ctrl power state descriptors in the capture: limits (MP, IDLP, ACTP) unknown")
    return states


def _place_events(source, events: list[Event], warnings: list[str]):
    """(events that can be placed, utc -> sample id) or ([], None) when the source has no clock.

    Only "no clock" is caught (CaptureError from a capture, ValueError from an ArraySource): any other
    error is a bug and propagates."""
    try:
        to_sid = _placer(source.sample_id, events)
    except (CaptureError, ValueError) as e:
        logger.info("events of %s cannot be placed: %s", getattr(source, "path", "the source"), e)
        warnings.append(f"events cannot be placed ({e}); phases other than the whole capture are left out")
        return [], None
    return events, to_sid


def _placer(to_sid, events: list[Event]):
    """``to_sid`` for one scalar time, the events' own from one call over all of them (the phases, the
    commands and the write-amplification rows ask for each several times: 2,400 calls of ~10 us for a
    10-hour capture, most of it numpy's per-call cost), the same values; any other time through
    ``to_sid``. Raises as ``to_sid`` does when the source has no clock."""
    times = sorted({t for e in events for t in (e.t_start, e.t_end) if t is not None})
    placed = dict(zip(times, np.asarray(to_sid(np.array(times, np.float64)), np.float64).tolist())) if times else {}

    def place(utc):
        got = placed.get(utc)
        return got if got is not None else to_sid(utc)
    return place


def _phases(events_placed, to_sid, length: int, dt: float, min_idle_s: float, drive: dict):
    """The phases from the events, plus one per write-amplification interval (so their power comes
    from the same pass); returns (phases, waf rows)."""
    init_ps = drive.get("power_state")
    phases = phases_from_events(events_placed, to_sid or (lambda t: 0.0), length, dt, min_idle_s,
                                int(init_ps) if isinstance(init_ps, int) else None)
    waf_rows = waf_series(waf_samples(events_placed)) if to_sid else []
    for k, w in enumerate(waf_rows):
        a, b = float(to_sid(w["t0"])), float(to_sid(w["t1"]))
        a, b = max(0.0, a), min(float(length), b)
        if b > a:
            phases.append(Phase(f"waf {k + 1}", WAF_INTERVAL, a, b, None, {"waf_row": k}))
    return phases, waf_rows


def _phase_pass(source, phases: list[Phase], rails: list[str], dt: float, chunk: int) -> list[PhaseResult]:
    """One streaming pass over the signals; a PhaseResult per phase, in the phases' order."""
    has_peak = all(source.has(f"p_peak_{r}") for r in rails)
    names = [f"p_{r}" for r in rails]
    peaks = [f"p_peak_{r}" for r in rails] if has_peak else []
    inst = [f"p_max_{r}" for r in rails if source.has(f"p_max_{r}")]
    read = names + ["p_total"] + peaks + inst
    accs = sorted((_PhaseAcc(p, names + ["p_total"], dt, has_peak) for p in phases), key=lambda a: a.first)
    _stream(source, read, accs, chunk, names + ["p_total"], peaks, inst)
    results = [_result(a, rails, dt) for a in accs]
    order = {id(p): k for k, p in enumerate(phases)}
    results.sort(key=lambda r: order[id(r.phase)])
    return results


def _mark_invalid(results: list[PhaseResult], events_placed, to_sid, source, metadata: dict) -> None:
    """A phase during which the drive throttled, or whose readings a channel's range clipped, is
    invalid; an idle window inherits its idle phase's."""
    readings = smart_readings(events_placed)
    if readings and to_sid:
        for r in results:
            r.invalid = throttled_between(readings, float(source.utc(r.phase.start)), float(source.utc(r.phase.stop)))
            r.throttled = r.invalid is not None
    for r in results:
        r.clipped = phase_clipped(source, r.phase.start, r.phase.stop)
        n = int(math.ceil(r.phase.stop) - math.floor(r.phase.start))
        why = clipped_why(r.clipped, n, metadata)
        if why:
            r.invalid = f"{r.invalid}; {why}" if r.invalid else why
    by_name = {r.name: r for r in results}
    for r in results:
        if r.phase.parent and r.phase.parent in by_name and by_name[r.phase.parent].invalid:
            r.invalid = by_name[r.phase.parent].invalid
            r.throttled = by_name[r.phase.parent].throttled


def _attach_waf_power(results: list[PhaseResult], waf_rows: list[dict]) -> None:
    """Each write-amplification row gets its interval's mean power and time span."""
    for r in results:
        if r.kind == WAF_INTERVAL:
            w = waf_rows[r.phase.meta["waf_row"]]
            w["mean_w"] = r.mean_w
            w["start_s"], w["end_s"] = r.start_s, r.stop_s


def _capture_info(whole: PhaseResult, rails, dt, length, states, source, warnings: list[str]) -> dict:
    """The capture summary (from the whole-capture phase) and the warning for intervals lost in gaps."""
    lost = whole.rails["total"]["lost_intervals"]
    if lost:
        warnings.append(f"{lost} intervals ({lost * dt:.3f} s) of the capture were lost in gaps; "
                        "figures over them are partial")
    has_peak = all(source.has(f"p_peak_{r}") for r in rails)
    return {"rails": rails, "interval_s": dt, "length": length, "duration_s": length * dt,
            "lost_s": lost * dt, "states": {k: vars(v) for k, v in states.items()},
            "peak_source": "device 100 us windows" if has_peak else "none (1 ms means only)"}


def _prefetched(it, depth: int = 1, spare=None):
    """Iterate ``it`` on a second thread, ``depth`` items ahead (reading overlaps computing).
    ``spare(item)``: work on an item that its consumer would otherwise do itself, done on the second
    thread when it is ahead (the queue full: it would only wait), so the split between the two threads
    follows whichever is the longer on this host at this minute."""
    q: queue.Queue = queue.Queue(depth)
    stop = threading.Event()
    end = object()

    def hand_over(entry) -> bool:
        """Put ``entry`` unless the consumer stopped (it takes nothing more: a plain put would wait for
        ever on a full queue, and so would the consumer's join). False when it stopped."""
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.1)
            except queue.Full:
                continue                    # (the consumer still busy: look at the stop flag again)
            return True
        return False

    def run():
        try:
            for item in it:
                if spare is not None and q.full():
                    spare(item)
                if not hand_over((item, None)):
                    return
            hand_over((end, None))
        except BaseException as e:          # handed to the consumer, raised there
            hand_over((end, e))

    t = threading.Thread(target=run, name="analysis-read", daemon=True)
    t.start()
    try:
        while True:
            item, err = q.get()
            if item is end:
                if err is not None:
                    raise err
                return
            yield item
    finally:
        stop.set()
        t.join()


_OWN_SINCE = [time.monotonic(), time.process_time()]   # where own_load's rate is counted from


def own_load() -> float:
    """This process's own share of the 1-minute load average: its CPU seconds per second since the
    reference (import, or the last call over a minute later; the load average forgets in about a
    minute). A caller that was busy just before (a benchmark, a sweep's report) is most of a loaded
    core itself, which is not a reason to run its analysis on one thread."""
    now, cpu = time.monotonic(), time.process_time()
    t0, c0 = _OWN_SINCE
    if now - t0 > 60.0:
        _OWN_SINCE[:] = [now, cpu]
    return max(0.0, (cpu - c0) / (now - t0)) if now - t0 > 1.0 else 0.0


def free_cores() -> float:
    """Cores this process may run on (its affinity) that the host's load leaves free, the caller's
    own included (the 1-minute load average counts running and waiting threads, this process's too:
    own_load is taken back out of it)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):       # not Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return float(cores)
    return max(0.0, cores - max(0.0, load - min(own_load(), float(cores))))


def helper_threads() -> int:
    """Threads beside the caller's worth starting (0 or 1, reading ahead): on a host whose load leaves
    less than a second core free, a second thread only queues for the cores and the GIL, and the pass
    ran slower than on one thread (issue 42: a 10-hour analysis at load 5 fell from 9.9x pandas to
    4.2x in wall time), so the pass then runs on the caller's thread alone.
    POWERRIG_ANALYSIS_THREADS=1 or 2 forces one way (benchmarks, tests)."""
    forced = os.environ.get("POWERRIG_ANALYSIS_THREADS", "").strip()
    if forced in ("1", "2"):
        return int(forced) - 1
    return 1 if free_cores() >= 1.5 else 0


def _stream(source, read, accs, chunk, series, peaks, inst) -> None:
    """One pass over the capture; every phase takes its figures from the pieces it covers. When a
    core is free, a second thread reads each chunk and makes what every phase takes from it alike
    (the cut at the phases' edges, the pieces' summaries, the window sums: compiled kernels that
    release the GIL), a chunk ahead of the phases' own work on the caller's thread. The pieces'
    maxima and the windows' block maxima are made by whichever thread gets to them first (the
    reading one only when it is ahead: _prefetched's spare work). A third thread for the percentiles
    and the binning, until 30 Nov, cost more CPU than it saved wall time once the binning was compiled."""
    if not accs:
        return
    start = min(a.first for a in accs)
    stop = max(a.last for a in accs)
    ahead = helper_threads()
    made = _Chunks(accs, series, start, PREFETCH + 2 if ahead else 1, peaks, inst)
    p = _Pass(accs, made.sums.windows)
    pool = ArrayPool()
    pieces = (made.make(c0, cols) for c0, cols in source.chunks(read, start, stop, chunk, pool))
    for c in _prefetched(pieces, PREFETCH, _Chunk.ready) if ahead else pieces:
        p.feed(c)
        c.segs = c.peaks = c.inst = None      # (these refer to the chunk's arrays too)
        pool.give_back(c.cols)     # what no phase kept is read into again: no fresh pages per chunk
    p.finish(made.sums.flush())


PREFETCH = 1     # chunks made ahead of the one the phases take: with the one being made, PREFETCH + 2 in flight


@dataclass(slots=True)
class _Chunk:
    """One chunk and what every phase takes from it alike: made on the reading thread, except what
    ``maxima`` and the window sums make at the first question (on either thread, see ``ready``)."""
    c0: int
    c1: int
    cols: dict
    bounds: np.ndarray                     # the pieces: the chunk cut at every phase edge in it
    at: dict                               # bound -> piece number
    spans: list                            # (phase, start, end, peak start) of each phase covering part of it
    segs: dict                             # series -> Segments (the pieces' summaries)
    cws: list                              # the window sums of each window length (ChunkWindows or None)
    next_starts: list[int]                 # the window sums' first start not yet returned, after this chunk
    peaks: list                            # the rails' 100 us peak series ([] when the capture has none)
    inst: list                             # the rails' instantaneous maximum series ([] when none)
    made_maxima: tuple | None = None       # maxima(), once made

    def maxima(self) -> tuple:
        """Per-piece maxima of the total 100 us peak and of the total instantaneous maximum, each the
        float64 sum of the rails': (piece peaks or None, the first interval holding each or None, piece
        instantaneous maxima or None). Made once: by the phases' thread at its first question, or
        ahead by the reading thread when it would otherwise wait (ready)."""
        if self.made_maxima is None:
            seg_peak = peak_at = seg_inst = None
            if self.peaks:
                seg_peak, peak_at = piece_max_of_sum(self.peaks, self.bounds)
            if self.inst:
                seg_inst = piece_max_of_sum(self.inst, self.bounds)[0]
            self.made_maxima = (seg_peak, peak_at, seg_inst)
        return self.made_maxima

    def ready(self) -> None:
        """What the phases' thread would make at its first questions (the pieces' maxima, the window
        sums' block maxima), made now by a reading thread that is ahead: the two threads' split then
        follows whichever is the longer on this host (docs/scale.md, "An eleventh look")."""
        self.maxima()
        for cw in self.cws:
            if cw is not None:
                cw.ready()


def _admit(pending: list[_PhaseAcc], active: list[_PhaseAcc], c1: int) -> None:
    """Move the phases that begin before the end of this chunk (``pending``, by first sample) to ``active``."""
    while pending and pending[0].first < c1:
        active.append(pending.pop(0))


class _Chunks:
    """Makes each chunk's _Chunk, in chunk order: the phases are admitted when the chunks reach them
    and dropped once past, and the window sums run over the whole signal (their work arrays in a ring
    as long as the chunks in flight, so the phases read a chunk's sums while the next are made)."""

    def __init__(self, accs: list[_PhaseAcc], series: list[str], start: int, ring: int, peaks: list[str],
                 inst: list[str]):
        self.series, self.peaks, self.inst = series, peaks, inst
        self.sums = WindowSums([w.window for w in accs[0].windows], position=start, exact=True, ring=ring)
        self.pending = list(accs)          # sorted by first sample
        self.open: list[_PhaseAcc] = []

    def make(self, c0: int, cols: dict) -> _Chunk:
        n = len(next(iter(cols.values())))
        c1 = c0 + n
        _admit(self.pending, self.open, c1)
        bounds, at, spans = self._cut(c0, c1, n)
        self.open = [a for a in self.open if a.hi > c1]
        segs = {name: Segments(cols[name], bounds) for name in self.series}
        cws = self.sums.feed(cols["p_total"])
        return _Chunk(c0, c1, cols, bounds, at, spans, segs, cws, self.sums.next_starts,
                      [cols[n] for n in self.peaks], [cols[n] for n in self.inst])

    def _cut(self, c0: int, c1: int, n: int):
        """Cut the chunk at every edge of every phase in it: (piece bounds, bound -> piece number,
        (phase, start, end, peak start) per phase covering part of the chunk), chunk-relative."""
        cuts = {0, n}
        spans = []
        for a in self.open:
            s, e = max(a.lo, c0), min(a.hi, c1)
            if e > s:
                ps = max(s, a.peak_from)
                cuts.update((s - c0, e - c0))
                if ps < e:
                    cuts.add(ps - c0)
                spans.append((a, s - c0, e - c0, ps - c0))
        bounds = np.array(sorted(cuts), dtype=np.intp)
        at = {int(v): k for k, v in enumerate(bounds)}
        return bounds, at, spans


class _Pass:
    """The phases' side of the pass, one chunk at a time: phases are admitted when the pass reaches
    them, the pieces feed the phases that cover them, and a phase is finished once the pass is past
    it and its sliding windows are complete."""

    def __init__(self, accs: list[_PhaseAcc], wins: list[int]):
        self.wins = wins
        self.pending = list(accs)
        self.active: list[_PhaseAcc] = []

    def feed(self, c: _Chunk) -> None:
        _admit(self.pending, self.active, c.c1)
        self._feed_edges(c.c0, c.c1, c.cols)
        at, segs = c.at, c.segs
        seg_peak, peak_at, seg_inst = c.maxima()
        for a, s, e, ps in c.spans:
            ia, ib = at[s], at[e]
            for name, st in a.stats.items():
                st.add(segs[name], ia, ib)
            if seg_peak is not None and ps < e:
                _take_peak(a, seg_peak[at[ps]:ib], at[ps], peak_at, c.c0)
            if seg_inst is not None:
                a.inst_max = max(a.inst_max, _highest(seg_inst[ia:ib]))
        self._take_windows(c.cws)
        for a in self._retire(c.c1, c.next_starts):
            a.finish()

    def finish(self, cws) -> None:
        """The windows held back to the end (WindowSums.flush), then every phase still open."""
        self._take_windows(cws)
        for a in self.active + self.pending:
            a.finish()
        self.active, self.pending = [], []

    def _feed_edges(self, c0: int, c1: int, cols: dict) -> None:
        """Partly covered intervals at a phase's ends count with their covered fraction."""
        for a in self.active:
            for sid, w in a.edges:
                if c0 <= sid < c1:
                    for name, st in a.stats.items():
                        st.feed_edge(float(cols[name][sid - c0]), w)

    def _windows_done(self, a: _PhaseAcc, next_starts: list[int]) -> bool:
        return all(a.hi - w < max(a.lo, nxt) for w, nxt in zip(self.wins, next_starts))

    def _take_windows(self, cws) -> None:
        """Every active phase's best window of each length starting in its range, in this chunk."""
        if not self.active:
            return
        lo = np.fromiter((a.lo for a in self.active), np.int64, len(self.active))
        hi = np.fromiter((a.hi for a in self.active), np.int64, len(self.active))
        for k, cw in enumerate(cws):
            if cw is not None:
                for a, best in zip(self.active, cw.best_many(lo, hi - cw.window + 1)):
                    a.windows[k].update(best)

    def _retire(self, c1: int, next_starts: list[int]) -> list[_PhaseAcc]:
        """Drop (and return, to be finished) the phases the pass is past and whose windows are complete."""
        still, done = [], []
        for a in self.active:
            (done if a.last <= c1 and self._windows_done(a, next_starts) else still).append(a)
        self.active = still
        return done


def _highest(part: np.ndarray) -> float:
    """The largest of the pieces' maxima, NaN (a piece wholly in a gap) passed over; -inf when all are
    NaN. One max where no piece is empty (it propagates NaN), nanmax only where one is."""
    m = float(part.max())
    if m == m:
        return m
    return float(np.nanmax(part)) if not np.isnan(part).all() else -math.inf


def _take_peak(a: _PhaseAcc, part: np.ndarray, first_piece: int, peak_at: np.ndarray, c0: int) -> None:
    """Raise a phase's 100 us peak to the highest in these pieces, placed at its first interval."""
    k = int(np.argmax(part))                     # NaN (a piece wholly in a gap) wins argmax: then nanargmax
    if part[k] != part[k]:
        if np.isnan(part).all():
            return
        k = int(np.nanargmax(part))
    if part[k] > a.peak:                         # the first piece holding the maximum, its first interval
        a.peak, a.peak_at = float(part[k]), c0 + int(peak_at[first_piece + k])


def _figure(w, dt) -> WindowFigure:
    if w.end < 0:
        return WindowFigure(windows=w.windows, skipped=w.skipped)
    return WindowFigure(w.value, w.start * dt, w.end * dt, w.windows, w.skipped)


def _result(a: _PhaseAcc, rails, dt) -> PhaseResult:
    p = a.phase
    a.finish()
    stats = {r: a.summary[f"p_{r}"] for r in rails}
    stats["total"] = a.summary["p_total"]
    lost = stats["total"]["lost_intervals"]
    w1, w10, w100ms = a.windows
    if a.peak_at >= 0:
        # the device's window ends in interval peak_at; its 100 us lie at the end of that interval at the latest
        peak = WindowFigure(a.peak, (a.peak_at + 1) * dt - 1e-4, (a.peak_at + 1) * dt, 1, 0)
    else:
        peak = WindowFigure()
    return PhaseResult(p, p.start * dt, p.stop * dt, (p.stop - p.start) * dt, stats, lost * dt,
                       _figure(w1, dt), _figure(w10, dt), peak, a.has_peak and len(rails) == 1,
                       a.inst_max if a.inst_max > -math.inf else math.nan, max_100ms=_figure(w100ms, dt))


@functools.lru_cache(maxsize=16)
def window_100ms(n1: int, interval_s: float) -> int:
    """Samples in the 100 ms window (the maximum average published descriptions of OCP's power requirement
    give beside PCM-1's 1 s and PCM-2's 100 us): the divisor of the 1 s window nearest 100 ms, so the
    window sums keep their block size."""
    want = min(n1, max(1, int(round(0.1 / interval_s))))
    for k in range(want):
        for d in (want - k, want + k):
            if 1 <= d <= n1 and n1 % d == 0:
                return d
    return 1


def _load_edges(events, to_sid) -> list[tuple[float, str]]:
    """Where the load changed other than by a command: each workload's start and end (a fio run, a
    workload phase) and a drive's removal or return, as (sample id, what), in time order."""
    out = []
    for e in events:
        workload = e.kind == FIO or (e.kind == PHASE and any(k in e.meta for k in ("rw", "bs", "iodepth"))
                                     and not e.meta.get("idle"))
        if workload:
            out.append((float(to_sid(e.t_start)), f"{e.name} starting"))
            if e.t_end is not None:
                out.append((float(to_sid(e.t_end)), f"{e.name} stopping"))
        elif e.kind == NOTE and (e.meta or {}).get("removal"):
            out.append((float(to_sid(e.t_start)), e.name))
    return sorted(out, key=lambda x: x[0])


def _commands(source, events, to_sid, states, length) -> list[CommandEnergy]:
    """Each command's energy in a window of its own (analysis/command_energy.py): the level before taken after
    the last load edge or power-state change before it, the window ended at the next load edge or
    command. A power-state change's
    window runs on through the quiet reads that follow it (the get-feature that confirms it): its
    settle is the transition measured against EXLAT + ENLAT; only a load edge or the next change ends it."""
    dt = source.interval_s
    pre = max(1, int(round(PRE_S / dt)))
    post = max(1, int(round(POST_S / dt)))
    out = []
    ps_now = None
    cmds = commands(events, to_sid, length)               # in time order of their starts
    edges = _load_edges(events, to_sid)
    edge_at = [x for x, _ in edges]
    is_tr = [e.kind == POWER_STATE or e.name.startswith("set-feature power") for e, _, _ in cmds]
    starts = [a for _, a, _ in cmds]
    tr_starts = [(a, k) for k, (_, a, _) in enumerate(cmds) if is_tr[k]]
    ends = sorted((b, k) for k, (_, _, b) in enumerate(cmds) if is_tr[k])    # transitions: their level is new
    end_at_ = [b for b, _ in ends]
    for k, (e, a, b) in enumerate(cmds):
        lat = math.nan
        if e.kind == POWER_STATE:
            new = power_state_of(e)
            lat = transition_latency_us(states, ps_now, new) * 1e-6
            ps_now = new
        # before: after the last load edge and the last power-state change (a quiet read before it
        # moves the level by noise only: it does not end the level before)
        prior = []
        i = bisect.bisect_right(edge_at, a) - 1
        if i >= 0:
            prior.append(edges[i])
        j = bisect.bisect_right(end_at_, a) - 1
        while j >= 0 and ends[j][1] == k:
            j -= 1
        if j >= 0:
            prior.append((ends[j][0], cmds[ends[j][1]][0].name))
        pre_from, before_by = max(prior, key=lambda x: x[0], default=(None, ""))
        # after: up to the next load edge or the next command (a transition: the next transition)
        nxt = []
        i = bisect.bisect_right(edge_at, a)
        if i < len(edges):
            nxt.append(edges[i])
        if is_tr[k]:         # the next change after this one ended (its twin, PS event and set-feature, is one)
            j = bisect.bisect_left(tr_starts, (b, -1))
            while j < len(tr_starts) and tr_starts[j][1] == k:
                j += 1
            if j < len(tr_starts):
                nxt.append((tr_starts[j][0], cmds[tr_starts[j][1]][0].name))
        else:
            j = bisect.bisect_right(starts, a)
            if j < len(cmds):
                nxt.append((starts[j], cmds[j][0].name))
        end_at, cut_by = min(nxt, key=lambda x: x[0], default=(None, ""))
        i = bisect.bisect_right(edge_at, a)
        inside = edges[i][1] if i < len(edges) and edges[i][0] < b else ""
        lo = max(0, int(math.floor(a)) - pre)
        hi = min(length, int(math.ceil(b)) + post)
        if end_at is not None and end_at >= hi:
            end_at = None                  # the next event lies past the 2 s window: nothing cut
        p = np.concatenate([c["p_total"] for _, c in source.chunks(["p_total"], lo, hi)]).astype(np.float64)
        out.append(command_energy(p, lo, a, b, dt, pre, lat, e.name, e.kind, e.argv, pre_from=pre_from,
                                  end_at=end_at, before_by=before_by, cut_by=cut_by, inside=inside))
    return out


def _rounds(results: list[PhaseResult], dt: float) -> list[PhaseResult]:
    """The workload runs as rounds: one phase per span (fio's job phase and the sweep's phase over the same
    run are one round), and no phase that holds several rounds (a sweep's phase over its steady rounds)."""
    slack = max(2 * dt, 0.05)
    work, out = [r for r in results if r.kind == WORKLOAD], []
    s, e, ids = C.spans(work)                   # each phase against all at once (numpy), not pair by pair
    taken = np.zeros(len(work), bool)           # the rounds kept so far
    for k, r in enumerate(work):
        same = (np.abs(s - r.start_s) <= slack) & (np.abs(e - r.stop_s) <= slack)
        if (same & taken).any():
            continue
        if ((ids != id(r)) & ~same & (s >= r.start_s - slack) & (e <= r.stop_s + slack)).any():
            continue                            # holds another round
        taken[k] = True
        out.append(r)
    return out


def _steady(results: list[PhaseResult]) -> list[dict]:
    """Steady state on bandwidth and on power for each repeated workload (same rw, bs, QD, state)."""
    groups = defaultdict(list)
    for r in results:
        if r.kind == WORKLOAD:
            m = r.phase.meta
            groups[(m.get("rw"), m.get("bs"), m.get("iodepth"), r.phase.power_state)].append(r)
    out = []
    for (rw, bs, qd, ps), rs in groups.items():
        if len(rs) < 2:
            continue
        bw = [r.phase.meta.get("bw_bytes") for r in rs]
        row = {"workload": f"{rw} bs={bs} qd={qd} ps={ps}", "rounds": len(rs),
               "power": steady_state([r.mean_w for r in rs])}
        if all(isinstance(x, (int, float)) for x in bw):
            row["bandwidth"] = steady_state(bw)
        out.append(row)
    return out
