"""[[dwell]]: a power state held for ``hold_s`` with no I/O, measured as a whole and in ``windows`` equal
parts: whether the state's power is steady or creeps (a drive warming up, background work starting after
minutes idle) shows as the drift from the first window's mean to the last's. The idle step's few seconds
cannot show it.

    [[dwell]]  name, hold_s (default 60), windows (default 4), power_states (default: the plan's)

In every listed power state and repetition, after that state's workloads: key ``dwell/NAME/psN/rR``,
its phase ``dwell:NAME`` (the step's power.mean, energy and peaks are over it) and the measurement
``dwell.drift_pct`` (last window's mean - first's, in % of the first; each window's watts in its notes).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from powerrig.core.bounds import Bound
from powerrig.core.names import TOTAL_POWER
from powerrig.core.timeline import PHASE
from powerrig.sweep import measure
from powerrig.sweep.steps import values as V
from powerrig.sweep.steps.base import IN_EACH_STATE, ParseContext, StepKind, StepRun, register

PREFIX = "dwell:"           # its phase: PREFIX + its name


@dataclass(frozen=True)
class Dwell:
    name: str
    hold_s: float = 60.0
    windows: int = 4
    power_states: tuple = ()       # (): every power state of the plan


@register
class DwellKind(StepKind):
    name = table = "dwell"
    spec = Dwell
    order = 30                     # after the state's idle step and workloads
    stage = IN_EACH_STATE
    bounds = {"hold_s": Bound(1.0, 7 * 86_400.0, "s"), "windows": Bound(2, 1000, "", True),
              "power_states": Bound(0, 31, "", True)}

    def parse(self, path, d, ctx: ParseContext) -> Dwell:
        V.table(path, d)
        V.known(path, d, self.keys())
        df = Dwell("")
        name = V.step_name(path, d, "dwell")
        pss = V.plan_power_states(path, d, ctx.d.get("power_states", [0]))
        return Dwell(name, V.number(path + ("hold_s",), d.get("hold_s", df.hold_s)),
                     V.integer(path + ("windows",), d.get("windows", df.windows)), pss)

    def key_name(self, plan, dw, rep, ps=None):
        return self.state_key_name(plan, dw, rep, ps)

    def steps(self, plan, ps, rep):
        return [dict(zip(("key", "name"), self.key_name(plan, dw, rep, ps)), power_state=ps, workload=None, spec=dw)
                for dw in self.specs(plan) if not dw.power_states or ps in dw.power_states]

    def estimate_s(self, plan, step):
        return step.spec.hold_s

    def durations(self, plan):
        return [(("dwell", k, "hold_s"), dw.hold_s) for k, dw in enumerate(self.specs(plan))]

    def fits(self, plan, fits, S, top_ps, top_rep):
        for k, dw in enumerate(self.specs(plan)):
            key, name = self.key_name(plan, dw, top_rep, top_ps)
            fits(("dwell", k, "name"), dw.name, S.steps.c.workload)
            fits(("dwell", k, "name"), key, S.steps.c.key)
            fits(("dwell", k, "name"), name, S.steps.c.name)
            fits(("dwell", k, "name"), f"{PREFIX}{dw.name}", S.phases.c.name, S.measurements.c.phase)

    def act(self, run: StepRun) -> None:
        """Hold the state: a PHASE over the hold, the link checked each second (a lost link redoes the step)."""
        dw = run.step.spec
        ev = run.tl.begin(PHASE, f"{PREFIX}{dw.name}", meta={"power_state": run.step.power_state, "dwell": True})
        end = time.monotonic() + dw.hold_s
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            run.sweep._check_link(run.rec)
        run.tl.end(ev)
        run.measure_name = ev.name
        run.state["span"] = (ev.t_start, ev.t_end)

    def rows(self, run: StepRun) -> list[dict]:
        """The hold's recorded samples of total power in ``windows`` equal parts (a gap's left out): each
        part's mean, and the drift from the first to the last."""
        dw, cap = run.step.spec, run.cap
        t0, t1 = run.state["span"]
        a = max(0, math.floor(float(cap.sample_id(t0))))
        b = min(int(cap.length), math.ceil(float(cap.sample_id(t1))))
        x = np.concatenate([np.empty(0)] + [c[TOTAL_POWER] for _, c in cap.chunks([TOTAL_POWER], a, b)]) \
            if b > a else np.empty(0)
        parts = np.array_split(x.astype(np.float64), dw.windows)
        watts = [float(np.nanmean(p)) if np.isfinite(p).any() else None for p in parts]
        first, last = watts[0], watts[-1]
        drift = 100.0 * (last - first) / first if first and last is not None else None
        return [measure.row("dwell.drift_pct", f"{PREFIX}{dw.name}", drift, "%",
                            notes=json.dumps({"window_s": len(x) * cap.interval_s / dw.windows, "window_w": watts}))]

    def params(self, run):
        return {"dwell": asdict(run.step.spec)}

    def measured_s(self, run):
        return run.step.spec.hold_s

    def row_workload(self, step):
        return step.spec.name
