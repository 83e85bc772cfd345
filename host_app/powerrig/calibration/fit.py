"""Gain and offset per channel from paired readings, and the calibration that applies them.

Pure functions over arrays (no I/O): ``fit_channel`` is a least-squares line reference = a * reading
+ b; ``apply_fit`` turns a line into the interposer's calibration fields. The interposer subtracts an
integer offset code on the device (before V*I, so power stays exact) and the host multiplies by the
gain, so a fitted line maps to: gain' = a * gain, offset' = offset - b / (a * gain * lsb).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from powerrig.core.errors import InstrumentError
from powerrig_fw.calibration import TC_LIMIT_PPM, gain_at

OFFSET_LIMIT_CODES = 4096        # what the firmware accepts (powerrig_fw.calibration.validate)
GAIN_RANGE = (0.8, 1.2)


@dataclass
class ChannelFit:
    channel: str            # "12V.v", "12V.i"
    gain: float             # a: reference = a * reading + b
    offset: float           # b, in volts or amps
    residual_max: float     # largest |reference - fitted| at the fit points, in volts or amps
    residual_rms: float
    full_scale: float
    points: int

    @property
    def residual_fs(self) -> float:
        """The largest residual as a fraction of full scale."""
        return self.residual_max / self.full_scale

    def to_dict(self) -> dict:
        return asdict(self) | {"residual_fs": self.residual_fs}


def fit_channel(channel: str, reading: np.ndarray, reference: np.ndarray, full_scale: float) -> ChannelFit:
    x, y = np.asarray(reading, float), np.asarray(reference, float)
    if len(x) < 2 or np.ptp(x) < 0.05 * full_scale:
        raise InstrumentError(f"{channel}: the readings span {np.ptp(x) if len(x) else 0:.4g} of {full_scale:.4g} full "
                              "scale; a gain needs points across the range (step the load over more of it)")
    a, b = np.polyfit(x, y, 1)
    r = y - (a * x + b)
    return ChannelFit(channel, float(a), float(b), float(np.abs(r).max()), float(np.sqrt(np.mean(r * r))),
                      float(full_scale), len(x))


def apply_fit(cal: dict, description: dict, fits: dict[str, ChannelFit]) -> dict:
    """The new calibration: ``cal`` with every fitted channel's gain and offset updated."""
    lsb = {r["name"]: (r["v_lsb"], r["i_lsb"]) for r in description["rails"]}
    out = {"version": 1, "source": "powerrig calibrate", "rails": {}}
    for rail, c in cal["rails"].items():
        new = dict(c)
        for q, k in (("v", 0), ("i", 1)):
            f = fits.get(f"{rail}.{q}")
            if f is None:
                continue
            g0, o0 = float(c.get(f"{q}_gain", 1.0)), int(c.get(f"{q}_offset", 0))
            g1 = f.gain * g0
            o1 = int(round(o0 - f.offset / (f.gain * g0 * lsb[rail][k])))
            if not GAIN_RANGE[0] <= g1 <= GAIN_RANGE[1] or abs(o1) > OFFSET_LIMIT_CODES:
                raise InstrumentError(f"{f.channel}: the fit asks for gain {g1:.5f} and offset {o1} codes, outside what "
                                      "the interposer accepts (gain 0.8..1.2, offset +-4096): check the wiring and the "
                                      "channel map before calibrating")
            new[f"{q}_gain"], new[f"{q}_offset"] = g1, o1
        out["rails"][rail] = new
    return out


def errors_pct(reading: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Interposer error in percent of the reference reading."""
    ref = np.asarray(reference, float)
    return (np.asarray(reading, float) - ref) / np.abs(ref) * 100.0


def check_temperature_gap(t_first_c: float, t_now_c: float) -> float:
    """The board's temperature difference from the first pass (K), refused under 10 K: checked before
    any point is measured, and again on the fit."""
    dt = t_now_c - t_first_c
    if abs(dt) < 10.0:
        raise InstrumentError(f"the board is {t_now_c:.1f} C, {dt:+.1f} K from the first pass at {t_first_c:.1f} C: "
                              "temperature coefficients need at least 10 K between the passes (warm or cool the board)")
    return dt


def apply_temperature_fit(cal: dict, fits: dict[str, ChannelFit], t_first_c: float, t_now_c: float) -> dict:
    """The second pass of the two-temperature calibration (hw/rails.toml [calibration]).

    ``cal`` was fitted at board temperature ``t_first_c``; ``fits`` are lines measured now, at
    ``t_now_c``, with that calibration applied. A channel whose gain must change by a factor ``a``
    over the difference gets a temperature coefficient (ppm/K) so that the gain is right at both
    temperatures, referred to ``t_first_c``: G(T) = g * (1 + tc * (T - t_first_c)).
    """

    dt = check_temperature_gap(t_first_c, t_now_c)
    t_ref = cal.get("t_ref_c", 25.0)
    out = {"version": 1, "source": "powerrig calibrate --temperature", "t_ref_c": t_first_c, "rails": {}}
    for rail, c in cal["rails"].items():
        new = dict(c)
        for q in ("v", "i"):
            g1, g2 = gain_at(c, q, t_first_c, t_ref), gain_at(c, q, t_now_c, t_ref)
            f = fits.get(f"{rail}.{q}")
            if f is not None:
                g2 = f.gain * g2
            tc = (g2 / g1 - 1.0) / dt * 1e6
            if abs(tc) > TC_LIMIT_PPM:
                raise InstrumentError(f"{rail}.{q}: {tc:.0f} ppm/K between {t_first_c:.1f} and {t_now_c:.1f} C is not drift "
                                      "(more than +-500 ppm/K): check the wiring and that the board reached temperature")
            new[f"{q}_gain"], new[f"{q}_tc"] = g1, tc
        out["rails"][rail] = new
    return out


def rebase_temperature(cal: dict, t_c: float) -> dict:
    """The same calibration referred to board temperature ``t_c``: each gain becomes its value at
    ``t_c`` and ``t_ref_c`` = ``t_c`` (coefficients kept), so a fit made at ``t_c`` multiplies it."""

    t_ref = cal.get("t_ref_c", 25.0)
    rails = {r: dict(c, v_gain=gain_at(c, "v", t_c, t_ref), i_gain=gain_at(c, "i", t_c, t_ref))
             for r, c in cal["rails"].items()}
    return dict(cal, t_ref_c=float(t_c), rails=rails)
