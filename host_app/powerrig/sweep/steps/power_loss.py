"""[[power_loss]]: surprise power loss during verified writes (the cycles run in sweep/power_loss.py;
docs/power-loss.md). [[perst_stress]] and [[hotplug]] take the same keys (steps/perst_stress.py,
steps/hotplug.py).

    [[power_loss]] name, cycles, bs, iodepth, size, cut_ms, off_ms, ready_timeout_s, holdup_threshold_v,
                   inrush_trigger_w, seed, fsync_every
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from powerrig.core.errors import PowerrigError
from powerrig.sweep import power_loss as cycles_of
from powerrig.sweep.steps import values as V
from powerrig.sweep.steps.base import LAST, ParseContext, StepKind, StepRun, register


@dataclass(frozen=True)
class PowerLoss:
    """Surprise power loss during writes: each cycle writes fio verify headers (a new seed), cuts 12 V
    ``cut_ms`` after the writes are seen flowing (a [from, to] range: a random point in it), restores
    it ``off_ms`` later (a number or a range, as cut_ms), waits for the controller and classifies every
    block fio's verify finds wrong. ``kind`` "perst": PERST# asserted instead of the cut (a reset
    under load; power stays, so nothing acknowledged may be lost either); "hotplug": a surprise
    removal and an insertion with the CEM timing (sweep/power_loss.py)."""
    name: str
    cycles: int = 10
    bs: int = 131072
    iodepth: int = 8
    size: str = "100%"                 # the region the writes run through, from the namespace's start
    cut_ms: tuple = (0.0, 500.0)       # (from, to); equal: a chosen point
    off_ms: tuple = (10.0, 10.0)
    ready_timeout_s: float = 30.0
    holdup_threshold_v: float = 9.0    # hold-up: from the cut until the drive side falls through this
    inrush_trigger_w: float = 40.0     # the raw burst around each restore triggers on 12 V above this
    seed: int = 29                     # with the step's key and the cycle: each cycle's randseed and random points
    kind: str = field(default="cut", metadata={"toml": None})   # "cut" ([[power_loss]]), "perst", "hotplug"
    fsync_every: int | None = None     # a flush (fio fsync=N) after every N writes; unset: none, the hash as before

    @property
    def prefix(self) -> str:
        """Its steps' key prefix and its measurements' phase prefix."""
        return {"perst": "perst-stress", "hotplug": "hot-plug"}.get(self.kind, "power-loss")


def power_loss_cycle_s(pl: PowerLoss) -> float:
    """Rough length of one cycle: fio's start and first status (1 s), the cut, the off time, the
    controller's enumeration and two verify passes (a few fio starts)."""
    return 2.5 + pl.cut_ms[1] / 1000 + pl.off_ms[1] / 1000 + 0.5


@register
class PowerLossKind(StepKind):
    """The cut and, by subclassing (pulse, default off_ms), PERST# stress and hot-plug."""
    name = table = "power_loss"
    spec = PowerLoss
    plan_field = "power_loss"          # the three share Plan.power_loss (its hash as before)
    pulse = "cut"
    default_off_ms = (10.0, 10.0)
    order = 200
    stage = LAST

    def parse(self, path, d, ctx: ParseContext) -> PowerLoss:
        """One table, every value in range (one-line errors naming the key)."""
        V.table(path, d)
        V.known(path, d, self.keys())
        df = PowerLoss("", off_ms=self.default_off_ms)
        if "name" not in d:
            raise V.Bad(path + ("name",), f"missing: a {path[0]} step needs a name")
        name = V.fio_section(path + ("name",), V.string(path + ("name",), d["name"]))
        lo, hi = V.ms_range(path + ("cut_ms",), d.get("cut_ms", list(df.cut_ms)))
        off = V.ms_range(path + ("off_ms",), d.get("off_ms", list(df.off_ms)))
        return PowerLoss(name, V.integer(path + ("cycles",), d.get("cycles", df.cycles)),
                         V.block_size(path + ("bs",), d.get("bs", df.bs)),
                         V.integer(path + ("iodepth",), d.get("iodepth", df.iodepth)),
                         V.size(path + ("size",), d.get("size", df.size)), (lo, hi), off,
                         V.number(path + ("ready_timeout_s",), d.get("ready_timeout_s", df.ready_timeout_s)),
                         V.number(path + ("holdup_threshold_v",), d.get("holdup_threshold_v", df.holdup_threshold_v)),
                         V.number(path + ("inrush_trigger_w",), d.get("inrush_trigger_w", df.inrush_trigger_w)),
                         V.integer(path + ("seed",), d.get("seed", df.seed)), self.pulse,
                         V.integer(path + ("fsync_every",), d["fsync_every"]) if "fsync_every" in d else None)

    def check(self, these, ctx: ParseContext) -> None:
        table = self.table
        if these and ctx.rig.source != "interposer":
            raise V.Bad(("rig", "source"), f"{ctx.rig.source!r} cannot switch the drive's power: a [[{table}]] step "
                                           'needs the interposer (source = "interposer")')
        if these and not ctx.drive.serial:
            raise V.Bad(("drive", "serial"), f"{table} {these[0].name!r} switches the drive's power and writes to it: "
                                             "name its serial number (nvme id-ctrl shows it)")

    def specs(self, plan) -> tuple:
        return tuple(x for x in plan.power_loss if x.kind == self.pulse)

    def resolved(self, d: dict) -> None:
        if "power_loss" in d and not d["power_loss"]:
            d.pop("power_loss")    # plans without power-loss steps keep the hash they had before it existed
        for pl in d.get("power_loss", []):
            if "fsync_every" in pl and pl["fsync_every"] is None:
                pl.pop("fsync_every")          # unset: plans keep the hash they had before the key

    def key_name(self, plan, pl, rep, *detail):
        return (f"{pl.prefix}/{pl.name}/r{rep + 1}",
                f"{pl.prefix.replace('-', ' ')} {pl.name}" + (f" #{rep + 1}" if plan.timing.repetitions > 1 else ""))

    def steps(self, plan, ps, rep):
        return [dict(zip(("key", "name"), self.key_name(plan, pl, rep)), power_state=plan.power_states[0],
                     workload=None, power_loss=pl) for pl in self.specs(plan)]

    def estimate_s(self, plan, step):
        return step.power_loss.cycles * power_loss_cycle_s(step.power_loss)

    def fits(self, plan, fits, S, top_ps, top_rep):
        for k, pl in enumerate(self.specs(plan)):
            key, name = self.key_name(plan, pl, top_rep)
            path = (self.table, k, "name")
            fits(path, pl.name, S.steps.c.workload)
            fits(path, key, S.steps.c.key)
            fits(path, name, S.steps.c.name)
            fits(path, f"{pl.prefix}:{pl.name}", S.measurements.c.phase)

    def after(self, run: StepRun) -> None:
        """The cycles (sweep/power_loss.py), on the namespace the steps' fio uses; a redone step (attempt > 1)
        draws fresh cycle seeds."""
        step, sweep = run.step, run.sweep
        if not hasattr(run.dev, "power_sequence"):
            raise PowerrigError(f"step {step.name}: the rails are measured by {run.plan.rig.source}, which cannot "
                                "switch the drive's power; a power_loss step needs the interposer")
        run.state["cycles"] = cycles_of.PowerLossStep(
            step.power_loss, step, run.dev, run.nvme, run.fio, sweep._rig.controller, sweep._rig.namespaces[0],
            run.plan.drive.serial, run.fio_dir, run.tl, run.note, attempt=run.attempt).run()

    def rows(self, run):
        pl = run.step.power_loss
        return cycles_of.measurements(run.state["cycles"], f"{pl.prefix}:{pl.name}")

    def params(self, run):
        return {"fio_dir": str(run.fio_dir), "power_loss": asdict(run.step.power_loss),
                "power_cycles": len(run.state["cycles"])}

    def row_workload(self, step):
        return step.power_loss.name
