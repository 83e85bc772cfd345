"""The simulated USB link has the same latency floor in both directions, measured against the
simulator's true clock: the clock fit can only be as good as the asymmetry of the fastest round
trips (docs/link.md), and a floor on one side only (the writer thread's wake-up, before the floor
existed) was a bias of the simulator, not of USB."""
from __future__ import annotations

import time

import numpy as np

from powerrig.interposer import Interposer
from powerrig.sim.interposer import USB_FLOOR_S
from test_clock_remap import truth_utc

SLACK_S = 20e-6      # the device index is an integer (4 us) and the truth's offset is read from two clocks


def test_every_ping_takes_at_least_the_floor_each_way_against_the_true_clock(sim):
    s = sim("--seed", "3", "--jitter-ms", "0.2")
    with Interposer.open(s.port) as dev:
        deadline = time.monotonic() + 60
        with dev.stream() as st:
            for _ in st.blocks(seconds=1):
                pass
            while dev.clock.count < 60 and time.monotonic() < deadline:   # pings continue after the stream
                time.sleep(0.05)
        p = np.array(dev.clock.pings_since(0)[0])
    truth = s.stop()["clock"]
    assert len(p) >= 60, len(p)
    outbound = truth_utc(truth, p[:, 1]) - p[:, 0]        # host sent -> device received (its stamp)
    inbound = p[:, 3] - truth_utc(truth, p[:, 2])         # device replied -> host read the reply
    assert outbound.min() >= USB_FLOOR_S - SLACK_S, outbound.min()
    assert inbound.min() >= USB_FLOOR_S - SLACK_S, inbound.min()
    # the floor is a floor, not the typical value: the jitter spreads latencies above it
    assert np.median(outbound) > USB_FLOOR_S and np.median(inbound) > USB_FLOOR_S
