"""Joulescope recordings (JLS v2) -> interval columns. Jetperch's writers lay a file out as one source
per instrument (joulescope_ui's SignalRecord and Exporter: named MODEL-SERIAL, e.g. JS220-003512;
pyjoulescope_driver's Record: the same name, one unit), each with its own ``current``, ``voltage`` (and
``power``, ``current_range``, ``gpi[n]``) signals at its own rate (up to 1 MHz for a JS220, 2 MHz for a
JS110) and UTC entries. A file's units are enumerated: a file of one unit maps as it is, a file of
several (the UI recording two units together) needs ``RAIL=FILE#SERIAL`` (or #SOURCE-NAME), and an
ambiguous mapping is refused in one line that lists the units. Each rail's unit is placed on one UTC
grid through its own time map and reduced exactly as a live Joulescope is (powerrig.core.reduce)."""
from __future__ import annotations

import math
from dataclasses import dataclass
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
# the JS220's current ranges by the index its s/i/range stream (the file's current_range signal) carries,
# widest first: joulescope_ui devices/jsdrv/js220.py, current_range options and current_range_limits [0, 5]
JS220_CURRENT_RANGES = ("10 A", "180 mA", "18 mA", "1.8 mA", "180 uA", "18 uA")


@dataclass
class JlsUnit:
    """One instrument in a JLS file: its source and its current/voltage signals."""
    source_id: int
    name: str
    vendor: str
    model: str
    serial: str
    version: str
    signals: dict          # signal name -> pyjls SignalDef

    def label(self) -> str:
        return f"{self.name} (serial {self.serial})" if self.serial else self.name

    def matches(self, sel: str) -> bool:
        """A rail's #selector: the serial number (leading zeros optional) or the source's name."""
        sel = sel.strip()
        by_serial = bool(self.serial) and sel.lstrip("0") == self.serial.lstrip("0") and sel.lstrip("0") != ""
        return by_serial or sel.lower() == self.name.lower()


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``FILE`` or ``FILE#UNIT`` -> (path, unit selector); a path that itself holds '#' is taken whole."""
    if "#" in spec and not Path(spec).is_file():
        path, _, sel = spec.rpartition("#")
        return Path(path), sel
    return Path(spec), None


def _open(path: Path) -> pyjls.Reader:
    if not path.is_file():
        raise CaptureError(f"Joulescope recording {path} not found; check the path")
    try:
        return pyjls.Reader(str(path))
    except Exception as e:  # pyjls raises its own bare exceptions for a file it cannot read
        raise CaptureError(f"{path} is not a readable JLS file ({e})") from None


def units_in(reader: pyjls.Reader) -> list[JlsUnit]:
    """Every source of the file that has an FSR current and voltage: the file's instruments."""
    by_source: dict[int, dict] = {}
    for sid, sig in reader.signals.items():
        if sid and sig.signal_type == pyjls.SignalType.FSR:
            by_source.setdefault(sig.source_id, {}).setdefault(sig.name, sig)
    out = []
    for src_id, sigs in sorted(by_source.items()):
        if "current" not in sigs or "voltage" not in sigs:
            continue
        src = reader.sources.get(src_id)
        out.append(JlsUnit(src_id, getattr(src, "name", "") or f"source {src_id}", getattr(src, "vendor", "") or "",
                           getattr(src, "model", "") or "", getattr(src, "serial_number", "") or "",
                           getattr(src, "version", "") or "", sigs))
    return out


def choose_units(files: dict[str, str]) -> tuple[dict[str, pyjls.Reader], dict[str, tuple[Path, JlsUnit]]]:
    """Open each file once and pick each rail's unit; every ambiguity is one line listing the units."""
    readers: dict[str, pyjls.Reader] = {}
    chosen: dict[str, tuple[Path, JlsUnit]] = {}
    try:
        for rail, spec in files.items():
            path, sel = split_spec(str(spec))
            key = str(path.resolve()) if path.exists() else str(path)
            if key not in readers:
                readers[key] = _open(path)
            units = units_in(readers[key])
            listing = ", ".join(u.label() for u in units)
            if not units:
                raise CaptureError(f"{path} has no unit with current and voltage signals; record current and voltage "
                                   "in the Joulescope UI (or give a powerrig capture to `powerrig analyse` directly)")
            if sel is None:
                if len(units) > 1:
                    eg = units[0].serial or units[0].name
                    raise CaptureError(f"{path} holds {len(units)} Joulescope units: {listing}; name the unit of each "
                                       f"rail, e.g. {rail}={path}#{eg}")
                unit = units[0]
            else:
                hit = [u for u in units if u.matches(sel)]
                if len(hit) != 1:
                    raise CaptureError(f"{path} holds {'no' if not hit else 'more than one'} unit {sel!r}; its units: "
                                       f"{listing}; name one by serial or source name ({rail}={path}#SERIAL)")
                unit = hit[0]
            for other, (opath, ounit) in chosen.items():
                if str(opath.resolve()) == str(path.resolve()) and ounit.source_id == unit.source_id:
                    raise CaptureError(f"rails {other} and {rail} both name unit {unit.label()} in {path}; give each "
                                       f"rail its own unit (its units: {listing})")
            chosen[rail] = (path, unit)
    except BaseException:
        for r in readers.values():
            r.close()
        raise
    return readers, chosen


class _Unit:
    """One rail's instrument: its samples and its own UTC map, read from its file's reader."""

    def __init__(self, rail: str, path: Path, reader: pyjls.Reader, unit: JlsUnit):
        self.rail, self.path, self.r, self.unit = rail, path, reader, unit
        si, sv = unit.signals["current"], unit.signals["voltage"]
        if si.sample_rate != sv.sample_rate or si.length != sv.length:
            raise CaptureError(f"{path}: unit {unit.label()}'s current and voltage differ in rate or length; "
                               "record both together")
        self.i_id, self.v_id = si.signal_id, sv.signal_id
        self.fs = float(si.sample_rate)
        self.length = int(si.length)
        if self.length < 2:
            raise CaptureError(f"{path}: unit {unit.label()} holds {self.length} samples; nothing to import")
        self.serial, self.model = unit.serial, unit.model
        self.invalid = 0               # samples the instrument marked invalid (NaN) inside the imported rows
        t = self.r.sample_id_to_timestamp(self.i_id, [0, self.length - 1])
        self.utc0 = t[0] / TIME64_SECOND + TIME64_EPOCH_UNIX
        self.utc1 = t[1] / TIME64_SECOND + TIME64_EPOCH_UNIX

    def sample_at(self, utc):
        """Sample ids at host UTC (unix seconds), from the unit's own UTC entries (drift included)."""
        t64 = np.round((np.atleast_1d(utc) - TIME64_EPOCH_UNIX) * TIME64_SECOND).astype(np.int64)
        return np.asarray(self.r.timestamp_to_sample_id(self.i_id, t64), dtype=np.float64)

    def read(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        return self.r.fsr(self.v_id, a, b - a), self.r.fsr(self.i_id, a, b - a)

    def identity(self) -> dict:
        """What the capture's metadata says about this rail's instrument."""
        u = self.unit
        return {"file": str(self.path), "source": u.name, "source_id": u.source_id, "vendor": u.vendor,
                "model": u.model, "serial": u.serial, "version": u.version, "sample_rate_hz": self.fs,
                "samples": self.length, "invalid_samples": self.invalid, "signals": sorted(u.signals),
                "current_range": self.current_range()}

    def current_range(self) -> dict:
        """The current ranges the unit used, when the file holds its current_range signal."""
        sig = self.unit.signals.get("current_range")
        if sig is None or not sig.length:
            return {"recorded": False}
        st = np.asarray(self.r.fsr_statistics(sig.signal_id, 0, int(sig.length), 1))[0]
        lo, hi = int(round(float(st[2]))), int(round(float(st[3])))
        out = {"recorded": True, "codes": [lo, hi]}
        if self.model.upper().startswith("JS220") and 0 <= lo <= hi < len(JS220_CURRENT_RANGES):
            out |= {"widest": JS220_CURRENT_RANGES[lo], "narrowest": JS220_CURRENT_RANGES[hi]}
        return out


def read_joulescope(files: dict[str, str | Path], interval_s: float) -> tuple[float, dict, Sampling, dict]:
    """(t0 UTC, columns, sampling, provenance) from each rail's unit: ``files`` maps rail -> FILE or
    FILE#SERIAL (a file holding several units needs the selector)."""
    readers, chosen = choose_units(files)
    try:
        units = [_Unit(rail, path, readers[str(path.resolve())], unit) for rail, (path, unit) in chosen.items()]
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
                u.invalid += int((~(np.isfinite(v[edges[0] - lo:]) & np.isfinite(i[edges[0] - lo:]))).sum())
                for name in cols:
                    cols[name][a:b, k] = part[name]
        fs = min(u.fs for u in units)
        sampling = Sampling("Joulescope (imported)", 1.0 / fs, 1.0 / fs <= 4e-6 * (1 + 1e-9),
                            {u.rail: JS220_ACCURACY for u in units},
                            "imported: " + ", ".join(f"{u.rail} {u.model or 'Joulescope'} {u.serial} at {u.fs:g} Hz"
                                                     for u in units))
        prov = {"instrument": "Joulescope", "serial": ",".join(u.serial for u in units),
                "files": {u.rail: str(u.path) for u in units}, "sample_rate_hz": {u.rail: u.fs for u in units},
                "units": {u.rail: u.identity() for u in units}}
        return t0, cols, sampling, prov
    finally:
        for r in readers.values():
            r.close()
