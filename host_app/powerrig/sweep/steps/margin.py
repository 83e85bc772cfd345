"""[[margin]]: rail margining: the lab supply feeding the slot ([rig] supply) sets the rail to each voltage,
the interposer's reading must agree, then one of the plan's workloads runs; nominal is restored after every
point (the point itself: sweep/margin.py; docs/power-loss.md#margining).

    [[margin]]  name, rail ("12V" | "3V3"), volts, workload, settle_s, agree_pct, current_limit_a
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from powerrig.core.timeline import NOTE
from powerrig.dut import destructive
from powerrig.sweep import margin as points
from powerrig.sweep.margin import MARGIN_LIMITS
from powerrig.sweep.steps import values as V
from powerrig.sweep.steps.base import AFTER_STATES, ParseContext, StepKind, StepRun, register
from powerrig.sweep.steps.workload import run_workload, steady_rows, workload_params, workload_s


@dataclass(frozen=True)
class Margin:
    """Rail margining: the lab supply feeding the slot ([rig] supply) sets ``rail`` to each of ``volts``;
    after ``settle_s`` the interposer's reading must agree within ``agree_pct`` (else the supply does
    not feed the slot), then ``workload`` (a [[workload]] of the plan) runs; nominal is restored after
    every point (sweep/margin.py)."""
    name: str
    rail: str = "12V"
    volts: tuple = (10.8, 12.0, 13.2)
    workload: str = ""
    settle_s: float = 1.0
    agree_pct: float = 2.0
    current_limit_a: float = 10.0


@register
class MarginKind(StepKind):
    name = table = plan_field = "margin"
    spec = Margin
    order = 100
    parse_order = 250          # after the power-loss tables (a plan's errors come in the order they did)
    stage = AFTER_STATES

    def parse(self, path, d, ctx: ParseContext) -> Margin:
        """One [[margin]] table: every voltage within the rail's margin limits (MARGIN_LIMITS), the workload
        one of the plan's."""
        workloads = ctx.parsed["workload"]
        V.table(path, d)
        V.known(path, d, self.keys())
        df = Margin("")
        if "name" not in d:
            raise V.Bad(path + ("name",), "missing: a margin step needs a name")
        name = V.fio_section(path + ("name",), V.string(path + ("name",), d["name"]))
        rail = V.string(path + ("rail",), d.get("rail", df.rail))
        if rail not in MARGIN_LIMITS:
            raise V.Bad(path + ("rail",), f"{rail!r} cannot be margined: give {' or '.join(MARGIN_LIMITS)}")
        lo, hi = MARGIN_LIMITS[rail]
        vs = V.want(path + ("volts",), d.get("volts", list(df.volts) if rail == "12V" else [3.003, 3.3, 3.597]),
                    (list,), "an array of voltages")
        if not vs:
            raise V.Bad(path + ("volts",), "must name at least one voltage")
        volts = []
        for k, v in enumerate(vs):
            V.want(path + ("volts", k), v, (int, float), "a voltage")
            V.finite(path + ("volts", k), v)
            if not lo - 1e-9 <= v <= hi + 1e-9:
                raise V.Bad(path + ("volts", k), f"{v:g} V is outside {rail}'s margin range {lo:g}..{hi:g} V "
                                                 f"({'+-10 %' if rail == '12V' else '+-9 %, PCIe CEM 3.3 Vaux'}); "
                                                 "give a voltage within it")
            volts.append(float(v))
        V.no_repeats(path + ("volts",), volts, lambda x: f"{x:g} V", "list each voltage once")
        if "workload" not in d:
            raise V.Bad(path + ("workload",), "missing: the [[workload]] (by name) to run at each voltage")
        wl = V.string(path + ("workload",), d["workload"])
        if wl not in [w.name for w in workloads]:
            raise V.Bad(path + ("workload",), f"no [[workload]] named {wl!r} in the plan (it has: "
                                              f"{', '.join(w.name for w in workloads) or 'none'})")
        return Margin(name, rail, tuple(volts), wl, V.number(path + ("settle_s",), d.get("settle_s", df.settle_s)),
                      V.number(path + ("agree_pct",), d.get("agree_pct", df.agree_pct)),
                      V.number(path + ("current_limit_a",), d.get("current_limit_a", df.current_limit_a)))

    def check(self, margin, ctx: ParseContext) -> None:
        if margin and not ctx.rig.supply:
            raise V.Bad(("rig", "supply"), f"margin {margin[0].name!r} needs the programmable supply that feeds the "
                                           'slot: name it with [rig] supply = "VISA resource" (a virtual rig: '
                                           '"reference")')
        if margin and not ctx.drive.serial:
            raise V.Bad(("drive", "serial"), f"margin {margin[0].name!r} runs the drive outside its nominal voltage: "
                                             "name its serial number (nvme id-ctrl shows it)")

    def resolved(self, d: dict) -> None:
        if not d["margin"]:
            d.pop("margin")        # plans without margin steps keep the hash they had before it existed

    def key_name(self, plan, m, rep, volts=None):
        return (f"margin/{m.name}/{m.rail}-{volts:.3f}V/r{rep + 1}",
                f"margin {m.name} {m.rail} {volts:.3f} V" + (f" #{rep + 1}" if plan.timing.repetitions > 1 else ""))

    def steps(self, plan, ps, rep):
        out = []
        for m in plan.margin:
            w = next(x for x in plan.workloads if x.name == m.workload)
            out += [dict(zip(("key", "name"), self.key_name(plan, m, rep, v)), power_state=plan.power_states[0],
                         workload=w, margin=m, margin_v=v) for v in m.volts]
        return out

    def estimate_s(self, plan, step):
        return step.margin.settle_s + workload_s(plan, step.workload)

    def longest_s(self, plan, step):
        return step.margin.settle_s + workload_s(plan, step.workload, longest=True)

    def planned_s(self, plan, step):
        return workload_s(plan, step.workload)      # the ETA as before: without the supply's settle

    def fits(self, plan, fits, S, top_ps, top_rep):
        for k, m in enumerate(plan.margin):
            key, name = self.key_name(plan, m, top_rep, max(m.volts))
            fits(("margin", k, "name"), key, S.steps.c.key)
            fits(("margin", k, "name"), name, S.steps.c.name)
            fits(("margin", k, "name"), f"margin:{m.name}", S.measurements.c.phase)

    # -- the run: the interposer's reading of the margined rail from the recorder's blocks ----------------
    def start(self, run: StepRun) -> None:
        rail_v = run.state["rail_v"] = points.RailVolts(run.step.margin.rail)
        outer = run.on_block
        run.on_block = rail_v.feed if outer is None else (lambda b: (rail_v.feed(b), outer(b)))

    def after_settle(self, run: StepRun) -> None:
        """The guard's permit, the supply set and its voltage checked on the interposer; the run's stack
        brings the rail back to nominal when it closes."""
        step, sweep, spec = run.step, run.sweep, run.plan.rig
        m, rail_v = step.margin, run.state["rail_v"]
        destructive.margin_permit(run.nvme, sweep._rig.controller, run.plan.drive.serial)
        ev = run.tl.begin(NOTE, "margin", meta={"rail": m.rail, "volts_set": step.margin_v, "margin": m.name})
        point = run.stack.enter_context(points.MarginPoint(m, step.margin_v, points.supply_resource(spec, sweep._rig.info),
                                                           points.channel_of(spec, m.rail), rail_v, run.note))
        measured = point.apply()
        ev.meta["volts_measured"] = measured
        run.tl.end(ev)
        rail_v.reset()
        run.state["measured_v"], run.state["during_v"] = measured, None

    def act(self, run):
        run_workload(run)

    def after(self, run: StepRun) -> None:
        run.state["during_v"] = run.state["rail_v"].mean(0.0, 0.0)   # the rail over the idle window and workload

    def rows_first(self, run):
        return steady_rows(run)

    def rows(self, run):
        return points.measurements(run.step.margin, run.step.margin_v, run.state["measured_v"], run.state["during_v"])

    def params(self, run):
        return {**workload_params(run), "margin": {**asdict(run.step.margin), "volts_set": run.step.margin_v}}

    def measured_s(self, run):
        return run.sweep._measured_s

    def row_workload(self, step):
        return step.workload.name
