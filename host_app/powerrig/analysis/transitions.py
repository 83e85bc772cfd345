"""A power-state change timed from the rails, from the moment the controller was handed the Set
Features (its submission traced in the drive host's kernel, dut/nvmetrace.py): when the rails leave
the level before (the drive entered the new state: ``latency_s``) and when they have settled at the
new level (``settle_s``), beside the NVMe worst case EXLAT(old) + ENLAT(new) with a verdict.

Levels: before = the mean over PRE_S before the submission (never before ``pre_from``, the last
event that changed the load); after = the mean of the last quarter of the window, which ends POST_S
after the submission or at ``end_at`` (the next event). A band around each (BAND_FRAC of the step,
at least BAND_MIN_W and four standard deviations of the level before) says what "left" and
"settled" mean. On the rails averaged over 1 ms (centred: a drive's 1 kHz program ripple off, no
shift), the onset is where the move began, from the moments it reached a quarter and three quarters
of the step (an exponential approach from t0 reaches them at t0 + tau ln(4/3) and t0 + tau ln 4; a
linear ramp gives nearly the same t0); settling is the end of the last interval outside the new level's band. No step larger than the band
(a change between states of one idle level): the latency is NaN and ``note`` says why; the overshoot, if
any, is all there is to settle. With intervals as long as the boxcar (1 ms), an overshoot shorter than
an interval that an interval edge splits can leave less than the band in each half where, the edges
elsewhere, it would leave more in one: when no interval alone leaves the band, two adjacent ones beyond it together
(same sign, over five standard deviations of their sum: on noise alone no more often than one interval
leaves the band) count, and settling is the end of the later.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from powerrig.analysis.checks import judge
from powerrig.core.names import Verdict

PRE_S = 0.05
POST_S = 0.5
BAND_FRAC = 0.1
BAND_MIN_W = 0.1
SMOOTH_S = 0.001


@dataclass
class Transition:
    from_ps: int | None
    to_ps: int
    submit_s: float             # the set-feature's submission, capture seconds
    before_w: float
    after_w: float
    latency_s: float            # submission -> the rails leave the level before
    settle_s: float             # submission -> the rails stay within the band of the new level
    limit_s: float              # EXLAT(old) + ENLAT(new) from id-ctrl (NaN when unknown)
    verdict: str                # pass / marginal / fail (checks.judge against the limit), or "n/a"
    source: str                 # "nvme_trace" (kernel submission) or "host" (nvme-cli's call)
    note: str | None = None
    marginal_from: float | None = None   # where judge()'s marginal band below the limit starts (s)

    def to_dict(self) -> dict:
        return asdict(self)


def time_transition(p: np.ndarray, first: int, submit: float, interval_s: float, limit_s: float = math.nan,
                    from_ps: int | None = None, to_ps: int = 0, source: str = "nvme_trace",
                    pre_from: float | None = None, end_at: float | None = None, no_limit: str = "") -> Transition:
    """``p``: total power for sample ids [first, first + len(p)); ``submit``: the submission as a
    fractional sample id; ``pre_from``/``end_at``: sample ids bounding the windows (neighbouring events);
    ``no_limit``: why ``limit_s`` is NaN (a latency not reported), first in ``note``."""
    dt = interval_s
    a = int(math.floor(submit)) - first
    pre = max(1, int(round(PRE_S / dt)))
    lo = max(0, a - pre) if pre_from is None else max(0, a - pre, int(math.ceil(pre_from)) - first)
    end = min(len(p), a + max(4, int(round(POST_S / dt))))
    if end_at is not None:
        end = min(end, max(a + 4, int(math.floor(end_at)) - first))
    nan = math.nan

    def out(before, after, lat, settle, note):
        j = judge(settle, limit_s, uncertainty=dt, units="s")      # the one verdict model (analysis/checks.py)
        ok = str(j.verdict) if j.verdict in (Verdict.PASS, Verdict.MARGINAL, Verdict.FAIL) else "n/a"
        if no_limit and math.isnan(limit_s):
            note = "; ".join(x for x in (no_limit, note) if x)
        return Transition(from_ps, to_ps, submit * dt, before, after, lat, settle, limit_s, ok, source, note,
                          j.marginal_from)

    if a - lo < 1 or end - a < 4:
        return out(nan, nan, nan, nan, "too few samples around the set-feature")
    # a 1 ms boxcar, centred: a drive's 1 kHz program ripple (and noise) off the edges, none of its timing
    w = max(1, int(round(SMOOTH_S / dt)))
    ps = np.convolve(fill_gaps(p), np.ones(w) / w, mode="same") if w > 1 else fill_gaps(p)
    seg = p[lo:a]
    post = p[a:end]
    tail = post[int(len(post) * 0.75):]
    if np.isnan(seg).all() or np.isnan(tail).all():     # a gap in the capture covers one side
        side = "before" if np.isnan(seg).all() else "after"
        return out(nan, nan, nan, nan, f"no samples {side} the set-feature: the capture has a gap there")
    before = float(np.nanmean(seg))
    sd = float(np.nanstd(ps[lo + w:a - w // 2 - 1])) if a - lo > 2 * w + 2 else 0.0
    after = float(np.nanmean(tail))
    step = after - before
    band = max(BAND_MIN_W, BAND_FRAC * abs(step), 4.0 * sd)
    sub = submit - first
    if abs(step) <= band:
        # no level change to time (e.g. two states with the same idle power): the transient, if any, is all there is
        dev = ps[a:end] - after
        far = np.flatnonzero(np.abs(dev) > band)
        if not len(far) and w == 1:
            far = _split_by_an_edge(dev, max(band, 5.0 * math.sqrt(2.0) * sd))
        settle = max(0.0, (a + int(far[-1]) + 1 - (w - 1) // 2 - sub) * dt) if len(far) else nan
        same = f"the level did not change by more than {band:.3f} W ({before:.3f} -> {after:.3f} W)"
        # what the verdict judges must be what the note says was timed: the transient's end, or nothing
        return out(before, after, nan, settle,
                   f"{same}: no step to time a latency; the settle is where the set-feature's transient ended"
                   if len(far) else f"{same} and nothing moved: no step to time")
    moved = (ps[a:end] - before) / step                  # 0 at the old level, 1 at the new
    t25, t75 = _crossing(moved, 0.25), _crossing(moved, 0.75)
    if t25 is None:
        return out(before, after, nan, nan, "the rails never left the level before")
    # back to where the move began, as an exponential approach would start: t25 = t0 + tau ln(4/3),
    # t75 = t0 + tau ln 4 (a linear ramp gives nearly the same point)
    onset = t25 if t75 is None else t25 - (t75 - t25) / math.log(3.0) * math.log(4.0 / 3.0)
    onset = a + onset
    far = np.flatnonzero(np.abs(ps[a:end] - after) > band)
    # the boxcar holds a value outside the band up to half its width after the rails' last one
    settle_n = int(far[-1]) + 1 - (w - 1) // 2 if len(far) else 0
    lat = max(0.0, (onset - sub) * dt)
    settle = max(lat, (a + settle_n - sub) * dt)
    return out(before, after, lat, settle, None)


def fill_gaps(p: np.ndarray) -> np.ndarray:
    """Intervals lost in a gap (NaN) take the value of the interval before them (the first valid one at
    the start): a gap never reads as the rails leaving or not yet reaching a level."""
    p = np.asarray(p, dtype=float)
    bad = np.isnan(p)
    if not bad.any():
        return p
    if bad.all():
        return np.zeros_like(p)
    idx = np.where(~bad, np.arange(len(p)), 0)
    np.maximum.accumulate(idx, out=idx)
    out = p[idx]
    first = int(np.argmax(~bad))
    out[:first] = p[first]
    return out


def _split_by_an_edge(dev: np.ndarray, band: float) -> np.ndarray:
    """The later of each two adjacent intervals whose deviations, of one sign, exceed ``band`` together:
    an excursion shorter than an interval that an interval edge split in two (the interval it would fill
    alone, were the edges elsewhere, would be beyond the band). Indices into ``dev``."""
    x, y = dev[:-1], dev[1:]
    return np.flatnonzero((np.sign(x) == np.sign(y)) & (np.abs(x + y) > band)) + 1


def _crossing(x: np.ndarray, level: float) -> float | None:
    """Where ``x`` (one value per interval, taken at the interval's middle) first reaches ``level``,
    interpolated, in intervals from the start of ``x``."""
    k = np.flatnonzero(x >= level)
    if not len(k):
        return None
    k = int(k[0])
    if k == 0:
        return 0.5
    x0, x1 = float(x[k - 1]), float(x[k])
    return k - 0.5 + (level - x0) / (x1 - x0) if x1 > x0 else k + 0.5
