"""idle_steps: in every power state, a step with no workload: the state's idle power over the idle
window ([timing] idle_s) after its settle.

    idle_steps = true | false     (default true)
"""
from __future__ import annotations

from powerrig.sweep.steps import values as V
from powerrig.sweep.steps.base import IN_EACH_STATE, ParseContext, StepKind, register


@register
class IdleKind(StepKind):
    name = "idle"
    table = plan_field = "idle_steps"      # a switch, not a table: its "spec" is true or false
    order = 10
    parse_order = 300                      # read after the tables (a plan's errors come in the order they did)
    stage = IN_EACH_STATE

    def keys(self) -> set:
        return set()

    def parse_all(self, ctx: ParseContext) -> bool:
        return V.boolean(("idle_steps",), ctx.d.get("idle_steps", True))

    def steps(self, plan, ps, rep):
        if not plan.idle_steps:
            return []
        return [{"key": f"ps{ps}/idle/r{rep + 1}",
                 "name": f"PS{ps} idle" + (f" #{rep + 1}" if plan.timing.repetitions > 1 else ""),
                 "power_state": ps, "workload": None}]
