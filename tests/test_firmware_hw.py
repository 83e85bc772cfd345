"""hw/: rails.toml is the one source of channel scaling; the error budget, the simulator and the
firmware defaults follow it; the error budget covers the simulator's front-end error model; the pin
map in hw/README.md is the firmware's."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import numpy as np

from conftest import REPO
from powerrig.core.rails import load_rails
from powerrig.sim.interposer.frontend import FrontEnd, FrontEndSpec


def error_budget():
    spec = importlib.util.spec_from_file_location("error_budget", REPO / "hw" / "error_budget.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class SteadyLoad:
    nominal_volts = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}

    def rail_currents(self, t):
        return {"12V": np.full(len(t), 2.0)}


def twelve_volt_codes(rails_path):
    fe = FrontEnd(SteadyLoad(), spec=FrontEndSpec(noise_v_lsb=0, noise_i_lsb=0, gain_error=0, offset_codes=0,
                                                  droop_ohm=0), cfg=load_rails(rails_path))
    raw, _truth = fe.sample(np.arange(10) * 4e-6)
    return int(raw[0, 1])


def test_changing_a_shunt_moves_simulator_firmware_defaults_and_error_budget(tmp_path):
    text = (REPO / "hw" / "rails.toml").read_text()
    assert 'shunt_ohm = 0.005' in text
    halved = tmp_path / "rails.toml"
    halved.write_text(text.replace("shunt_ohm = 0.005", "shunt_ohm = 0.0025", 1))
    orig = REPO / "hw" / "rails.toml"
    # simulator: the same 2 A gives half the current code
    assert twelve_volt_codes(halved) == round(twelve_volt_codes(orig) / 2)
    # firmware defaults: 12 V amps per code doubles
    def emitted(path):
        env = dict(os.environ, POWERRIG_RAILS=str(path))
        out = subprocess.run([sys.executable, "-m", "powerrig.core.rails", "--emit-firmware"], env=env,
                             capture_output=True, text=True, check=True).stdout
        return float(re.search(r"\('12V', [^,]+, ([^,]+),", out).group(1))
    assert emitted(halved) == 2 * emitted(orig)
    # error budget: full scale doubles, shunt dissipation halves, resolution coarsens
    eb = error_budget()
    a, b = eb.budget(eb.load(orig))["12V"], eb.budget(eb.load(halved))["12V"]
    assert b["i_full_scale_a"] == 2 * a["i_full_scale_a"] and b["shunt_w_at_max"] == a["shunt_w_at_max"] / 2
    assert b["i_lsb_a"] == 2 * a["i_lsb_a"] and b["calibrated"]["power_at_max"] > a["calibrated"]["power_at_max"]
    r = subprocess.run([sys.executable, str(REPO / "hw" / "error_budget.py"), "--rails", str(halved)],
                       capture_output=True, text=True, check=True)
    assert "| 12V | 2.5 mOhm | 20.00 A" in r.stdout, r.stdout


def test_error_budget_covers_the_simulated_front_end():
    eb = error_budget()
    spec = FrontEndSpec()
    assert eb.PARTS["adc"]["noise_lsb_rms"] == {"V": spec.noise_v_lsb, "I": spec.noise_i_lsb}
    for name, r in eb.budget(eb.load()).items():
        u = r["uncalibrated"]
        assert spec.gain_error <= min(u["i_gain"], u["v_gain"]), name
        assert spec.offset_codes <= round(u["i_offset_a"] / r["i_lsb_a"], 6), name
        assert spec.offset_codes <= round(u["v_offset_v"] / r["v_lsb_v"], 6), name
        assert r["i_headroom"] > 1.2 and r["shunt_w_at_max"] < r["shunt_rating_w"] / 2, (name, r)
        assert r["calibrated"]["power_at_max"] < r["uncalibrated"]["power_at_max"] < 0.05


def test_readme_shows_the_error_budget_and_the_firmware_pin_map():
    readme = (REPO / "hw" / "README.md").read_text()
    eb = error_budget()
    assert eb.table(eb.budget(eb.load())) in readme, "hw/README.md: paste the output of python hw/error_budget.py"
    pins = dict(re.findall(r"^(\w+) = const\((\d+)\)", (REPO / "firmware" / "board" / "pins.py").read_text(), re.M))
    assert pins
    for name, gpio in pins.items():
        assert re.search(rf"\|\s*`{name}`\s*\|\s*{gpio}\s*\|", readme), f"hw/README.md pin map lacks {name} = {gpio}"
