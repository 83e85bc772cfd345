"""A CSV from any meter -> interval columns, read through a small mapping file (TOML):

    [time]
    column = "Time (s)"          # the time column
    units = "s"                  # s | ms | us: seconds from start_utc; unix: UNIX seconds; iso: ISO 8601 text
    start_utc = "2026-11-25T08:00:00Z"   # for s/ms/us: the UTC of time 0
    [rails.12V]
    voltage = { column = "V1", units = "V" }      # V | mV
    current = { column = "I1", units = "mA" }     # A | mA | uA
    [rails.3V3]
    voltage = { column = "V2", units = "V" }
    current = { column = "I2", units = "A" }
    [accuracy.12V]                                  # optional: the meter's stated accuracy per rail
    v_gain_pct = 0.05
    v_offset = 0.002
    i_gain_pct = 0.1
    i_offset = 0.0005

Samples are averaged into intervals (mean V, I and V*I per interval); an interval with no sample is
a gap. A meter samples far slower than 4 us, so the capture states its sample interval and the peak
checks say their requirement is not met.
"""
from __future__ import annotations

import csv
import math
import tomllib
from datetime import datetime
from pathlib import Path

import numpy as np

from powerrig.core.errors import CaptureError
from powerrig.core.sampling import Accuracy, Sampling

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
SCALE = {"V": 1.0, "mV": 1e-3, "A": 1.0, "mA": 1e-3, "uA": 1e-6}


class MappingError(CaptureError):
    """The mapping file does not say how to read the CSV."""


def _need(d: dict, key: str, where: str):
    if key not in d:
        raise MappingError(f"mapping {where}: missing {key!r}; see docs/lab-instruments.md for the mapping file")
    return d[key]


def load_mapping(path: str | Path) -> dict:
    try:
        m = tomllib.loads(Path(path).read_text())
    except OSError as e:
        raise MappingError(f"cannot read mapping file {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise MappingError(f"mapping file {path} is not TOML ({e})") from None
    t = _need(m, "time", str(path))
    _need(t, "column", "[time]")
    if t.get("units", "s") not in (*TIME_UNITS, "unix", "iso"):
        raise MappingError(f"mapping [time] units {t.get('units')!r}: use s, ms, us, unix or iso")
    if t.get("units", "s") in TIME_UNITS and "start_utc" not in t:
        raise MappingError("mapping [time]: times in s/ms/us need start_utc (the UTC of time 0, ISO 8601)")
    rails = _need(m, "rails", str(path))
    if not rails:
        raise MappingError("mapping [rails] is empty: name at least one rail with its voltage and current columns")
    for r, spec in rails.items():
        for q in ("voltage", "current"):
            col = _need(spec, q, f"[rails.{r}]")
            if col.get("units", "V" if q == "voltage" else "A") not in SCALE:
                raise MappingError(f"mapping [rails.{r}] {q} units {col.get('units')!r}: use V, mV, A, mA or uA")
    return m


def _utc(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def read_meter_csv(csv_path: str | Path, mapping: dict, interval_s: float) -> tuple[float, dict, Sampling, dict]:
    """(t0 UTC, columns, sampling, provenance) from the CSV and its mapping."""
    csv_path = Path(csv_path)
    try:
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise CaptureError(f"cannot read {csv_path}: {e.strerror or e}") from None
    if not rows:
        raise CaptureError(f"{csv_path} has no data rows")
    t = mapping["time"]
    units = t.get("units", "s")
    header = list(rows[0])

    def column(name: str, scale: float = 1.0) -> np.ndarray:
        if name not in rows[0]:
            raise MappingError(f"{csv_path} has no column {name!r}; its columns: {', '.join(header)}")
        try:
            return np.array([float(r[name]) for r in rows]) * scale
        except (TypeError, ValueError) as e:
            raise CaptureError(f"{csv_path} column {name!r}: {e}") from None

    if units == "iso":
        times = np.array([_utc(r[t["column"]]) for r in rows])
    elif units == "unix":
        times = column(t["column"])
    else:
        times = _utc(str(t["start_utc"])) + column(t["column"], TIME_UNITS[units])
    order = np.argsort(times, kind="stable")
    times = times[order]
    rails = list(mapping["rails"])
    v = np.column_stack([column(s["voltage"]["column"], SCALE[s["voltage"].get("units", "V")])[order]
                         for s in mapping["rails"].values()])
    a = np.column_stack([column(s["current"]["column"], SCALE[s["current"].get("units", "A")])[order]
                         for s in mapping["rails"].values()])
    dt = float(np.median(np.diff(times))) if len(times) > 1 else interval_s
    t0 = float(times[0])
    n = int(math.floor((times[-1] + dt - t0) / interval_s + 1e-9))
    row = np.clip(((times - t0) / interval_s).astype(np.int64), 0, max(n - 1, 0))
    cnt = np.bincount(row, minlength=n).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        cols = {}
        for name, x in (("v", v), ("i", a), ("p", v * a)):
            cols[name] = np.column_stack([np.bincount(row, x[:, k], minlength=n) / cnt for k in range(len(rails))])
    acc = {r: Accuracy(**mapping["accuracy"][r]) for r in rails if r in mapping.get("accuracy", {})}
    sampling = Sampling(f"meter CSV {csv_path.name}", max(dt, 0.0), False, acc,
                        f"{len(times)} samples about {dt * 1e3:g} ms apart, averaged into intervals")
    prov = {"instrument": mapping.get("instrument", "meter"), "file": str(csv_path), "samples": len(times)}
    return t0, cols, sampling, prov
