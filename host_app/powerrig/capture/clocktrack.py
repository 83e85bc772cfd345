"""Sample id <-> host UTC for a capture, from the clock anchors stored in it.

Each anchor pins a sample id to its raw device index, and to the UTC the stream's clock model gave
it when that part of the capture was written. A piecewise-linear track through the anchors follows
the device crystal's drift over hours where one model would not. Beyond the first/last anchor the
track extends with that anchor's own model.

Anchors also carry the pings received since the previous anchor. When they do, the track is
RE-FITTED: every anchor's UTC comes from the current fit (``timebase.fit_pings``) over the pings on
both sides of it (``REFIT_HALF_S``), not from the causal model of the moment of recording. A capture
recorded with an older, biased fit is therefore placed with today's, and the first seconds of a
capture get the pings that came after them.
"""
from __future__ import annotations

from itertools import chain

import numpy as np

from powerrig.core.clock import ClockModel, fit_pings

REFIT_HALF_S = 300.0     # pings up to this far before and after an anchor fit its UTC
REFIT_STEP_S = 300.0     # anchors within one step share one fit (a 10-hour capture: 120 fits)


def pack_pings(pings) -> dict:
    """Pings (t_send, index_rx, index_tx, t_recv) as compact JSON columns: host times in 0.1 us
    from t0, device indices relative to i0 (exact: they are integers or halves)."""
    a = np.asarray(pings, dtype=np.float64)
    t0, i0 = float(a[0, 0]), int(a[0, 1])
    return {"t0": t0, "i0": i0,
            "send": np.rint((a[:, 0] - t0) * 1e7).astype(np.int64).tolist(),
            "rx": (a[:, 1] - i0).tolist(), "tx": (a[:, 2] - i0).tolist(),
            "recv": np.rint((a[:, 3] - t0) * 1e7).astype(np.int64).tolist()}


def unpack_pings(d: dict) -> np.ndarray:
    """Rows (t_send, index_rx, index_tx, t_recv) from ``pack_pings``."""
    t0, i0 = float(d["t0"]), float(d["i0"])
    return np.stack([t0 + np.asarray(d["send"], np.float64) * 1e-7, i0 + np.asarray(d["rx"], np.float64),
                     i0 + np.asarray(d["tx"], np.float64), t0 + np.asarray(d["recv"], np.float64) * 1e-7], axis=1)


def _unpack_many(docs: list[dict]) -> np.ndarray:
    """``unpack_pings`` of many anchors at once (a 10-hour capture stores 7,200 of them)."""
    n = np.array([len(d["send"]) for d in docs])
    total = int(n.sum())
    t0 = np.repeat(np.array([float(d["t0"]) for d in docs]), n)
    i0 = np.repeat(np.array([float(d["i0"]) for d in docs]), n)

    def col(key):
        return np.fromiter(chain.from_iterable(d[key] for d in docs), np.float64, total)

    return np.stack([t0 + col("send") * 1e-7, i0 + col("rx"), i0 + col("tx"), t0 + col("recv") * 1e-7], axis=1)


def refit_anchors(anchors: list[dict]) -> list[dict] | None:
    """The anchors with UTC (and model) re-fitted from the pings stored in them, or None when the
    capture holds no pings (recorded before pings were stored: its anchors stand as recorded)."""
    docs = [a["pings"] for a in anchors if a.get("pings")]
    if not docs:
        return None
    p = _unpack_many(docs)
    p = p[np.argsort(p[:, 0], kind="stable")]
    period = float(anchors[0]["model"].get("period_s", 4e-6))
    # each anchor's device index, as the host saw it: its UTC under the recorded model
    at = np.array([ClockModel.from_dict(a["model"]).utc(a["raw_index"]) for a in anchors])
    out = [dict(a) for a in anchors]
    if len(p) < 2:
        return None
    step0 = float(p[0, 0])
    k = np.floor((at - step0) / REFIT_STEP_S).astype(np.int64)
    for b in np.unique(k):
        lo = step0 + b * REFIT_STEP_S - REFIT_HALF_S
        hi = step0 + (b + 1) * REFIT_STEP_S + REFIT_HALF_S
        sel = p[np.searchsorted(p[:, 0], lo):np.searchsorted(p[:, 0], hi, side="right")]
        if len(sel) < 2:
            sel = p
        m = fit_pings(sel, period)
        md = m.to_dict()
        for j in np.flatnonzero(k == b):
            out[j]["utc"] = float(m.utc(out[j]["raw_index"]))
            out[j]["model"] = md
            out[j]["recorded_utc"] = anchors[j]["utc"]
    return out


class ClockTrack:
    def __init__(self, sample_id: np.ndarray, utc: np.ndarray, interval_samples: int,
                 first_model: ClockModel, last_model: ClockModel, refitted: bool = False):
        order = np.argsort(sample_id, kind="stable")
        self.sample_id = np.asarray(sample_id, dtype=np.float64)[order]
        self.utc_at = np.asarray(utc, dtype=np.float64)[order]
        self.interval_samples = interval_samples
        self.first_model = first_model
        self.last_model = last_model
        self.refitted = refitted          # True: UTCs re-fitted from the stored pings, not as recorded

    @classmethod
    def from_anchors(cls, anchors: list[dict], interval_samples: int, refit: bool = True) -> "ClockTrack | None":
        """The track through the anchors; re-fitted from their pings when they carry any and
        ``refit`` (False: the mapping exactly as recorded). The re-fit runs on first use (about a
        second for a 10-hour capture), so opening a capture to read its samples does not pay it."""
        if not anchors:
            return None
        if refit and any(a.get("pings") for a in anchors):
            tr = cls.__new__(cls)
            tr.interval_samples = interval_samples
            tr._pending = anchors
            return tr
        return cls._build(anchors, interval_samples, False)

    @classmethod
    def _build(cls, anchors: list[dict], interval_samples: int, refitted: bool) -> "ClockTrack":
        sid = np.array([a["sample_id"] for a in anchors], dtype=np.float64)
        utc = np.array([a["utc"] for a in anchors], dtype=np.float64)
        # a later anchor for the same sample id supersedes an earlier one (better-fitted model)
        keep = np.unique(sid[::-1], return_index=True)[1]
        keep = len(sid) - 1 - keep
        first = min(anchors, key=lambda a: a["sample_id"])
        last = max(anchors, key=lambda a: a["sample_id"])
        return cls(sid[keep], utc[keep], interval_samples, ClockModel.from_dict(first["model"]),
                   ClockModel.from_dict(last["model"]), refitted=refitted)

    def __getattr__(self, name):
        """Builds a deferred re-fit the first time the track is used."""
        pending = self.__dict__.pop("_pending", None)
        if pending is None:
            raise AttributeError(name)
        redone = refit_anchors(pending)
        built = self._build(redone or pending, self.interval_samples, redone is not None)
        self.__dict__.update(built.__dict__)
        return getattr(self, name)

    def _slope(self, model: ClockModel) -> float:
        """Seconds per interval under a model."""
        return self.interval_samples * model.period_s / (1.0 + model.drift_ppm * 1e-6)

    def utc(self, sample_id):
        """Host UTC (s) of a (fractional) sample id."""
        x = np.asarray(sample_id, dtype=np.float64)
        s, u = self.sample_id, self.utc_at
        out = np.interp(x, s, u)
        lo, hi = x < s[0], x > s[-1]
        out = np.where(lo, u[0] + (x - s[0]) * self._slope(self.first_model), out)
        out = np.where(hi, u[-1] + (x - s[-1]) * self._slope(self.last_model), out)
        return out if out.ndim else float(out)

    def sample_id_at(self, utc):
        """Fractional sample id at a host UTC time (the inverse of ``utc``)."""
        t = np.asarray(utc, dtype=np.float64)
        s, u = self.sample_id, self.utc_at
        out = np.interp(t, u, s)
        lo, hi = t < u[0], t > u[-1]
        out = np.where(lo, s[0] + (t - u[0]) / self._slope(self.first_model), out)
        out = np.where(hi, s[-1] + (t - u[-1]) / self._slope(self.last_model), out)
        return out if out.ndim else float(out)
