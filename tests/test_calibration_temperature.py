"""The two-temperature calibration (hw/rails.toml [calibration]): gains carry temperature coefficients
against the board sensor; the host applies them (powerrig_fw.calibration.gain_at through
wire.rail_scales), the simulator's front end drifts by them, and the procedure fits them."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.interposer import frames as wire
from powerrig.calibration.fit import ChannelFit, apply_temperature_fit, rebase_temperature
from powerrig.core.errors import InstrumentError
from powerrig.core.rails import load_rails
from powerrig.sim.interposer.frontend import FrontEnd, FrontEndSpec
from powerrig_fw import calibration as fw_cal


class Steady:
    nominal_volts = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}

    def rail_currents(self, t):
        return {"12V": np.full(len(t), 6.0), "3V3": np.full(len(t), 0.5), "5V": np.full(len(t), 2.0)}


def power_errors(fe: FrontEnd, cal: dict, board_temp_c):
    """Worst relative power error over the rails, codes scaled the way the host scales them."""
    cfg = fe.cfg
    desc = {"rails": [{"name": r.name, "v_lsb": r.v_lsb, "i_lsb": r.i_lsb} for r in cfg.rails],
            "calibration": cal, "board_temp_c": board_temp_c}
    raw, truth = fe.sample(np.arange(2000) * 4e-6)
    scales = wire.rail_scales(desc, cfg.names)
    worst = 0.0
    for k, s in enumerate(scales):
        c = cal["rails"][s.name]
        v = (raw[:, 2 * k] - c["v_offset"]) * s.v_per_code
        i = (raw[:, 2 * k + 1] - c["i_offset"]) * s.i_per_code
        worst = max(worst, abs((v * i).mean() / truth[s.name].mean() - 1))
    return worst


def test_temperature_coefficients_keep_the_power_right_over_a_30_k_swing():
    spec = FrontEndSpec(noise_v_lsb=0, noise_i_lsb=0, droop_ohm=0, board_temp_c=55.0, t_ref_c=25.0)
    fe = FrontEnd(Steady(), seed=3, spec=spec, cfg=load_rails())
    cal = fe.factory_calibration()
    assert fw_cal.validate(cal) is None
    compensated = power_errors(fe, cal, 55.0)
    ignored = power_errors(fe, cal, None)           # the same board, the temperature not applied
    assert ignored > 3e-4                           # up to 2 x 14.5 ppm/K x 30 K of drift
    assert compensated < ignored / 5 and compensated < 1e-4


def test_gain_at_and_validation():
    c = {"v_gain": 1.01, "i_gain": 0.99, "v_tc": 10.0, "i_tc": -20.0}
    assert fw_cal.gain_at(c, "v", None, 25.0) == 1.01
    assert fw_cal.gain_at(c, "v", 35.0, 25.0) == pytest.approx(1.01 * (1 + 10e-6 * 10))
    assert fw_cal.gain_at(c, "i", 15.0, 25.0) == pytest.approx(0.99 * (1 + 20e-6 * 10))
    base = fw_cal.defaults()
    bad = fw_cal.merge(base, {"rails": {"12V": {"i_tc": 900.0}}})
    assert "i_tc" in fw_cal.validate(bad)
    assert "t_ref_c" in fw_cal.validate(dict(base, t_ref_c="warm"))


def fit(channel, gain):
    return ChannelFit(channel, gain, 0.0, 0.0, 0.0, 1.0, 3)


def test_the_second_pass_fits_the_coefficient_that_makes_both_temperatures_right():
    cal = fw_cal.defaults()
    # at 45 C the interposer reads 12V current 0.04 % low and 3V3 voltage 0.02 % high
    new = apply_temperature_fit(cal, {"12V.i": fit("12V.i", 1.0004), "3V3.v": fit("3V3.v", 0.9998)}, 25.0, 45.0)
    assert new["t_ref_c"] == 25.0
    assert new["rails"]["12V"]["i_tc"] == pytest.approx(20.0)
    assert new["rails"]["3V3"]["v_tc"] == pytest.approx(-10.0)
    assert fw_cal.gain_at(new["rails"]["12V"], "i", 45.0, 25.0) == pytest.approx(1.0004)
    assert fw_cal.gain_at(new["rails"]["12V"], "i", 25.0, 25.0) == pytest.approx(1.0)
    assert fw_cal.validate(new) is None
    with pytest.raises(InstrumentError, match="at least 10 K"):
        apply_temperature_fit(cal, {}, 25.0, 30.0)
    with pytest.raises(InstrumentError, match="ppm/K"):
        apply_temperature_fit(cal, {"12V.i": fit("12V.i", 1.05)}, 25.0, 45.0)


def test_rebasing_keeps_every_gain_at_every_temperature():
    cal = fw_cal.merge(fw_cal.defaults(), {"t_ref_c": 22.0, "rails": {"12V": {"i_gain": 1.002, "i_tc": 15.0}}})
    moved = rebase_temperature(cal, 40.0)
    assert moved["t_ref_c"] == 40.0
    assert fw_cal.gain_at(moved["rails"]["12V"], "i", 40.0, 40.0) == fw_cal.gain_at(cal["rails"]["12V"], "i", 40.0, 22.0)
    for t in (0.0, 22.0, 70.0):     # linear coefficients: the same to second order (tc^2 dT^2 ~ 1e-7)
        assert fw_cal.gain_at(moved["rails"]["12V"], "i", t, 40.0) == pytest.approx(
            fw_cal.gain_at(cal["rails"]["12V"], "i", t, 22.0), rel=1e-6)
