"""The virtual SSD: power states with latencies and transients, rails, APST, temperature, SMART."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.sim.ssd.model import JobLoad, expected_point
from powerrig.sim.ssd.profile import ProfileError, available, load
from powerrig.sim.ssd.drive import SsdError, VirtualSSD


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


SEQ_WRITE = [JobLoad("w", "write", 131072, 128)]


def test_profiles_load_and_bad_names_are_clear():
    assert {"d5-p5336", "micron-fdp", "client-apst"} <= set(available())
    assert load("client-apst").state(4).nops
    with pytest.raises(ProfileError, match="available"):
        load("no-such-drive")


@pytest.mark.parametrize("ps", [0, 1, 2])
@pytest.mark.parametrize("direction", ["write", "read"])
def test_solidigm_bandwidth_per_state_matches_published_within_5_percent(ps, direction):
    prof = load("d5-p5336")
    mibps, watts = prof.published_drive_point(ps, direction)
    got = expected_point(prof, ps, direction, 131072, 128)
    assert got["MiBps"] == pytest.approx(mibps, rel=0.05)
    # drive-level power: writes within 5 %; reads were bus-limited in the source and are within 15 %
    assert got["watts"] == pytest.approx(watts, rel=0.05 if direction == "write" else 0.15)
    assert got["watts"] <= prof.state(ps).mp_w + 1e-9


def test_ps2_write_is_power_capped_at_mp():
    got = expected_point("d5-p5336", 2)
    assert got["watts"] == pytest.approx(10.0, rel=0.01) and got["throttled_by"] == "power_state"
    assert got["bytes_per_s"] == pytest.approx(17.3e9 / 24, rel=0.05)


def test_state_change_lands_within_enlat_plus_exlat_with_a_transient():
    c = Clock()
    ssd = VirtualSSD("d5-p5336", clock=c)
    c.t += 1
    run = ssd.start_io(SEQ_WRITE, 10)
    c.t += 1
    t_set = c.t
    t_switch = ssd.set_power_state(2)
    bound = (60000 + 60000) * 1e-6
    assert t_set < t_switch < t_set + bound
    t = np.arange(t_set - 0.05, t_set + bound + 0.05, 4e-6)
    p = ssd.power_at(t)
    before, after = p[t < t_set].mean(), p[t > t_set + bound].mean()
    assert before == pytest.approx(21.35, rel=0.05) and after == pytest.approx(10.0, rel=0.05)
    window = (t > t_switch) & (t < t_switch + 1e-3)
    assert p[window].max() > after + 1.0            # the transient
    settled = p[t > t_set + bound]
    means = settled[:len(settled) // 1250 * 1250].reshape(-1, 1250).mean(axis=1)
    assert np.all(np.abs(means - 10.0) < 0.5)       # done within ENLAT+EXLAT (5 ms means: the writes pulse)
    ssd.stop_io(run)


def test_rails_vectorized_with_5v_zero_and_aux_on_3v3():
    ssd = VirtualSSD("d5-p5336")
    t = ssd.clock() + np.linspace(-0.01, 0, 2500)
    amps = ssd.rail_currents(t)
    assert set(amps) == {"12V", "3V3", "5V"} and all(a.shape == t.shape for a in amps.values())
    assert np.all(amps["5V"] == 0)
    watts = amps["12V"] * 12 + amps["3V3"] * 3.3
    assert watts.mean() == pytest.approx(5.5, rel=0.01)


def test_power_state_the_drive_lacks_is_rejected():
    ssd = VirtualSSD("micron-fdp")
    with pytest.raises(SsdError, match="not supported"):
        ssd.set_power_state(2)
    assert ssd.get_power_state() == (0, 0)


def test_apst_steps_down_after_idle_and_io_wakes_it():
    c = Clock()
    ssd = VirtualSSD("client-apst", clock=c)
    c.t += 0.05
    assert ssd.get_power_state()[0] == 0
    c.t += 0.2
    assert ssd.get_power_state()[0] == 3
    c.t += 2.5
    assert ssd.get_power_state()[0] == 4
    assert ssd.power_at(np.array([c.t]))[0] == pytest.approx(0.005)
    run = ssd.start_io([JobLoad("r", "randread", 4096, 1)], 1)
    c.t += 0.02                                   # PS4 exit 8 ms + PS0 entry 0 ms, halfway
    assert ssd.get_power_state()[0] == 0
    ssd.stop_io(run)
    ssd.set_apst(False)
    c.t += 10
    assert ssd.get_power_state()[0] == 0


def test_apst_on_a_drive_without_it_is_rejected():
    with pytest.raises(SsdError, match="APST"):
        VirtualSSD("d5-p5336").set_apst(True)


def test_temperature_rises_and_throttles_at_the_limit():
    c = Clock()
    ssd = VirtualSSD("d5-p5336", clock=c)
    t0 = ssd.temp_c
    run = ssd.start_io(SEQ_WRITE, 3600)
    c.t += 600
    ssd.advance()
    assert ssd.temp_c > t0 + 20
    assert ssd.thm_count >= 1 and ssd.throttled
    assert ssd.operating_point().watts <= load("d5-p5336").thermal["throttle_w"] + 1e-6
    log = ssd.smart_log()
    assert log["thm_temp1_trans_count"] >= 1 and log["temperature_k"] >= 273 + 75
    ssd.stop_io(run)


def test_smart_and_fdp_counters_follow_the_bytes():
    c = Clock()
    ssd = VirtualSSD("micron-fdp", clock=c)
    jobs = [JobLoad(f"j{k}", "write", 131072, 32, offset_frac=k / 8, size_frac=1 / 8, handle=k) for k in range(8)]
    run = ssd.start_io(jobs, 2)
    c.t += 2
    res = ssd.stop_io(run)
    written = sum(res["write_bytes"])
    assert written == pytest.approx(5150 * 2**20 * 2, rel=0.02)
    smart = ssd.smart_log()
    assert smart["data_units_written"] == -(-int(written) // 512000) or \
        abs(smart["data_units_written"] - written / 512000) <= 1
    fdp = ssd.fdp_stats()
    assert fdp["hbmw"] == pytest.approx(written, rel=1e-6) and fdp["mbmw"] / fdp["hbmw"] == pytest.approx(1.0, abs=0.05)
    with pytest.raises(SsdError):
        VirtualSSD("d5-p5336").fdp_stats()


def test_get_features_reports_the_state_set_while_the_drive_switches():
    """Set then Get at once (a fast host): the feature's value is the new state, though the power
    follows only after the transition (half of EXLAT+ENLAT on the virtual drive)."""
    from powerrig.sim.ssd.drive import VirtualSSD

    ssd = VirtualSSD("d5-p5336")
    t0 = ssd.clock()
    t_switch = ssd.set_power_state(2, t=t0)
    assert t_switch > t0 and ssd.ps == 0
    assert ssd.get_power_state()[0] == 2
