"""The step interface: what a kind of plan step is (labgrid's strategy + registry as the model).

A kind is a StepKind subclass in a module of its own in this folder, registered by ``@register``; the
package imports every module here, so a new kind is one new file (docs/architecture.md, "Adding a
step kind"). A kind says, in one place:

- its plan table and keys: ``table`` (``[[table]]``) and ``spec``, ONE dataclass whose fields are the
  keys (a field's ``metadata={"toml": ...}`` renames it in TOML, ``None`` keeps it out);
- its validation (``parse``: one table, one-line errors through ``values.Bad``; ``check``: across
  tables and against the rig and the drive) and its own keys' bounds (``bounds``);
- what it adds to the plan hash (``resolved``: a kind that is absent adds nothing, so every plan
  keeps the hash it had before the kind existed);
- the steps it makes (``steps``) and their planned length (``estimate_s``);
- how a step runs: hooks the engine calls at fixed points of every step (``start``, ``after_settle``,
  ``act``, ``after``), given a StepRun;
- what it measures (``rows_first``, ``rows``) and what the stored step and its report show
  (``params``, ``row_workload``).

Kinds never import the engine: the engine hands itself in as ``run.sweep``.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field, fields
from pathlib import Path

from powerrig.sweep.steps import values as V

# stages: the order in which a plan's steps run
IN_EACH_STATE = 0      # in every power state and repetition (idle, workloads, dwells)
AFTER_STATES = 1       # after them, per repetition (margins)
LAST = 2               # last: they cut the drive's power (power loss, PERST# stress, hot-plug)


@dataclass(frozen=True)
class Step:
    index: int
    key: str                       # stable id: the same plan gives the same keys (resume)
    name: str
    power_state: int
    workload: object | None        # a Workload; None: an idle step (or a power-loss step)
    repetition: int
    power_loss: object | None = None
    margin: object | None = None
    margin_v: float | None = None      # this step's supply voltage
    kind: str = ""                     # its StepKind's name (the registry's key)
    spec: object | None = None         # its table, for kinds without a field of their own above


@dataclass
class ParseContext:
    """What a kind's validation may look at: the plan's table as read, and what was parsed before it."""
    d: dict
    rig: object
    drive: object
    parsed: dict = field(default_factory=dict)       # kind name -> what its parse_all gave


@dataclass
class StepRun:
    """One attempt of one step, as the engine runs it; the kinds' run hooks read and fill it."""
    sweep: object                  # the engine's Sweep (its helpers: _workload, _self_report_start, _emit ...)
    step: Step
    plan: object
    tl: object
    nvme: object
    fio: object
    fio_dir: Path
    dev: object
    attempt: int
    rec: object = None
    on_block: object = None        # what the recorder feeds each block (a kind may wrap it in ``start``)
    stack: ExitStack = field(default_factory=ExitStack)   # closed however the step ends (a rail back at nominal)
    measure_name: str | None = None    # the phase measured as the step's workload (power.mean, efficiency ...)
    bw_rounds: list = field(default_factory=list)
    steady: bool | None = None
    removal: str | None = None     # why the workload stopped when the drive went away under it
    state: dict = field(default_factory=dict)       # a kind's own values between its hooks
    an: object = None              # after the capture: its analysis and the capture itself (rows)
    cap: object = None

    def note(self, text: str) -> None:
        self.sweep._emit("note", text=text)


class StepKind:
    name = ""                      # the registry's key (Step.kind)
    table = ""                     # the plan's top-level key it reads ([[table]], or a switch such as idle_steps)
    spec: type | None = None       # one table's dataclass: its fields are the table's keys
    plan_field = ""                # the Plan attribute holding what it parsed; "": Plan.more (new kinds)
    order = 0.0                    # among the kinds of one stage: the order of its steps
    parse_order = None             # the order it is validated in (default: ``order``)
    stage = IN_EACH_STATE
    what = ""                      # how errors name one table ("workload", "margin" ...)
    bounds: dict = {}              # its own number keys' floors and ceilings: {"hold_s": Bound(...)}

    # -- the plan ------------------------------------------------------------------------------
    def keys(self) -> set:
        """The table's keys, from the spec's fields."""
        out = set()
        for f in fields(self.spec):
            k = f.metadata.get("toml", f.name)
            if k is not None:
                out.add(k)
        return out | set(self.extra_keys)

    extra_keys: tuple = ()         # keys the table takes beyond the spec's fields (workload: ranges)

    def parse(self, path: tuple, d: dict, ctx: ParseContext):
        """One table: the spec, every value checked (values.Bad otherwise)."""
        raise NotImplementedError

    def parse_all(self, ctx: ParseContext):
        """Every table of this kind in the plan, names unique, then ``check``."""
        ts = V.want((self.table,), ctx.d.get(self.table, []), (list,), f"an array of tables ([[{self.table}]])")
        specs = tuple(self.parse((self.table, k), t, ctx) for k, t in enumerate(ts))
        V.unique_names((self.table,), self.what or self.table, specs)
        self.check(specs, ctx)
        return specs

    def check(self, specs: tuple, ctx: ParseContext) -> None:
        """Checks across the kind's tables and against the rig and the drive."""

    def specs(self, plan) -> tuple:
        """This kind's tables in a parsed plan."""
        if self.plan_field:
            return getattr(plan, self.plan_field)
        return dict(plan.more).get(self.table, ())

    def has_steps(self, parsed) -> bool:
        return bool(parsed)

    def resolved(self, d: dict) -> None:
        """Its part of Plan.resolved() (and so of the hash), edited in place: a new kind's tables are
        there under its table's name only when the plan has them."""

    def steps(self, plan, ps: int | None, rep: int) -> list[dict]:
        """Its steps in power state ``ps`` (stage IN_EACH_STATE; else None) and repetition ``rep``: each
        the Step's fields but index and repetition."""
        return []

    def key_name(self, plan, spec, rep: int, *detail) -> tuple[str, str]:
        return (f"{self.table}/{spec.name}/r{rep + 1}",
                f"{self.table.replace('_', ' ')} {spec.name}" + (f" #{rep + 1}" if plan.timing.repetitions > 1 else ""))

    def state_key_name(self, plan, spec, rep: int, ps: int) -> tuple[str, str]:
        """A step of one of its tables in power state ``ps``: TABLE/NAME/psN/rR, "PSN TABLE NAME [#R]"."""
        return (f"{self.table}/{spec.name}/ps{ps}/r{rep + 1}",
                f"PS{ps} {self.table} {spec.name}" + (f" #{rep + 1}" if plan.timing.repetitions > 1 else ""))

    def estimate_s(self, plan, step: Step) -> float:
        """A step's length beyond the settle and idle every step has (for --check's limits and the ETA)."""
        return 0.0

    def longest_s(self, plan, step: Step) -> float:
        """The most a step can take beyond the settle and idle (a steady-state workload's max_rounds),
        which `--check` shows beside the estimate."""
        return self.estimate_s(plan, step)

    def planned_s(self, plan, step: Step) -> float:
        """Its length for the ETA while the sweep runs."""
        return self.estimate_s(plan, step)

    def durations(self, plan) -> list[tuple[tuple, float]]:
        """(key path, seconds) of every single duration it takes, each checked against [limits] max_hours."""
        return []

    def fits(self, plan, fits, S, top_ps: int, top_rep: int) -> None:
        """Every text it puts into the results database fits its column (``fits(path, text, *columns)``)."""

    # -- the run (the engine calls these at fixed points of every step) -------------------------
    def start(self, run: StepRun) -> None:
        """Before the recording starts."""

    def after_settle(self, run: StepRun) -> None:
        """After the power state is set and settled, before the idle window."""

    def act(self, run: StepRun) -> None:
        """After the idle window, while the drive's own power is polled (checks.self_reported_power)."""

    def after(self, run: StepRun) -> None:
        """After the polling stopped, before the last thermal reading."""

    # -- what it measures and shows -----------------------------------------------------------------
    def rows_first(self, run: StepRun) -> list[dict]:
        """Measurements stored before the step's transition figures."""
        return []

    def rows(self, run: StepRun) -> list[dict]:
        """Its own measurements (measure.row), stored after the generic ones."""
        return []

    def params(self, run: StepRun) -> dict:
        """What the stored step's params (the report's step table) show of it."""
        return {}

    def measured_s(self, run: StepRun) -> float:
        """Seconds measured beyond the idle window."""
        return 0.0

    def row_workload(self, step: Step) -> str | None:
        """The stored step's workload column."""
        return None


REGISTRY: dict[str, StepKind] = {}


def register(cls):
    """Class decorator: one instance of the kind in the registry, its bounds known to the value checks."""
    if cls.name in REGISTRY:
        raise ValueError(f"step kind {cls.name!r} is registered twice")
    kind = cls()
    REGISTRY[cls.name] = kind
    V.KIND_BOUNDS.update({f"{cls.table}.{k}": b for k, b in cls.bounds.items()})
    return cls


def kinds() -> list[StepKind]:
    """Every kind, in the order of their steps (stage, then order)."""
    return sorted(REGISTRY.values(), key=lambda k: (k.stage, k.order))


def parse_kinds() -> list[StepKind]:
    """Every kind, in the order a plan is validated."""
    return sorted(REGISTRY.values(), key=lambda k: k.order if k.parse_order is None else k.parse_order)


def kind_of(step: Step) -> StepKind:
    return REGISTRY[step.kind]
