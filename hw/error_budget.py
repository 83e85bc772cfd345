#!/usr/bin/env python3
"""Error budget of the interposer's analog front end, per rail, from hw/rails.toml and the parts' figures.

Why: a power number is only as good as its worst case. This combines the shunt (tolerance, tempco),
the current-sense amplifier (gain and offset error and drift), the divider, the ADC (INL, offset)
and the reference into resolution, noise floor, full scale and worst-case accuracy per rail, before
and after calibration. rails.toml is the one source of channel scaling: change a shunt there and
this, the simulator and the firmware defaults all follow (tests/test_firmware_hw.py).

    python hw/error_budget.py [--rails PATH] [--json]

Part figures are datasheet maxima (typical where noted) for the parts in hw/bom.csv; check them
against the current datasheets at each BOM review.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
INTERVAL_SAMPLES = 250       # 1 ms at 4 us: the default interval's averaging

# datasheet figures (max unless noted); names match hw/bom.csv
PARTS = {
    "shunt": {"part": "BVR-Z (Isabellenhuette), 4-terminal manganin, 1 %", "tolerance": 0.01, "tempco_ppm": 10,
              "rating_w": 5.0},
    "amp": {"part": "INA240A2 (TI), gain 50", "gain_error": 0.002, "gain_drift_ppm": 2.5,
            "offset_v": 25e-6, "offset_drift_v": 0.25e-6},
    "divider": {"part": "TNPU0805 pair, 0.05 % 5 ppm/K thin film", "ratio_error": 0.001, "tempco_ppm": 10},
    "buffer": {"part": "OPA333 (TI), zero drift", "offset_v": 10e-6, "offset_drift_v": 0.05e-6},
    "adc": {"part": "AD7380 (ADI), 16 bit", "inl_lsb": 2.0, "offset_lsb": 12.0, "offset_drift_lsb": 0.2,
            "gain_error": 0.0005, "noise_lsb_rms": {"V": 1.2, "I": 2.5}},   # noise: typical, with the amp
    "ref": {"part": "ADR4525B (ADI), 2.5 V", "accuracy": 0.0002, "tempco_ppm": 2},
    "sensor": {"part": "TMP117 (TI)", "accuracy_k": 0.1},
}


def load(path: Path | None = None) -> dict:
    path = path or Path(os.environ.get("POWERRIG_RAILS") or HERE / "rails.toml")
    return tomllib.loads(Path(path).read_text())


def simulated(path: Path = HERE / "sim" / "results.json") -> dict:
    """The ngspice figures per rail (hw/sim/afe.py via `make hw`), or {} before the first run."""
    return json.loads(path.read_text())["rails"] if path.exists() else {}


def budget(doc: dict, sim: dict | None = None) -> dict:
    """Per rail: resolution, full scale, noise floor and worst-case errors (fractions and units).

    Calibrated: the method in rails.toml [calibration]: the reference's uncertainty, INL at the
    reading, what is left of each temperature coefficient after the two-temperature fit (tc_residual)
    plus the shunt's drift over the sensor-to-shunt gradient, one code of offset rounding, and the
    front end's dynamic error on a 1 ms mean under 100 kHz ripple (ngspice, hw/sim/results.json).
    """
    adc, p = doc["adc"], PARTS
    cal = doc.get("calibration", {})
    dt = cal.get("delta_t_k", 30.0)
    res = cal.get("tc_residual", 1.0)
    grad = cal.get("gradient_k", 0.0) + p["sensor"]["accuracy_k"]
    meter_v, meter_i = cal.get("meter_v", 2e-4), cal.get("meter_i", 2e-4)
    sim = simulated() if sim is None else sim
    code_v = adc["vref_v"] / (1 << (adc["bits"] - 1))        # volts per code at the ADC input
    code_max = (1 << (adc["bits"] - 1)) - 1
    out = {}
    for r in doc["rail"]:
        shunt, gain, div = r["shunt_ohm"], r["amp_gain"], r["divider_ratio"]
        v_lsb, i_lsb = code_v / div, code_v / (gain * shunt)
        i_max = r["expected_max_a"]
        v_nom = r["nominal_v"]
        i_codes, v_codes = i_max / i_lsb, v_nom / v_lsb          # codes at the reading the budget is for
        i_tc = p["shunt"]["tempco_ppm"] + p["amp"]["gain_drift_ppm"] + p["ref"]["tempco_ppm"]
        v_tc = p["divider"]["tempco_ppm"] + p["ref"]["tempco_ppm"]
        # uncalibrated worst case: every error at its limit, linear sum
        i_gain = (p["shunt"]["tolerance"] + p["amp"]["gain_error"] + p["adc"]["gain_error"] + p["ref"]["accuracy"]
                  + i_tc * 1e-6 * dt)
        i_off_a = p["amp"]["offset_v"] / (gain * shunt) + p["adc"]["offset_lsb"] * i_lsb
        v_gain = p["divider"]["ratio_error"] + p["adc"]["gain_error"] + p["ref"]["accuracy"] + v_tc * 1e-6 * dt
        v_off_v = p["adc"]["offset_lsb"] * v_lsb + p["buffer"]["offset_v"] / div
        # calibrated with temperature coefficients (rails.toml [calibration])
        dyn = abs(sim.get(r["name"], {}).get("ripple", {}).get("mean_error_pct_1ms", 0.0)) / 100
        i_gain_cal = (meter_i + p["adc"]["inl_lsb"] / i_codes + res * i_tc * 1e-6 * dt
                      + p["shunt"]["tempco_ppm"] * 1e-6 * grad + dyn)
        i_off_cal = (res * p["amp"]["offset_drift_v"] * dt / (gain * shunt)
                     + (1 + res * p["adc"]["offset_drift_lsb"] * dt) * i_lsb)
        v_gain_cal = meter_v + p["adc"]["inl_lsb"] / v_codes + res * v_tc * 1e-6 * dt
        v_off_cal = ((1 + res * p["adc"]["offset_drift_lsb"] * dt) * v_lsb
                     + res * p["buffer"]["offset_drift_v"] * dt / div)

        def power_error(ig, io, vg, vo):
            """Worst-case power error at (nominal V, expected max A), as a fraction."""
            return (ig + io / i_max) + (vg + vo / v_nom) + (ig + io / i_max) * (vg + vo / v_nom)

        noise_v = p["adc"]["noise_lsb_rms"]["V"] * v_lsb
        noise_i = p["adc"]["noise_lsb_rms"]["I"] * i_lsb
        calibrated = power_error(i_gain_cal, i_off_cal, v_gain_cal, v_off_cal)
        out[r["name"]] = {
            "shunt_ohm": shunt, "amp_gain": gain, "divider_ratio": div,
            "v_lsb_v": v_lsb, "i_lsb_a": i_lsb, "p_lsb_w_at_nominal": v_nom * i_lsb,
            "v_full_scale_v": v_lsb * code_max, "i_full_scale_a": i_lsb * code_max,
            "i_headroom": i_lsb * code_max / i_max,
            "shunt_w_at_max": i_max ** 2 * shunt, "shunt_rating_w": p["shunt"]["rating_w"],
            "noise_rms_sample": {"v": noise_v, "i": noise_i},
            "noise_rms_1ms": {"v": noise_v / math.sqrt(INTERVAL_SAMPLES), "i": noise_i / math.sqrt(INTERVAL_SAMPLES)},
            "uncalibrated": {"i_gain": i_gain, "i_offset_a": i_off_a, "v_gain": v_gain, "v_offset_v": v_off_v,
                             "power_at_max": power_error(i_gain, i_off_a, v_gain, v_off_v)},
            "calibrated": {"i_gain": i_gain_cal, "i_offset_a": i_off_cal, "v_gain": v_gain_cal, "v_offset_v": v_off_cal,
                           "dynamic_i": dyn, "power_at_max": calibrated},
            "calibrated_worst_pct": round(100 * calibrated, 4),
            "simulated": sim.get(r["name"], {}),
        }
    return out


def table(b: dict) -> str:
    rows = ["| rail | shunt | I full scale (headroom) | shunt W at max (rating) | LSB V / I / W | noise rms per sample V / I "
            "| per 1 ms | worst-case P error at max A: uncalibrated | calibrated |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, r in b.items():
        rows.append(
            f"| {name} | {r['shunt_ohm'] * 1e3:g} mOhm | {r['i_full_scale_a']:.2f} A ({r['i_headroom']:.1f}x) "
            f"| {r['shunt_w_at_max']:.3f} W ({r['shunt_rating_w']:g} W) "
            f"| {r['v_lsb_v'] * 1e6:.0f} uV / {r['i_lsb_a'] * 1e6:.0f} uA / {r['p_lsb_w_at_nominal'] * 1e3:.2f} mW "
            f"| {r['noise_rms_sample']['v'] * 1e3:.2f} mV / {r['noise_rms_sample']['i'] * 1e3:.2f} mA "
            f"| {r['noise_rms_1ms']['v'] * 1e6:.0f} uV / {r['noise_rms_1ms']['i'] * 1e6:.0f} uA "
            f"| {100 * r['uncalibrated']['power_at_max']:.2f} % | {100 * r['calibrated']['power_at_max']:.2f} % |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rails", type=Path, default=None, help="rails file (default: $POWERRIG_RAILS or hw/rails.toml)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    b = budget(load(args.rails))
    print(json.dumps(b, indent=1) if args.json else table(b))
    if not args.json:
        print("calibrated worst case at full current: " + ", ".join(f"{n} {r['calibrated_worst_pct']:.3f} %" for n, r in b.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
