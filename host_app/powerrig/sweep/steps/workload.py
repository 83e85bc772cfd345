"""[[workload]]: a fio workload measured in every power state (streams, ranges, FDP placement, SNIA PTS
steady-state rounds, write-amplification sampling, a Power Limit run after it).

    [[workload]] name, rw, bs, iodepth, numjobs, rwmixread, ranges, runtime_s | size, streams,
                 steady_state, waf_every_s, fdp
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from powerrig.core.errors import ToolError
from powerrig.core.timeline import FIO
from powerrig.sweep import measure
from powerrig.sweep.steps import values as V
from powerrig.sweep.steps.base import IN_EACH_STATE, ParseContext, StepKind, StepRun, register

KEEP_BW_ROUNDS = 64         # the steady-state row keeps the last rounds' bandwidths


@dataclass(frozen=True)
class WorkloadStream:
    """One fio job of a workload (several streams run together in one fio process)."""
    rw: str
    bs: int
    iodepth: int
    rwmixread: int | None = None
    range_pct: tuple | None = field(default=None, metadata={"toml": "range"})   # (from %, to %) of the namespace
    namespace: str | None = None       # another namespace (FDP: one per placement handle)
    rate_iops: int | None = None
    fdp: bool = False                  # writes carry the namespace's FDP placement handle (fio fdp=1)


STREAM = {f.metadata.get("toml", f.name) for f in WorkloadStream.__dataclass_fields__.values()}


@dataclass(frozen=True)
class Workload:
    name: str
    rw: str = "read"
    bs: int = 131072
    iodepth: int = 128
    numjobs: int = 1
    rwmixread: int | None = None
    runtime_s: float | None = None     # None: the plan's measure_s (unless size is given)
    size: str | None = None
    streams: tuple = ()                # explicit streams; else one per range, else one
    steady_state: bool = False
    waf_every_s: float | None = None   # sample write-amplification counters this often
    fdp: bool = False                  # every stream's writes carry FDP placement handles

    def all_streams(self) -> tuple[WorkloadStream, ...]:
        if self.streams:
            return self.streams
        return (WorkloadStream(self.rw, self.bs, self.iodepth, self.rwmixread, fdp=self.fdp),)


def writes(w: Workload) -> bool:
    return any(not s.rw.endswith("read") for s in w.all_streams())


def parse_workload(path, d, default_name=None) -> Workload:
    """One [[workload]] table (or [preparation.job]), every value in range."""
    V.table(path, d)
    V.known(path, d, WORKLOAD)
    name = V.string(path + ("name",), d["name"]) if "name" in d else default_name
    if not name:
        raise V.Bad(path + ("name",), "a workload needs a name")
    V.fio_section(path + ("name",), name)
    rw = V.rw_mode(path + ("rw",), d.get("rw", "read"))
    bs_v = d.get("bs", "128k")
    bs_list = None
    if isinstance(bs_v, list):
        bs_list = [V.block_size(path + ("bs", k), b) for k, b in enumerate(bs_v)]
        bs = bs_list[0] if bs_list else 131072
    else:
        bs = V.block_size(path + ("bs",), bs_v)
    qd = V.integer(path + ("iodepth",), d.get("iodepth", 128))
    nj = V.integer(path + ("numjobs",), d.get("numjobs", 1))
    mix = V.integer(path + ("rwmixread",), d["rwmixread"]) if "rwmixread" in d else None
    rt = V.number(path + ("runtime_s",), d["runtime_s"]) if "runtime_s" in d else None
    size = V.size(path + ("size",), d["size"]) if "size" in d else None
    if rt is not None and size is not None:
        raise V.Bad(path + ("size",), "give runtime_s or size, not both")
    fdp = V.boolean(path + ("fdp",), d.get("fdp", False))
    streams = []
    if "ranges" in d:
        rs = V.want(path + ("ranges",), d["ranges"], (list,), "an array of [from %, to %]")
        if bs_list is not None and len(bs_list) != len(rs):
            raise V.Bad(path + ("bs",), f"{len(bs_list)} block sizes for {len(rs)} ranges (give one each, or one)")
        for k, r in enumerate(rs):
            streams.append(WorkloadStream(rw, bs_list[k] if bs_list else bs, qd, mix, V.pct_range(path + ("ranges", k), r),
                                  fdp=fdp))
    elif bs_list is not None:
        raise V.Bad(path + ("bs",), "a list of block sizes needs ranges (one stream per range)")
    if "streams" in d:
        if streams:
            raise V.Bad(path + ("streams",), "give ranges or streams, not both")
        ss = V.want(path + ("streams",), d["streams"], (list,), "an array of tables")
        for k, s in enumerate(ss):
            p = path + ("streams", k)
            V.table(p, s)
            V.known(p, s, STREAM)
            streams.append(WorkloadStream(V.rw_mode(p + ("rw",), s.get("rw", rw)), V.block_size(p + ("bs",), s.get("bs", bs)),
                                  V.integer(p + ("iodepth",), s.get("iodepth", qd)),
                                  V.integer(p + ("rwmixread",), s["rwmixread"]) if "rwmixread" in s else mix,
                                  V.pct_range(p + ("range",), s["range"]) if "range" in s else None,
                                  V.device(p + ("namespace",), s["namespace"]) if "namespace" in s else None,
                                  V.integer(p + ("rate_iops",), s["rate_iops"]) if "rate_iops" in s else None,
                                  V.boolean(p + ("fdp",), s.get("fdp", fdp))))
    if rw in ("rw", "readwrite", "randrw") and mix is None and not streams:
        mix = 50
    return Workload(name, rw, bs, qd, nj, mix, rt, size, tuple(streams),
                    V.boolean(path + ("steady_state",), d.get("steady_state", False)),
                    V.number(path + ("waf_every_s",), d["waf_every_s"]) if "waf_every_s" in d else None, fdp)


def removal(tl, e: ToolError) -> str | None:
    """Why the workload stopped when the drive went away under it (fio's runner marks its FIO event
    interrupted by removal and the presence watcher's "drive removed" / "drive back" are on the
    timeline), or None for any other failure, which stays one."""
    if not any((ev.meta or {}).get("interrupted") == "removal" for ev in tl.events(kind=FIO)):
        return None
    return f"interrupted: {e}"


def run_workload(run: StepRun) -> None:
    """The step's workload (the engine's Sweep._workload: steady-state rounds, WAF sampling), the drive's
    own power over it (checks.self_reported_power) and a Power Limit run after it (checks.power_limit_w)."""
    sweep, plan, step, nvme = run.sweep, run.plan, run.step, run.nvme
    sr = sweep._self_report_start(nvme) if plan.checks.self_reported_power else None
    try:
        run.measure_name, run.bw_rounds, run.steady = sweep._workload(step, run.tl, nvme, run.fio, run.fio_dir, run.rec)
    except ToolError as e:            # the drive went away under fio: the step is interrupted,
        run.removal = removal(run.tl, e)     # stored with its times, and the run goes on
        if run.removal is None:
            raise
        run.note(f"{step.name}: {run.removal}; the step is stored as interrupted and the run goes on")
    if sr is not None and run.removal is None:
        sweep._self_report(nvme, run.tl, run.measure_name, sr)
    if plan.checks.power_limit_w and run.removal is None:
        sweep._power_limit(step, run.tl, nvme, run.fio, run.fio_dir)


LIMIT_LEAD_S = 2.0         # the Power Limit run: this long (at most a quarter of it) at its own power before the limit
LIMIT_STATUS_S = 1         # fio's status interval in that run: its first document says the I/O is flowing


def limit_lead_s(runtime_s: float | None) -> float:
    """How long the Power Limit run goes at the workload's own power before the limit is set."""
    return min(LIMIT_LEAD_S, 0.25 * runtime_s) if runtime_s else LIMIT_LEAD_S


def limit_run_s(runtime_s: float, follows_status: bool = True) -> float:
    """The Power Limit run's runtime: the workload's, longer by the lead and, where fio's status is
    followed (the lead then runs from its first status), that status interval."""
    return runtime_s + limit_lead_s(runtime_s) + (LIMIT_STATUS_S if follows_status else 0)


def workload_s(plan, w: Workload, longest: bool = False) -> float:
    """The workload's length in a step, with the Power Limit run after it (checks.power_limit_w): a
    steady-state workload at [steady_state] rounds (the fewest it runs: the ETA), or with ``longest``
    at max_rounds (the most, which `--check` shows beside the estimate)."""
    rt = plan.runtime_of(w) or plan.timing.measure_s
    own = rt * ((plan.steady.max_rounds if longest else plan.steady.rounds) if w.steady_state else 1)
    return own + (limit_run_s(rt) if plan.checks.power_limit_w else 0.0)


def steady_rows(run: StepRun) -> list[dict]:
    if run.steady is None:
        return []
    return [{"name": "steady_state.rounds", "phase": run.measure_name, "value": float(len(run.bw_rounds)),
             "units": "rounds", "outcome": "pass" if run.steady else "fail",
             "notes": json.dumps({"bandwidth_MiBps": [b / 2**20 for b in run.bw_rounds[-KEEP_BW_ROUNDS:]]})}]


def workload_params(run: StepRun) -> dict:
    w = run.step.workload
    return {"workload": asdict(w), "runtime_s": run.plan.runtime_of(w), "fio_dir": str(run.fio_dir)}


@register
class WorkloadKind(StepKind):
    name = table = "workload"
    plan_field = "workloads"
    spec = Workload
    extra_keys = ("ranges",)
    order = 20
    stage = IN_EACH_STATE

    def parse(self, path, d, ctx: ParseContext) -> Workload:
        return parse_workload(path, d)

    def check(self, specs, ctx: ParseContext) -> None:
        if not ctx.drive.serial:
            for w in specs:
                if writes(w):
                    raise V.Bad(("drive", "serial"), f"workload {w.name!r} writes to the drive: name its serial number "
                                                     "(nvme id-ctrl shows it) so the sweep cannot write to the wrong drive")

    def key_name(self, plan, w, rep, ps=None):
        return (f"ps{ps}/{w.name}/r{rep + 1}", f"PS{ps} {w.name}" + (f" #{rep + 1}" if plan.timing.repetitions > 1 else ""))

    def steps(self, plan, ps, rep):
        return [dict(zip(("key", "name"), self.key_name(plan, w, rep, ps)), power_state=ps, workload=w)
                for w in plan.workloads]

    def estimate_s(self, plan, step):
        return workload_s(plan, step.workload)

    def longest_s(self, plan, step):
        return workload_s(plan, step.workload, longest=True)

    def durations(self, plan):
        return [(("workload", k, "runtime_s"), w.runtime_s) for k, w in enumerate(plan.workloads) if w.runtime_s]

    def fits(self, plan, fits, S, top_ps, top_rep):
        for k, w in enumerate(plan.workloads):
            key, name = self.key_name(plan, w, top_rep, top_ps)
            fits(("workload", k, "name"), w.name, S.steps.c.workload)
            fits(("workload", k, "name"), key, S.steps.c.key)
            fits(("workload", k, "name"), name, S.steps.c.name)
            fits(("workload", k, "name"), f"{measure.SELF_REPORT}{measure.MEASURE}{w.name}", S.phases.c.name, S.measurements.c.phase)

    def act(self, run):
        run_workload(run)

    def rows_first(self, run):
        return steady_rows(run)

    def params(self, run):
        return workload_params(run)

    def measured_s(self, run):
        return run.sweep._measured_s

    def row_workload(self, step):
        return step.workload.name


WORKLOAD = WorkloadKind().keys()
