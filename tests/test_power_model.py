"""The virtual drive's power model and the analysis that measures it (issue 29), on the stepped rig:
the firmware's own powerrig_fw.actions fires the edges; the host side sees only codes and read-backs."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.analysis import power_events
from powerrig.sim.ssd.power import PoweredDrive, PowerSpec, SteadyLoad, SwitchedOutputs
from powerrig.sim.power_loop import SteppedRig

PRE = 250


def _cycle(rig, cut_after_us=3000):
    edges = rig.run([{"output": "12V", "level": 0, "after_us": cut_after_us},
                     {"output": "12V", "level": 1, "after_us": 20000}])
    cut, on = [t for t in rig.drive.truth if t["output"] == "12V"][-2:]
    rig.wait_ready()
    acked, read = rig.read_back()
    return edges, cut, on, acked, power_events.verify(acked, read)


def _rig(**spec):
    rig = SteppedRig(PowerSpec(**spec), seed=3)
    rig.command({"op": "enable", "watchdog_ms": 1000})
    return rig


def test_a_healthy_plp_loses_nothing_and_a_weak_one_loses_exactly_what_the_verify_finds():
    rig = _rig(defect_rate=0.0)
    for _ in range(3):
        _e, cut, _on, acked, lost = _cycle(rig)
        assert len(acked) > 100 and lost == {} and cut["lost_writes"] == 0 and not cut["weak_plp"]
    rig = _rig(defect_rate=1.0)
    for _ in range(3):
        _e, cut, _on, acked, lost = _cycle(rig)
        injected = {lba for lba, _t in rig.drive.cache.lost[-cut["lost_writes"]:]}
        assert cut["weak_plp"] and cut["lost_writes"] > 10
        assert set(lost) == injected and set(lost.values()) == {"missing"}
        # the newest acknowledged writes are the ones lost (the PLP flush goes oldest first)
        assert min(lost) > max(set(acked) - set(lost))


def test_edges_land_on_their_sample_and_the_samples_show_them_there():
    rig = _rig()
    edges, cut, on, _a, _l = _cycle(rig, cut_after_us=4100)
    assert [e["index"] - e["requested"] for e in edges] == [0, 0]
    assert edges[1]["requested"] - edges[0]["requested"] == 5000          # 20 ms at 4 us
    b = rig.burst(edges[0]["requested"] - PRE, PRE + 2000)
    v, i, _ = b.rail("12V")
    assert power_events.find_fall(i) == PRE
    h = power_events.holdup_s(v, PRE, rig.drive.spec.plp_threshold_v, rig.period_s)
    assert h == pytest.approx(cut["holdup_s"], rel=0.01)
    assert cut["tau_s"] == 5e-3 and cut["holdup_s"] == pytest.approx(5e-3 * np.log((12 - 0.008 * 0.5) / 9.0))
    b = rig.burst(edges[1]["requested"] - PRE, PRE + 1000)
    _v, i, _ = b.rail("12V")
    assert power_events.find_rise(i) == PRE
    ir = power_events.inrush(i, PRE, rig.period_s)
    assert ir["peak_a"] == pytest.approx(on["inrush_peak_a"], rel=0.02)
    assert ir["charge_c"] == pytest.approx(on["inrush_charge_c"], rel=0.02)


def test_an_edge_asked_for_after_its_samples_were_produced_is_set_late_and_says_so():
    drive = PoweredDrive(SteadyLoad())
    now = [1000]
    board = SwitchedOutputs(drive, lambda: now[0], lambda i: now.__setitem__(0, i), lambda i: 1.0 + i * 4e-6,
                            produced=lambda: 1100)
    plan = [0] * 8
    plan[0:3] = [1050, 0, 0]          # 12V off at 1050, but samples up to 1099 are already out
    plan[4:7] = [1200, 0, 1]          # back on at 1200: ahead, waited for
    board.fire(plan, 2)
    assert plan[3] == 1100 and plan[7] == 1200 and now[0] == 1200
    assert [(e[2], e[3]) for e in board.edges] == [(1050, 1100), (1200, 1200)]


def test_enumeration_waits_for_power_and_perst_release():
    drive = PoweredDrive(SteadyLoad(), PowerSpec(enum_delay_ms=100))
    drive.set_output("12V", 0, 10.0)
    assert drive.ready_at() is None
    drive.set_output("12V", 1, 10.5)
    drive.set_output("PERST", 1, 10.5)
    assert drive.ready_at() is None
    drive.set_output("PERST", 0, 10.6)
    assert drive.ready_at() == pytest.approx(10.7)
    amps = drive.rail_currents(np.array([10.49, 10.5, 10.5 + 150e-6]))["12V"]
    assert amps[0] == 0 and amps[1] == pytest.approx(4.5) and amps[2] == pytest.approx(0.5 + 4 / np.e)


def test_analysis_on_known_shapes():
    period = 4e-6
    v = np.r_[np.full(10, 12.0), 12.0 - 0.01 * np.arange(1000)]     # cut at 10, a ramp through 9 V at 300 samples
    assert power_events.holdup_s(v, 10, 9.0, period) == pytest.approx(300 * period, rel=1e-9)
    t = np.arange(2000) * period
    i = np.r_[np.zeros(100), 0.5 + 4.0 * np.exp(-t / 150e-6)]
    ir = power_events.inrush(i, power_events.find_rise(i), period)
    assert ir["peak_a"] == pytest.approx(4.5) and ir["charge_c"] == pytest.approx(4.0 * 150e-6, rel=0.005)
    assert power_events.verify({1: 5, 2: 6, 3: 7}, {1: 5, 2: 4}) == {2: "stale", 3: "missing"}
    fall = np.r_[np.full(60, 0.5), np.zeros(100)]
    assert power_events.find_fall(fall) == 60
    noise = np.random.default_rng(1).normal(0.0, 0.003, 500)      # a rail the drive does not draw from
    assert power_events.find_fall(noise) == -1 and power_events.find_fall(noise + 0.01) == -1


def test_the_perst_input_reads_the_line_the_board_drives():
    """The front end's PERST# lane (high = released) goes low on the assertion's sample and back on the
    release's: a capture shows each reset where the board set it."""
    from powerrig.sim.interposer.frontend import PERST_BIT

    rig = _rig()
    on, off = rig.run([{"output": "PERST", "level": 1, "after_us": 3000},
                       {"output": "PERST", "level": 0, "after_us": 40000}])
    first = on["index"] - PRE
    b = rig.burst(first, off["index"] - first + PRE)
    low = np.flatnonzero((b.codes[:, -1] & PERST_BIT) == 0) + first
    assert low[0] == on["index"] and low[-1] == off["index"] - 1 and len(low) == off["index"] - on["index"]
    assert rig.drive.ready_at() == pytest.approx(rig.utc_of_index(off["index"]) + rig.drive.spec.enum_delay_ms * 1e-3)


def test_a_drive_powered_from_3v3_draws_no_12v_inrush_when_12v_returns():
    """The client (M.2) profile's main rail is 3.3 V: restoring 12 V charges nothing there, so neither
    the model's truth nor the samples show an inrush (the datacenter default keeps its 4 A)."""
    assert PowerSpec.for_rail("12V").inrush_peak_a == PowerSpec().inrush_peak_a > 0
    assert PowerSpec.for_rail("3V3", inrush_peak_a=1.5).inrush_peak_a == 1.5       # asked for: kept
    rig = SteppedRig(PowerSpec.for_rail("3V3"), seed=3)
    rig.drive.inner = SteadyLoad(amps_12v=0.0)
    rig.command({"op": "enable", "watchdog_ms": 1000})
    edges, _cut, on, _a, _l = _cycle(rig)
    assert on["inrush_peak_a"] == 0.0 and on["inrush_charge_c"] == 0.0
    _v, i, _ = rig.burst(edges[1]["requested"] - PRE, PRE + 1000).rail("12V")
    assert power_events.find_rise(i) == -1
