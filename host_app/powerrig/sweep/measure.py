"""From a step's analysis to what the results store keeps: phases (with per-rail figures) and
measurements with units, limits, marginal band and outcome (OpenHTF's model: run -> step ->
measurement)."""
from __future__ import annotations

import json

from powerrig.analysis.checks import Judged, judge
from powerrig.analysis import drive_said as D
from powerrig.analysis.checks import number_or_none as _number
from powerrig.analysis.referee import SIDES
from powerrig.core.names import Verdict

WAF_KEEP = 2000          # WAF samples kept per step (10 h at one a minute is 600)
SELF_REPORT = "self-report:"   # phases over which the drive's own power report is compared
MEASURE = "measure:"           # the phase over the measured part of a workload: MEASURE + its name
LIMIT = "limit:"               # the phase from a Power Limit's set to the end of the workload run under it


def phase_rows(an) -> list[dict]:
    out = []
    for r in an.phases:
        m = r.phase.meta or {}
        bw = _number(m.get("bw_bytes"))
        out.append({"name": r.name, "kind": r.kind, "power_state": r.phase.power_state, "start_s": r.start_s,
                    "duration_s": r.duration_s, "lost_s": r.lost_s, "mean_w": r.mean_w, "energy_j": r.energy_j,
                    "max_1s_w": r.max_1s.value_w, "max_10s_w": r.max_10s.value_w,
                    "peak_100us_w": r.peak_100us.value_w, "mib_s": bw / 2**20 if bw is not None else None,
                    "iops": _number(m.get("iops")), "invalid": r.invalid,
                    # the 100 ms maximum beside the 1 s and 100 us ones: a metric of the total (no new column)
                    "rails": {**r.rails, "total": {**r.rails.get("total", {}), "max_100ms_w": r.max_100ms.value_w}}})
    return out


def _m(name, phase, value, units, outcome="info", **kw) -> dict:
    return {"name": name, "phase": phase, "value": _number(value), "units": units, "outcome": outcome, **kw}


row = _m          # for the steps that make their own rows (sweep/power_loss.py)


def _check(c) -> dict:
    """A check as the store keeps it: its verdict as analysis.checks.judge decided it (never decided
    again here), the marginal band's start, and the why first among the notes."""
    notes = ([c.why] if c.why else []) + [n for n in c.notes if n not in c.why]
    return _m(c.check, c.phase, c.value, c.unit, str(c.status), upper=_number(c.limit), marginal_upper=_number(c.marginal_from),
              requirement_met=bool(c.requirement_met), notes=json.dumps(notes) if notes else None)


def measurements(an, measure_phase: str | None, idle_phase: str | None, capacity_bytes: int | None = None,
                 extra: list[dict] | None = None) -> list[dict]:
    """The step's figures: power, energy, throughput and efficiency of its measured phase, idle
    power (and ready-idle GB/W), and every check of those phases with its limit and verdict."""
    out: list[dict] = []
    by = {r.name: r for r in an.phases}
    eff = {e["phase"]: e for e in an.efficiency}
    inv = lambda r: "invalid" if r.invalid else "info"  # noqa: E731
    if measure_phase and measure_phase in by:
        r = by[measure_phase]
        o = inv(r)
        out.append(_m("power.mean", r.name, r.mean_w, "W", o))
        for rail, s in r.rails.items():
            if rail != "total":
                out.append(_m(f"power.mean.{rail}", r.name, s.get("mean_w"), "W", o))
        out.append(_m("energy", r.name, r.energy_j, "J", o,
                      **({"notes": json.dumps(["lower bound: " + r.invalid])} if r.lower_bound else {})))
        out.append(_m("power.max_1s", r.name, r.max_1s.value_w, "W", o))
        out.append(_m("power.max_100ms", r.name, r.max_100ms.value_w, "W", o))
        out.append(_m("power.peak_100us", r.name, r.peak_100us.value_w, "W", o))
        e = eff.get(r.name)
        if e:
            out += [_m("throughput.mib_s", r.name, e["mib_s"], "MiB/s", o),
                    _m("throughput.iops", r.name, e["iops"], "IOPS", o),
                    _m("efficiency.mib_s_per_w", r.name, e["mib_s_per_w"], "MiB/s/W", o),
                    _m("efficiency.iops_per_w", r.name, e["iops_per_w"], "IOPS/W", o),
                    _m("efficiency.j_per_gib", r.name, e["j_per_gib"], "J/GiB", o)]
    if idle_phase and idle_phase in by:
        r = by[idle_phase]
        out.append(_m("power.idle", r.name, r.mean_w, "W", inv(r)))
        if capacity_bytes and r.mean_w and r.mean_w > 0:
            out.append(_m("efficiency.ready_idle_gb_per_w", r.name, capacity_bytes / 1e9 / r.mean_w, "GB/W", inv(r)))
    wanted = {measure_phase, idle_phase}
    out += [_check(c) for c in an.checks if c.phase in wanted]
    if an.waf:
        last = an.waf[-1]
        # the series beside its power (per sample interval), for the sweep report's WAF-over-time plot
        series = [[_number(w.get("start_s")), _number(w.get("end_s")), _number(w.get("waf_instant")),
                   _number(w.get("waf_cumulative")), _number(w.get("mean_w")), _number(w.get("host_mib_s"))] for w in an.waf]
        out.append(_m("waf.cumulative", measure_phase, last.get("waf_cumulative"), "", "info",
                      notes=json.dumps({"waf_series": series[-WAF_KEEP:],
                                        "columns": ["start_s", "end_s", "waf_instant", "waf_cumulative", "mean_w",
                                                    "host_mib_s"]})))
    out += extra or []
    return out


def transition(an, limit_s: float | None, old_ps: int | None, new_ps: int,
               apst_from_s: float | None = None, no_limit: str = "") -> list[dict]:
    """ENLAT + EXLAT against the measured transition: how long after the set-feature completed the
    rails were still moving to the new state's level (a drive may complete the command first and
    finish the transition after). ``limit_s``: old EXLAT + new ENLAT from id-ctrl (the engine knows
    the state it leaves; a capture alone does not). ``apst_from_s``: where the drive's first APST move
    began (capture s, sweep/command_trace.first_apst_s): a settle reaching it is that move's, not judged.
    ``no_limit``: why there is no limit (a latency the drive does not report): measured, judged n/a."""
    limit = _number(limit_s)
    sets = [c for c in an.commands if c.name == "set-feature power"]
    if not sets or (limit is None and not no_limit):
        return []
    c = sets[-1]
    after = max(0.0, c.settle_s - c.duration_s)
    # settle_s counts whole sample intervals: with the set-feature placed on its traced submission (~1 ms
    # wide, dut/nvmetrace.py) rather than nvme-cli's ~100 ms call, that interval is the figure's resolution
    apst_inside = apst_from_s is not None and c.start_s < apst_from_s <= c.start_s + c.settle_s
    # an APST move inside the window: the settle measured is the move's, so nothing is judged
    j = judge(None if apst_inside else after, limit, units="s",
              uncertainty=(getattr(an, "info", None) or {}).get("interval_s"),
              short=f"an APST move began {apst_from_s - c.start_s:.4f} s after the set-feature, inside its settle "
                    "window (transition.rails_settle_s times the change itself)" if apst_inside else "")
    if limit is None:                   # a term not reported: no limit to judge against, the settle still stored
        j = Judged(Verdict.NA, "; ".join(x for x in (j.why if apst_inside else "", no_limit) if x))
    ok = j.verdict in (Verdict.PASS, Verdict.MARGINAL)
    return [_m("transition.settle_s", c.name, c.settle_s, "s", "info",
               notes=json.dumps({"from": "set-feature start", "command_s": c.duration_s, "before_w": _number(c.before_w),
                                 "after_w": _number(c.after_w)})),
            _m("transition.after_completion_s", c.name, after, "s", str(j.verdict), upper=limit,
               marginal_upper=j.marginal_from, requirement_met=ok if j.verdict != Verdict.NA else None,
               notes=json.dumps({"limit": "EXLAT(old) + ENLAT(new)", "from_ps": old_ps, "to_ps": new_ps,
                                 **({"why": j.why} if j.why else {})}))]


def self_reported(an, tolerance_pct: float) -> list[dict]:
    """The drive's self-reported watts (log 25h AIPWR) against the interposer's mean over the span that average
    covers (sweep/engine.py: measurement started and stopped around the window, dut/claims.interval_span). A
    capture gap in that span (overruns) leaves the interposer's mean over less than the drive's average: the
    data is short (checks.judge: partial inside the limits, why said; a starved rig's 434 ms of idle lost
    under a workload read -3 % for +1.3 %)."""
    out = []
    for r in an.phases:
        if not r.name.startswith(SELF_REPORT):
            continue
        drive_w, rig_w = _number((r.phase.meta or {}).get("self_report_w")), _number(r.mean_w)
        if drive_w is None or not rig_w:
            continue
        err = 100.0 * (drive_w - rig_w) / rig_w
        gap = (f"the capture lost {r.lost_s:.3f} s of the {r.duration_s:.3f} s the drive's average covers: the "
               "interposer's mean is over less") if r.lost_s else ""
        j = judge(err, tolerance_pct, -tolerance_pct, units="%", enough=not gap, short=gap)
        ok = j.verdict in (Verdict.PASS, Verdict.MARGINAL)
        of = r.name[len(SELF_REPORT):]
        out.append(_m("power.self_reported", of, drive_w, "W", "info",
                      notes=json.dumps({"interposer_w": rig_w, "intervals": r.phase.meta.get("self_report_intervals"),
                                        "window_s": r.duration_s, "max_w": r.phase.meta.get("self_report_max_w"),
                                        "error_bound_pct": r.phase.meta.get("self_report_error_bound_pct"),
                                        "estimated": r.phase.meta.get("self_report_estimated"),
                                        **({"lost_s": r.lost_s} if r.lost_s else {})})))
        out.append(_m("power.self_reported.error_pct", of, err, "%", str(j.verdict), lower=-tolerance_pct,
                      upper=tolerance_pct, marginal_upper=j.marginal_from if err >= 0 else None,
                      marginal_lower=j.marginal_from if err < 0 else None, requirement_met=ok,
                      notes=json.dumps([j.why]) if j.why else None))
    return out


def referee(verdicts) -> list[dict]:
    """The referee's verdicts (analysis/referee.py) as measurements: the error as the value with the bound
    as its limits, the outcome (pass / fail / n/a), and the claim, the truth and why in the notes."""

    out = []
    for v in verdicts:
        b = _number(v.bound)
        sides = SIDES.get(v.name, "both")       # which way the error is bounded (analysis/referee.py)
        lower = None if b is None or sides == "upper" else -b
        upper = None if sides == "lower" else b
        notes = {"claim": _number(v.claim), "truth": _number(v.truth), "units": v.units, "why": v.why, **(v.notes or {})}
        out.append(_m(v.name, v.phase, v.error, v.error_units, v.outcome, lower=lower, upper=upper,
                      requirement_met=v.outcome == "pass" if v.outcome != "n/a" else None,
                      notes=json.dumps(notes, default=lambda o: None)))
    return out


def drive_said(said, to_s) -> list[dict]:
    """What the drive said during the step (analysis/drive_said.py) as verdicts of the step, each with its
    time in the step's capture (``to_s(utc)``): a critical warning fails it (the byte against 0), a
    removal or a controller reset makes its figures invalid from then on (with the return's time)."""
    out = []
    back = [s for s in said if s.kind == D.BACK]
    for s in said:
        t = to_s(s.t_utc)
        if s.kind == D.WARNING:
            out.append(_m("drive.critical_warning", f"at {t:.2f} s", float(s.value), "", "fail", upper=0.0,
                          requirement_met=True, notes=json.dumps([f"{s.text} at {t:.2f} s into the step",
                                                                  {"t_s": t}], default=str)))
        elif s.kind == D.REMOVED:
            ret = next((to_s(b.t_utc) for b in back if b.t_utc >= s.t_utc), None)
            why = (f"{s.text} at {t:.2f} s into the step" + (f", back at {ret:.2f} s" if ret is not None else
                                                             ", not back before the step ended")
                   + ": the figures after it are not the drive's")
            out.append(_m("drive.removed", f"at {t:.2f} s", t, "s", "invalid", requirement_met=False,
                          notes=json.dumps([why, {"t_s": t, "back_s": ret}])))
        elif s.kind == D.RESET:
            out.append(_m("drive.reset", f"at {t:.2f} s", t, "s", "invalid", requirement_met=False,
                          notes=json.dumps([f"{s.text} at {t:.2f} s into the step: the figures around it are not "
                                            "the drive's steady behaviour", {"t_s": t}])))
    return out
