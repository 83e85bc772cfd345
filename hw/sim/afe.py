#!/usr/bin/env python3
"""The analog front end of each rail in ngspice: shunt, INA240 as a behavioural model from its data
sheet (gain, 400 kHz bandwidth, 2 V/us slew, input offset), the RC anti-alias filter and the AD7380's
switched-capacitor input, sampled every 4 us like the firmware does.

    python hw/sim/afe.py [--rails hw/rails.toml] --out DIR

Cases per rail: a load step from 1/12 of the rail's maximum current to the maximum in 1 us (on 12 V:
0.5 -> 6 A), a 100 kHz ripple from the drive's regulators (20 % of maximum around half of it) and a
small-signal AC sweep. Figures: -3 dB bandwidth, settling to 1 LSB after the step (inside one 4 us
frame or not), the OCP PCM-2 100 us peak power error against the true current, and the ripple's
error on the 1 ms mean. Writes DIR/results.json and DIR/afe_step.png, afe_ripple.png, afe_bode.png;
`make hw` copies them to hw/sim/results.json (read by hw/error_budget.py) and docs/img/.
Plain ngspice netlists in batch mode (the distribution's ngspice 46) and numpy: no extra library.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
AMP = {"bw_hz": 400e3, "slew_v_per_s": 2e6, "offset_v": 25e-6}      # INA240 data sheet (typical BW/slew, max offset)
AAF = {"r_ohm": 33.2, "c_f": 2.2e-9}                                  # hw/board/measure.py
ADC = {"c_sample_f": 20e-12, "r_switch_ohm": 100.0, "t_conv_s": 190e-9, "period_s": 4e-6}
T_STEP = 20e-6


def netlist(rail: dict, load: str, tstop: float, analysis: str) -> str:
    """One rail's AFE; ``load`` is the current source's SPICE value (PWL/SIN)."""
    p = ADC["period_s"]
    gm_c = 1e-9
    gm = 2 * np.pi * AMP["bw_hz"] * gm_c
    imax = AMP["slew_v_per_s"] * gm_c
    return f"""* powerrig AFE, rail {rail['name']}
VBUS vbus 0 DC {rail['nominal_v']}
RSH vbus vload {rail['shunt_ohm']}
ILOAD vload 0 {load}
* INA240: transconductor with a current limit into 1 nF = one pole at BW and a slew limit; input offset
BAMP 0 vamp I = {{ max(min({gm}*({rail['amp_gain']}*(v(vbus)-v(vload)+{AMP['offset_v']}) - v(vamp)), {imax}), {-imax}) }}
CAMP vamp 0 {gm_c}
RLEAK vamp 0 1G
EBUF vout 0 vamp 0 1
RAA vout vadc {AAF['r_ohm']}
CAA vadc 0 {AAF['c_f']}
* AD7380 input: the sampling capacitor tracks through the switch, then is held (converted) and reset
* conv is high while converting: the capacitor is off the input and discharged (worst-case kickback)
VCONV conv 0 PULSE(0 1 {p - ADC['t_conv_s']} 1n 1n {ADC['t_conv_s']} {p})
STRK vadc vcs 0 conv strack
SRST vcs 0 conv 0 sreset
CS vcs 0 {ADC['c_sample_f']}
.model strack SW(Vt=-0.5 Ron={ADC['r_switch_ohm']} Roff=1e12)
.model sreset SW(Vt=0.5 Ron=1k Roff=1e12)
.control
set filetype=ascii
{analysis}
quit
.endc
.end
"""


def run(cir: str, work: Path, name: str) -> np.ndarray:
    (work / f"{name}.cir").write_text(cir)
    r = subprocess.run(["ngspice", "-b", f"{name}.cir"], cwd=work, capture_output=True, text=True)
    if r.returncode or not (work / f"{name}.dat").exists():
        sys.exit(f"ngspice failed on {name}: {r.stdout[-800:]}{r.stderr[-800:]}")
    return np.loadtxt(work / f"{name}.dat")


def sampled(t, v, period=ADC["period_s"]):
    """The ADC's samples: the sampling capacitor's voltage at the end of each track phase."""
    ts = np.arange(period - ADC["t_conv_s"] - 2e-9, t[-1], period)
    return ts, np.interp(ts, t, v)


def input_range(v: np.ndarray, vref: float) -> dict:
    """Where the ADC's AINx+ goes in a case, with AINx- on AGND: the single-ended drive's absolute input
    and common mode ((AIN+ + AIN-) / 2), to hold against the AD7380's input ranges (hw/README.md)."""
    lo, hi = float(v.min()), float(v.max())
    return {"ain_plus_min_v": lo, "ain_plus_max_v": hi, "common_mode_min_v": lo / 2, "common_mode_max_v": hi / 2,
            "within_0_to_vref": bool(lo >= -1e-3 and hi <= vref)}


def rail_cases(rail: dict, work: Path, lsb_v: float, vref: float = 2.5) -> dict:
    gain_v = rail["amp_gain"] * rail["shunt_ohm"]                       # volts at the ADC per amp
    i_max = rail["expected_max_a"]
    i_lo = i_max / 12
    name = rail["name"]
    out = {}
    # 1. step: i_lo -> i_max in 1 us
    tstop = T_STEP + 200e-6
    load = f"PWL(0 {i_lo} {T_STEP} {i_lo} {T_STEP + 1e-6} {i_max})"
    d = run(netlist(rail, load, tstop, f"tran 5n {tstop} 0 5n uic\nwrdata {name}_step.dat v(vadc) v(vcs) v(vamp)"), work, f"{name}_step")
    t, vadc, vcs = d[:, 0], d[:, 1], d[:, 3]
    ts, vs = sampled(t, vcs)
    i_true_s = np.interp(ts, [0, T_STEP, T_STEP + 1e-6, tstop], [i_lo, i_lo, i_max, i_max])
    v_final = i_max * gain_v + AMP["offset_v"] * rail["amp_gain"]
    bad = np.where(np.abs(vs - v_final) > lsb_v)[0]
    settle_s = float(ts[bad[-1] + 1] - T_STEP) if len(bad) and bad[-1] + 1 < len(ts) else 0.0
    i_meas = (vs - AMP["offset_v"] * rail["amp_gain"]) / gain_v
    # OCP PCM-2: 100 us peak of the power, from the samples, against the true current (12 V nominal)
    win = int(round(100e-6 / ADC["period_s"]))
    p_meas = np.convolve(i_meas * rail["nominal_v"], np.ones(win) / win, "valid")
    p_true = np.convolve(i_true_s * rail["nominal_v"], np.ones(win) / win, "valid")
    out["step"] = {"from_a": i_lo, "to_a": i_max, "rise_s": 1e-6, "lsb_v_at_adc": lsb_v,
                   "settle_1lsb_s": settle_s, "within_one_frame": bool(settle_s <= ADC["period_s"]),
                   "pcm2_peak_w_true": float(p_true.max()), "pcm2_peak_w_measured": float(p_meas.max()),
                   "pcm2_peak_error_pct": float(100 * (p_meas.max() - p_true.max()) / p_true.max())}
    out["_step_trace"] = (t, vadc, ts, vs, i_true_s * gain_v)
    adc_in = [vadc]
    # 2. ripple: 100 kHz, 20 % of max around half of max, 1 ms
    i_dc, i_ac, f = i_max / 2, 0.2 * i_max / 2, 100e3
    tstop = 1.0e-3 + 20e-6
    d = run(netlist(rail, f"SIN({i_dc} {i_ac} {f} 0 0 0)", tstop,
                    f"tran 10n {tstop} 0 10n uic\nwrdata {name}_ripple.dat v(vadc) v(vcs)"), work, f"{name}_ripple")
    t, vadc, vcs = d[:, 0], d[:, 1], d[:, 3]
    ts, vs = sampled(t, vcs)
    keep = ts > 20e-6
    ts, vs = ts[keep], vs[keep]
    n = int(round(1e-3 / ADC["period_s"]))
    ts, vs = ts[:n], vs[:n]
    i_meas = (vs - AMP["offset_v"] * rail["amp_gain"]) / gain_v
    i_true = i_dc + i_ac * np.sin(2 * np.pi * f * ts)
    amp_meas = np.sqrt(2) * np.std(i_meas)
    out["ripple"] = {"f_hz": f, "dc_a": i_dc, "ac_a": i_ac,
                     "mean_error_pct_1ms": float(100 * (i_meas.mean() - i_true.mean()) / i_true.mean()),
                     "true_mean_error_pct_1ms": float(100 * (i_true.mean() - i_dc) / i_dc),
                     "ripple_amplitude_ratio": float(amp_meas / i_ac)}
    out["_ripple_trace"] = (ts, i_meas, i_true)
    adc_in.append(vadc)
    out["adc_input"] = input_range(np.concatenate(adc_in), vref)
    # 3. AC: bandwidth from the shunt to the ADC input (switch held closed)
    acnet = netlist(rail, "DC 1 AC 1", 0, f"ac dec 50 1k 20meg\nwrdata {name}_ac.dat vdb(vadc)")
    acnet = acnet.replace("VCONV conv 0 PULSE", "VCONV conv 0 DC 0 PULSE")
    # the behavioural amplifier is linear for small signals: its pole and the RC set the bandwidth
    acnet = acnet.replace("BAMP 0 vamp I = { max(min(", "GAMPL 0 vamp vbus vload {:.6g}\n* ".format(
        rail["amp_gain"] * 2 * np.pi * AMP["bw_hz"] * 1e-9))
    acnet = acnet.replace("CAMP vamp 0", "RAMP vamp 0 {:.6g}\nCAMP vamp 0".format(1 / (2 * np.pi * AMP["bw_hz"] * 1e-9)))
    acnet = acnet.replace("RLEAK vamp 0 1G\n", "")
    d = run(acnet, work, f"{name}_ac")
    fr, db = d[:, 0], d[:, 1]
    db = db - db[0]
    bw = float(fr[np.argmax(db < -3.0)])
    out["bandwidth_hz"] = bw
    out["_ac_trace"] = (fr, db)
    return out


def plots(results: dict, traces: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    t, vadc, ts, vs, vtrue = traces["12V"]["_step_trace"]
    ax.plot((t - T_STEP) * 1e6, vadc, lw=1, label="ADC input (after RC)")
    ax.plot((ts - T_STEP) * 1e6, vs, "o", ms=3, label="4 us samples (sampling capacitor)")
    ax.plot((ts - T_STEP) * 1e6, vtrue, "k--", lw=0.8, label="true current x gain")
    s = results["rails"]["12V"]["step"]
    ax.set_xlim(-5, 40)
    ax.set_xlabel("time after the start of the step (us)")
    ax.set_ylabel("V at the ADC (current channel)")
    ax.set_title(f"12 V rail: {s['from_a']:.1f} -> {s['to_a']:.1f} A in 1 us; 1 LSB settling "
                 f"{s['settle_1lsb_s'] * 1e6:.2f} us; PCM-2 peak error {s['pcm2_peak_error_pct']:+.3f} %")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "afe_step.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ts, im, it = traces["12V"]["_ripple_trace"]
    r = results["rails"]["12V"]["ripple"]
    ax.plot(ts * 1e6, it, "k-", lw=0.8, label="true current")
    ax.plot(ts * 1e6, im, "o", ms=3, label="measured (4 us samples)")
    ax.set_xlim(20, 120)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("A")
    ax.set_title(f"12 V rail, 100 kHz ripple: amplitude ratio {r['ripple_amplitude_ratio']:.3f}, "
                 f"1 ms mean error {r['mean_error_pct_1ms']:+.4f} %")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "afe_ripple.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, tr in traces.items():
        fr, db = tr["_ac_trace"]
        ax.semilogx(fr, db, label=f"{name}: -3 dB at {results['rails'][name]['bandwidth_hz'] / 1e3:.0f} kHz")
    ax.axhline(-3, color="k", lw=0.5)
    ax.set_xlabel("Hz")
    ax.set_ylabel("dB (shunt current to ADC input, normalised)")
    ax.set_ylim(-40, 3)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(out / "afe_bode.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rails", type=Path, default=HERE.parent / "rails.toml")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    doc = tomllib.loads(a.rails.read_text())
    lsb_v = doc["adc"]["vref_v"] / (1 << (doc["adc"]["bits"] - 1))
    a.out.mkdir(parents=True, exist_ok=True)
    results = {"model": {"amp": AMP, "anti_alias": AAF, "adc": ADC}, "rails": {}}
    traces = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rail in doc["rail"]:
            r = rail_cases(rail, Path(tmp), lsb_v, doc["adc"]["vref_v"])
            traces[rail["name"]] = r
            results["rails"][rail["name"]] = {k: v for k, v in r.items() if not k.startswith("_")}
    (a.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    plots(results, traces, a.out)
    for name, r in results["rails"].items():
        s, rp = r["step"], r["ripple"]
        print(f"{name}: bandwidth {r['bandwidth_hz'] / 1e3:.0f} kHz; step {s['from_a']:.2f}->{s['to_a']:.2f} A settles to 1 LSB in "
              f"{s['settle_1lsb_s'] * 1e6:.2f} us ({'within' if s['within_one_frame'] else 'NOT within'} one 4 us frame); "
              f"PCM-2 100 us peak error {s['pcm2_peak_error_pct']:+.3f} %; 100 kHz ripple: 1 ms mean error "
              f"{rp['mean_error_pct_1ms']:+.4f} %, amplitude ratio {rp['ripple_amplitude_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
