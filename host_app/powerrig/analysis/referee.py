"""The referee: what a drive says about its own power put beside what the slot measured (issue 38).

Pure: it takes the drive's claims as plain numbers (decoded elsewhere, dut/claims.py) and the
interposer's total power through an AnalysisSource (a capture, or arrays), and returns one Verdict per
claim: the claim, the truth over the same span, the error, the bound it is judged by and an outcome
(``pass`` / ``fail`` / ``n/a`` with why). The outcomes are the results store's words (schema.py).

Per window the drive measured (a Set Features 25h start .. stop, log 25h read after):

- ``referee.avg_power``: AIPWR against the interposer's mean over the span the drive's intervals
  cover. Error in % of the truth; bound: the drive's own stated error IPWRPE, or DEFAULT_ERROR_PCT when
  it states none (255).
- ``referee.max_power``: MIPWR against the interposer's largest mean over a sliding window of the
  drive's own sampling interval (IPMSR) inside the span; same bound.
- ``referee.histogram``: the 250 mW histogram against the interposer's histogram of consecutive
  windows of that interval over the span: the earth mover's distance between the two (W: how far the
  drive's power mass sits from the truth's), judged against bound x truth mean + half a bin (what a
  histogram of 250 mW bins cannot resolve). The total variation distance is given beside it.
- ``referee.measured``: a drive that sets "estimated, not measured" (PMA bit 2) fails this one:
  an estimate is not a measurement, however close it comes; its numbers are still refereed.

Over the whole step, SMART's IPM polled about every second (``referee.ipm_lag``): each poll against the
interposer's mean over the second before it, and the lag at which the two series agree best
(Pearson correlation over lags 0..LAG_SEARCH_S by LAG_STEP_S); more than LAG_LIMIT_S fails. A step
whose power did not change during the polls has no lag to find: n/a.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from powerrig.core.names import TOTAL_POWER, rail_signal

DEFAULT_ERROR_PCT = 5.0     # the bound when the drive states none (IPWRPE 255)
NOT_REPORTED = 255
BIN_W = 0.25                # the histogram's bin (PHBS shall be 250 mW)
LAG_LIMIT_S = 1.0           # IPM may lag the slot's last second by at most this
LAG_SEARCH_S = 10.0
LAG_STEP_S = 0.1
MIN_CHANGE_W = 0.5          # the polls' truth must move this much for a lag to be found


@dataclass
class Verdict:
    name: str                       # referee.avg_power, ...
    phase: str                      # the window (or "ipm")
    claim: float | None             # what the drive says
    truth: float | None             # what the slot measured over the same span
    error: float | None             # claim against truth (units below)
    units: str                      # of claim / truth
    error_units: str                # of error and bound
    bound: float | None             # the error allowed
    outcome: str                    # pass | fail | n/a
    why: str                        # one line: how it was judged, or why it could not be
    notes: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def stated_bound(ipwrpe) -> tuple[float, str]:
    """(bound %, where it comes from): the drive's IPWRPE, or the default when it states none."""
    if ipwrpe is None or int(ipwrpe) == NOT_REPORTED:
        return DEFAULT_ERROR_PCT, f"the drive states no error bound (IPWRPE 255): default {DEFAULT_ERROR_PCT:g} %"
    return float(ipwrpe), f"the drive's stated error bound IPWRPE {int(ipwrpe)} %"


def _total(source, t0: float, t1: float) -> tuple[np.ndarray, float]:
    """The interposer's total power from host UTC t0 to t1 (NaN in gaps) and the time of its first sample."""
    a = max(0, int(math.floor(float(source.sample_id(t0)))))
    b = min(int(source.length), int(math.ceil(float(source.sample_id(t1)))))
    if b <= a:
        return np.empty(0), t0
    parts = [c[TOTAL_POWER] for _, c in source.chunks([TOTAL_POWER], a, b)]
    return np.concatenate(parts).astype(np.float64), float(source.utc(a))


def _sliding_means(x: np.ndarray, n: int, min_cover: float = 0.9) -> np.ndarray:
    """Means of every n consecutive values, over the values that are there (a gap's NaN left out); NaN
    where less than ``min_cover`` of a window is there."""
    ok = np.isfinite(x)
    c = np.concatenate([[0.0], np.cumsum(np.where(ok, x, 0.0))])
    k = np.concatenate([[0], np.cumsum(ok)])
    have = k[n:] - k[:-n]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(have >= min_cover * n, (c[n:] - c[:-n]) / np.maximum(have, 1), np.nan)


def histogram_distance(drive_counts, drive_bin_w: float, truth_w: np.ndarray) -> tuple[float, float]:
    """(earth mover's distance in W, total variation) between the drive's histogram (counts of bins
    [k*bin, (k+1)*bin)) and the truth's window means. EMD takes the drive's bins at their centres."""
    counts = np.asarray(drive_counts, dtype=np.float64)
    truth_w = np.asarray(truth_w, dtype=np.float64)
    truth_w = truth_w[np.isfinite(truth_w)]
    if counts.sum() <= 0 or not len(truth_w):
        return math.nan, math.nan
    centres = (np.arange(len(counts)) + 0.5) * drive_bin_w
    p = counts / counts.sum()
    # EMD in one dimension: the integral of |F_drive - F_truth| over watts
    xs = np.sort(np.concatenate([centres[counts > 0], truth_w]))
    fd = np.array([p[centres <= x].sum() for x in xs])
    ft = np.searchsorted(np.sort(truth_w), xs, side="right") / len(truth_w)
    emd = float(np.sum(np.abs(fd - ft)[:-1] * np.diff(xs))) if len(xs) > 1 else 0.0
    tb = np.floor(truth_w / drive_bin_w).astype(np.int64)
    nb = max(len(counts), int(tb.max()) + 1 if len(tb) else 0)
    q = np.bincount(np.clip(tb, 0, None), minlength=nb)[:nb] / len(truth_w)
    pp = np.zeros(nb)
    pp[:len(p)] = p
    return emd, float(0.5 * np.abs(pp - q).sum())


def referee_window(source, claim: dict, phase: str) -> list[Verdict]:
    """The verdicts of one measurement window. ``claim``: t0, t1 (host UTC span its intervals cover),
    avg_w, max_w, max_t (host UTC or None), counts (histogram), bin_w, interval_s (IPMSR), pmc,
    estimated, ipwrpe."""
    out: list[Verdict] = []
    bound, bound_why = stated_bound(claim.get("ipwrpe"))
    t0, t1 = float(claim["t0"]), float(claim["t1"])
    x, _ = _total(source, t0, t1)
    dt = float(source.interval_s)
    span = {"t0": t0, "t1": t1, "window_s": t1 - t0, "intervals": claim.get("pmc")}
    if not len(x) or not np.isfinite(x).any():
        why = "the interposer has no reading over the drive's span"
        return [Verdict(n, phase, None, None, None, "W", "%", bound, "n/a", why, span)
                for n in ("referee.avg_power", "referee.max_power", "referee.histogram")] + [_measured(claim, phase)]
    truth_mean = float(np.nanmean(x))
    # average interval power
    avg = claim.get("avg_w")
    if avg is None:
        out.append(Verdict("referee.avg_power", phase, None, truth_mean, None, "W", "%", bound, "n/a",
                           "the drive reports no average interval power (AIPWR 0)", span))
    else:
        err = 100.0 * (avg - truth_mean) / truth_mean
        ok = abs(err) <= bound
        out.append(Verdict("referee.avg_power", phase, avg, truth_mean, err, "W", "%", bound, "pass" if ok else "fail",
                           f"AIPWR against the interposer's mean over the {t1 - t0:.1f} s its intervals cover; "
                           f"{bound_why}", {**span, "gaps_pct": 100.0 * float(np.isnan(x).mean())}))
    # maximum interval power: the largest window of the drive's own interval
    interval = claim.get("interval_s")
    n = int(round(interval / dt)) if interval else 0
    mx = claim.get("max_w")
    if not n or n > len(x):
        out.append(Verdict("referee.max_power", phase, mx, None, None, "W", "%", bound, "n/a",
                           "the drive's sampling interval (IPMSR) is unknown or longer than the span", span))
    else:
        m = _sliding_means(x, n)
        k = int(np.nanargmax(m)) if np.isfinite(m).any() else 0
        truth_max = float(m[k])
        t_max = t0 + (k + n) * dt
        if mx is None:
            out.append(Verdict("referee.max_power", phase, None, truth_max, None, "W", "%", bound, "n/a",
                               "the drive reports no maximum interval power (MIPWR 0)", span))
        else:
            err = 100.0 * (mx - truth_max) / truth_max
            ok = abs(err) <= bound
            notes = {**span, "truth_max_end_utc": t_max, "window_s": n * dt}
            if claim.get("max_t") is not None:
                notes["drive_max_end_utc"] = claim["max_t"]
                notes["timestamp_off_s"] = claim["max_t"] - t_max
            out.append(Verdict("referee.max_power", phase, mx, truth_max, err, "W", "%", bound, "pass" if ok else "fail",
                               f"MIPWR against the interposer's largest {n * dt * 1000:g} ms mean (the drive's "
                               f"interval) in the span; {bound_why}", notes))
    # histogram
    counts = claim.get("counts")
    if not counts or not n or not sum(counts):
        out.append(Verdict("referee.histogram", phase, None, None, None, "W", "W", None, "n/a",
                           "the drive reports no histogram (or its interval is unknown)", span))
    else:
        k = len(x) // n
        tw = x[:k * n].reshape(k, n)
        tw = tw[np.isfinite(tw).all(axis=1)].mean(axis=1)
        emd, tv = histogram_distance(counts, claim.get("bin_w") or BIN_W, tw)
        lim = bound / 100.0 * truth_mean + 0.5 * (claim.get("bin_w") or BIN_W)
        ok = emd <= lim
        out.append(Verdict("referee.histogram", phase, float(sum(counts)), float(len(tw)), emd, "windows", "W", lim,
                           "pass" if ok else "fail",
                           f"earth mover's distance between the drive's {claim.get('bin_w') or BIN_W:g} W histogram "
                           f"and the interposer's over {len(tw)} windows of {n * dt * 1000:g} ms, against "
                           f"{bound:g} % of the mean plus half a bin", {**span, "total_variation": tv,
                                                                        "drive_counts": list(counts),
                                                                        "truth_counts": np.bincount(np.floor(tw / (claim.get("bin_w") or BIN_W)).astype(int)).tolist() if len(tw) else []}))
    out.append(_measured(claim, phase))
    return out


def _measured(claim: dict, phase: str) -> Verdict:
    if claim.get("estimated"):
        return Verdict("referee.measured", phase, 1.0, 0.0, None, "", "", None, "fail",
                       "the drive flags its numbers 'estimated, not measured' (log 25h PMA bit 2): an estimate is "
                       "not a measurement, whatever its error")
    return Verdict("referee.measured", phase, 0.0, 0.0, None, "", "", None, "pass",
                   "the drive says it measured (PMA bit 2 clear)")


def last_second(source, times, lag_s: float = 0.0) -> np.ndarray:
    """The interposer's mean over the second before each host UTC time (minus ``lag_s``); NaN where the
    capture does not hold it."""
    times = np.asarray(times, dtype=np.float64)
    if not len(times):
        return np.empty(0)
    lo, hi = float(times.min()) - lag_s - 1.0, float(times.max()) - lag_s
    x, tx0 = _total(source, lo - 0.01, hi + 0.01)
    dt = float(source.interval_s)
    n = int(round(1.0 / dt))
    if len(x) < n:
        return np.full(len(times), np.nan)
    m = _sliding_means(x, n)              # m[k]: mean of samples k..k+n-1, ending at tx0 + (k + n) * dt
    k = np.round((times - lag_s - tx0) / dt).astype(np.int64) - n
    ok = (k >= 0) & (k < len(m))
    out = np.full(len(times), np.nan)
    out[ok] = m[k[ok]]
    return out


def referee_ipm(source, polls, phase: str = "ipm") -> Verdict:
    """IPM polled about every second, ``polls`` [(host UTC of the read, W)], against the slot's last
    second: the lag at which they agree best, and the error at no lag."""
    pts = [(float(p[0]), float(p[1])) for p in polls if p[1] is not None and p[0] is not None]
    notes: dict = {"polls": len(pts), "lag_limit_s": LAG_LIMIT_S}
    if len(pts) < 4:
        return Verdict("referee.ipm_lag", phase, None, None, None, "s", "s", LAG_LIMIT_S, "n/a",
                       f"{len(pts)} IPM readings: too few to find a lag", notes)
    t = np.array([p[0] for p in pts])
    d = np.array([p[1] for p in pts])
    truth0 = last_second(source, t)
    good0 = np.isfinite(truth0)
    notes["series"] = [[round(a, 3), round(b, 4), None if not math.isfinite(c) else round(float(c), 4)]
                       for a, b, c in zip(t.tolist(), d.tolist(), truth0.tolist())]
    if good0.sum() >= 2:
        e = 100.0 * (d[good0] - truth0[good0]) / truth0[good0]
        notes["error_pct_mean"] = float(np.mean(e))
        notes["error_pct_max_abs"] = float(np.max(np.abs(e)))
    if good0.sum() < 4 or np.nanmax(truth0) - np.nanmin(truth0) < MIN_CHANGE_W:
        return Verdict("referee.ipm_lag", phase, None, None, None, "s", "s", LAG_LIMIT_S, "n/a",
                       "the slot's power did not change while IPM was polled: no lag can be told", notes)
    best, best_r = None, -2.0
    rs = []
    for lag in np.arange(0.0, LAG_SEARCH_S + 1e-9, LAG_STEP_S):
        tr = last_second(source, t, lag)
        ok = np.isfinite(tr)
        if ok.sum() < max(4, int(0.6 * len(t))) or np.std(tr[ok]) == 0 or np.std(d[ok]) == 0:
            rs.append(None)
            continue
        r = float(np.corrcoef(d[ok], tr[ok])[0, 1])
        rs.append(r)
        if r > best_r + 1e-6:
            best, best_r = float(lag), r
    if best is None:
        return Verdict("referee.ipm_lag", phase, None, None, None, "s", "s", LAG_LIMIT_S, "n/a",
                       "the capture does not hold the seconds before the polls", notes)
    notes.update(correlation=best_r, correlation_by_lag=[None if r is None else round(r, 4) for r in rs],
                 lag_step_s=LAG_STEP_S)
    ok = best <= LAG_LIMIT_S
    return Verdict("referee.ipm_lag", phase, best, 0.0, best, "s", "s", LAG_LIMIT_S, "pass" if ok else "fail",
                   f"SMART IPM polled every second against the slot's last second: it agrees best "
                   f"{best:.1f} s late (correlation {best_r:.3f}); more than {LAG_LIMIT_S:g} s fails", notes)


LIMIT_SETTLE_S = 1.0        # a drive must hold a Power Limit within this of the set (the command's time included)
LIMIT_TOL_PCT = 2.0         # 100 ms means above limit x (1 + this) are over it (the slot's own uncertainty)


def limit_settle_s(x: np.ndarray, dt: float, limit_w: float) -> float | None:
    """Seconds from the series' start until its 100 ms means stay at or under the limit (+ LIMIT_TOL_PCT) to
    the end; 0 when never over; None when the last one is still over (it never complied)."""
    n = max(1, int(round(0.1 / dt)))
    if len(x) < n:
        return None
    m = _sliding_means(np.asarray(x, dtype=np.float64), n)
    over = np.nan_to_num(m, nan=0.0) > limit_w * (1 + LIMIT_TOL_PCT / 100.0)
    if not over.any():
        return 0.0
    k = int(np.nonzero(over)[0][-1])
    if k == len(m) - 1:
        return None
    return (k + n) * dt              # the end of the last window over the limit


def _peak_100us(source, t0: float, t1: float) -> tuple[float | None, bool]:
    """The largest 100 us mean of the total from t0 to t1 from the capture's per-rail 100 us peaks (p_peak_RAIL,
    the device's windows): exact with one rail, else the sum of the rails' peaks in each interval, an upper
    bound. (None, False) when the capture has no peak signals."""
    rails = tuple(getattr(source, "rails", ()))
    names = [rail_signal("p_peak", r) for r in rails]
    if not names or not all(source.has(n) for n in names):
        return None, False
    a = max(0, int(math.ceil(float(source.sample_id(t0)))))
    b = min(int(source.length), int(math.floor(float(source.sample_id(t1)))))
    if b <= a:
        return None, False
    best = -math.inf
    for _, c in source.chunks(names, a, b):
        tot = np.sum([np.asarray(c[n], dtype=np.float64) for n in names], axis=0)
        if np.isfinite(tot).any():
            best = max(best, float(np.nanmax(tot)))
    return (best if best > -math.inf else None), len(names) == 1


def referee_limit(source, limit_w: float, t_set: float, t_end: float, phase: str, notes: dict | None = None) -> Verdict:
    """Power Limit compliance (feature 23h): how long after ``t_set`` (the sweep passes when Set Features 23h
    completed) the slot's 100 ms means stay under the limit, and the 1 s average and the 100 us, 100 ms and 1 s
    maxima after that (the 100 us one from the per-rail peaks: exact with one rail, else an upper bound).
    Passes when it complies within LIMIT_SETTLE_S."""
    x, tx0 = _total(source, t_set, t_end)
    dt = float(source.interval_s)
    base = {"limit_w": limit_w, "t_from": t_set, "t_end": t_end, **(notes or {})}
    if len(x) < int(1.0 / dt):
        return Verdict("referee.power_limit", phase, limit_w, None, None, "W", "s", LIMIT_SETTLE_S, "n/a",
                       "less than a second of the slot's reading after the limit was set", base)
    lead = tx0 - t_set
    settle = limit_settle_s(x, dt, limit_w)
    if settle is None:
        m1 = _sliding_means(x, int(round(1.0 / dt)))
        base.update(max_1s_w=float(np.nanmax(m1)), mean_w=float(np.nanmean(x)))
        return Verdict("referee.power_limit", phase, limit_w, float(np.nanmax(m1)), None, "W", "s", LIMIT_SETTLE_S,
                       "fail", f"the slot's 100 ms means were still over the {limit_w:g} W limit when the workload "
                               f"ended ({t_end - t_set:.1f} s after it was set): it never complied", base)
    settle = max(0.0, settle + lead)       # the first sample may lie a fraction of an interval before the set
    after = x[int(round((settle - lead) / dt)):]
    figs = {"settle_s": settle, "mean_1s_after_w": float(np.nanmean(after[:int(round(1.0 / dt))])),
            "mean_after_w": float(np.nanmean(after)) if len(after) else None}
    for name, win in (("max_100ms_w", 0.1), ("max_1s_w", 1.0)):
        n = int(round(win / dt))
        figs[name] = float(np.nanmax(_sliding_means(after, n))) if len(after) >= n else None
    figs["max_100us_w"], figs["max_100us_exact"] = _peak_100us(source, t_set + settle, t_end)
    base.update(figs)
    ok = settle <= LIMIT_SETTLE_S
    return Verdict("referee.power_limit", phase, limit_w, figs["max_100ms_w"], settle, "W", "s", LIMIT_SETTLE_S,
                   "pass" if ok else "fail",
                   f"under the {limit_w:g} W limit {settle:.2f} s after Set Features 23h completed (100 ms means within "
                   f"{LIMIT_TOL_PCT:g} %); more than {LIMIT_SETTLE_S:g} s fails", base)


# -- the power state descriptors, per power state (IDLP, ACTP) ------------------------------------------
PSD_BOUND_PCT = 10.0        # IDLP is a "typical" figure and the descriptor states no error: judged within this
IDLP_WINDOW_S = 30.0        # IDLP: typical power over 30 s idle in the state (struct nvme_id_psd's comment)
ACTP_WINDOW_S = 10.0        # ACTP: the largest average over a 10 s period with the workload APW names
ACTP_MIN_S = 9.5            # a measured workload this long stands for the 10 s (fio's ramp trims a little)
APW_WORKLOADS = {1: "APW 1 (5 min idle, 32 random 1 MiB writes, 30 s idle)",
                 2: "APW 2 (80,000 sequential 128 KiB writes, several commands pending)"}
# which way a verdict's error is bounded (sweep/measure.py turns it into the stored lower/upper limits)
SIDES = {"referee.histogram": "upper", "referee.ipm_lag": "upper", "referee.power_limit": "upper",
         "referee.active_power": "lower", "referee.ocp_peak": "lower",
         "referee.ocp_max_avg": "lower"}


def referee_idle(source, psd, t0: float, t1: float, phase: str) -> Verdict:
    """IDLP of the step's power state against the slot's mean over its idle window. Two-sided within
    PSD_BOUND_PCT; a window shorter than IDLP's 30 s is judged and the why says so."""
    notes = {"power_state": getattr(psd, "ps", None), "t0": t0, "t1": t1, "window_s": t1 - t0}
    claim = getattr(psd, "idle_power_w", None)
    if psd is None or claim is None:
        return Verdict("referee.idle_power", phase, None, None, None, "W", "%", PSD_BOUND_PCT, "n/a",
                       "the power state's descriptor reports no idle power (IDLP 0 or IPS 0)", notes)
    x, _ = _total(source, t0, t1)
    if not len(x) or not np.isfinite(x).any():
        return Verdict("referee.idle_power", phase, claim, None, None, "W", "%", PSD_BOUND_PCT, "n/a",
                       "the interposer has no reading over the idle window", notes)
    truth = float(np.nanmean(x))
    err = 100.0 * (claim - truth) / truth
    short = "" if t1 - t0 >= IDLP_WINDOW_S - 0.25 else f" (over {t1 - t0:.1f} s, not IDLP's {IDLP_WINDOW_S:g} s)"
    return Verdict("referee.idle_power", phase, claim, truth, err, "W", "%", PSD_BOUND_PCT,
                   "pass" if abs(err) <= PSD_BOUND_PCT else "fail",
                   f"PS{psd.ps} IDLP against the slot's mean over the idle window{short}; the descriptor states "
                   f"no error: {PSD_BOUND_PCT:g} %", notes)


def apw_matches(apw: int, workload) -> tuple[bool, str]:
    """Whether the plan's workload is the one the descriptor's APW names (only APW 2 can be: a sweep
    workload of sequential 128 KiB writes with more than one command pending)."""
    if apw not in APW_WORKLOADS:
        return False, f"the descriptor names no workload for ACTP (APW {apw})"
    if apw == 2 and workload is not None and getattr(workload, "rw", None) == "write" and \
            getattr(workload, "bs", None) == 131072 and (getattr(workload, "iodepth", 1) or 1) > 1:
        return True, APW_WORKLOADS[2]
    name = getattr(workload, "name", None) or "none"
    return False, f"ACTP is defined under {APW_WORKLOADS[apw]}; this step's workload ({name}) is not it"


def referee_active(source, psd, t0: float, t1: float, phase: str, workload) -> Verdict:
    """ACTP of the step's power state against the slot's largest 10 s mean of the measured workload, when
    the workload is the one APW names. One-sided: the drive fails when it draws more than ACTP by more than
    PSD_BOUND_PCT (a larger ACTP is conservative, and the notes say by how much)."""
    notes = {"power_state": getattr(psd, "ps", None), "t0": t0, "t1": t1, "window_s": ACTP_WINDOW_S}
    claim = getattr(psd, "active_power_w", None)
    if psd is None or claim is None:
        return Verdict("referee.active_power", phase, None, None, None, "W", "%", PSD_BOUND_PCT, "n/a",
                       "the power state's descriptor reports no active power (ACTP 0 or APS 0)", notes)
    ok, why = apw_matches(psd.active_workload, workload)
    notes["workload"] = why
    if not ok:
        return Verdict("referee.active_power", phase, claim, None, None, "W", "%", PSD_BOUND_PCT, "n/a", why, notes)
    if t1 - t0 < ACTP_MIN_S:
        return Verdict("referee.active_power", phase, claim, None, None, "W", "%", PSD_BOUND_PCT, "n/a",
                       f"the workload was measured for {t1 - t0:.1f} s; ACTP is the largest {ACTP_WINDOW_S:g} s "
                       "average", notes)
    x, tx0 = _total(source, t0, t1)
    dt = float(source.interval_s)
    n = min(len(x), int(round(ACTP_WINDOW_S / dt)))
    m = _sliding_means(x, n) if n else np.empty(0)
    if not len(m) or not np.isfinite(m).any():
        return Verdict("referee.active_power", phase, claim, None, None, "W", "%", PSD_BOUND_PCT, "n/a",
                       "the interposer has no full window over the workload", notes)
    k = int(np.nanargmax(m))
    truth = float(m[k])
    err = 100.0 * (claim - truth) / truth
    notes.update(window_s=n * dt, truth_window_end_utc=tx0 + (k + n) * dt)
    over = err < -PSD_BOUND_PCT
    return Verdict("referee.active_power", phase, claim, truth, err, "W", "%", PSD_BOUND_PCT,
                   "fail" if over else "pass",
                   f"PS{psd.ps} ACTP against the slot's largest {n * dt:g} s mean under {why}; fails when the drive "
                   f"draws more than ACTP by over {PSD_BOUND_PCT:g} %"
                   + ("" if err <= PSD_BOUND_PCT else f" (ACTP is conservative by {err:.0f} %)"), notes)


# -- the rail split: the drive's total against the sum of the slot's rails --------------------------------
def referee_rail_split(source, claim_w: float | None, t0: float, t1: float, bound_pct: float, phase: str) -> Verdict:
    """The drive's average (AIPWR: NVM subsystem total power) against the sum of the slot's rails over the
    same span: how far it is in W, each rail's mean beside it, and the rails whose sum it is nearest (a
    drive that meters only its 12 V rail is nearest the 12 V rail alone)."""
    rails = [r for r in getattr(source, "rails", ()) if source.has(rail_signal("p", r))]
    notes: dict = {"t0": t0, "t1": t1}
    x, _ = _total(source, t0, t1)
    if claim_w is None or not len(x) or not np.isfinite(x).any():
        return Verdict("referee.rail_split", phase, claim_w, None, None, "W", "W", None, "n/a",
                       "no average from the drive, or no reading from the slot over its span", notes)
    total = float(np.nanmean(x))
    per = {}
    a = max(0, int(math.floor(float(source.sample_id(t0)))))
    b = min(int(source.length), int(math.ceil(float(source.sample_id(t1)))))
    for r in rails:
        name = rail_signal("p", r)
        per[r] = float(np.nanmean(np.concatenate([c[name] for _, c in source.chunks([name], a, b)])))
    notes["rails_w"] = per
    combos = {"+".join(k): sum(per[r] for r in k) for n in range(1, len(rails) + 1)
              for k in itertools.combinations(rails, n)}
    nearest = min(combos, key=lambda k: abs(combos[k] - claim_w)) if combos else None
    notes["nearest_rails"] = nearest
    diff = claim_w - total
    lim = bound_pct / 100.0 * total
    ok = abs(diff) <= lim
    whole = nearest is None or len(nearest.split("+")) == len(rails)
    why = (f"the drive's total {claim_w:.3f} W against the sum of the slot's rails {total:.3f} W "
           f"({', '.join(f'{r} {w:.3f} W' for r, w in per.items())}): {diff:+.3f} W; within {bound_pct:g} % passes")
    if not whole:
        why += f"; it is nearest the {nearest} rail{'s' if '+' in nearest else ''} alone"
    return Verdict("referee.rail_split", phase, claim_w, total, diff, "W", "W", lim, "pass" if ok else "fail", why, notes)


# -- lifetime counters and OCP's peak ------------------------------------------------------------------
def energy_wh(source, t0: float, t1: float) -> tuple[float, float]:
    """The slot's energy from host UTC t0 to t1 (Wh; a gap's samples left out) and the share of the span
    that has readings."""
    x, _ = _total(source, t0, t1)
    if not len(x):
        return math.nan, 0.0
    ok = np.isfinite(x)
    return float(np.sum(x[ok]) * float(source.interval_s) / 3600.0), float(ok.mean())


def referee_lifetime(name: str, what: str, start: float | None, end: float | None, unit_wh: float,
                     truth_wh: float, bound_pct: float, phase: str, notes: dict | None = None) -> Verdict:
    """A lifetime energy counter (SMART OLEC in Wh; OCP C0h lifetime power consumed, kWh?) read before and
    after a run, its delta against the slot's integrated energy over the same span. A counter in whole
    units rounded up can be one unit off at each end: it fails when the delta is further from the truth
    than one unit plus the bound; it passes only when the run was long enough that one unit is inside
    the bound (else n/a: too short to tell)."""
    base = {"unit_wh": unit_wh, "start": start, "end": end, "truth_wh": truth_wh, **(notes or {})}
    if start is None or end is None:
        return Verdict(name, phase, None, truth_wh, None, "Wh", "Wh", None, "n/a",
                       f"the drive reports no {what}", base)
    if not math.isfinite(truth_wh):
        return Verdict(name, phase, None, None, None, "Wh", "Wh", None, "n/a", "the slot has no reading over the run", base)
    delta = (end - start) * unit_wh
    err = delta - truth_wh
    lim = unit_wh + bound_pct / 100.0 * truth_wh
    span = f"{what} went up {end - start:g} x {unit_wh:g} Wh = {delta:g} Wh while the slot integrated {truth_wh:.4g} Wh"
    if abs(err) > lim:
        return Verdict(name, phase, delta, truth_wh, err, "Wh", "Wh", lim, "fail",
                       f"{span}: more than one count ({unit_wh:g} Wh) plus {bound_pct:g} % off", base)
    need = unit_wh / (bound_pct / 100.0)
    if truth_wh < need:
        return Verdict(name, phase, delta, truth_wh, err, "Wh", "Wh", lim, "n/a",
                       f"{span}: consistent, but one count is {100.0 * unit_wh / max(truth_wh, 1e-12):.0f} % of it; "
                       f"a run of {need:g} Wh tells a {bound_pct:g} % error", base)
    return Verdict(name, phase, delta, truth_wh, err, "Wh", "Wh", lim, "pass",
                   f"{span}: within one count plus {bound_pct:g} %", base)


def referee_ocp_max_avg(claim_w: float | None, measured_w: float | None, bound_pct: float, phase: str,
                        notes: dict | None = None) -> Verdict:
    """OCP C0h's current maximum average power (the drive's largest 1 s average since it counts, in whole
    units, units unconfirmed: read as W) against the slot's largest 1 s mean (OCP PCM-1) over the step.
    One-sided, as the drive's maximum may come from before the step: it fails when the slot saw more than
    the drive says its maximum is by over one count plus the bound; a claim far above what the slot saw is
    consistent (an earlier, busier time) and says so."""
    base = dict(notes or {})
    if claim_w is None or not claim_w:
        return Verdict("referee.ocp_max_avg", phase, None, measured_w, None, "W", "W", None, "n/a",
                       "the drive reports no OCP current maximum average power (C0h 262-263)", base)
    if measured_w is None or not math.isfinite(measured_w):
        return Verdict("referee.ocp_max_avg", phase, claim_w, None, None, "W", "W", None, "n/a",
                       "the slot has no 1 s maximum over the step", base)
    lim = 1.0 + bound_pct / 100.0 * measured_w
    err = claim_w - measured_w
    if err < -lim:
        return Verdict("referee.ocp_max_avg", phase, claim_w, measured_w, err, "W", "W", lim, "fail",
                       f"OCP C0h current maximum average power {claim_w:g} W (units unconfirmed) is below the slot's "
                       f"largest 1 s mean {measured_w:.3f} W (PCM-1) by more than one count plus {bound_pct:g} %", base)
    above = "; the drive's maximum is higher (it may be from before the step)" if err > lim else ""
    return Verdict("referee.ocp_max_avg", phase, claim_w, measured_w, err, "W", "W", lim, "pass",
                   f"OCP C0h current maximum average power {claim_w:g} W (units unconfirmed) against the slot's largest "
                   f"1 s mean {measured_w:.3f} W (PCM-1): not below it by more than one count plus {bound_pct:g} %{above}",
                   base)


def referee_ocp_peak(capability_w: float | None, measured_w: float | None, exact: bool, bound_pct: float,
                     phase: str, notes: dict | None = None) -> Verdict:
    """OCP C0h's maximum peak power capability against the slot's largest 100 us mean (OCP PCM-2) over the
    step. One-sided: fails when the slot saw more than the capability by over the bound. When the 100 us
    figure is the sum of per-rail peaks (an upper bound of the total's), a fail says so."""
    base = {"exact": exact, **(notes or {})}
    if capability_w is None or not capability_w:
        return Verdict("referee.ocp_peak", phase, None, measured_w, None, "W", "%", bound_pct, "n/a",
                       "the drive reports no OCP peak power capability (C0h 260-261)", base)
    if measured_w is None or not math.isfinite(measured_w):
        return Verdict("referee.ocp_peak", phase, capability_w, None, None, "W", "%", bound_pct, "n/a",
                       "the slot has no 100 us maximum over the step", base)
    err = 100.0 * (capability_w - measured_w) / measured_w
    over = err < -bound_pct
    how = "" if exact else " (the sum of per-rail 100 us peaks: an upper bound of the total's)"
    return Verdict("referee.ocp_peak", phase, capability_w, measured_w, err, "W", "%", bound_pct,
                   "fail" if over else "pass",
                   f"OCP C0h peak power capability (units unconfirmed: read as W) against the slot's largest 100 us "
                   f"mean (PCM-2){how}; fails when the slot saw more than it by over {bound_pct:g} %", base)
