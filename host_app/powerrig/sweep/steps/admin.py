"""[[admin]]: a flush, a firmware commit, a controller reset, a format and a sanitize issued in a step of
their own, ``gap_s`` of quiet after each, so each one's energy above the level before
(``command.energy_above_j``: analysis/admin_energy.py, stored by the engine from sweep/command_trace.py)
has a clean window from its traced start until the rails settle back (issue 37).

    [[admin]]  name, commands, gap_s (default 0.5), power_states (default: the plan's),
               ses (format, default 0), sanact (sanitize, default 2), fw_slot (default 1), fw_action (default 2)

Per repetition after every state's steps and the margins (a format or sanitize erases what a later
workload would read): key ``admin/NAME/psN/rR``, its phase ``admin:NAME`` over the commands. Every
command but the flush erases or changes the drive, so each goes through the guarded door
(dut/destructive.py) with the plan's ``[drive] serial``: a plan that lists one without it is refused
when read.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from powerrig.core.bounds import Bound
from powerrig.core.timeline import PHASE
from powerrig.dut import destructive
from powerrig.sweep.steps import values as V
from powerrig.sweep.steps.base import AFTER_STATES, ParseContext, StepKind, StepRun, register

PREFIX = "admin:"           # its phase: PREFIX + its name
COMMANDS = ("flush", "fw-commit", "reset", "format", "sanitize")   # the names command_trace.ENERGY_COMMANDS prices
GUARDED = ("fw-commit", "reset", "format", "sanitize")              # they change or erase the drive


@dataclass(frozen=True)
class Admin:
    name: str
    commands: tuple = ("flush",)
    gap_s: float = 0.5             # quiet after each command: its rails settle back before the next
    power_states: tuple = ()       # (): every power state of the plan
    ses: int = 0                   # Format NVM's secure erase setting (0 none, 1 user data, 2 crypto)
    sanact: int = 2                # Sanitize action (1 exit failure mode, 2 block, 3 overwrite, 4 crypto)
    fw_slot: int = 1
    fw_action: int = 2             # Firmware Commit CA 010b: the slot's image, activated at the next reset


def _issue(cmd: str, nvme, controller: str, namespace: str, serial: str, a: Admin) -> None:
    """One command: the flush straight (it changes nothing a read sees), the others through the guard."""
    if cmd == "flush":
        nvme.flush(namespace)
    elif cmd == "format":
        destructive.format(nvme, namespace, serial, ses=a.ses, controller=controller)
    elif cmd == "sanitize":
        destructive.sanitize(nvme, controller, serial, action=a.sanact)
    elif cmd == "fw-commit":
        destructive.firmware_commit(nvme, controller, serial, slot=a.fw_slot, action=a.fw_action)
    else:
        destructive.reset(nvme, controller, serial)


@register
class AdminKind(StepKind):
    name = table = "admin"
    spec = Admin
    order = 150                    # after the margins (their workloads read what a format would erase)
    stage = AFTER_STATES
    bounds = {"gap_s": Bound(0.1, 3600.0, "s"), "power_states": Bound(0, 31, "", True),
              "ses": Bound(0, 2, "", True), "sanact": Bound(1, 4, "", True), "fw_slot": Bound(0, 7, "", True),
              "fw_action": Bound(0, 7, "", True)}

    def parse(self, path, d, ctx: ParseContext) -> Admin:
        V.table(path, d)
        V.known(path, d, self.keys())
        df = Admin("")
        name = V.step_name(path, d, "admin")
        cmds = V.want(path + ("commands",), d.get("commands", list(df.commands)), (list,), "an array of command names")
        if not cmds:
            raise V.Bad(path + ("commands",), f"must name at least one command ({', '.join(COMMANDS)})")
        for k, c in enumerate(cmds):
            if V.string(path + ("commands", k), c) not in COMMANDS:
                raise V.Bad(path + ("commands", k), f"{c!r} is not one of {', '.join(COMMANDS)}")
        V.no_repeats(path + ("commands",), list(cmds), str, "list each command once (timing.repetitions repeats steps)")
        pss = V.plan_power_states(path, d, ctx.d.get("power_states", [0]))
        return Admin(name, tuple(cmds), V.number(path + ("gap_s",), d.get("gap_s", df.gap_s)), pss,
                     *(V.integer(path + (k,), d.get(k, getattr(df, k))) for k in ("ses", "sanact", "fw_slot", "fw_action")))

    def check(self, these, ctx: ParseContext) -> None:
        """The guard's confirmation is the drive's serial: each guarded command is checked against it."""
        for a in these:
            guarded = [c for c in a.commands if c in GUARDED]
            if guarded and not ctx.drive.serial:
                raise V.Bad(("drive", "serial"), f"admin {a.name!r} issues {', '.join(guarded)}, which change or erase "
                                                 "the drive: name its serial number (nvme id-ctrl shows it)")

    def key_name(self, plan, a, rep, ps=None):
        return self.state_key_name(plan, a, rep, ps)

    def steps(self, plan, ps, rep):
        return [dict(zip(("key", "name"), self.key_name(plan, a, rep, p)), power_state=p, workload=None, spec=a)
                for a in self.specs(plan) for p in (a.power_states or plan.power_states)]

    def estimate_s(self, plan, step):
        return len(step.spec.commands) * step.spec.gap_s      # beyond the commands' own time, unknown before

    def durations(self, plan):
        return [(("admin", k, "gap_s"), a.gap_s) for k, a in enumerate(self.specs(plan))]

    def fits(self, plan, fits, S, top_ps, top_rep):
        for k, a in enumerate(self.specs(plan)):
            key, name = self.key_name(plan, a, top_rep, max(a.power_states or plan.power_states))
            fits(("admin", k, "name"), a.name, S.steps.c.workload)
            fits(("admin", k, "name"), key, S.steps.c.key)
            fits(("admin", k, "name"), name, S.steps.c.name)
            fits(("admin", k, "name"), f"{PREFIX}{a.name}", S.phases.c.name, S.measurements.c.phase)

    def act(self, run: StepRun) -> None:
        """The commands in the plan's order, each followed by ``gap_s`` of quiet, under one PHASE."""
        a, rig = run.step.spec, run.sweep._rig
        ev = run.tl.begin(PHASE, f"{PREFIX}{a.name}", meta={"power_state": run.step.power_state, "admin": True})
        for cmd in a.commands:
            _issue(cmd, run.nvme, rig.controller, rig.namespaces[0], run.plan.drive.serial, a)
            time.sleep(a.gap_s)
            run.sweep._check_link(run.rec)
        run.tl.end(ev)
        run.measure_name = ev.name
        run.state["span_s"] = ev.t_end - ev.t_start

    def params(self, run):
        return {"admin": asdict(run.step.spec)}

    def measured_s(self, run):
        return run.state.get("span_s", 0.0)

    def row_workload(self, step):
        return step.spec.name
