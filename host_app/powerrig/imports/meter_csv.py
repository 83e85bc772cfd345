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
    current = { column = "I2", units = "A", range = [-0.1, 3.0] }   # optional: readings outside are invalid
    [accuracy.12V]                                  # optional: the meter's stated accuracy per rail
    v_gain_pct = 0.05
    v_offset = 0.002
    i_gain_pct = 0.1
    i_offset = 0.0005

Each sample stands for its own period (the meter's interval: its records are means over it). By
default the capture keeps that interval, one row per record; with another interval each row is the
time-weighted mean of the records overlapping it, the overlaps computed in integer nanoseconds (no
float truncation drops or doubles an interval), and every row not wholly covered is listed with its
coverage. A record that is no reading (the SCPI overflow 9.9E37 an N6705C logs for an overload, its
not-a-number 9.91E37, NaN, an empty cell, OL/OVLD, or a value outside a column's ``range``) is never
averaged in: its rows are NaN, a gap ("invalid") with an annotation, and counted per rail and quantity.
A meter samples far slower than 4 us, so the capture states its sample interval and the peak checks
say their requirement is not met.
"""
from __future__ import annotations

import csv
import tomllib
from datetime import datetime
from pathlib import Path

import numpy as np

from powerrig.core.errors import CaptureError
from powerrig.core.sampling import Accuracy, Sampling
from powerrig.instruments.scpi import NOT_A_NUMBER, OVERLOAD, reading_faults

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
SCALE = {"V": 1.0, "mV": 1e-3, "A": 1.0, "mA": 1e-3, "uA": 1e-6}


class MappingError(CaptureError):
    """The mapping file does not say how to read the CSV."""


NS = 1_000_000_000
OUT_OF_RANGE = 3                                     # beside scpi's NOT_A_NUMBER and OVERLOAD
FAULT_NAMES = {OVERLOAD: "overload", NOT_A_NUMBER: "not_a_number", OUT_OF_RANGE: "out_of_range"}
OVERLOAD_TEXT = {"OL", "+OL", "-OL", "OVL", "OVLD", "OVER", "OVERLOAD", "OVERFLOW"}
EMPTY_TEXT = {"", "NAN", "-", "--", "---", "----", "N/A", "NA"}
ON_GRID = 20                                         # a record within 1/20 of a period of its slot is on the grid


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
            rng = col.get("range")
            if rng is not None and not (isinstance(rng, list) and len(rng) == 2
                                        and all(isinstance(x, (int, float)) for x in rng) and rng[0] < rng[1]):
                raise MappingError(f"mapping [rails.{r}] {q} range {rng!r}: give [low, high] in the column's units")
    return m


def _utc(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _numbers(csv_path: Path, name: str, cells: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(values, faults) of one column: the meter's no-reading markers (SCPI 9.9E37 / 9.91E37, NaN, an
    empty cell, OL ...) become NaN with their fault code; any other text is refused in one line."""
    try:
        x = np.array(cells, dtype=np.float64)
        return x, reading_faults(x)
    except ValueError:
        pass
    x = np.empty(len(cells))
    text_fault = np.zeros(len(cells), np.uint8)
    for k, c in enumerate(cells):
        try:
            x[k] = float(c)
        except (TypeError, ValueError):
            word = (c or "").strip().upper()
            if word in OVERLOAD_TEXT or word in EMPTY_TEXT:
                x[k] = np.nan
                text_fault[k] = OVERLOAD if word in OVERLOAD_TEXT else NOT_A_NUMBER
            else:
                raise CaptureError(f"{csv_path} column {name!r} row {k + 2}: {c!r} is not a number; fix the cell "
                                   "or leave it empty (an empty cell is read as no reading)") from None
    return x, np.where(text_fault > 0, text_fault, reading_faults(x))


def _times_ns(csv_path: Path, mapping: dict, rows: list[dict]) -> tuple[float, np.ndarray]:
    """(UTC of the first record, each record's time in integer ns after it)."""
    t = mapping["time"]
    units = t.get("units", "s")
    name = t["column"]
    if name not in rows[0]:
        raise MappingError(f"{csv_path} has no column {name!r}; its columns: {', '.join(rows[0])}")
    cells = [r[name] for r in rows]
    if units == "iso":
        try:
            secs = np.array([_utc(c) for c in cells])
        except (TypeError, ValueError) as e:
            raise CaptureError(f"{csv_path} column {name!r}: {e}; give ISO 8601 times") from None
        base = 0.0
    else:
        secs, bad = _numbers(csv_path, name, cells)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise CaptureError(f"{csv_path} column {name!r} row {k + 2}: {cells[k]!r} is no time; every row needs one")
        base = 0.0 if units == "unix" else _utc(str(t["start_utc"]))
        secs = secs * TIME_UNITS.get(units, 1.0)
    first = float(np.min(secs))
    ns = np.round((secs - first) * NS).astype(np.int64)
    return base + first, ns


def _meter_grid(csv_path: Path, ns: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, bool]:
    """(the meter's interval in ns, each record's [start, end) in ns): on the meter's own grid when every
    record sits within 1/20 of a period of its slot (the usual logger), else each record up to the next."""
    d = np.diff(ns)
    if (d == 0).any():
        k = int(np.flatnonzero(d == 0)[0])
        raise CaptureError(f"{csv_path}: rows {k + 2} and {k + 3} have the same time; one record per time")
    if not len(d):
        raise CaptureError(f"{csv_path} has a single row: its interval is unknown; log at least two records")
    med = int(np.median(d))
    span = int(ns[-1])
    steps = max(1, (span * 2 + med) // (2 * med))               # periods between the first and last record
    dt = (span * 2 + steps) // (2 * steps)                     # the period over the whole log, to the ns
    slot = (ns * 2 + dt) // (2 * dt)                           # integer rounding, no float truncation
    on_grid = bool(np.all(np.abs(ns - slot * dt) * ON_GRID <= dt) and np.all(np.diff(slot) > 0))
    if on_grid:
        return dt, slot * dt, (slot + 1) * dt, True
    end = np.minimum(np.append(ns[1:], ns[-1] + dt), ns + dt)
    return dt, ns, end, False


def _resample(start: np.ndarray, end: np.ndarray, x: dict, interval_ns: int, rows: int):
    """Time-weighted means of each record's values over output rows [j I, (j+1) I): every overlap in
    integer ns. ``x``: name -> (records x rails) with NaN where invalid; returns the means, the ns each
    rail's valid records cover per row, and whether any record (valid or not) spans the row."""
    first = start // interval_ns
    last = (end - 1) // interval_ns
    pieces = (last - first + 1).astype(np.int64)
    rec = np.repeat(np.arange(len(start)), pieces)
    offset = np.arange(len(rec)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    j = first[rec] + offset
    w = np.minimum(end[rec], (j + 1) * interval_ns) - np.maximum(start[rec], j * interval_ns)
    keep = (w > 0) & (j < rows)
    rec, j, w = rec[keep], j[keep], w[keep]
    spanned = np.bincount(j, w, minlength=rows)[:rows] > 0
    n_rails = next(iter(x.values())).shape[1]
    covered = np.zeros((rows, n_rails), np.int64)
    out = {name: np.full((rows, n_rails), np.nan) for name in x}
    for k in range(n_rails):
        ok = np.isfinite(np.column_stack([a[rec, k] for a in x.values()])).all(axis=1)
        covered[:, k] = np.bincount(j[ok], w[ok], minlength=rows)[:rows].astype(np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            for name, a in x.items():
                out[name][:, k] = np.bincount(j[ok], a[rec[ok], k] * w[ok], minlength=rows)[:rows] / covered[:, k]
    out = {name: np.where(covered > 0, a, np.nan) for name, a in out.items()}
    return out, covered, spanned


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    return [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2])]


def _rows(csv_path: Path) -> list[dict]:
    try:
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise CaptureError(f"cannot read {csv_path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise CaptureError(f"{csv_path} is not a CSV text file ({e})") from None
    if not rows:
        raise CaptureError(f"{csv_path} has no data rows")
    return rows


def read_meter_csv(csv_path: str | Path, mapping: dict, interval_s: float | None = None
                   ) -> tuple[float, dict, Sampling, dict]:
    """(t0 UTC, columns, sampling, provenance) from the CSV and its mapping; ``interval_s`` None keeps
    the meter's own interval. Columns carry ``reason`` per row ("" valid, "invalid", "missing")."""
    csv_path = Path(csv_path)
    rows = _rows(csv_path)
    t0, ns = _times_ns(csv_path, mapping, rows)
    order = np.argsort(ns, kind="stable")
    ns = ns[order]
    dt, start, end, on_grid = _meter_grid(csv_path, ns)
    if interval_s is None:
        if dt % 1000 or NS % dt:
            raise CaptureError(f"{csv_path}: the meter logs every {dt / 1000:g} us, which is not a whole number of "
                               "microseconds dividing one second; give --interval-us (e.g. 1000)")
        interval_ns = dt
    else:
        interval_ns = int(round(interval_s * 1e6)) * 1000
    rails = list(mapping["rails"])
    header = list(rows[0])
    vals, faults = {}, {}
    for q, key in (("v", "voltage"), ("i", "current")):
        cols, fcols = [], []
        for r, spec in mapping["rails"].items():
            col = spec[key]
            name = col["column"]
            if name not in rows[0]:
                raise MappingError(f"{csv_path} has no column {name!r}; its columns: {', '.join(header)}")
            x, f = _numbers(csv_path, name, [row[name] for row in rows])
            if col.get("range") is not None:
                lo, hi = col["range"]
                f = np.where((f == 0) & ((x < lo) | (x > hi)), OUT_OF_RANGE, f)
            x = np.where(f > 0, np.nan, x * SCALE[col.get("units", "V" if q == "v" else "A")])
            cols.append(x[order])
            fcols.append(f[order])
        vals[q], faults[q] = np.column_stack(cols), np.column_stack(fcols)
    vals["p"] = vals["v"] * vals["i"]
    n_rows = int(-(-int(end[-1]) // interval_ns))
    cols, covered, spanned = _resample(start, end, vals, interval_ns, n_rows)
    full = (covered == interval_ns).all(axis=1)
    none = (covered == 0).any(axis=1)
    partial = ~full & ~none
    # a row without a valid reading is "invalid" where records span it (overloads ...), "missing" where none do
    cols["reason"] = np.where(none, np.where(spanned, "invalid", "missing"), "")
    runs = []
    for a, n in _runs(partial):
        runs.append([a, n, round(float(covered[a:a + n].min() / interval_ns), 6)])
    counts = {r: {key: {name: int(((faults[q][:, k]) == code).sum()) for code, name in FAULT_NAMES.items()}
                  for q, key in (("v", "voltage"), ("i", "current"))} for k, r in enumerate(rails)}
    bad_records = int(((faults["v"] > 0) | (faults["i"] > 0)).any(axis=1).sum())
    acc = {r: Accuracy(**mapping["accuracy"][r]) for r in rails if r in mapping.get("accuracy", {})}
    sampling = Sampling(f"meter CSV {csv_path.name}", dt / NS, False, acc,
                        f"{len(ns)} records every {dt / 1e6:g} ms, " + ("one row each" if interval_ns == dt else
                        f"resampled to {interval_ns / 1e6:g} ms by time-weighted overlap"))
    prov = {"instrument": mapping.get("instrument", "meter"), "file": str(csv_path), "samples": len(ns),
            "invalid_samples": bad_records, "invalid": counts,
            "resampling": {"meter_interval_s": dt / NS, "interval_s": interval_ns / NS, "on_meter_grid": on_grid,
                           "exact": True, "coverage": {"full": int(full.sum()), "partial": int(partial.sum()),
                                                       "none": int(none.sum()), "partial_runs": runs}}}
    return t0, cols, sampling, prov
