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
DELTA_T_K = 30.0             # board temperature swing from calibration to use
CAL_METER = 0.0002           # reference meter uncertainty in calibration (6.5-digit DMM, 0.02 %)
INTERVAL_SAMPLES = 250       # 1 ms at 4 us: the default interval's averaging

# datasheet figures (max unless noted); names match hw/bom.csv
PARTS = {
    "shunt": {"part": "WSL2512 (Vishay), 1 %", "tolerance": 0.01, "tempco_ppm": 75, "rating_w": 1.0},
    "amp": {"part": "INA240A2 (TI), gain 50", "gain_error": 0.002, "gain_drift_ppm": 2.5,
            "offset_v": 25e-6, "offset_drift_v": 0.25e-6},
    "divider": {"part": "0.1 % 25 ppm/K thin film pair", "ratio_error": 0.002, "tempco_ppm": 50},
    "adc": {"part": "AD7380 (ADI), 16 bit", "inl_lsb": 2.0, "offset_lsb": 12.0, "offset_drift_lsb": 0.2,
            "gain_error": 0.0005, "noise_lsb_rms": {"V": 1.2, "I": 2.5}},   # noise: typical, with the amp
    "ref": {"part": "ADR4525B (ADI), 2.5 V", "accuracy": 0.0002, "tempco_ppm": 2},
}


def load(path: Path | None = None) -> dict:
    path = path or Path(os.environ.get("POWERRIG_RAILS") or HERE / "rails.toml")
    return tomllib.loads(Path(path).read_text())


def budget(doc: dict) -> dict:
    """Per rail: resolution, full scale, noise floor and worst-case errors (fractions and units)."""
    adc, p = doc["adc"], PARTS
    code_v = adc["vref_v"] / (1 << (adc["bits"] - 1))        # volts per code at the ADC input
    code_max = (1 << (adc["bits"] - 1)) - 1
    out = {}
    for r in doc["rail"]:
        shunt, gain, div = r["shunt_ohm"], r["amp_gain"], r["divider_ratio"]
        v_lsb, i_lsb = code_v / div, code_v / (gain * shunt)
        i_max = r["expected_max_a"]
        v_nom = r["nominal_v"]
        # uncalibrated worst case: every error at its limit, linear sum
        i_gain = (p["shunt"]["tolerance"] + p["amp"]["gain_error"] + p["adc"]["gain_error"] + p["ref"]["accuracy"]
                  + (p["shunt"]["tempco_ppm"] + p["amp"]["gain_drift_ppm"] + p["ref"]["tempco_ppm"]) * 1e-6 * DELTA_T_K)
        i_off_a = p["amp"]["offset_v"] / (gain * shunt) + p["adc"]["offset_lsb"] * i_lsb
        v_gain = (p["divider"]["ratio_error"] + p["adc"]["gain_error"] + p["ref"]["accuracy"]
                  + (p["divider"]["tempco_ppm"] + p["ref"]["tempco_ppm"]) * 1e-6 * DELTA_T_K)
        v_off_v = p["adc"]["offset_lsb"] * v_lsb
        # after calibration at one temperature: drift, the meter, INL and one code of offset remain
        i_gain_cal = (CAL_METER + p["adc"]["inl_lsb"] / code_max
                      + (p["shunt"]["tempco_ppm"] + p["amp"]["gain_drift_ppm"] + p["ref"]["tempco_ppm"]) * 1e-6 * DELTA_T_K)
        i_off_cal = (p["amp"]["offset_drift_v"] * DELTA_T_K / (gain * shunt)
                     + (1 + p["adc"]["offset_drift_lsb"] * DELTA_T_K) * i_lsb)
        v_gain_cal = (CAL_METER + p["adc"]["inl_lsb"] / code_max
                      + (p["divider"]["tempco_ppm"] + p["ref"]["tempco_ppm"]) * 1e-6 * DELTA_T_K)
        v_off_cal = (1 + p["adc"]["offset_drift_lsb"] * DELTA_T_K) * v_lsb

        def power_error(ig, io, vg, vo):
            """Worst-case power error at (nominal V, expected max A), as a fraction."""
            return (ig + io / i_max) + (vg + vo / v_nom) + (ig + io / i_max) * (vg + vo / v_nom)

        noise_v = p["adc"]["noise_lsb_rms"]["V"] * v_lsb
        noise_i = p["adc"]["noise_lsb_rms"]["I"] * i_lsb
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
                           "power_at_max": power_error(i_gain_cal, i_off_cal, v_gain_cal, v_off_cal)},
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
