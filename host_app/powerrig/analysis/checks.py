"""OCP and NVMe power checks over phase results. Each says value, limit, verdict, where, and whether
the data met the check's requirement.

Verdicts: a highest-window check that exceeds its limit fails even on partial data (more data can
only raise a maximum); one that stays under it on gappy or too-short data is "partial", never a
pass. Mean-type checks (idle) on incomplete data are "partial" either way. A throttled phase is
"invalid". See docs/analysis.md for each definition and its source.
"""
from __future__ import annotations

import math

from powerrig.analysis.descriptors import PowerState, ocp_peak_limit
from powerrig.analysis.result import CheckResult, PhaseResult
from powerrig.core.names import PhaseKind, Verdict

OCP_MIN_CAPTURE_S = 15 * 60        # PCM-1 / PCM-2: capture >= 15 min
PCM1_MAX_SAMPLING_S = 2e-3         # PCM-1: sampling <= 2 ms
PWR6_LIMIT_W = 5.0 * 1.05          # PWR-6: idle <= 5 W, SanBlaze passes at +5 %
IDLE_WINDOW_S = 30.0


def _verdict(value, limit, complete: bool, requirement_met: bool, invalid: str | None, kind: str = "max") -> Verdict:
    if invalid:
        return Verdict.INVALID
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Verdict.NA
    if limit is None or (isinstance(limit, float) and math.isnan(limit)):
        return Verdict.INFO
    over = value > limit
    if kind == "max" and over:
        return Verdict.FAIL
    if not (complete and requirement_met):
        return Verdict.PARTIAL
    return Verdict.FAIL if over else Verdict.PASS


def _where(w) -> tuple | None:
    return None if math.isnan(w.start_s) else (w.start_s, w.end_s)


def _state(states: dict, ps) -> PowerState | None:
    return states.get(ps) if ps is not None else None


def pcm1(r: PhaseResult, states: dict, interval_s: float) -> CheckResult:
    """OCP PCM-1: highest 1 s sliding-window mean <= MP of the active power state."""
    st = _state(states, r.phase.power_state)
    limit = st.max_power_w if st else None
    notes = []
    req = interval_s <= PCM1_MAX_SAMPLING_S and r.duration_s >= OCP_MIN_CAPTURE_S
    if r.duration_s < OCP_MIN_CAPTURE_S:
        notes.append(f"phase is {r.duration_s:.0f} s; OCP asks for >= 15 min")
    if limit is None:
        notes.append("no MP for the active power state (no id-ctrl or unknown state)")
    if r.max_1s.skipped:
        notes.append(f"{r.max_1s.skipped} windows touched gaps and were skipped")
    v = r.max_1s.value_w
    return CheckResult("OCP PCM-1", r.name, None if math.isnan(v) else v, limit, "W",
                       _verdict(v, limit, r.complete, req, r.invalid), req, _where(r.max_1s), notes)


def pcm2(r: PhaseResult) -> CheckResult:
    """OCP PCM-2: highest 100 us window mean (a measurement; PCM-3 sets its limit)."""
    req = r.peak_exact and r.duration_s >= OCP_MIN_CAPTURE_S
    notes = [] if r.peak_exact else ["sum of per-rail 100 us peaks: an upper bound of the total's peak"]
    v = r.peak_100us.value_w
    status = (Verdict.INVALID if r.invalid else Verdict.NA if math.isnan(v)
              else Verdict.INFO if r.complete and req else Verdict.PARTIAL)
    return CheckResult("OCP PCM-2", r.name, None if math.isnan(v) else v, None, "W", status, req,
                       _where(r.peak_100us), notes)


def pcm3(r: PhaseResult, states: dict) -> CheckResult:
    """OCP PCM-3: 100 us peak <= 1.5 x MAP (MAP <= 25 W), 37.5 W (<= 29 W), 1.3 x MAP above."""
    st = _state(states, r.phase.power_state)
    limit = ocp_peak_limit(st.max_power_w) if st else None
    req = r.duration_s >= OCP_MIN_CAPTURE_S
    notes = [] if st else ["no MAP for the active power state"]
    v = r.peak_100us.value_w
    return CheckResult("OCP PCM-3", r.name, None if math.isnan(v) else v, limit, "W",
                       _verdict(v, limit, r.complete, req, r.invalid), req, _where(r.peak_100us), notes)


def pwr6(w: PhaseResult) -> CheckResult:
    """OCP PWR-6: idle power (mean of 30 one-second samples after settling) <= 5 W + 5 %."""
    req = w.duration_s >= IDLE_WINDOW_S - 1e-6
    v = w.mean_w
    notes = [] if req else [f"idle window is {w.duration_s:.1f} s; PWR-6 takes 30 samples at 1 s"]
    return CheckResult("OCP PWR-6", w.phase.parent or w.name, None if math.isnan(v) else v, PWR6_LIMIT_W, "W",
                       _verdict(v, PWR6_LIMIT_W, w.complete, req, w.invalid, "mean"), req,
                       (w.start_s, w.stop_s), notes)


def idlp(w: PhaseResult, states: dict, tolerance: float = 0.0) -> CheckResult:
    """NVMe IDLP: mean power over 30 s after 10 s idle vs the state's reported idle power."""
    st = _state(states, w.phase.power_state)
    limit = st.idle_power_w * (1 + tolerance) if st and st.idle_power_w is not None else None
    req = w.duration_s >= IDLE_WINDOW_S - 1e-6
    notes = [] if limit is not None else ["the drive reports no IDLP for this state"]
    v = w.mean_w
    return CheckResult("NVMe IDLP", w.phase.parent or w.name, None if math.isnan(v) else v, limit, "W",
                       _verdict(v, limit, w.complete, req, w.invalid, "mean"), req, (w.start_s, w.stop_s), notes)


def actp(r: PhaseResult, states: dict, tolerance: float = 0.0) -> CheckResult:
    """NVMe ACTP: highest 10 s mean over the workload vs the state's reported active power."""
    st = _state(states, r.phase.power_state)
    limit = st.active_power_w * (1 + tolerance) if st and st.active_power_w is not None else None
    req = r.duration_s >= 10.0
    notes = [] if limit is not None else ["the drive reports no ACTP for this state"]
    if st and st.active_workload is not None:
        notes.append(f"ACTP is defined over workload APW {st.active_workload}")
    v = r.max_10s.value_w
    return CheckResult("NVMe ACTP", r.name, None if math.isnan(v) else v, limit, "W",
                       _verdict(v, limit, r.complete, req, r.invalid), req, _where(r.max_10s), notes)


def run_checks(results: list[PhaseResult], states: dict, interval_s: float) -> list[CheckResult]:
    """Every check that applies to each phase: workloads and operational dwells get PCM-1/2/3 and
    ACTP, idle windows get PWR-6 and IDLP."""
    out = []
    for r in results:
        if r.kind in (PhaseKind.WORKLOAD, PhaseKind.DWELL):
            st = _state(states, r.phase.power_state)
            if st and st.non_operational:
                continue   # no I/O in a non-operational state: MP is not an I/O limit there
            out += [pcm1(r, states, interval_s), pcm2(r), pcm3(r, states)]
            if r.kind == PhaseKind.WORKLOAD:
                out.append(actp(r, states))
        elif r.kind == PhaseKind.IDLE_WINDOW:
            out += [pwr6(r), idlp(r, states)]
    return out
