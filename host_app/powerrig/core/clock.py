"""One clock: device sample index <-> host UTC, fitted continuously from timestamped pings.

Each ping gives (host time sent, device sample index when the command arrived, device sample index
when the reply left, host time received). Latency is never negative, so the true line host-time(index)
passes ABOVE every (arrival index, host send time) point and BELOW every (reply index, host receive
time) point. The fit takes the tightest line on each side (the supporting line of the convex hull,
the linear-programming estimate of Moon, Skelly and Towsley for one-way delays) and the middle of the
two. Slow round trips simply never touch a hull, so no quantile has to be chosen; the few fastest
pings in each direction decide, and they come within a few tens of microseconds of the latency floor
in seconds (the uniform USB jitter's minimum over n pings falls as 1/n, not 1/sqrt(n)).

What a round trip cannot tell is an ASYMMETRY of the fixed latencies (host write path vs the
device's reply path): the midline is off by half their difference. ``asymmetry_s`` corrects it once
measured (docs/link.md: the marker input stamps a host-driven edge with the ADC clock).

Why not the old fit (a least-squares line through the midpoints of the fastest half of the round
trips)? Its error is the mean of (outbound - inbound)/2 over those pings, i.e. half the difference of
the MEAN latencies, which on the simulator was 131 us of constant bias and needs minutes to settle.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class ClockModel:
    """utc = utc_ref + (index - index_ref) * period_s / (1 + drift_ppm * 1e-6)

    drift_ppm is how fast the device's crystal runs against the host clock (positive: fast).
    """
    index_ref: int
    utc_ref: float
    period_s: float = 4e-6
    drift_ppm: float = 0.0
    residual_us: float = float("nan")
    pings: int = 0

    def utc(self, index):
        """Host UTC (s) of a sample index (scalar or array)."""
        d = np.asarray(index, dtype=np.float64) - self.index_ref
        return self.utc_ref + d * self.period_s / (1.0 + self.drift_ppm * 1e-6)

    def index(self, utc):
        """Sample index (float) at a host UTC time (scalar or array)."""
        d = np.asarray(utc, dtype=np.float64) - self.utc_ref
        return self.index_ref + d * (1.0 + self.drift_ppm * 1e-6) / self.period_s

    @property
    def offset_s(self) -> float:
        """UTC of sample index 0 (the device's boot, as seen from the host)."""
        return float(self.utc(0))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["offset_s"] = self.offset_s
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ClockModel":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


MAX_CANDIDATES = 128     # per direction: the tightest ping of each of at most this many time bins
SETTLED_PINGS = 250      # below this every new ping refits at once (the first ten seconds)
NEAR_QUANTILE = 0.5      # per-second extremes within this quantile of hull distance set the slope
FAR_FROM_NOMINAL = 0.01  # a clock this far off (1 %: no crystal, an emulated board) is fitted from the start


class ClockFit:
    """Accumulates pings and refits the model; safe to feed from one thread and read from others.

    ``window``: pings kept (10 per second after the first 30 s until the fit settles, then 2 a second
    on average, interposer/pings.py: 15000 is 25 minutes to about 2 hours; a longer line
    averages the slope better, a real crystal's temperature drift over hours is followed by the capture's anchors and
    the re-fit of stored pings, see capture/clocktrack.py). ``asymmetry_s``: (inbound - outbound)
    fixed latency / 2, measured on the rig (0 until measured); added to the midline.
    """

    def __init__(self, period_s: float = 4e-6, window: int = 15000, asymmetry_s: float = 0.0):
        self.period_s = period_s
        self.window = window
        self._asymmetry_s = float(asymmetry_s)
        # a preallocated ring of rows (t_send, index_rx, index_tx, t_recv), written now so its pages are
        # resident from the start: a deque of tuples grew the process ~2.8 MB over its first ten minutes
        self._ring = np.full((window, 4), np.nan)
        self._n = 0                 # rows held (<= window); the newest is at (self.total - 1) % window
        self._lock = threading.Lock()
        self._model: ClockModel | None = None
        self._stale = False
        self._fitted_at = 0.0
        self.refit_s = 0.5
        self.rejected = 0
        self.total = 0              # pings accepted since creation (``pings_since`` counts on it)

    def add(self, t_send: float, index: float, t_recv: float, index_tx: float | None = None) -> None:
        """One ping: host time sent, device index at arrival (or the midpoint when index_tx is None),
        host time received, device index when the reply left."""
        if not t_recv >= t_send:
            self.rejected += 1
            return
        tx = index if index_tx is None else index_tx
        if tx < index:
            self.rejected += 1
            return
        with self._lock:
            self._ring[self.total % self.window] = (t_send, index, tx, t_recv)
            self.total += 1
            self._n = min(self._n + 1, self.window)
            self._stale = True

    @property
    def count(self) -> int:
        return self._n

    def _last(self, n: int) -> np.ndarray:
        """The newest ``n`` rows held, oldest first (a copy)."""
        return self._ring[np.arange(self.total - n, self.total) % self.window]

    @property
    def asymmetry_s(self) -> float:
        return self._asymmetry_s

    @asymmetry_s.setter
    def asymmetry_s(self, value: float) -> None:
        with self._lock:
            self._asymmetry_s = float(value)
            self._model = None

    def pings_since(self, total: int) -> tuple[np.ndarray, int]:
        """The pings added after the ``total``-th (as many as are still kept) and the new total:
        a capture stores them so a later analysis can re-fit (``fit_pings``). Rows of (t_send,
        index_rx, index_tx, t_recv)."""
        with self._lock:
            n = max(0, min(self.total - total, self._n))
            return self._last(n), self.total

    def model(self) -> ClockModel | None:
        """The current fit, or None before the first ping. Refitted on new pings, at most every
        ``refit_s`` once the fit has settled (a writer asks for every block)."""
        with self._lock:
            if self._n and (self._model is None or self._stale):
                now = time.monotonic()
                if self._model is None or self._n < SETTLED_PINGS or now - self._fitted_at >= self.refit_s:
                    self._model = fit_pings(self._last(self._n), self.period_s, self._asymmetry_s)
                    self._fitted_at = now
                    self._stale = False
            return self._model


def _hull_line(x: np.ndarray, y: np.ndarray, upper: bool) -> tuple[float, float]:
    """(slope, value at mean(x)) of the line through the upper (or lower) convex hull of the points
    that touches it at mean(x): among lines above (below) every point, the one with the least total
    vertical distance to them. x must be sorted ascending."""
    xm = float(np.mean(x))
    s = -1.0 if upper else 1.0                  # work on the lower hull of (x, s*y)
    yy = s * y
    hull: list[int] = []
    px, py = x.tolist(), yy.tolist()            # one point per second at most: a Python loop is fine
    for i in range(len(px)):                    # Andrew's monotone chain (lower hull)
        while len(hull) >= 2:
            o, a = hull[-2], hull[-1]
            if (px[a] - px[o]) * (py[i] - py[o]) - (py[a] - py[o]) * (px[i] - px[o]) <= 0:
                hull.pop()
            else:
                break
        hull.append(i)
    hx, hy = x[hull], yy[hull]
    if len(hull) == 1 or hx[-1] == hx[0]:
        return 0.0, float(s * hy.min())
    k = int(np.clip(np.searchsorted(hx, xm, side="right") - 1, 0, len(hx) - 2))
    slope = (hy[k + 1] - hy[k]) / (hx[k + 1] - hx[k])
    return float(s * slope), float(s * (hy[k] + slope * (xm - hx[k])))


def _candidates(x: np.ndarray, r: np.ndarray, upper: bool, bin_s: float = 1.0) -> np.ndarray:
    """Indices of the points that can be hull vertices: the extreme residual in each bin of bin_s
    (the slope is known to a few ppm, so inside one second nothing else can reach the hull). x sorted."""
    b = np.floor((x - x[0]) / bin_s).astype(np.int64)
    starts = np.flatnonzero(np.diff(b, prepend=-1))
    ext = (np.maximum if upper else np.minimum).reduceat(r, starts)
    hit = np.flatnonzero(r == np.repeat(ext, np.diff(np.append(starts, len(r)))))
    first = np.unique(b[hit], return_index=True)[1]
    return hit[first]


def fit_pings(pings: np.ndarray, period_s: float = 4e-6, asymmetry_s: float = 0.0) -> ClockModel:
    """The clock model from pings (rows: t_send, index at arrival, index at reply, t_recv).

    Host time H as a line in device time x = index * period: H(x_arrival) >= t_send and
    H(x_reply) <= t_recv for every ping. The upper hull of the send points and the lower hull of the
    receive points bound the line from both sides; the model is their midline (+ asymmetry_s).
    residual_us is half the gap between the two bounds: the true line lies inside them."""
    a = np.asarray(pings, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 4 or not len(a):
        raise ValueError("pings must be rows of (t_send, index_rx, index_tx, t_recv)")
    t_send, i_rx, i_tx, t_recv = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
    i_ref = int(i_tx[-1])
    t0 = float(t_send[-1])
    xs = (i_rx - i_ref) * period_s
    xr = (i_tx - i_ref) * period_s
    ys, yr = t_send - t0, t_recv - t0
    span = max(np.ptp(xs), np.ptp(xr))
    # A device clock far from the host's (an emulated board runs 10-20x slower than real time,
    # docs/emulator.md) shows in any span: start from the midpoints' slope instead of the nominal one.
    slope0, bin_s = 1.0, max(1.0, float(span) / MAX_CANDIDATES)
    if len(a) >= 3 and span > 0 and abs(np.ptp(0.5 * (ys + yr)) / span - 1.0) > FAR_FROM_NOMINAL:
        slope0 = float(np.polyfit(0.5 * (xs + xr), 0.5 * (ys + yr), 1)[0])
        bin_s = float(span) / 32        # its slope is known to ~0.1 %, not to ppm: finer bins
    if len(a) < 3 or span < 0.5:
        # too short to see a crystal's ppm: the nominal (or far-off) rate, offset from the tightest round trip
        slope = slope0
        k = int(np.argmin((t_recv - t_send) - (i_tx - i_rx) * period_s * slope))
        mid = 0.5 * (ys[k] - xs[k] * slope + yr[k] - xr[k] * slope)
        gap = 0.5 * ((yr[k] - xr[k] * slope) - (ys[k] - xs[k] * slope))
        return ClockModel(index_ref=i_ref, utc_ref=t0 + mid + asymmetry_s, period_s=period_s,
                          drift_ppm=(1.0 / slope - 1.0) * 1e6, residual_us=float(gap * 1e6), pings=len(a))
    os_ = np.argsort(xs, kind="stable")
    orr = np.argsort(xr, kind="stable")
    xs, ys, xr, yr = xs[os_], ys[os_], xr[orr], yr[orr]
    ss = sr = slope0 - 1.0
    for _ in range(2):      # candidates against the nominal rate, then against the first fit's slope
        cs = _candidates(xs, ys - xs * (1.0 + ss), upper=True, bin_s=bin_s)
        cr = _candidates(xr, yr - xr * (1.0 + sr), upper=False, bin_s=bin_s)
        # hulls of the residuals (y - x) keep the numbers small; slopes add back 1
        ss, vs = _hull_line(xs[cs], ys[cs] - xs[cs], upper=True)
        sr, vr = _hull_line(xr[cr], yr[cr] - xr[cr], upper=False)
    ms, mr = float(np.mean(xs[cs])), float(np.mean(xr[cr]))
    # the offset comes from the hulls at their centres; the slope from a least-squares line (shared by
    # both directions) through the per-second extremes that lie close to their hull: two hull vertices
    # alone give a slope as noisy as the latency floor, many near-floor points average it out
    slope_res = 0.5 * (ss + sr)
    if len(cs) >= 4 and len(cr) >= 4:
        gx, gy = [], []
        for x, y, c, sl, v, m, up in ((xs, ys, cs, ss, vs, ms, True), (xr, yr, cr, sr, vr, mr, False)):
            px, py = x[c], y[c] - x[c]
            dist = np.abs(py - (v + sl * (px - m)))
            near = dist <= np.quantile(dist, NEAR_QUANTILE)
            gx.append(px[near] - px[near].mean())
            gy.append(py[near] - py[near].mean())
        gx, gy = np.concatenate(gx), np.concatenate(gy)
        den = float(np.dot(gx, gx))
        if den > 0:
            slope_res = float(np.dot(gx, gy)) / den
    slope = 1.0 + slope_res
    hs = vs - slope_res * ms    # both bounding lines (as residuals) at x = 0, the reference index
    hr = vr - slope_res * mr
    at0 = 0.5 * (hs + hr)
    return ClockModel(index_ref=i_ref, utc_ref=t0 + at0 + asymmetry_s, period_s=period_s,
                      drift_ppm=(1.0 / slope - 1.0) * 1e6, residual_us=float(0.5 * (hr - hs) * 1e6), pings=len(a))


def marker_offset(model: ClockModel, host_times, edge_indices) -> tuple[float, float]:
    """(mean, standard deviation) in seconds of model time - host time over marker toggles: the
    host switched a line wired to the marker input at host_times, the ADC saw the edges at
    edge_indices. The mean is the latency asymmetry left in the model: set ``asymmetry_s`` to minus
    it (docs/link.md, "Measuring the remaining asymmetry on real hardware")."""
    t = np.asarray(host_times, dtype=np.float64)
    i = np.asarray(edge_indices, dtype=np.float64)
    if t.shape != i.shape or t.size < 2:
        raise ValueError("marker_offset needs at least two toggles, one host time per edge index")
    d = model.utc(i) - t
    return float(np.mean(d)), float(np.std(d, ddof=1))
