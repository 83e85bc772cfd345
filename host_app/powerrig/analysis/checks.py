"""OCP and NVMe power checks over phase results, and the one verdict model every part of powerrig uses.

``judge()`` decides every verdict from the requirement (its limits), the measured value, the value's
measurement uncertainty and the data's validity, so the same value against the same limit gets the
same verdict wherever it is judged (a capture report, the sweep's store, the web page, the GUI):

- ``invalid`` (why): the data cannot be trusted (thermal throttling in the phase);
- ``n/a`` (why): no value to judge; ``info``: a measurement with no limit;
- ``fail``: outside a limit by more than the uncertainty, on any data: more data cannot bring a
  maximum back under its limit, and a mean clearly over it on a short window is not excused by
  the window (the why says the data was short);
- ``marginal`` (why): inside the limit's marginal band (within 5 % of it) or within the
  measurement's uncertainty of it, on either side: close enough that the limit decides nothing;
- ``partial`` (why): inside the limit with room, but on data short of the requirement (gaps, a phase
  shorter than the standard asks, sampling too slow): not yet a pass;
- ``pass``: inside the limit with room, on data that meets the requirement.

See docs/analysis.md for each check's definition and its source.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np

from powerrig.analysis.descriptors import PowerState, ocp_peak_limit
from powerrig.analysis.result import CheckResult, PhaseResult
from powerrig.core.names import PhaseKind, Verdict
from powerrig.core.sampling import INTERPOSER, Sampling

OCP_MIN_CAPTURE_S = 15 * 60        # PCM-1 / PCM-2: capture >= 15 min
PCM1_MAX_SAMPLING_S = 2e-3         # PCM-1: sampling <= 2 ms
PCM2_MAX_SAMPLING_S = 4e-6         # PCM-2 (and PCM-3's peak): 100 us windows of samples <= 4 us apart
PWR6_LIMIT_W = 5.0 * 1.05          # PWR-6: idle <= 5 W, SanBlaze passes at +5 %
IDLE_WINDOW_S = 30.0
# a window placed from host timestamps lands a few ms either side of its nominal length: the idle
# window of a 40 s idle (10 s settle + 30 s) must not flip between "30 s" and "short" by host jitter
WINDOW_TOLERANCE_S = 0.25
MARGINAL_FRAC = 0.05               # within 5 % of a limit: marginal (OpenHTF's marginal band, as the store keeps it)


@dataclass(frozen=True)
class Judged:
    verdict: Verdict
    why: str = ""                  # empty for a plain pass or fail on enough data
    marginal_from: float | None = None   # the band's start below an upper limit (above a lower one)


def number_or_none(v) -> float | None:
    """A finite float of ``v`` (a stored value, a meta field), or None for none, a bool, text or NaN/inf."""
    if type(v) is float:           # most calls (3,600 checks ask ~9 times each): no conversion
        return v if math.isfinite(v) else None
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _g(v: float) -> str:
    return f"{v:.4g}"


def _at(x: float, v: float) -> str:
    """``x`` (a margin, an uncertainty) to the decimals ``v`` is shown with: "by 0.005 W" beside
    "9.995 W", not "by 0.004672 W"; two significant figures when those decimals would show 0."""
    shown = _g(v)
    if "e" in shown:
        return _g(x)
    decimals = len(shown.partition(".")[2])
    out = f"{x:.{decimals}f}"
    return out if float(out) != 0 or x == 0 else f"{x:.2g}"


def judge(value, upper=None, lower=None, *, uncertainty: float | None = 0.0, enough: bool = True,
          short: str = "", invalid: str | None = None, no_limit: str = "", units: str = "W",
          marginal_frac: float = MARGINAL_FRAC) -> Judged:
    """The verdict of ``value`` against ``upper`` / ``lower`` (either may be None). ``uncertainty``:
    the value's stated error (same units; None or NaN: unknown, taken as 0); ``enough``: the data met
    the requirement (length, sampling, no gaps), ``short`` says why not; ``invalid``: why the data
    cannot be trusted; ``no_limit``: why there is no limit (for the info verdict's why)."""
    if invalid:
        return Judged(Verdict.INVALID, str(invalid))
    v = number_or_none(value)
    if v is None:
        return Judged(Verdict.NA, "no value: " + (short or "nothing was measured") if short else "no value measured")
    hi, lo = number_or_none(upper), number_or_none(lower)
    if hi is None and lo is None:
        why = no_limit or "a measurement with no limit"
        return Judged(Verdict.INFO if enough else Verdict.PARTIAL,
                      why if enough else f"{why}; {short or 'the data is short of the requirement'}")
    u = abs(number_or_none(uncertainty) or 0.0)

    def u_txt() -> str:      # formatted only where a why shows it (a fail, a marginal): not for the passes
        return f" (measurement uncertainty +-{_at(u, v)} {units})" if u else ""
    short_txt = f"; on short data: {short}" if not enough and short else ""
    band_hi = band_lo = None
    if hi is not None:
        band_hi = hi - max(marginal_frac * abs(hi), u)
        if v > hi + u:
            return Judged(Verdict.FAIL, f"{_g(v)} {units} over the {_g(hi)} {units} limit{u_txt()}{short_txt}".strip(),
                          band_hi)
    if lo is not None:
        band_lo = lo + max(marginal_frac * abs(lo), u)
        if v < lo - u:
            return Judged(Verdict.FAIL, f"{_g(v)} {units} under the {_g(lo)} {units} limit{u_txt()}{short_txt}",
                          band_lo)
    if hi is not None and v >= band_hi:
        side = "over" if v > hi else "within"
        return Judged(Verdict.MARGINAL, f"{_g(v)} {units} is {side} the {_g(hi)} {units} limit by "
                                        f"{_at(abs(hi - v), v)} {units} (marginal from {_g(band_hi)} {units}){u_txt()}"
                                        f"{short_txt}", band_hi)
    if lo is not None and v <= band_lo:
        side = "under" if v < lo else "within"
        return Judged(Verdict.MARGINAL, f"{_g(v)} {units} is {side} the {_g(lo)} {units} limit by "
                                        f"{_at(abs(v - lo), v)} {units} (marginal to {_g(band_lo)} {units}){u_txt()}"
                                        f"{short_txt}", band_lo)
    band = band_hi if band_hi is not None else band_lo
    if not enough:
        return Judged(Verdict.PARTIAL, f"inside the limit, but {short or 'the data is short of the requirement'}",
                      band)
    return Judged(Verdict.PASS, "", band)


@functools.lru_cache(maxsize=64)
def _rail_volts(rail: str) -> float | None:
    """A rail's nominal volts from its name as the rails are named ("12V", "3V3", "5V"); cached: every
    check of every phase asks for each rail's (3,600 checks in a 10-hour capture's analysis)."""
    m = re.fullmatch(r"(\d+)V(\d*)", rail.strip())
    return float(f"{m.group(1)}.{m.group(2) or 0}") if m else None


def uncertainty_w(r: PhaseResult, value_w, sampling: Sampling = INTERPOSER) -> float | None:
    """The source's stated error (W) of a total-power figure of this phase: each rail's share of the
    value at its nominal volts, through the source's accuracy (core/sampling.py); None when a rail's
    accuracy or volts is unknown."""
    v = number_or_none(value_w)
    mean = number_or_none(r.mean_w)
    if v is None or not mean or len(r.rails) < 2:      # ("total" and at least one rail)
        return None
    total = 0.0
    for rail, s in r.rails.items():
        if rail == "total":
            continue
        volts, acc, p = _rail_volts(rail), sampling.accuracy.get(rail), number_or_none(s.get("mean_w"))
        if volts is None or acc is None or p is None:
            return None
        share = p / mean * v
        total += acc.power_w(volts, share / volts)
    return total


def _check(name: str, r: PhaseResult, phase: str, value, limit, requirement_met: bool, where, notes: list,
           short: list, sampling: Sampling, no_limit: str = "") -> CheckResult:
    """One check's record, its verdict from judge()."""
    if not r.complete:
        short = short + [f"{r.lost_s:.3f} s of the phase was lost in gaps"]
    v = number_or_none(value)
    u = uncertainty_w(r, v, sampling)
    j = judge(v, limit, uncertainty=u, enough=r.complete and requirement_met, short="; ".join(short),
              invalid=r.invalid, no_limit=no_limit)
    # requirement_met: the data was enough for the check (its length and sampling, and no gaps)
    return CheckResult(name, phase, v, limit, "W", j.verdict, r.complete and requirement_met, where, notes, j.why,
                       u, j.marginal_from)
def _where(w) -> tuple | None:
    return None if math.isnan(w.start_s) else (w.start_s, w.end_s)


def _state(states: dict, ps) -> PowerState | None:
    return states.get(ps) if ps is not None else None


def pcm1(r: PhaseResult, states: dict, interval_s: float, sampling: Sampling = INTERPOSER) -> CheckResult:
    """OCP PCM-1: highest 1 s sliding-window mean <= MP of the active power state."""
    st = _state(states, r.phase.power_state)
    limit = st.max_power_w if st else None
    notes, short = [], []
    req = interval_s <= PCM1_MAX_SAMPLING_S and r.duration_s >= OCP_MIN_CAPTURE_S
    if r.duration_s < OCP_MIN_CAPTURE_S:
        short.append(f"phase is {r.duration_s:.0f} s; OCP asks for >= 15 min")
    if interval_s > PCM1_MAX_SAMPLING_S:
        short.append(f"intervals of {interval_s * 1e3:g} ms; PCM-1 asks for <= 2 ms")
    if r.max_1s.skipped:
        notes.append(f"{r.max_1s.skipped} windows touched gaps and were skipped")
    return _check("OCP PCM-1", r, r.name, r.max_1s.value_w, limit, req, _where(r.max_1s), short + notes, short,
                  sampling, "no MP for the active power state (no id-ctrl or unknown state)")


def peak_sampling_note(sampling: Sampling) -> str | None:
    """Why a source's data cannot give the OCP 100 us peak (None when it can)."""
    if sampling.sample_s <= PCM2_MAX_SAMPLING_S * (1 + 1e-9) and sampling.peak_exact:
        return None
    every = (f"{sampling.sample_s * 1e3:.3g} ms" if sampling.sample_s >= 1e-3 else f"{sampling.sample_s * 1e6:.3g} us")
    return (f"sampling requirement not met: {sampling.source} samples every {every}; "
            f"the 100 us peak needs <= {PCM2_MAX_SAMPLING_S * 1e6:g} us sampling")


def pcm2(r: PhaseResult, sampling: Sampling = INTERPOSER) -> CheckResult:
    """OCP PCM-2: highest 100 us window mean (a measurement; PCM-3 sets its limit)."""
    slow = peak_sampling_note(sampling)
    req = r.peak_exact and r.duration_s >= OCP_MIN_CAPTURE_S and slow is None
    notes = [] if r.peak_exact else ["sum of per-rail 100 us peaks: an upper bound of the total's peak"]
    short = ([slow] if slow else []) + ([] if r.duration_s >= OCP_MIN_CAPTURE_S else
                                        [f"phase is {r.duration_s:.0f} s; OCP asks for >= 15 min"])
    if not r.peak_exact:          # the partial's why: not the total's own peak (PCM-3 may still pass on it)
        short.append("the total's 100 us peak is bounded by the sum of the rails' own peaks")
    if slow:
        notes.insert(0, slow)
    return _check("OCP PCM-2", r, r.name, r.peak_100us.value_w, None, req, _where(r.peak_100us), notes, short,
                  sampling, "a measurement: PCM-3 judges it")


def pcm3(r: PhaseResult, states: dict, sampling: Sampling = INTERPOSER) -> CheckResult:
    """OCP PCM-3: 100 us peak <= 1.5 x MAP (MAP <= 25 W), 37.5 W (<= 29 W), 1.3 x MAP above."""
    st = _state(states, r.phase.power_state)
    limit = ocp_peak_limit(st.max_power_w) if st else None
    slow = peak_sampling_note(sampling)
    req = r.duration_s >= OCP_MIN_CAPTURE_S and slow is None
    short = ([slow] if slow else []) + ([] if r.duration_s >= OCP_MIN_CAPTURE_S else
                                        [f"phase is {r.duration_s:.0f} s; OCP asks for >= 15 min"])
    if not r.peak_exact:          # the partial's why: not the total's own peak (PCM-3 may still pass on it)
        short.append("the total's 100 us peak is bounded by the sum of the rails' own peaks")
    return _check("OCP PCM-3", r, r.name, r.peak_100us.value_w, limit, req, _where(r.peak_100us),
                  [slow] if slow else [], short, sampling, "no MAP for the active power state")


def _idle_window_short(w: PhaseResult, check: str) -> list[str]:
    return [] if w.duration_s >= IDLE_WINDOW_S - WINDOW_TOLERANCE_S else \
        [f"idle window is {w.duration_s:.1f} s; {check} takes 30 s after 10 s of idle"]


def pwr6(w: PhaseResult, sampling: Sampling = INTERPOSER) -> CheckResult:
    """OCP PWR-6: idle power (mean of 30 one-second samples after settling) <= 5 W + 5 %."""
    short = _idle_window_short(w, "PWR-6")
    return _check("OCP PWR-6", w, w.phase.parent or w.name, w.mean_w, PWR6_LIMIT_W, not short,
                  (w.start_s, w.stop_s), list(short), short, sampling)


def idlp(w: PhaseResult, states: dict, tolerance: float = 0.0, sampling: Sampling = INTERPOSER) -> CheckResult:
    """NVMe IDLP: mean power over 30 s after 10 s idle vs the state's reported idle power."""
    st = _state(states, w.phase.power_state)
    limit = st.idle_power_w * (1 + tolerance) if st and st.idle_power_w is not None else None
    short = _idle_window_short(w, "IDLP")
    return _check("NVMe IDLP", w, w.phase.parent or w.name, w.mean_w, limit, not short, (w.start_s, w.stop_s),
                  list(short), short, sampling, "the drive reports no IDLP for this state")


def actp(r: PhaseResult, states: dict, tolerance: float = 0.0, sampling: Sampling = INTERPOSER) -> CheckResult:
    """NVMe ACTP: highest 10 s mean over the workload vs the state's reported active power."""
    st = _state(states, r.phase.power_state)
    limit = st.active_power_w * (1 + tolerance) if st and st.active_power_w is not None else None
    req = r.duration_s >= 10.0
    short = [] if req else [f"phase is {r.duration_s:.1f} s; ACTP is the highest 10 s mean"]
    notes = list(short)
    if st and st.active_workload is not None:
        notes.append(f"ACTP is defined over workload APW {st.active_workload}")
    return _check("NVMe ACTP", r, r.name, r.max_10s.value_w, limit, req, _where(r.max_10s), notes, short, sampling,
                  "the drive reports no ACTP for this state")


def spans(rs: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, stops, identities) of phase results as arrays: a phase is compared with all the
    others at once (numpy), not pair by pair in Python: a 10-hour capture's ~840 workload phases made
    700,000 pairs, a fifth of its analysis (issue 42)."""
    return (np.array([r.start_s for r in rs], np.float64), np.array([r.stop_s for r in rs], np.float64),
            np.array([id(r) for r in rs], np.int64))


def checked_phases(results: list[PhaseResult], interval_s: float) -> list[PhaseResult]:
    """The workloads and dwells each check runs on, each span once: a workload phase that holds
    another (a fio job's phase around a sweep's measured phase over the same run, or the jobs of
    several streams inside it) is checked as the outer one only; a fio job's own phase inside another
    workload phase is not checked again; a dwell is checked only when no workload phase lies in it
    (the workload's own checks say what the state drew under I/O). "a inside b" is
    a.start >= b.start - slack and a.stop <= b.stop + slack."""
    slack = max(2 * interval_s, 0.05)
    work = [r for r in results if r.kind == PhaseKind.WORKLOAD]
    s, e, ids = spans(work)
    keep = []
    for r in work:
        outer = (r.start_s >= s - slack) & (r.stop_s <= e + slack) & (ids != id(r))    # q holding r
        if outer.any():
            if not ((s[outer] >= r.start_s - slack) & (e[outer] <= r.stop_s + slack)).all():
                continue               # strictly inside another workload phase: that one is checked
            if r.name.startswith(FIO_JOB_PREFIX):
                continue               # the same span as the sweep's phase over it: checked under that name
        keep.append(r)
    for r in results:
        if r.kind == PhaseKind.DWELL and not ((s >= r.start_s - slack) & (e <= r.stop_s + slack)).any():
            keep.append(r)
    return keep


FIO_JOB_PREFIX = "fio:"            # the phase fio's runner makes per job (powerrig.dut.fio names it so)


def run_checks(results: list[PhaseResult], states: dict, interval_s: float,
               sampling: Sampling = INTERPOSER, checked: list[PhaseResult] | None = None) -> list[CheckResult]:
    """Every check that applies, once per requirement and phase: workloads and operational dwells get
    PCM-1/2/3 and workloads ACTP (checked_phases: each span once, or ``checked`` where the caller made
    it already), idle windows get PWR-6 and IDLP. ``sampling``: what the capture's source resolves (a
    peak check on a source too slow for it says so and is never a pass; its accuracy is each value's
    uncertainty)."""
    out = []
    for r in checked_phases(results, interval_s) if checked is None else checked:
        st = _state(states, r.phase.power_state)
        if st and st.non_operational:
            continue   # no I/O in a non-operational state: MP is not an I/O limit there
        out += [pcm1(r, states, interval_s, sampling), pcm2(r, sampling), pcm3(r, states, sampling)]
        if r.kind == PhaseKind.WORKLOAD:
            out.append(actp(r, states, sampling=sampling))
    for r in results:
        if r.kind == PhaseKind.IDLE_WINDOW:
            out += [pwr6(r, sampling), idlp(r, states, sampling=sampling)]
    return out
