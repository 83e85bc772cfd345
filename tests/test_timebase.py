"""The clock fit against synthetic pings with known offset, drift, jitter and slow outliers."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.timebase import ClockFit, ClockModel


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
