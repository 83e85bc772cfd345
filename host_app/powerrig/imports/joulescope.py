"""Joulescope UI recordings (JLS v2) -> interval columns. The UI writes one file per unit: a source per
instrument with ``current``, ``voltage`` (and ``power``) at the chosen rate (up to 1 MHz for a JS220,
2 MHz for a JS110) and UTC entries; one file per rail here, placed on one UTC grid through each file's
own time map, reduced exactly as a live Joulescope is (powerrig.core.reduce)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyjls

from powerrig.core.errors import CaptureError
from powerrig.core.reduce import reduce_intervals
from powerrig.core.sampling import Accuracy, Sampling

TIME64_SECOND = 1 << 30
TIME64_EPOCH_UNIX = 1514764800
PEAK_WINDOW_S = 100e-6
# JS220 data sheet (see docs/lab-instruments.md); JS110 is wider: 0.1 % -> 0.3 %
JS220_ACCURACY = Accuracy(0.1, 1e-3, 0.1, 150e-6)
CHUNK = 1 << 22


class _Unit:
    def __init__(self, rail: str, path: Path):
        self.rail, self.path = rail, path
        if not path.is_file():
            raise CaptureError(f"Joulescope recording {path} for rail {rail} not found; check the path")
        try:
            self.r = pyjls.Reader(str(path))
        except Exception as e:  # pyjls raises its own bare exceptions for a file it cannot read
            raise CaptureError(f"{path} is not a readable JLS file ({e})") from None
        sigs = {s.name: (sid, s) for sid, s in self.r.signals.items() if sid}
        missing = [n for n in ("current", "voltage") if n not in sigs]
        if missing:
            self.r.close()
            raise CaptureError(f"{path} has no {' or '.join(missing)} signal; record current and voltage in the "
                               "Joulescope UI (or give a powerrig capture to `powerrig analyse` directly)")
        (self.i_id, si), (self.v_id, sv) = sigs["current"], sigs["voltage"]
        if si.sample_rate != sv.sample_rate or si.length != sv.length:
            self.r.close()
            raise CaptureError(f"{path}: current and voltage differ in rate or length; record both together")
        self.fs = float(si.sample_rate)
        self.length = int(si.length)
        src = self.r.sources.get(si.source_id)
        self.serial = getattr(src, "serial_number", "") if src else ""
        self.model = getattr(src, "model", "") if src else ""
        t = self.r.sample_id_to_timestamp(self.i_id, [0, self.length - 1])
        self.utc0 = t[0] / TIME64_SECOND + TIME64_EPOCH_UNIX
        self.utc1 = t[1] / TIME64_SECOND + TIME64_EPOCH_UNIX

    def sample_at(self, utc):
        """Sample ids at host UTC (unix seconds), from the file's own UTC entries (drift included)."""
        t64 = np.round((np.atleast_1d(utc) - TIME64_EPOCH_UNIX) * TIME64_SECOND).astype(np.int64)
        return np.asarray(self.r.timestamp_to_sample_id(self.i_id, t64), dtype=np.float64)

    def read(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        return self.r.fsr(self.v_id, a, b - a), self.r.fsr(self.i_id, a, b - a)

    def close(self):
        self.r.close()


def read_joulescope(files: dict[str, str | Path], interval_s: float) -> tuple[float, dict, Sampling, dict]:
    """(t0 UTC, columns, sampling, provenance) from one Joulescope file per rail."""
    units = [_Unit(rail, Path(p)) for rail, p in files.items()]
    try:
        t0 = max(u.utc0 for u in units)
        t1 = min(u.utc1 for u in units)
        rows = int(math.floor((t1 - t0) / interval_s))
        if rows <= 0:
            raise CaptureError("the Joulescope files do not overlap in time; give recordings of the same run")
        cols = {k: np.empty((rows, len(units))) for k in ("v", "i", "p", "p_min", "p_max", "p_peak")}
        step = max(1, int(CHUNK / (interval_s * max(u.fs for u in units))))
        for k, u in enumerate(units):
            window = max(1, int(round(PEAK_WINDOW_S * u.fs)))
            for a in range(0, rows, step):
                b = min(rows, a + step)
                edges = np.round(u.sample_at(t0 + np.arange(a, b + 1) * interval_s)).astype(np.int64)
                edges = np.clip(edges, 0, u.length)
                lo = max(0, int(edges[0]) - window + 1)
                v, i = u.read(lo, int(edges[-1]))
                part = reduce_intervals(v, i, edges - lo, window)
                for name in cols:
                    cols[name][a:b, k] = part[name]
        fs = min(u.fs for u in units)
        sampling = Sampling("Joulescope (imported)", 1.0 / fs, 1.0 / fs <= 4e-6 * (1 + 1e-9),
                            {u.rail: JS220_ACCURACY for u in units},
                            f"imported from {len(units)} Joulescope UI recording(s) at {fs:g} Hz")
        prov = {"instrument": "Joulescope", "serial": ",".join(u.serial for u in units),
                "files": {u.rail: str(u.path) for u in units}, "sample_rate_hz": {u.rail: u.fs for u in units}}
        return t0, cols, sampling, prov
    finally:
        for u in units:
            u.close()
