"""A device whose clock runs far slower than the host's (an emulated board, docs/emulator.md, "Time").

Both failed before: the clock fit assumed a slope within ppm of nominal for its first half second and
for its hull candidates (a board at 5 % of real time was placed seconds off, with a negative
residual), and the pinger sent 25-100 pings per HOST second, i.e. 20x more per device second than a
real board gets, enough to take most of an RP2040's CPU.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from powerrig.interposer.client import Interposer
from powerrig.core.clock import fit_pings

PERIOD = 4e-6


def pings(rate: float, n: int, seed: int = 1) -> np.ndarray:
    """n pings 10 ms of device time apart against a device at ``rate`` device s per host s, with
    0.5-2.5 ms of random latency each way (rows: t_send, index_rx, index_tx, t_recv)."""
    rng = np.random.default_rng(seed)
    rows, t = [], 1000.0
    for _ in range(n):
        t += 0.01 / rate * (1 + 0.3 * rng.random())
        up, down = 0.0005 + 0.002 * rng.random(), 0.0005 + 0.002 * rng.random()
        rx = (t + up - 1000.0) * rate / PERIOD
        rows.append((t, rx, rx + 0.0003 * rate / PERIOD, t + up + 0.0003 + down))
    return np.array(rows)


@pytest.mark.parametrize("rate", [0.05, 0.2])
@pytest.mark.parametrize("n", [5, 20, 50, 300])
def test_fit_follows_a_device_clock_far_from_nominal(rate, n):
    a = pings(rate, n)
    m = fit_pings(a, PERIOD)
    fitted = 1 + m.drift_ppm * 1e-6                                     # device s per host s
    # 5-20 pings over 0.05-0.2 device s: the midpoints' slope, to a few %; then the hulls, to 100 ppm
    assert fitted == pytest.approx(rate, rel=0.03 if n < 50 else 1e-4 / rate)
    idx = a[-1, 1]
    true_t = 1000.0 + idx * PERIOD / rate
    assert abs(m.utc(idx) - true_t) < 2e-3                              # within the ping latencies
    assert m.residual_us > 0


def test_fit_of_a_real_crystal_is_unchanged():
    """Within 1 % of nominal the fit takes its old path: the first half second at the nominal rate."""
    m = fit_pings(pings(1.0, 20), PERIOD)
    assert m.drift_ppm == 0.0


class SlowClockLink:
    """Answers pings from a device clock running at ``rate`` of the host's."""

    def __init__(self, rate: float):
        self.rate = rate
        self.t0 = time.time()
        self.pings = 0
        self.sent: list[float] = []         # host time of each ping
        self.error = None
        self.port = "slow"
        self.lock = threading.Lock()

    def command(self, cmd: str, timeout: float = 2.0, **args) -> dict:
        t = time.time()
        with self.lock:
            self.pings += 1
            self.sent.append(t)
        idx = (t - self.t0) * self.rate / PERIOD
        return {"ok": True, "us": 0, "rx_index": idx, "index": idx, "_index": idx, "_t_send": t, "_t_recv": t + 1e-4}

    def close(self) -> None:
        pass


DESCRIPTION = {"sample_period_us": 4, "interval_us": {"default": 1000}, "rails": [{"name": "12V"}]}


@pytest.mark.parametrize("rate", [1.0, 0.05])
def test_pinger_paces_pings_in_device_time(rate):
    link = SlowClockLink(rate)
    dev = Interposer(link, dict(DESCRIPTION), burst_s=60, burst_interval=0.01)
    try:
        time.sleep(1.2)
    finally:
        dev.close()
    assert dev.device_rate == pytest.approx(rate, rel=0.1)
    assert link.time_scale == pytest.approx(1 / rate, rel=0.1)      # replies' deadlines in device time
    # 100 pings per device second: at 5 % speed ~20 in the first 0.2 s while the rate is unknown, then
    # one per 0.2 s (at real time up to ~120; a loaded machine only ever sends fewer)
    if rate < 1.0:
        assert link.pings < 35, link.pings


def test_pinger_keeps_to_the_boards_minimum_ping_interval():
    """A board that says how often its main loop affords a ping (describe "ping_interval_min_us", the
    RP2040's 20 ms) gets no more, in its first seconds' fast phase too; one that says nothing gets
    the host's 100 a second. Held by the gaps between pings, which a starved host (this file runs in
    make test's SCHED_IDLE lane) only stretches: a count in one second of wall time fell to 49 there."""
    counts, gaps = {}, {}
    for floor_us in (0, 50000):
        link = SlowClockLink(1.0)
        dev = Interposer(link, dict(DESCRIPTION, ping_interval_min_us=floor_us), burst_s=60, burst_interval=0.01)
        try:
            time.sleep(1.0)
        finally:
            dev.close()
        counts[floor_us] = link.pings
        gaps[floor_us] = [b - a for a, b in zip(link.sent, link.sent[1:])]
    assert counts[50000] <= 21 and gaps[50000] and min(gaps[50000]) >= 0.049, (counts, gaps[50000])
    # without a floor the fast phase's 10 ms: gaps shorter than any 50 ms floor allows. A starved host
    # only stretches gaps, so one short gap proves the pace; the counts in one second of wall time are
    # the host's to starve (13 without the floor against 15 with it, once, in make test's idle lane)
    assert min(gaps[0]) < 0.03, (counts, sorted(gaps[0])[:5])
