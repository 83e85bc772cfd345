"""fio runner: structured jobs -> job file -> fio (never a shell) -> every job parsed, with times.

A run writes its job file, JSON output and bandwidth/IOPS logs into one directory, so it can be
reproduced from what it wrote down. Times: each job's absolute start and end come from
``job_start`` (fio >= 3.36), else from the per-I/O latency logs of a plan with ``io_log`` (the first
I/O's submission and the last one's completion), else from the epoch-stamped bandwidth logs
(``log_unix_epoch=1``; a window's average, so edges within one ``log_avg_msec``), else from the
runner's own clock; ``time_source`` records which. A plan with ``block_trace`` on a drive host then
moves them to the kernel's first issue and last completion within them (blocktrace.py):
``time_source`` "block_trace", or the reason it could not on the job's ``block_trace``.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
import warnings
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
import os

import numpy as np

from powerrig.dut import blocktrace, commands, guard, destructive
from powerrig.dut._run import fail, run_tool
from powerrig.dut.commands import RW_MODES, WRITE_MODES, _truthy, job_writes  # noqa: F401 - fio's vocabulary, kept here too
from powerrig.core import owned
from powerrig.core.errors import PowerrigError, ToolError
from powerrig.core.timeline import FIO, PHASE, Timeline, Event
from powerrig.dut.presence import PresenceWatch

logger = logging.getLogger(__name__)

DIRECTIONS = ("read", "write", "trim")


@dataclass
class FioJob:
    """One job section (a stream). Sizes are fio strings or byte counts; None = fio's default."""
    name: str
    rw: str = "write"
    bs: str | int = "128k"
    iodepth: int = 1
    numjobs: int = 1
    size: str | int | None = None
    offset: str | int | None = None
    filename: str | None = None
    rwmixread: int | None = None
    rate: str | None = None            # e.g. "500m" or "500m,100m" (read,write)
    rate_iops: str | int | None = None
    runtime: float | None = None       # seconds
    time_based: bool = False
    ioengine: str | None = None
    direct: bool | None = None
    extra: dict = field(default_factory=dict)

    def options(self) -> dict:
        if self.rw not in RW_MODES:
            raise ToolError(f"fio job {self.name!r}: rw={self.rw!r} is not one of {', '.join(sorted(RW_MODES))}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise ToolError(f"fio job name {self.name!r}: use letters, digits, '_', '-' and '.' only")
        o = {"rw": self.rw, "bs": self.bs, "iodepth": self.iodepth, "numjobs": self.numjobs}
        for k in ("size", "offset", "filename", "rwmixread", "rate", "rate_iops", "ioengine"):
            v = getattr(self, k)
            if v is not None:
                o[k] = v
        if self.runtime is not None:
            # fio reads a bare number as whole seconds: "0.6" is 0, which with time_based runs for ever
            ms = round(float(self.runtime) * 1000)
            o["runtime"] = f"{ms // 1000}" if ms % 1000 == 0 else f"{ms}ms"
        if self.time_based:
            o["time_based"] = 1
        if self.direct is not None:
            o["direct"] = int(self.direct)
        o.update(self.extra)
        return o


@dataclass
class FioPlan:
    """Jobs run together (one fio process). ``global_options`` apply to all jobs."""
    jobs: list[FioJob]
    global_options: dict = field(default_factory=dict)
    group_reporting: bool = False
    output_format: str = "json"        # json or json+
    log_avg_msec: int = 500
    status_interval: float | None = None
    # per-I/O latency logs instead of windowed bandwidth logs: phase edges from the first I/O's
    # submission and the last one's completion (fio 3.33 has no job_start), at one log line per I/O
    io_log: bool = False
    # on a drive host: the kernel's block tracepoints refine each job's edges (blocktrace.py)
    block_trace: bool = False

    def job_file(self, log_prefix: str | None, permit=None) -> str:
        """The job file, built (and every key and value checked) by the door, commands.fio_job_file;
        a plan that writes needs the destructive door's Permit for every file it writes."""
        return commands.fio_job_file(self, log_prefix, permit)

    def groups(self) -> list[tuple[int, int]]:
        """(groupid, stage) of every job, as fio numbers them: ``stonewall`` (alias
        ``wait_for_previous``) and ``new_group`` start a new reporting group once the current one has
        a job; only ``stonewall`` also waits for the jobs before it (a new stage, run after them)."""
        out, gid, stage, seen = [], 0, 0, False
        for j in self.jobs:
            o = {**self.global_options, **j.options()}
            wall = _truthy(o.get("stonewall")) or _truthy(o.get("wait_for_previous"))
            if (wall or _truthy(o.get("new_group"))) and seen:
                gid += 1
                stage += 1 if wall else 0
            out.append((gid, stage))
            seen = True
        return out

    def clone_indices(self) -> list[list[int]]:
        """fio's job numbers (the log file index) of every plan job's clones: 1.. in plan order."""
        out, n = [], 0
        for j in self.jobs:
            out.append(list(range(n + 1, n + 1 + j.numjobs)))
            n += j.numjobs
        return out

    def job_filename(self, k: int) -> str | None:
        """The file plan job ``k`` does its I/O on (its own or the global ``filename``)."""
        f = {**self.global_options, **self.jobs[k].options()}.get("filename")
        return str(f) if f else None

    def writes(self) -> list["FioJob"]:
        """Jobs that write to their target: any rw with a write or trim part, or verify writes."""
        return [j for j in self.jobs if job_writes({**self.global_options, **j.options()})]


@dataclass
class DirectionResult:
    io_bytes: int
    bw_bytes: float
    iops: float
    runtime_ms: int
    total_ios: int
    clat_mean_ns: float | None
    clat_percentiles_ns: dict[float, int]


@dataclass
class JobResult:
    name: str
    groupid: int
    error: int
    job_runtime_ms: int
    start_utc: float
    end_utc: float
    time_source: str              # "job_start", "io_log", "log", "runner_clock"
    directions: dict[str, DirectionResult]
    index: int | None = None      # fio's job number (log file index); None with group_reporting
    members: tuple[str, ...] = ()  # with group_reporting: the plan jobs the group entry stands for
    block_trace: str | None = None  # a block_trace plan whose edges stayed fio's: why (one line)

    @property
    def bytes_total(self) -> int:
        return sum(d.io_bytes for d in self.directions.values())


@dataclass
class FioResult:
    fio_version: str
    jobs: list[JobResult]
    output_dir: str
    argv: list[str]
    t_call: float
    t_return: float
    status_reports: int = 0

    def job(self, name: str) -> list[JobResult]:
        return [j for j in self.jobs if j.name == name]


# -- parsing ------------------------------------------------------------------------------------
def split_json_documents(text: str) -> list[dict]:
    """fio's JSON output: one document, or several concatenated (--status-interval), maybe after
    notices on their own lines. A truncated or malformed document is a ToolError."""
    dec = json.JSONDecoder()
    docs, i = [], 0
    while True:
        j = text.find("{", i)
        if j < 0:
            break
        # only start at a line beginning: notices may contain braces
        if j > 0 and text[j - 1] not in "\n\r" and text[:j].strip():
            nl = text.find("\n", j)
            if nl < 0:
                break
            i = nl + 1
            continue
        try:
            obj, end = dec.raw_decode(text, j)
        except ValueError as e:
            raise ToolError(f"fio wrote malformed or truncated JSON ({e.msg} at char {e.pos}); "
                            "the run's result is discarded") from None
        docs.append(obj)
        i = end
    if not docs:
        raise ToolError(f"fio wrote no JSON result (got {text.strip()[:80]!r})")
    return docs


def _num(v, what) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    raise ToolError(f"fio JSON: {what} is {v!r}, not a number")


def _need(d: dict, key: str, where: str):
    if key not in d:
        raise ToolError(f"fio JSON: required field {key!r} missing in {where} (unsupported fio version?)")
    return d[key]


def parse_direction(d: dict, where: str) -> DirectionResult:
    clat = d.get("clat_ns") or {}
    pct = {float(k): int(v) for k, v in (clat.get("percentile") or {}).items()}
    return DirectionResult(io_bytes=int(_num(_need(d, "io_bytes", where), "io_bytes")),
                           bw_bytes=float(_num(_need(d, "bw_bytes", where), "bw_bytes")),
                           iops=float(_num(_need(d, "iops", where), "iops")),
                           runtime_ms=int(_num(_need(d, "runtime", where), "runtime")),
                           total_ios=int(d.get("total_ios", 0)),
                           clat_mean_ns=float(clat["mean"]) if "mean" in clat else None,
                           clat_percentiles_ns=pct)


def parse_fio_json(text: str) -> tuple[dict, list[dict], int]:
    """(final document, its jobs, number of interim status documents)."""
    docs = split_json_documents(text)
    final = docs[-1]
    jobs = _need(final, "jobs", "the fio report")
    if not isinstance(jobs, list):
        raise ToolError("fio JSON: 'jobs' is not a list")
    return final, jobs, len(docs) - 1


def read_log_span(path: Path) -> tuple[float, float] | None:
    """(first, last) epoch seconds of a log written with log_unix_epoch=1, or None if empty/missing."""
    try:
        first = last = None
        with open(path) as f:
            for line in f:
                cols = line.split(",")
                if len(cols) < 2:
                    continue
                t = int(cols[0])
                first = t if first is None else first
                last = t
    except (OSError, ValueError):
        return None
    if first is None or first < 10**11:   # not epoch milliseconds (log_unix_epoch missing)
        return None
    return first / 1000.0, last / 1000.0


STAMP_MID_S = 0.001    # fio stamps a log entry with its job's epoch and the time since, each cut to whole ms


def read_io_log_span(path: Path) -> tuple[float, float] | None:
    """(first submission, last completion) in epoch s of a per-I/O latency log (``log_avg_msec=0``,
    ``log_unix_epoch=1``: one line ``completion ms, latency ns, direction, bytes[, offset]`` per I/O,
    written when fio reaps it), or None if empty, missing or not epoch-stamped. A stamp is cut to
    whole ms twice (the epoch and the time since it), so the moment it stands for is the stamp
    plus ``STAMP_MID_S`` (+-1 ms); the first I/O submitted is the one whose completion less its
    latency comes first, not the first line (I/Os complete out of order). A line is stamped when fio
    writes it (stat.c ``add_log_sample``: ``mtime_since_now(&td->epoch)``), after the completion time of
    its reap batch that the latency runs to, so the start found may lie after the real submission by
    the time fio spent on that batch first: microseconds on a free core, milliseconds on a starved
    guest (5.7 ms seen in a TCG guest held to 20 % of a core). block_trace has no such lag."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # an empty file: numpy warns, we answer None
            a = np.loadtxt(path, delimiter=",", usecols=(0, 1), dtype=np.int64, ndmin=2)
    except (OSError, ValueError):
        return None
    if not len(a) or a[0, 0] < 10**11:                # nothing, or not epoch milliseconds
        return None
    done = a[:, 0] / 1000.0 + STAMP_MID_S
    return float(np.min(done - a[:, 1] / 1e9)), float(np.max(a[:, 0]) / 1000.0)


def job_times(job: dict, log_files: list[Path], log_avg_msec: int, t_call: float, t_return: float,
              report_utc: float | None = None, clones: int = 1, to_host=None,
              io_logs: list[Path] = ()) -> tuple[float, float, str]:
    """Absolute start and end of a job (or of a reporting group: ``log_files`` (bandwidth) and
    ``io_logs`` (per-I/O latency) are its own logs, ``clones`` how many jobs it sums), and which
    source said so. The end never falls after fio's report time (``timestamp_ms``) or the runner's
    return. ``to_host``: fio's clock (a drive host's) to this host's UTC; ``report_utc`` is on
    fio's clock too."""
    to_host = to_host or (lambda t: t)
    rt = clone_runtime_s(job, clones)
    limit = min(t_return, to_host(report_utc)) if report_utc else t_return
    if "job_start" in job and job["job_start"]:
        start = to_host(float(job["job_start"]) / 1000.0)
        return start, min(start + rt, limit), "job_start"
    spans = [s for s in (read_io_log_span(p) for p in io_logs) if s]
    if spans:
        start = max(to_host(min(s[0] for s in spans)), t_call)
        return start, max(min(to_host(max(s[1] for s in spans)), limit), start), "io_log"
    spans = [s for s in (read_log_span(p) for p in log_files) if s]
    if spans:
        first = to_host(min(s[0] for s in spans))
        last = to_host(max(s[1] for s in spans))
        start = max(first - log_avg_msec / 1000.0, t_call)   # a log entry is stamped at the end of its window
        return start, max(min(max(last, start + rt), limit), start), "log"
    return max(t_call, t_return - rt) if rt else t_call, t_return, "runner_clock"


def clone_runtime_s(job: dict, clones: int = 1) -> float:
    """How long one job (one clone) ran, in s. Under group_reporting fio sums ``job_runtime`` over
    the group's jobs but reports each direction's ``runtime`` as the longest: take that, else the
    sum divided by the number of jobs."""
    if clones > 1:
        rts = [float(job[d].get("runtime", 0)) for d in DIRECTIONS if isinstance(job.get(d), dict)]
        if any(rts):
            return max(rts) / 1000.0
        return float(job.get("job_runtime", 0)) / 1000.0 / clones
    return float(job.get("job_runtime", 0)) / 1000.0


def place_runner_clock(results: list["JobResult"], stages: list[int], t_call: float, t_return: float) -> None:
    """Without job_start or logs, jobs of later stonewall stages ran after earlier ones: lay the
    stages back to back, the last ending at the runner's return, each as long as its longest job."""
    order = sorted(set(stages))
    length = {s: max((r.end_utc - r.start_utc for r, st in zip(results, stages) if st == s), default=0.0)
              for s in order}
    end = t_return
    ends = {}
    for s in reversed(order):
        ends[s] = end
        end = max(t_call, end - length[s])
    for r, s in zip(results, stages):
        if r.time_source == "runner_clock":
            dur = r.end_utc - r.start_utc
            r.end_utc = ends[s]
            r.start_utc = max(t_call, ends[s] - dur)


def results_from_report(plan: "FioPlan", final: dict, jobs: list[dict], logs: Path, t_call: float,
                        t_return: float, to_host=None, block=None) -> list["JobResult"]:
    """Every reported entry as a JobResult with absolute times (on this host's clock: ``to_host``
    maps the drive host's). Without group_reporting fio prints one entry per job clone (its number
    is the log index); with it, one entry per reporting group, whose times come from its own jobs'
    logs only. ``block``: the run's traced block I/O (blocktrace.BlockEvents, on this host's clock),
    which moves each job's edges to its kernel's first issue and last completion within them."""
    groups = plan.groups()
    indices = plan.clone_indices()
    report_ms = final.get("timestamp_ms")
    report_utc = float(report_ms) / 1000.0 if isinstance(report_ms, (int, float)) and report_ms else None
    if plan.group_reporting:
        gids = sorted({g for g, _ in groups})
        if len(jobs) != len(gids):
            raise ToolError(f"fio reported {len(jobs)} groups, the plan has {len(gids)} "
                            "(group_reporting prints one per stonewall/new_group): the result is incomplete")
    else:
        expected = sum(j.numjobs for j in plan.jobs)
        if len(jobs) != expected:
            raise ToolError(f"fio reported {len(jobs)} jobs, the plan has {expected}: the result is incomplete")
    results, stages = [], []
    clone_owner = [k for k, idx in enumerate(indices) for _ in idx]
    for pos, jd in enumerate(jobs):
        jname = str(_need(jd, "jobname", "a job"))
        err = int(jd.get("error", 0))
        if err:
            raise ToolError(f"fio job {jname!r} ended with error {err} ({_errno_text(err)})")
        dirs = {d: parse_direction(jd[d], f"job {jname} {d}") for d in DIRECTIONS if d in jd}
        if plan.group_reporting:
            gid = int(jd.get("groupid", gids[pos]))
            members = [k for k, (g, _) in enumerate(groups) if g == gid]
            if not members:
                raise ToolError(f"fio reported group {gid}, which the plan does not have")
            nums = [i for k in members for i in indices[k]]
            stage, index, names = groups[members[0]][1], None, tuple(plan.jobs[k].name for k in members)
        else:
            k = clone_owner[pos]
            index, nums, stage, names = pos + 1, [pos + 1], groups[k][1], ()
        own = [(plan.jobs[k].name, i) for k, idx in enumerate(indices) for i in idx if i in nums]
        start, end, src = job_times(jd, [logs / f"{n}_bw.{i}.log" for n, i in own], plan.log_avg_msec, t_call,
                                    t_return, report_utc, len(nums), to_host,
                                    [logs / f"{n}_lat.{i}.log" for n, i in own])
        results.append(JobResult(jname, int(jd.get("groupid", 0)), err, int(jd.get("job_runtime", 0)),
                                 start, end, src, dirs, index, names))
        stages.append(stage)
    place_runner_clock(results, stages, t_call, t_return)
    if block is not None:
        devs = [sorted({block.devices[f] for k, j in enumerate(plan.jobs) if j.name in (r.members or (r.name,))
                        for f in [plan.job_filename(k)] if f in block.devices}) for r in results]
        windows = blocktrace.job_windows([(r.start_utc, r.end_utc, set(d)) for r, d in zip(results, devs)])
        for r, d, (lo, hi) in zip(results, devs, windows):
            edges = blocktrace.refine(r.start_utc, r.end_utc, d, block, lo, hi) if d else None
            if edges is None:
                r.block_trace = (f"block_trace: no I/O traced on {', '.join(d) or 'its device'} near the job's "
                                 f"span; fio's edges ({r.time_source}) stand")
            else:
                r.start_utc, r.end_utc, r.time_source = edges[0], edges[1], "block_trace"
    return results


def complete_documents(text: str) -> list[dict]:
    """The whole JSON documents in fio's output so far; one still being written is left for later."""
    try:
        return split_json_documents(text)
    except ToolError:
        cut = text.rfind("\n}\n")             # fio ends each document with a closing brace line
        if cut < 0:
            return []
        try:
            return split_json_documents(text[:cut + 3])
        except ToolError:
            return []


def status_totals(doc: dict) -> tuple[float, int, int]:
    """(fio's time stamp in s, I/O bytes, I/Os) over all jobs and directions of one status document."""
    jobs = doc.get("jobs") or []
    b = sum(int((j.get(d) or {}).get("io_bytes", 0)) for j in jobs for d in DIRECTIONS)
    n = sum(int((j.get(d) or {}).get("total_ios", 0)) for j in jobs for d in DIRECTIONS)
    t = doc.get("timestamp_ms")
    return (t / 1000 if t is not None else float(doc.get("timestamp", time.time()))), b, n


class StatusFollower:
    """Reads fio's periodic status documents (``--status-interval``) from its output file while it
    runs and reports the bandwidth and IOPS since the previous one: ``on_status({"mib_s", "iops",
    "t", "runtime_s"})`` (t: fio's time stamp, epoch s; runtime_s: the longest job's runtime so far,
    so ``t - runtime_s`` is when its I/O began), on its own thread. fio appends one whole document per
    interval; the first is rated over the jobs' runtime so far."""

    def __init__(self, path: Path, on_status, every_s: float = 0.25):
        self.path, self.on_status, self.every_s = Path(path), on_status, every_s
        self._stop = threading.Event()
        self._seen = 0
        self._last: tuple[float, int, int] | None = None
        self._thread = threading.Thread(target=self._run, name="fio-status", daemon=True)

    def __enter__(self) -> "StatusFollower":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - the live figure is a display; the run's result stands
                logger.exception("reading fio's status from %s", self.path)

    def poll(self) -> int:
        """Report the documents that appeared since the last poll; returns how many."""
        try:
            text = self.path.read_text(errors="replace")
        except FileNotFoundError:
            return 0
        docs = complete_documents(text)[self._seen:]
        for doc in docs:
            self._seen += 1
            t, b, n = status_totals(doc)
            runtime = max((int(j.get("job_runtime", 0)) for j in doc.get("jobs") or []), default=0) / 1000
            if self._last is None:
                dt, db, dn = runtime, b, n
            else:
                dt, db, dn = t - self._last[0], b - self._last[1], n - self._last[2]
            self._last = (t, b, n)
            if dt > 0:
                self.on_status({"mib_s": db / dt / 2**20, "iops": dn / dt, "t": t, "runtime_s": runtime})
        return len(docs)


class Fio:
    """fio on one host. ``program`` is the argv prefix: ["fio"] or the simulator's command."""

    def __init__(self, program: list[str] | None = None, timeline: Timeline | None = None,
                 timeout_margin: float | None = None, env: dict | None = None, nvme=None, remote=None):
        """``nvme``: the NvmeCli (with its HostView) the guard reads serials and the host through
        (``powerrig.dut.runners`` pairs them; without one a write to a drive is refused). ``remote``: an SshHost fio runs on (its
        job file goes there, its JSON output and logs come back into the run's directory)."""
        self.program = list(program or ["fio"])
        self.remote = remote
        self.timeline = timeline if timeline is not None else Timeline()
        # how long past its runtime fio may take before it counts as hung: start-up and wind-down on a
        # drive host include the transport's round trips (a loaded QEMU guest's take seconds each)
        self.timeout_margin = timeout_margin if timeout_margin is not None else (60.0 if remote is None else 300.0)
        self.env = env
        self.nvme = nvme

    @property
    def follows_status(self) -> bool:
        """Whether ``run`` follows fio's status documents while it runs (``on_status``): on this host,
        not on a drive host, whose output comes back only at the end."""
        return self.remote is None

    def _presence(self, plan: "FioPlan", permit=None):
        """A watcher on the controllers of the drives the plan uses, on a drive host (a local drive's
        removal shows in the host's own logs; the drive host's is seen there): the controllers the
        guard judged a written file to be reached through (the permit's), and for a file only read
        the ones the guard resolves it to there; never a controller guessed from a file's name."""
        if self.remote is None:
            return None
        host = self._host_view()
        ctrls = self._watched(plan, host, permit)
        return PresenceWatch(self.remote, ctrls, host.sys_root) if ctrls else None

    def _host_view(self):
        """Where the guard reads the drive host (its sysfs root among it)."""
        return self.nvme.host if self.nvme is not None and self.nvme.host is not None else \
            guard.host_view(None, self.remote)

    def _watched(self, plan: "FioPlan", host, permit=None) -> tuple[str, ...]:
        ctrls = set(permit.controllers) if permit is not None else set()
        files = {str({**plan.global_options, **j.options()}.get("filename", "")) for j in plan.jobs}
        with guard.decision(host):
            for f in sorted(files - (set(permit.targets) if permit is not None else set())):
                if not f or not guard.is_drive(f, host):
                    continue
                try:
                    ctrls |= set(guard.resolve(f, host).controllers)
                except guard.GuardRefused:
                    continue                # not a drive of the guard's kind: nothing to watch
        return tuple(sorted(ctrls))

    def version(self) -> str:
        done = run_tool(commands.fio_version_argv(self.program), self.timeline, FIO, "fio --version", "fio", 30, self.env,
                        remote=self.remote)
        v = done.stdout.strip()
        if not re.match(r"fio-\d+\.\d+", v):
            raise fail(self.timeline, done.event, f"cannot tell the fio version from {v[:40]!r} (is this fio?)")
        self.timeline.end(done.event, ok=True, version=v)
        return v

    def run(self, plan: FioPlan, out_dir: str | Path, name: str = "fio", serial: str | None = None,
            allow_unguarded: bool = False, on_status=None) -> FioResult:
        """Run the plan; a FIO event for the process and a PHASE event per job (absolute times).

        A plan that writes needs the destructive door's permit (``destructive.fio_write``): a drive it
        writes needs that drive's ``serial``; only
        ``allow_unguarded=True`` skips the check, with a logged WARNING. Any failure (fio missing, non-zero exit, a job with an error, malformed output, fewer jobs
        than planned) raises ToolError with the FIO event marked failed; no partial result is returned.
        ``on_status(dict)``: live MiB/s and IOPS while fio runs, from its periodic status documents
        (a plan with ``status_interval``; see StatusFollower), on another thread.
        """
        commands.fio_sections(plan)             # a malformed plan fails before anything is checked or run
        permit = None
        if commands.fio_write_targets(plan):    # writes: only through the guarded door, which checks the drive
            permit = destructive.fio_write(self, plan, serial, allow_unguarded)
        out = owned.owned_dir(out_dir, top=True)        # fio's own files there: never through a link
        logs = owned.owned_dir(out / "logs")
        job_file = out / f"{name}.fio"
        output = out / f"{name}.json"
        if output.is_symlink() or output.exists():      # fio writes it anew (a link's target never)
            output.unlink()
        rdir = self.remote.mkdtemp() if self.remote is not None else None
        trace, block_note = None, None
        try:
            # on a drive host fio writes into a directory there, fetched back into ``out`` afterwards
            where = Path(rdir) if rdir else out
            job_text = plan.job_file(str(where / "logs"), permit)
            owned.write_owned(job_file, job_text)
            if rdir:
                self.remote.run(commands.helper_argv("mkdir", "-p", str(where / "logs")))
                self.remote.put_text(job_text, str(where / job_file.name))
            argv = commands.fio_argv(self.program, str(where / job_file.name), str(where / output.name),
                                     plan.output_format, plan.status_interval)
            longest = max((j.runtime or 0) for j in plan.jobs)
            timeout = longest + self.timeout_margin if longest else 3600.0
            follow = on_status is not None and plan.status_interval and self.follows_status
            if on_status is not None and not follow:
                logger.info("no live fio status for %s: %s", name, "fio runs on a drive host" if rdir
                            else "the plan has no status_interval")
            if plan.block_trace and rdir:
                trace = blocktrace.BlockTrace(self.remote, rdir, [plan.job_filename(k) for k in range(len(plan.jobs))]).start()
            elif plan.block_trace:
                block_note = "block_trace: only on a drive host (ssh:// or agent://); fio's edges stand"
            if rdir:
                self.remote.sample_clock()   # the drive host's clock, measured around the run its logs stamp
            t_call = time.time()
            watch = self._presence(plan, permit)
            with StatusFollower(output, on_status) if follow else nullcontext(), watch or nullcontext():
                done = run_tool(argv, self.timeline, FIO, name, "fio", timeout, self.env, check=False,
                                meta={"job_file": str(job_file), "output": str(output),
                                      **({"opened": dict(permit.opens)} if permit is not None and permit.opens else {})},
                                remote=self.remote)
            t_return = time.time()
            if trace is not None:
                trace.stop()
            if rdir:
                self.remote.sample_clock()
            if watch is not None:
                for e in watch.events():
                    self.timeline.add(e)
            if rdir:
                try:
                    fetched = self.remote.fetch_dir(rdir, out)
                except PowerrigError as e:
                    raise fail(self.timeline, done.event, f"fio's output could not be fetched: {e}") from None
                done.event.meta["fetched"] = sorted(fetched)
        finally:
            if trace is not None:
                trace.stop()                 # (once) a failed run leaves no tracing behind on the drive host
            if rdir:
                self.remote.remove(rdir)
        ev = done.event
        text = output.read_text() if output.exists() else ""
        if done.returncode != 0 and watch is not None and watch.removed:
            gone = [t for t, present in watch.changes if not present]
            back = [t for t, present in watch.changes if present]
            ev.meta["interrupted"] = "removal"
            raise fail(self.timeline, ev, f"fio interrupted by removal: {watch.controller} went away "
                                          f"{gone[0] - t_call:.2f} s into the run"
                                          + (f" and came back {back[-1] - gone[0]:.2f} s later" if back else "")
                                          + " (writes in flight then were never acknowledged: not lost data; "
                                          f"job file {job_file})")
        if done.returncode != 0:
            first = next((ln.strip() for ln in done.stderr.splitlines() if ln.strip()), "") or "no message"
            raise fail(self.timeline, ev, f"fio failed (exit {done.returncode}): {first}; "
                                          f"job file {job_file}, output {output}")
        block = None
        if trace is not None:
            block_note = trace.reason
            if trace.started:
                block, block_note = blocktrace.load(out / blocktrace.OUT_NAME, trace.devices, self.remote.to_host)
        try:
            final, jobs, interim = parse_fio_json(text or done.stdout)
            results = results_from_report(plan, final, jobs, logs, t_call, t_return,
                                          self.remote.to_host if self.remote is not None else None, block)
            for j in results:
                j.block_trace = j.block_trace or (block_note if block is None else None)
        except ToolError as e:
            raise fail(self.timeline, ev, str(e)) from None
        result = FioResult(str(final.get("fio version", "")), results, str(out), argv, t_call, t_return, interim)
        if block_note:
            ev.meta["block_trace"] = block_note
        self.timeline.end(ev, ok=True, fio_version=result.fio_version,
                          jobs=[{"name": j.name, "start_utc": j.start_utc, "end_utc": j.end_utc,
                                 "time_source": j.time_source, "bytes": j.bytes_total} for j in results])
        specs = {job.name: job for job in plan.jobs}
        for j in results:
            self.timeline.add(_phase(j, specs.get(j.name)))
        return result


def _phase(j: JobResult, spec: "FioJob | None"):
    """A PHASE event for one job: what was asked (rw, bs, iodepth, numjobs) and what it did, so
    efficiency (MiB/s per W, IOPS per W, J per GiB) can be computed from the capture alone."""
    meta = {"time_source": j.time_source, "job_index": j.index, "groupid": j.groupid, "members": list(j.members),
            "bw_bytes": sum(d.bw_bytes for d in j.directions.values()),
            "iops": sum(d.iops for d in j.directions.values()),
            "io_bytes": sum(d.io_bytes for d in j.directions.values())}
    if j.block_trace:
        meta["block_trace"] = j.block_trace
    if spec is not None:
        meta.update({"rw": spec.rw, "bs": parse_size(spec.bs), "iodepth": spec.iodepth, "numjobs": spec.numjobs})
    return Event(PHASE, f"fio:{j.name}", j.start_utc, j.end_utc, ok=True,
                 result={d: asdict(v) for d, v in j.directions.items()}, meta=meta)


def parse_size(s: str, whole: int | None = None) -> int:
    """fio sizes: 4k, 128K, 1m, 2g, plain bytes, or N% of ``whole`` (kb_base=1024)."""
    s = str(s).strip()
    if s.endswith("%"):
        if whole is None:
            raise ValueError(f"percentage {s} not allowed here")
        return int(whole * float(s[:-1]) / 100)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)", s, re.I)
    if not m:
        raise ValueError(f"bad size {s!r}")
    mult = 1024 ** "kmgtp".find(m.group(2).lower()) * 1024 if m.group(2) else 1
    return int(float(m.group(1)) * mult)



def _errno_text(err: int) -> str:
    try:
        return os.strerror(err)
    except ValueError:
        return "unknown error"
