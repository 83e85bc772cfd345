"""A streaming writer for sigrok session files (srzip v2, the .sr files PulseView and sigrok-cli open).

A session is a zip: ``version`` ("2"), ``metadata`` (INI), logic data in members ``logic-1-<chunk>``
(``unitsize`` bytes per sample, channel k is bit k) and each analog channel in members
``analog-1-<N>-<chunk>`` (float32 little-endian; N numbers the channel after the logic ones).
Every chunk is its own zip member, written as it comes, so memory stays flat however long the
session is. libsigrok shows every analog channel in volts, whatever it holds: callers put the unit
in the channel name.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from powerrig.core.errors import PowerrigError


class SigrokExportError(PowerrigError):
    """An export was asked for something a sigrok session cannot hold."""


def samplerate_text(hz: float) -> str:
    """libsigrok's spelling of a rate ("1 kHz", "250 kHz", "8 MHz"); it parses it back exactly."""
    hz = int(round(hz))
    for div, unit in ((1_000_000_000, "GHz"), (1_000_000, "MHz"), (1_000, "kHz")):
        if hz >= div and hz % div == 0:
            return f"{hz // div} {unit}"
    return f"{hz} Hz"


class SrZipWriter:
    """Writes one device's logic and analog channels chunk by chunk.

        with SrZipWriter(path, 1000, logic=["LED", "PHASE"], analog=["P12V_W"]) as w:
            w.write(logic_words, {"P12V_W": p})   # same number of samples in each call
    """

    def __init__(self, path: str | Path, samplerate_hz: float, logic: list[str] = (), analog: list[str] = (),
                 compresslevel: int = 1):
        self.path = Path(path)
        if samplerate_hz <= 0 or abs(samplerate_hz - round(samplerate_hz)) > 1e-9 * samplerate_hz:
            raise SigrokExportError(f"sample rate {samplerate_hz} Hz is not a whole number of hertz; "
                                    "sigrok sessions need an integer rate")
        if len(logic) > 64:
            raise SigrokExportError(f"{len(logic)} logic channels; a sigrok session holds at most 64")
        names = list(logic) + list(analog)
        if len(set(names)) != len(names):
            raise SigrokExportError(f"channel names must be unique: {names}")
        if not self.path.parent.exists():
            raise SigrokExportError(f"folder {self.path.parent} does not exist; create it or choose another --out")
        self.samplerate_hz = int(round(samplerate_hz))
        self.logic = list(logic)
        self.analog = list(analog)
        self.unitsize = max(1, -(-len(self.logic) // 8)) if self.logic else 0
        self.dtype = {1: np.uint8, 2: np.uint16}.get(self.unitsize, np.uint32 if self.unitsize <= 4 else np.uint64)
        self.samples = 0
        self._chunk = 0
        self._zip = zipfile.ZipFile(self.path, "w", zipfile.ZIP_DEFLATED, compresslevel=compresslevel,
                                    allowZip64=True)
        self._zip.writestr("version", "2")

    def __enter__(self) -> "SrZipWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close()
        if exc_type is not None:
            self.path.unlink(missing_ok=True)     # no half-written session left behind

    def _member(self, name: str, data) -> None:
        with self._zip.open(name, "w", force_zip64=True) as f:
            f.write(memoryview(data).cast("B"))

    def write(self, logic: np.ndarray | None, analog: dict[str, np.ndarray]) -> None:
        """Append samples: ``logic`` one word per sample (bit k = channel k), ``analog`` name -> values."""
        n = None
        if self.logic:
            words = np.ascontiguousarray(logic, dtype=self.dtype)
            n = len(words)
        for name in self.analog:
            m = len(analog[name])
            if n is not None and m != n:
                raise ValueError(f"chunk lengths differ: {name} has {m} samples, expected {n}")
            n = m
        if not n:
            return
        self._chunk += 1
        if self.logic:
            raw = words if self.unitsize in (1, 2, 4, 8) else None
            if raw is None:                            # 3, 5, 6, 7 bytes: cut the low bytes of each word
                raw = words.astype("<u8").view(np.uint8).reshape(-1, 8)[:, :self.unitsize]
            self._member(f"logic-1-{self._chunk}", np.ascontiguousarray(raw).astype(raw.dtype.newbyteorder("<"), copy=False))
        for k, name in enumerate(self.analog):
            data = np.ascontiguousarray(analog[name], dtype="<f4")
            self._member(f"analog-1-{len(self.logic) + k + 1}-{self._chunk}", data)
        self.samples += n

    def close(self) -> None:
        if self._zip is None:
            return
        lines = ["[global]", "sigrok version=0.5.2", "", "[device 1]"]
        if self.logic:
            lines.append("capturefile=logic-1")
            lines.append(f"total probes={len(self.logic)}")
        lines.append(f"samplerate={samplerate_text(self.samplerate_hz)}")
        if self.analog:
            lines.append(f"total analog={len(self.analog)}")
        lines += [f"probe{k + 1}={name}" for k, name in enumerate(self.logic)]
        lines += [f"analog{len(self.logic) + k + 1}={name}" for k, name in enumerate(self.analog)]
        if self.logic:
            lines.append(f"unitsize={self.unitsize}")
        self._zip.writestr("metadata", "\n".join(lines) + "\n")
        self._zip.close()
        self._zip = None
