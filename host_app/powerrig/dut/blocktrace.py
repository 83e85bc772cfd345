"""Phase edges from the drive host's kernel: block-layer tracepoints recorded while fio runs.

fio stamps an I/O in userspace: its submission before ``io_submit`` reaches the driver, its
completion when fio reaps it, after the controller completed it and the interrupt was taken. The
kernel's ``block:block_rq_issue`` (just before the driver rings the doorbell) and
``block:block_rq_complete`` (in the completion path) are nearer the device. A plan with
``block_trace`` records them on the drive host, in a tracefs instance of its own (filtered to the
plan's block devices), through the same transport as fio (ssh as root, or a QEMU guest's agent), and
moves each job's start to its first issue and its end to its last completion on its device, looked
for near its edges from fio's own logs (WINDOW_S; both on the drive host's clock) and never in the
span of another job on the same device (job_windows). The trace clock is tied to the drive host's
wall clock by trace markers that carry it (the intersection of their bounds, as agent.py's
``estimate``). When tracefs is missing or not permitted, the buffer overflowed or nothing was
traced near a job, fio's edges stand and the reason is one line on the FIO and PHASE events.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from powerrig.dut.commands import helper_argv

OUT_NAME = "blocktrace.txt"   # the trace text, in fio's run directory (fetched back with its logs)
MARKERS = 8                   # clock markers written at the start and at the stop
TOTAL_BUFFER_KB = 65536       # the instance's ring buffer over all CPUs (at least 1 MiB per CPU)
# how far from fio's own edges a job's first issue and last completion are looked for: fio stamps
# in userspace, up to tens of ms off on a loaded drive host (a QEMU guest on a busy machine)
WINDOW_S = 0.25

# Clock markers: the wall clock read (a shell variable where the shell has one: no fork between the
# read and the write) and written into the trace, whose stamp falls before the next read.
MARK = ('exec 4> "$I/trace_marker"; k=0; if [ -n "$EPOCHREALTIME" ]; then '
        'while [ $k -lt %MARKERS% ]; do echo "powerrig-clock $EPOCHREALTIME" >&4; k=$((k + 1)); done; '
        'echo "powerrig-clock-end $EPOCHREALTIME" >&4; else '
        'while [ $k -lt %MARKERS% ]; do echo "powerrig-clock $(date +%s.%N)" >&4; k=$((k + 1)); done; '
        'echo "powerrig-clock-end $(date +%s.%N)" >&4; fi; exec 4>&-').replace("%MARKERS%", str(MARKERS))
# One line each (the door refuses control characters, newlines included). Both write only inside
# the tracefs instance they make ($1): the drive host's own tracing is left alone.
START = (
    'T=/sys/kernel/tracing; [ -d $T/instances ] || mount -t tracefs nodev $T 2>/dev/null; '
    '[ -d $T/instances ] || T=/sys/kernel/debug/tracing; '
    '[ -d $T/instances ] || { echo "no tracefs on the drive host (mount -t tracefs nodev /sys/kernel/tracing as root)" >&2; exit 3; }; '
    '[ -d $T/events/block/block_rq_issue ] || { echo "the drive host kernel has no block tracepoints (CONFIG_EVENT_TRACING)" >&2; exit 3; }; '
    'I=$T/instances/$1; shift; '
    'mkdir "$I" 2>/dev/null || { echo "cannot make a tracefs instance in $T/instances (not root?)" >&2; exit 4; }; '
    'f=""; for p in "$@"; do n=$(basename "$(readlink -f "$p")"); s=/sys/class/block/$n; '
    '[ -e "$s/dev" ] || { echo "$p is not a block device" >&2; continue; }; '
    'd=$s; [ -e "$s/partition" ] && d=$(readlink -f "$s")/..; '
    'IFS=: read ma mi < "$d/dev"; echo "$p $ma,$mi"; '
    'f="${f:+$f || }dev == $(( (ma << 20) | mi ))"; done; '
    '[ -n "$f" ] || { rmdir "$I"; echo "none of the plan\'s files is a block device" >&2; exit 5; }; '
    'c=$(grep -c ^processor /proc/cpuinfo); kb=$(( %TOTAL% / (c > 0 ? c : 1) )); [ $kb -ge 1024 ] || kb=1024; '
    'ok=1; { echo mono > "$I/trace_clock" && echo $kb > "$I/buffer_size_kb"; } || ok=; '
    'for e in block_rq_issue block_rq_complete; do { echo "$f" > "$I/events/block/$e/filter" && '
    'echo 1 > "$I/events/block/$e/enable"; } || ok=; done; '
    '[ -n "$ok" ] || { for e in block_rq_issue block_rq_complete; do echo 0 > "$I/events/block/$e/enable"; done; '
    'rmdir "$I"; echo "cannot set up the block tracepoints in $I" >&2; exit 6; }; '
    + MARK).replace("%TOTAL%", str(TOTAL_BUFFER_KB))
STOP = (
    'T=/sys/kernel/tracing; [ -d $T/instances/$1 ] || T=/sys/kernel/debug/tracing; I=$T/instances/$1; '
    '[ -d "$I" ] || { echo "the trace instance $1 is gone" >&2; exit 3; }; '
    + MARK + '; echo 0 > "$I/tracing_on"; '
    'cat "$I/trace" > "$2"; r=$?; for e in block_rq_issue block_rq_complete; do echo 0 > "$I/events/block/$e/enable"; done; '
    'rmdir "$I" 2>/dev/null; exit $r'
)

_LINE = re.compile(r"\s(\d+\.\d+): (block_rq_issue|block_rq_complete|tracing_mark_write): (.*)$")
_WRITTEN = re.compile(r"entries-in-buffer/entries-written: (\d+)/(\d+)")


@dataclass
class BlockEvents:
    """A run's traced block I/O on the drive host's wall clock: per device ("259,0"), the issue and
    completion times (sorted), and the markers' bound on that clock (s, half width)."""
    issues: dict[str, np.ndarray] = field(default_factory=dict)
    completions: dict[str, np.ndarray] = field(default_factory=dict)
    bound_s: float = 0.0
    devices: dict[str, str] = field(default_factory=dict)     # the plan's file -> its disk "major,minor"


def clock_offset(markers: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(wall - trace clock, half width) from markers ``(trace stamp, wall clock read before it was
    written)``, in the order written: the wall clock read for the next one came after the write, so
    marker k bounds the offset to ``[wall_k - stamp_k, wall_k+1 - stamp_k]`` (the last is only an
    upper bound, written as "powerrig-clock-end"). The clocks tick together (mono and realtime),
    so the bounds of all markers hold at once: their intersection; None when they do not meet (the
    wall clock was stepped while fio ran)."""
    if len(markers) < 2:
        return None
    lo = max(w - s for (s, w), _ in zip(markers, markers[1:]))
    hi = min(nxt - s for (s, _), (_, nxt) in zip(markers, markers[1:]))
    if lo > hi:
        return None
    return (lo + hi) / 2, (hi - lo) / 2


def walk(text: str, line_re: re.Pattern) -> tuple[list[tuple[float, str, str]], list[list[tuple[float, float]]], str | None]:
    """The events of a tracefs instance's ``trace`` text that ``line_re`` matches (groups: stamp,
    event name, the rest) as (stamp, name, rest), the clock-marker runs (each closed by its
    "powerrig-clock-end" marker) and why the trace cannot be trusted (its buffer overflowed) or None.
    One walk for every tracer of ours (this module's block events, dut/nvmetrace.py's NVMe commands)."""
    out: list[tuple[float, str, str]] = []
    runs: list[list[tuple[float, float]]] = []
    cur: list[tuple[float, float]] = []
    why = None
    for line in text.splitlines():
        if line.startswith("#"):
            m = _WRITTEN.search(line)
            if m and int(m.group(1)) < int(m.group(2)):
                why = (f"the trace buffer overflowed ({int(m.group(2)) - int(m.group(1))} of "
                       f"{m.group(2)} events lost)")
            continue
        m = line_re.search(line)
        if not m:
            continue
        t, kind, rest = float(m.group(1)), m.group(2), m.group(3)
        if kind == "tracing_mark_write":
            w = rest.split()
            if len(w) == 2 and w[0] in ("powerrig-clock", "powerrig-clock-end"):
                cur.append((t, float(w[1])))
                if w[0] == "powerrig-clock-end":
                    runs.append(cur)
                    cur = []
            continue
        out.append((t, kind, rest))
    return out, runs, why


def parse(text: str) -> tuple[dict[str, list[float]], dict[str, list[float]], list[list[tuple[float, float]]], str | None]:
    """(issue stamps by device, completion stamps by device, marker runs, why the trace cannot be
    trusted or None) of a tracefs instance's ``trace`` text; stamps on the trace clock."""
    issues: dict[str, list[float]] = {}
    done: dict[str, list[float]] = {}
    events, runs, why = walk(text, _LINE)
    for t, kind, rest in events:
        rest = rest.split()
        if not rest or not re.fullmatch(r"\d+,\d+", rest[0]):
            continue
        if kind == "block_rq_complete" and rest[-1] != "[0]":
            continue                           # a failed request completed nothing
        (issues if kind == "block_rq_issue" else done).setdefault(rest[0], []).append(t)
    return issues, done, runs, why


def offset_of_runs(runs: list[list[tuple[float, float]]]) -> tuple[float, float] | None:
    """``clock_offset`` of each run of markers, intersected (the clocks tick together between the
    start and the stop); None without markers or when they disagree."""
    lo, hi = -np.inf, np.inf
    for r in runs:
        o = clock_offset(r)
        if o is None:
            return None
        lo, hi = max(lo, o[0] - o[1]), min(hi, o[0] + o[1])
    if not runs or lo > hi:
        return None
    return float((lo + hi) / 2), float((hi - lo) / 2)


def load(path: Path, devices: dict[str, str], to_wall=None) -> tuple[BlockEvents | None, str]:
    """The run's BlockEvents from its trace file (``to_wall`` maps the drive host's wall clock onto
    this host's), or None and why not (one line); else a one-line summary."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return None, f"block_trace: no trace came back from the drive host ({Path(path).name} missing)"
    issues, done, runs, why = parse(text)
    if why:
        return None, f"block_trace: {why}; fio's own edges stand"
    off = offset_of_runs(runs)
    if off is None:
        return None, "block_trace: the trace's clock markers are missing or disagree (the drive host's clock was stepped?)"
    offset, bound = off
    ref = runs[0][0][1]                        # a wall-clock time of this run: the mapping is an offset
    shift = offset + ((to_wall(ref) - ref) if to_wall else 0.0)
    ev = BlockEvents(bound_s=bound, devices=dict(devices))
    for src, dst in ((issues, ev.issues), (done, ev.completions)):
        for d, ts in src.items():
            dst[d] = np.sort(np.asarray(ts, dtype=float)) + shift
    n = sum(len(v) for v in ev.issues.values())
    return ev, (f"block_trace: {n} I/Os traced on {', '.join(sorted(set(devices.values()))) or 'no device'} "
                f"(trace clock to the drive host's within {bound * 1e3:.2f} ms)")


def refine(start: float, end: float, devices: list[str], ev: BlockEvents,
           lo: float | None = None, hi: float | None = None) -> tuple[float, float] | None:
    """A job's (start, end) from fio's own edges moved to the first issue and the last completion on
    its devices within WINDOW_S of them (fio's stamps are its own view: a loaded drive host reaps
    late and stamps from a cached clock, so they miss the kernel's by up to tens of ms either way),
    never before ``lo`` nor after ``hi`` (where the jobs before and after it on the same device
    are; jobs_windows). None when nothing was traced there."""
    a0 = max(start - WINDOW_S, lo if lo is not None else -np.inf)
    b0 = min(end + WINDOW_S, hi if hi is not None else np.inf)
    firsts, lasts = [], []
    for d in devices:
        i = ev.issues.get(d, np.empty(0))
        i = i[(i >= a0) & (i <= b0)]
        c = ev.completions.get(d, np.empty(0))
        c = c[(c >= a0) & (c <= b0)]
        if len(i) and len(c):
            firsts.append(i[0])
            lasts.append(c[-1])
    if not firsts:
        return None
    s, e = float(min(firsts)), float(max(lasts))
    return (s, e) if s <= e else None


def job_windows(spans: list[tuple[float, float, set]]) -> list[tuple[float | None, float | None]]:
    """For jobs ``(start, end, devices)`` of one run: how far each one's traced I/O may reach
    (``lo``, ``hi``): to the middle of the gap to the nearest job before and after it on a shared
    device (stonewalled jobs back to back); jobs that overlap in time share the device's I/O."""
    out = []
    for k, (s, e, devs) in enumerate(spans):
        lo = hi = None
        for j, (s2, e2, d2) in enumerate(spans):
            if j == k or not devs & d2:
                continue
            if e2 <= s:
                lo = max(lo if lo is not None else -np.inf, (e2 + s) / 2)
            elif s2 >= e:
                hi = min(hi if hi is not None else np.inf, (e + s2) / 2)
        out.append((lo, hi))
    return out


class BlockTrace:
    """``start`` before fio and ``stop`` after, on a drive host (``remote``), writing the trace into
    fio's run directory there; ``reason`` says why not when it could not."""

    def __init__(self, remote, run_dir: str, files: list[str]):
        self.remote, self.run_dir, self.files = remote, run_dir, [f for f in dict.fromkeys(files) if f]
        self.instance = "powerrig-" + Path(run_dir).name.replace(".", "-")
        self.devices: dict[str, str] = {}
        self.reason: str | None = None
        self.started = False
        self._stopped = False

    def start(self) -> "BlockTrace":
        if not self.files:
            self.reason = "block_trace: the plan names no device file"
            return self
        try:
            out = self.remote.run(helper_argv("sh", "-c", START, "sh", self.instance, *self.files), timeout=60)
        except Exception as e:  # noqa: BLE001 - tracing is a refinement: fio's edges stand without it
            self.reason = f"block_trace: not available on the drive host ({_last(e)})"
            return self
        for line in out.decode(errors="replace").splitlines():
            p, _, d = line.rpartition(" ")
            if p and re.fullmatch(r"\d+,\d+", d):
                self.devices[p] = d
        self.started = True
        return self

    def stop(self) -> None:
        """Write the closing markers, stop, save the trace into the run directory and remove the
        instance (once; again does nothing)."""
        if not self.started or self._stopped:
            return
        self._stopped = True
        try:
            self.remote.run(helper_argv("sh", "-c", STOP, "sh", self.instance, f"{self.run_dir}/{OUT_NAME}"), timeout=600)
        except Exception as e:  # noqa: BLE001
            self.reason = f"block_trace: the trace could not be read on the drive host ({_last(e)})"
            self.started = False


def _last(e: Exception) -> str:
    s = " ".join(str(e).split())
    return s[-200:]
