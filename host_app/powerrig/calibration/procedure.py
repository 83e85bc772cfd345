"""Calibration and validation against a reference meter: step the load, measure both on one clock,
fit, write, verify.

The reference's outputs supply each rail at a voltage setpoint and load it at a current setpoint
(an N6705C SMU channel, or the simulator's calibration fixture); fit and verification points differ,
so the figures after calibration are measured on points the fit never saw.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
import time

import numpy as np

from powerrig.calibration.fit import (ChannelFit, apply_fit, apply_temperature_fit, check_temperature_gap, errors_pct,
                                      fit_channel, rebase_temperature)
from powerrig.calibration.window import StreamWindows, WindowError
from powerrig.core.errors import InstrumentError
from powerrig.instruments.scpi import InvalidReading
from powerrig.core.rails import rails as rail_config

log = logging.getLogger(__name__)

FIT_V = (0.92, 1.0, 1.05)          # fractions of the nominal voltage
FIT_I = (0.1, 0.5, 0.9)            # fractions of the rail's expected maximum current
VERIFY_V = (0.95, 1.03)
VERIFY_I = (0.25, 0.7)
RETRIES = 2                         # a window with lost frames is measured again, this many times


@dataclass
class Point:
    setpoints: dict[str, tuple[float, float]]              # rail -> (V, A) asked of the reference
    interposer: dict[str, tuple[float, float]] = field(default_factory=dict)
    reference: dict[str, tuple[float, float]] = field(default_factory=dict)
    t0: float = 0.0
    t1: float = 0.0

    def to_dict(self) -> dict:
        return {"setpoints": self.setpoints, "interposer": self.interposer, "reference": self.reference,
                "t0": self.t0, "t1": self.t1}


def grid(rails: list[str], vf, if_) -> list[Point]:
    cfg = {r.name: r for r in rail_config().rails}
    pts = []
    for a in vf:
        for b in if_:
            pts.append(Point({r: (round(cfg[r].nominal_v * a, 4), round(max(cfg[r].expected_max_a, 0.1) * b, 4))
                              for r in rails}))
    return pts


def measure(points: list[Point], ref, win: StreamWindows, channels: dict[str, int], seconds: float,
            settle_s: float = 0.15, progress=None, label: str = "point") -> None:
    """Fill each point's readings: set, settle, one timed acquisition on the reference, the same host
    window from the interposer. ``label`` says in the progress line what the point is for."""

    chs = [channels[r] for r in win.rails]
    for n, p in enumerate(points):
        for r, (v, a) in p.setpoints.items():
            ref.set_source(channels[r], v, a)
            ref.output(channels[r], True)
        time.sleep(settle_s)
        for attempt in range(RETRIES + 1):
            acq = ref.acquire(chs, seconds, points=512)
            p.t0, p.t1 = acq.t_trigger, acq.t_end
            for r in win.rails:
                v, i = acq.volts[channels[r]], acq.amps[channels[r]]
                p.reference[r] = (float(v.mean()), float(i.mean()))
            try:
                p.interposer = win.mean(p.t0, p.t1)
                for r in win.rails:
                    _check_range(r, p.reference[r], p.interposer[r])
                break
            except WindowError as e:          # frames lost in this window: measure the point again
                if attempt == RETRIES:
                    raise
                log.warning("point %d: %s; measuring it again", n + 1, e)
        if progress:
            progress(f"{label} {n + 1}/{len(points)}: reference " + "  ".join(
                f"{r} {p.reference[r][0]:.4f} V {p.reference[r][1]:.4f} A" for r in win.rails)
                + "; interposer off by " + "  ".join(
                f"{r} {_pct(p.interposer[r][0], p.reference[r][0]):+.3f}% V {_pct(p.interposer[r][1], p.reference[r][1]):+.3f}% A"
                for r in win.rails))


def _pct(got: float, ref: float) -> float:
    return 100.0 * (got - ref) / ref if ref else 0.0


def _check_range(rail: str, ref: tuple[float, float], dut: tuple[float, ...]) -> None:
    """The reference and the interposer must roughly agree before anything is fitted: a large
    difference means a wrong channel map, an open lead or a tripped output, not a gain error."""
    for q, a, b in (("V", ref[0], dut[0]), ("A", ref[1], dut[1])):
        if not np.isfinite(a) or abs(a - b) > 0.05 * max(abs(a), abs(b), 0.05):
            raise InstrumentError(f"reference reads {a:.5g} {q} on rail {rail} where the interposer reads {b:.5g} {q}: "
                                  "out of range; check the channel map (--channels) and the wiring; no calibration "
                                  "was written")


def channel_arrays(points: list[Point], rail: str, q: str) -> tuple[np.ndarray, np.ndarray]:
    k = 0 if q == "v" else 1
    return (np.array([p.interposer[rail][k] for p in points]), np.array([p.reference[rail][k] for p in points]))


def errors(points: list[Point], rails: list[str]) -> dict[str, dict]:
    """Per channel: worst and mean |error| in % of the reference reading."""
    out = {}
    for r in rails:
        for q in ("v", "i"):
            e = errors_pct(*channel_arrays(points, r, q))
            out[f"{r}.{q}"] = {"max_abs_pct": float(np.abs(e).max()), "mean_pct": float(e.mean()),
                               "points_pct": [float(x) for x in e]}
    return out


@dataclass
class CalibrationResult:
    rails: list[str]
    fits: dict[str, ChannelFit]
    before: dict[str, dict]
    after: dict[str, dict]
    old_calibration: dict
    new_calibration: dict
    fit_points: list[Point]
    verify_before: list[Point]
    verify_after: list[Point]
    written: bool
    date: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))


def calibrate(dev, ref, channels: dict[str, int], seconds: float = 0.3, max_residual_fs: float = 5e-4,
              verify_limit_pct: float = 0.1, write: bool = True, progress=None,
              first_pass_temp_c: float | None = None) -> CalibrationResult:
    """Fit gain and offset of every channel the interposer streams; write them only when the fit's
    residuals are within ``max_residual_fs`` of full scale, then verify on fresh points and restore
    the old calibration if the verification misses ``verify_limit_pct``.

    Two-temperature method (hw/rails.toml [calibration]): the first pass fits gains and offsets and
    stores the board temperature as ``t_ref_c``; a second pass with ``first_pass_temp_c`` (that
    temperature) at least 10 K away fits each gain's temperature coefficient instead, keeping the
    first pass's gains and offsets."""
    say = progress or (lambda _m: None)
    old = dev.calibration()
    desc = dev.description
    board_t = desc.get("board_temp_c")
    if first_pass_temp_c is not None and board_t is None:
        raise InstrumentError("this interposer reports no board temperature; the temperature pass needs the "
                              "board sensor (TMP117, hw/README.md)")
    if first_pass_temp_c is not None:
        check_temperature_gap(first_pass_temp_c, board_t)     # before the rails are stepped for nothing
    fs = {r["name"]: (r["v_lsb"] * 32767, r["i_lsb"] * 32767) for r in desc["rails"]}
    try:
        with StreamWindows(dev) as win:
            rails = win.rails
            missing = [r for r in rails if r not in channels]
            if missing:
                raise InstrumentError(f"no reference channel for rail(s) {', '.join(missing)}; name them with "
                                      "--channels RAIL=N,...")
            fit_pts, ver_before = grid(rails, FIT_V, FIT_I), grid(rails, VERIFY_V, VERIFY_I)
            say(f"measuring {len(fit_pts)} fit points and {len(ver_before)} verification points, {seconds:g} s each")
            measure(fit_pts, ref, win, channels, seconds, progress=say, label="fit point")
            measure(ver_before, ref, win, channels, seconds, progress=say, label="check before writing")
        fits = {}
        for r in rails:
            for k, q in enumerate(("v", "i")):
                fits[f"{r}.{q}"] = fit_channel(f"{r}.{q}", *channel_arrays(fit_pts, r, q), fs[r][k])
        bad = [f for f in fits.values() if f.residual_fs > max_residual_fs]
        if bad:
            raise InstrumentError("fit residuals over the limit of {:.3g}% of full scale: {}; no calibration written"
                                  .format(max_residual_fs * 100, ", ".join(f"{f.channel} {f.residual_fs * 100:.3g}%" for f in bad)))
        if first_pass_temp_c is not None:
            new = apply_temperature_fit(old, fits, first_pass_temp_c, board_t)
        else:
            base = rebase_temperature(old, board_t) if board_t is not None else old
            new = apply_fit(base, desc, fits)
            if board_t is not None:
                new["t_ref_c"] = float(board_t)            # the gains hold at this board temperature
        ver_after = [Point(dict(p.setpoints)) for p in ver_before]
        if not write:
            return CalibrationResult(rails, fits, errors(ver_before, rails), {}, old, new, fit_pts, ver_before, [], False)
        dev.set_calibration(new, save=True)
        try:
            with StreamWindows(dev) as win:
                measure(ver_after, ref, win, channels, seconds, progress=say, label="check after writing")
            after = errors(ver_after, rails)
            worst = max(after.values(), key=lambda e: e["max_abs_pct"])
            if worst["max_abs_pct"] > verify_limit_pct:
                raise InstrumentError("verification after writing found {:.3f}% error (limit {:g}%); the old calibration "
                                      "was restored".format(worst["max_abs_pct"], verify_limit_pct))
        except BaseException:
            dev.set_calibration(old, save=True)
            raise
        return CalibrationResult(rails, fits, errors(ver_before, rails), after, old, new, fit_pts, ver_before,
                                 ver_after, True)
    finally:
        for c in set(channels.values()):
            try:
                ref.output(c, False)
            except InstrumentError as e:
                log.warning("could not switch reference channel %d off: %s", c, e)


def _reference_window(ref, chs, seconds: float, n: int):
    """One acquisition; a reference that reads no measurement gives no verdict (never a FAIL)."""
    try:
        acq = ref.acquire(chs, seconds, points=1024)
    except InvalidReading as e:
        raise InvalidReading(f"no verdict: the reference data is invalid in window {n} ({e})") from None
    return acq


def validate(dev, ref, channels: dict[str, int], windows: int = 5, seconds: float = 1.0,
             limit_pct: float = 0.25, floor_codes: float = 4.0, progress=None) -> dict:
    """Interposer vs reference on the running drive (no outputs switched): per rail V, I and P
    difference, pass/fail against ``limit_pct`` of reading + ``floor_codes`` LSBs."""
    desc = dev.description
    lsb = {r["name"]: (r["v_lsb"], r["i_lsb"]) for r in desc["rails"]}
    rows = []
    with StreamWindows(dev) as win:
        chs = [channels[r] for r in win.rails]
        for n in range(windows):
            for attempt in range(RETRIES + 1):
                acq = _reference_window(ref, chs, seconds, n + 1)
                try:
                    dut = win.mean(acq.t_trigger, acq.t_end, timeout=seconds + 5)
                    break
                except WindowError as e:
                    if attempt == RETRIES:
                        raise
                    log.warning("window %d: %s; measuring it again", n + 1, e)
            for r in win.rails:
                v, i = acq.volts[channels[r]], acq.amps[channels[r]]
                if not np.all(np.isfinite(dut[r][:3])):
                    raise InvalidReading(f"no verdict: the interposer's data for rail {r} in window {n + 1} is "
                                         f"invalid ({dut[r][0]:g} V, {dut[r][1]:g} A); check the link and record again")
                rows.append((r, dut[r][0], dut[r][1], dut[r][2], float(v.mean()), float(i.mean()),
                             float((v * i).mean())))
            if progress:
                progress(f"window {n + 1}/{windows}")
        rails = win.rails
    out = {"rails": {}, "limit_pct": limit_pct, "floor_codes": floor_codes, "windows": windows, "seconds": seconds}
    for r in rails:
        a = np.array([x[1:] for x in rows if x[0] == r])
        dv, di, dp = a[:, 0] - a[:, 3], a[:, 1] - a[:, 4], a[:, 2] - a[:, 5]
        lim_v = limit_pct / 100 * np.abs(a[:, 3]) + floor_codes * lsb[r][0]
        lim_i = limit_pct / 100 * np.abs(a[:, 4]) + floor_codes * lsb[r][1]
        ok = bool((np.abs(dv) <= lim_v).all() and (np.abs(di) <= lim_i).all())
        out["rails"][r] = {"v_ref": float(a[:, 3].mean()), "i_ref": float(a[:, 4].mean()), "p_ref": float(a[:, 5].mean()),
                           "dv": float(dv.mean()), "di": float(di.mean()), "dp": float(dp.mean()),
                           "dv_limit": float(lim_v.mean()), "di_limit": float(lim_i.mean()), "pass": ok}
    out["pass"] = all(x["pass"] for x in out["rails"].values())
    return out
