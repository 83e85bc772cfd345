"""Capture -> CSV: one row per interval of a time range, every signal of the capture as a column.

Written chunk by chunk with pyarrow's CSV writer (C++: about 9x numpy.savetxt on these columns), so
memory stays flat in the capture's length.
Lost intervals are rows with empty float cells, so the time column stays uniform.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from powerrig.capture import CaptureReader
from powerrig.capture import layout as L
from powerrig.core.errors import CaptureError
from powerrig.export.span import sample_range

CHUNK = 1 << 17


@dataclass
class CsvExport:
    path: Path
    rows: int
    columns: list[str]
    shortfalls: tuple = ()      # the capture was cut short or got less than asked (CaptureReader.shortfalls)

    def lines(self) -> str:
        return f"{self.path}: {self.rows} rows, columns {', '.join(self.columns)}"


def _decimate(name: str, x: np.ndarray, n: int) -> np.ndarray:
    """One row per n intervals, each column reduced as its meaning asks: minima by min, maxima and peaks
    by max, the digital OR by max and AND by min, everything else by the mean of the valid rows."""
    g = -(-len(x) // n)
    pad = g * n - len(x)
    if x.dtype.kind == "f":
        y = np.concatenate([x, np.full(pad, np.nan, x.dtype)]).reshape(g, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # an all-NaN group is a gap row: NaN
            if name.startswith("p_min"):
                return np.nanmin(y, axis=1)
            if name.startswith(("p_max", "p_peak")):
                return np.nanmax(y, axis=1)
            return np.nanmean(y, axis=1).astype(x.dtype)
    y = np.concatenate([x, np.repeat(x[-1:], pad)]).reshape(g, n)
    return y.min(axis=1) if name == "dig_and" else y.max(axis=1)


def export_csv(capture: str | Path, out: str | Path, from_s: float | None = None, to_s: float | None = None,
               chunk: int = CHUNK, decimate: int = 1) -> CsvExport:
    """Full rate by default; ``decimate`` N writes one row per N intervals (see _decimate)."""
    out = Path(out)
    if int(decimate) != decimate or decimate < 1:
        raise CaptureError(f"decimation {decimate} must be a whole number of intervals, 1 or more")
    decimate = int(decimate)
    chunk = max(decimate, chunk // decimate * decimate)
    if out.suffix.lower() != ".csv":
        raise CaptureError(f"output {out} must end in .csv")
    if not out.parent.exists():
        raise CaptureError(f"folder {out.parent} does not exist; create it or choose another --out")
    with CaptureReader(capture) as cap:
        start, stop = sample_range(cap, from_s, to_s)
        floats = [name for name, _ in L.signal_names(cap.rails)]
        units = dict(L.signal_names(cap.rails))
        dt = cap.interval_s
        schema = pa.schema([("time_s", pa.float64())] + [(f"{n}_{units[n]}", pa.float32()) for n in floats] +
                           [(n, pa.uint8()) for n in L.DIGITAL_FIELDS])
        tmp = out.with_name(out.name + ".part")
        try:
            with pacsv.CSVWriter(str(tmp), schema) as w:
                rows = 0
                for s0, c in cap.chunks(floats + list(L.DIGITAL_FIELDS), start, stop, chunk):
                    if decimate > 1:
                        c = {k: _decimate(k, v, decimate) for k, v in c.items()}
                    n = len(c[L.TOTAL_POWER])
                    rows += n
                    arrays = [pa.array((s0 + np.arange(n) * decimate) * dt)]
                    arrays += [pa.array(c[k], from_pandas=True) for k in floats]     # NaN -> empty cell
                    arrays += [pa.array(c[k]) for k in L.DIGITAL_FIELDS]
                    w.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))
            tmp.replace(out)
        finally:
            tmp.unlink(missing_ok=True)
        return CsvExport(out, rows, schema.names, tuple(cap.shortfalls))
