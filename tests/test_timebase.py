"""The clock fit against synthetic pings with known offset, drift, jitter and slow outliers."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.core.clock import ClockFit, ClockModel, marker_offset
from test_clock_remap import old_fit


def pings(fit, n, drift_ppm, jitter_s, outliers=0.0, seed=0, utc0=1.8e9, boot_index=2_700_000_000):
    rng = np.random.default_rng(seed)
    period = 4e-6
    for k in range(n):
        t_true = utc0 + k * 0.05                                  # when the device stamped
        d_in, d_out = rng.uniform(0, jitter_s, 2) + 100e-6
        if rng.random() < outliers:
            d_out += rng.uniform(5e-3, 50e-3)                     # a busy host: slow round trip
        index = boot_index + (t_true - utc0) * (1 + drift_ppm * 1e-6) / period
        fit.add(t_true - d_in, index, t_true + d_out)
    return lambda idx: utc0 + (np.asarray(idx) - boot_index) * period / (1 + drift_ppm * 1e-6)


@pytest.mark.parametrize("drift", [-50.0, 0.0, 35.0, 120.0])
def test_recovers_drift_and_offset(drift):
    fit = ClockFit(window=1200)
    truth = pings(fit, 1200, drift, 1e-3, outliers=0.05)
    m = fit.model()
    assert abs(m.drift_ppm - drift) < 2.0
    idx = np.linspace(2_700_000_000, 2_700_000_000 + 60 / 4e-6, 50)
    err = np.abs(m.utc(idx) - truth(idx))
    assert err.max() < 100e-6, err.max()


def test_rejects_slow_round_trips():
    clean, noisy = ClockFit(window=600), ClockFit(window=600)
    truth = pings(clean, 600, 20.0, 1e-3, outliers=0.0, seed=1)
    pings(noisy, 600, 20.0, 1e-3, outliers=0.3, seed=1)
    idx = 2_700_000_000 + np.arange(0, 600 * 0.05 / 4e-6, 100_000)
    e_noisy = np.abs(noisy.model().utc(idx) - truth(idx)).max()
    assert e_noisy < 150e-6, e_noisy


def test_model_round_trip_and_serialisation():
    m = ClockModel(index_ref=123_456_789, utc_ref=1.8e9, drift_ppm=42.0, residual_us=12.0, pings=9)
    idx = np.array([0, 1e6, 1e9])
    # float64 UTC resolves about 0.24 us at today's epoch: a round trip is exact to well under a sample
    np.testing.assert_allclose(m.index(m.utc(idx)), idx, atol=0.1)
    m2 = ClockModel.from_dict(m.to_dict())
    assert m2 == m
    assert m.offset_s == pytest.approx(m.utc(0))


def test_no_pings_no_model():
    assert ClockFit().model() is None


def asymmetric_pings(fit, n, out_floor, in_floor, seed=3, drift_ppm=35.0, utc0=1.8e9, boot=2_700_000_000,
                     late_in=0.0):
    """Pings whose fixed inbound latency differs from the outbound one (as the device's encode time
    makes it); uniform 0..1 ms jitter each way on top, the device's turnaround 0..2 ms, and on the
    inbound side only an exponential extra delay of mean ``late_in`` (a sender thread waking late,
    as the simulator's USB writer did)."""
    rng = np.random.default_rng(seed)
    period = 4e-6
    for k in range(n):
        t_arrive = utc0 + k * 0.04
        turn = rng.uniform(0, 2e-3)
        i_rx = boot + (t_arrive - utc0) * (1 + drift_ppm * 1e-6) / period
        i_tx = i_rx + turn * (1 + drift_ppm * 1e-6) / period
        wait = rng.exponential(late_in) if late_in else 0.0
        fit.add(t_arrive - out_floor - rng.uniform(0, 1e-3), i_rx,
                t_arrive + turn + in_floor + rng.uniform(0, 1e-3) + wait, i_tx)
    return lambda idx: utc0 + (np.asarray(idx) - boot) * period / (1 + drift_ppm * 1e-6)


def test_bound_fit_is_off_by_half_the_floor_asymmetry_not_the_mean_latency():
    # the old midpoint fit converged to half the difference of the MEAN latencies; this one to half
    # the difference of the minimum ones, and the turnaround's spread does not enter at all
    fit = ClockFit()
    truth = asymmetric_pings(fit, 250, out_floor=100e-6, in_floor=180e-6, late_in=200e-6)     # 10 s at 25 Hz
    m = fit.model()
    old = old_fit(np.array(fit.pings_since(0)[0]))
    idx = np.linspace(2_700_000_000, 2_700_000_000 + 10 / 4e-6, 50)
    err = m.utc(idx) - truth(idx)
    err_old = old.utc(idx) - truth(idx)
    # the floors' 40 us plus the envelope of 10 s of pings; the old fit adds the late tail's mean
    assert np.abs(err).max() < 120e-6, err * 1e6
    assert np.abs(err_old).min() > np.abs(err).max(), (err_old * 1e6, err * 1e6)
    assert abs(m.drift_ppm - 35.0) < 10.0


def test_asymmetry_correction_and_marker_measurement():
    fit = ClockFit()
    truth = asymmetric_pings(fit, 750, out_floor=100e-6, in_floor=300e-6)    # 30 s
    edges = 2_700_000_000 + np.arange(5, 30, 1.0) / 4e-6
    rng = np.random.default_rng(1)
    host = truth(edges) + rng.uniform(-5e-6, 5e-6, len(edges))              # toggles with a few us of slop
    mean, spread = marker_offset(fit.model(), host, edges)
    assert 70e-6 < mean < 130e-6 and spread < 20e-6
    fit.asymmetry_s = -mean
    corrected = fit.model()
    assert np.abs(corrected.utc(edges) - truth(edges)).max() < 25e-6


def test_marker_offset_needs_pairs():
    with pytest.raises(ValueError, match="at least two toggles"):
        marker_offset(ClockModel(index_ref=0, utc_ref=0.0), [1.0], [1])
