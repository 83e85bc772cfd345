"""Sample id <-> host UTC for a capture, from the clock anchors stored in it.

Each anchor is the stream's clock model evaluated when that part of the capture was written, so a
piecewise-linear track through the anchors follows the device crystal's drift over hours where one
model (fitted on the last minute of pings) would not. Beyond the first/last anchor the track
extends with that anchor's own model.
"""
from __future__ import annotations

import numpy as np

from powerrig.timebase import ClockModel


class ClockTrack:
    def __init__(self, sample_id: np.ndarray, utc: np.ndarray, interval_samples: int,
                 first_model: ClockModel, last_model: ClockModel):
        order = np.argsort(sample_id, kind="stable")
        self.sample_id = np.asarray(sample_id, dtype=np.float64)[order]
        self.utc_at = np.asarray(utc, dtype=np.float64)[order]
        self.interval_samples = interval_samples
        self.first_model = first_model
        self.last_model = last_model

    @classmethod
    def from_anchors(cls, anchors: list[dict], interval_samples: int) -> "ClockTrack | None":
        if not anchors:
            return None
        sid = np.array([a["sample_id"] for a in anchors], dtype=np.float64)
        utc = np.array([a["utc"] for a in anchors], dtype=np.float64)
        # a later anchor for the same sample id supersedes an earlier one (better-fitted model)
        keep = np.unique(sid[::-1], return_index=True)[1]
        keep = len(sid) - 1 - keep
        first = min(anchors, key=lambda a: a["sample_id"])
        last = max(anchors, key=lambda a: a["sample_id"])
        return cls(sid[keep], utc[keep], interval_samples, ClockModel.from_dict(first["model"]),
                   ClockModel.from_dict(last["model"]))

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
