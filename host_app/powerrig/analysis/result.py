"""Result records of an analysis: per-phase figures and check verdicts (plain data, JSON-ready)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from powerrig.analysis.phases import Phase
from powerrig.core.names import PhaseKind, Verdict

# the verdicts under their short names (powerrig.core.names.Verdict)
PASS, FAIL, PARTIAL, INVALID, NA, INFO = (Verdict.PASS, Verdict.FAIL, Verdict.PARTIAL, Verdict.INVALID,
                                          Verdict.NA, Verdict.INFO)


@dataclass
class WindowFigure:
    """A highest-window figure and where its window lies (seconds from capture start)."""
    value_w: float = math.nan
    start_s: float = math.nan
    end_s: float = math.nan
    windows: int = 0
    skipped: int = 0           # windows that touched a gap


@dataclass
class PhaseResult:
    phase: Phase
    start_s: float
    stop_s: float
    duration_s: float
    rails: dict                 # rail or "total" -> SeriesStats.to_dict()
    lost_s: float               # time with no data (gaps) inside the phase
    max_1s: WindowFigure        # OCP PCM-1 (highest 1 s mean of total power)
    max_10s: WindowFigure       # NVMe ACTP (highest 10 s mean)
    peak_100us: WindowFigure    # OCP PCM-2 (highest 100 us window), total power
    peak_exact: bool            # True: from device 100 us windows of a single rail or raw 4 us data
    inst_max_w: float           # highest instantaneous (4 us) total power seen, upper bound
    invalid: str | None = None  # why the phase's verdicts cannot be trusted (thermal throttling, clipping)
    throttled: bool = False     # the drive throttled in the phase (a cool-down and a retry may help; clipping: not)
    notes: list = field(default_factory=list)
    # the highest 100 ms mean, reported beside PCM-1's 1 s and PCM-2's 100 us (published descriptions
    # of the OCP requirement disagree on the window)
    max_100ms: WindowFigure = field(default_factory=WindowFigure)
    # rails whose readings the range clipped in the phase: {rail: {"current", "voltage", "intervals"}}
    clipped: dict = field(default_factory=dict)

    @property
    def lower_bound(self) -> bool:
        """The phase's power and energy are lower bounds: a channel was at full scale."""
        return bool(self.clipped)

    @property
    def name(self) -> str:
        return self.phase.name

    @property
    def kind(self) -> PhaseKind:
        return self.phase.kind

    @property
    def complete(self) -> bool:
        return self.lost_s == 0

    @property
    def mean_w(self) -> float:
        return self.rails["total"]["mean_w"]

    @property
    def energy_j(self) -> float:
        return self.rails["total"]["energy_j"]

    def row(self) -> dict:
        """One flat row for tables and CSV."""
        r = {"phase": self.name, "kind": self.kind, "power_state": self.phase.power_state,
             "start_s": self.start_s, "duration_s": self.duration_s, "lost_s": self.lost_s}
        for rail, s in self.rails.items():
            for k, v in s.items():
                r[f"{rail}_{k}"] = v
        r.update({"max_1s_w": self.max_1s.value_w, "max_100ms_w": self.max_100ms.value_w,
                  "max_10s_w": self.max_10s.value_w,
                  "peak_100us_w": self.peak_100us.value_w, "inst_max_w": self.inst_max_w,
                  "invalid": self.invalid or ""})
        return r


@dataclass
class CheckResult:
    check: str                  # "OCP PCM-1", ...
    phase: str
    value: float | None
    limit: float | None
    unit: str
    status: Verdict
    requirement_met: bool       # did the data meet the check's sampling/length requirement
    where_s: tuple | None = None   # (start, end) of the deciding window, seconds from capture start
    notes: list = field(default_factory=list)
    why: str = ""               # one line: why the verdict is not a plain pass / fail (short data, the band)
    uncertainty: float | None = None    # the value's stated measurement error (W), the source's accuracy
    marginal_from: float | None = None  # where the marginal band below the limit starts

    @property
    def passed(self) -> bool | None:
        return {Verdict.PASS: True, Verdict.FAIL: False}.get(self.status)    # marginal: neither, said so

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = str(self.status)
        d["passed"] = self.passed
        return d
