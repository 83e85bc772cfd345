"""The clock pings' schedule (interposer/pings.py): which interval follows, given the time since the
connection opened and the clock fit's bound; and the Interposer wiring it to its fit and to the power
watchdog. No clock runs: the times are given."""
from __future__ import annotations

import math

import pytest

from powerrig.interposer import pings
from powerrig.interposer.client import Interposer
from powerrig.interposer.pings import PingSchedule


class Bound:
    """A fit's bound as the schedule asks for it, counting the asks."""

    def __init__(self, us):
        self.us = us
        self.asks = 0

    def __call__(self):
        self.asks += 1
        return self.us


def test_the_first_seconds_ping_fast_and_never_ask_the_fit():
    s = PingSchedule(burst_s=30.0, burst_interval=0.01, interval=0.1)
    bound = Bound(5.0)
    assert [s.next_s(t, bound) for t in (0.0, 10.0, 29.99)] == [0.01] * 3
    assert bound.asks == 0 and not s.settled


def settled(**kw) -> PingSchedule:
    return PingSchedule(burst_s=0.0, interval=0.1, burst_every=5.0, burst_pings=10, settled=True,
                        _checked=0.0, **kw)


def test_after_the_burst_a_loose_bound_keeps_ten_a_second_and_a_tight_one_thins_to_bursts():
    s = PingSchedule(burst_s=30.0, burst_interval=0.01, interval=0.1, burst_every=5.0, burst_pings=10)
    bound = Bound(pings.TIGHT_US * 3)
    assert s.next_s(30.0, bound) == 0.1
    bound.us = pings.TIGHT_US                 # tight, but not looked at again before CHECK_S
    assert s.next_s(30.0 + pings.CHECK_S / 2, bound) == 0.1
    assert bound.asks == 1
    assert s.next_s(30.0 + pings.CHECK_S, bound) == 0.0      # the first burst starts at once
    assert bound.asks == 2 and s.settled


def test_a_settled_schedule_sends_its_burst_back_to_back_then_waits_for_the_next():
    """What is sent when: each ping of a burst as soon as the last one ended, then nothing until
    burst_every after the burst began; asking again while a ping is out changes nothing."""
    s = settled()
    sent, t = [], 100.0
    while t < 111.0:
        every = s.next_s(t, lambda: 10.0)
        assert s.next_s(t, lambda: 10.0) == every        # the reader asks again while it paces
        t += every
        sent.append(round(t, 3))
        t += 0.002                                      # the round trip
        s.answered()
    assert sent == [100.0 + k * 0.002 for k in range(10)] + \
        [pytest.approx(105.0 + k * 0.002) for k in range(10)] + \
        [pytest.approx(110.0 + k * 0.002) for k in range(10)] + [pytest.approx(115.0)]


def test_a_failed_ping_counts_as_one_of_the_burst():
    s = settled()
    assert s.next_s(0.0, lambda: 10.0) == 0.0
    for _ in range(10):
        s.answered()                                   # replies or errors alike
    assert s.next_s(0.1, lambda: 10.0) == pytest.approx(4.9)


def test_the_bound_is_asked_at_most_every_check_s():
    s = PingSchedule(burst_s=0.0)
    bound = Bound(1000.0)
    t = 0.0
    while t < 60.0:
        s.next_s(t, bound)
        t += 0.1
    assert bound.asks == math.ceil(60.0 / pings.CHECK_S), bound.asks


def test_a_bound_that_widens_brings_the_steady_rate_back_past_loose_us_only():
    s = PingSchedule(burst_s=0.0, interval=0.1, burst_every=5.0, burst_pings=10)
    t = 0.0

    def at(us):
        nonlocal t
        t += pings.CHECK_S
        for _ in range(10):
            s.answered()                               # the last burst over
        return s.next_s(t, lambda: us)

    assert at(50.0) == 0.0
    assert at(pings.LOOSE_US) == 0.0            # between the two limits: still bursts
    assert at(pings.LOOSE_US + 1) == 0.1
    assert at((pings.TIGHT_US + pings.LOOSE_US) / 2) == 0.1
    assert at(pings.TIGHT_US) == 0.0


@pytest.mark.parametrize("bound", [None, float("nan"), float("inf")])
def test_no_fit_yet_is_no_reason_to_thin(bound):
    s = PingSchedule(burst_s=0.0, interval=0.1)
    assert [s.next_s(k * pings.CHECK_S, lambda: bound) for k in range(4)] == [0.1] * 4


def test_an_armed_watchdog_gets_four_pings_inside_its_timeout_and_the_board_floor_still_holds():
    s = settled()
    assert s.next_s(0.0, lambda: 1.0) == 0.0
    for _ in range(10):
        s.answered()
    assert s.next_s(1.0, lambda: 1.0) == 4.0
    s.watchdog_s = 1.0
    assert s.next_s(1.0, lambda: 1.0) == 0.25
    s.watchdog_s = 0.02                         # a 20 ms watchdog on a board that affords a ping per 50 ms
    s.floor = 0.05
    assert s.next_s(1.0, lambda: 1.0) == 0.05
    s.watchdog_s = None
    s.floor = 0.0
    assert s.next_s(1.0, lambda: 1.0) == 4.0


def test_a_board_floor_spaces_a_bursts_pings():
    s = settled(floor=0.02)
    assert s.next_s(0.0, lambda: 1.0) == 0.02


def test_bursts_never_ping_more_often_than_the_interval_asked_for():
    s = PingSchedule(burst_s=0.0, interval=3600.0)
    assert s.next_s(0.0, lambda: 1.0) == 3600.0 and s.settled


class PingingLink:
    """A link that pings from its own reader (as SerialLink does): the Interposer hands it the schedule."""
    time_scale = 1.0
    error = None

    def __init__(self):
        self.every_s = None
        self.soon = 0
        self.sent = []

    def keep_pinging(self, every_s, on_reply, on_error):
        self.every_s = every_s
        return True

    def ping_soon(self):
        self.soon += 1

    def stop_pinging(self):
        pass

    def command(self, cmd, timeout=2.0, **args):
        self.sent.append((cmd, args))
        return {"ok": True}

    def close(self):
        pass


class Permit:
    def covers(self, what, serial):
        return what == "power"


def test_the_interposer_thins_its_pings_on_its_own_fit_and_keeps_the_watchdog_fed():
    link = PingingLink()
    dev = Interposer(link, {"sample_period_us": 4, "interval_us": {"default": 1000}, "rails": [{"name": "12V"}]})
    period = 4e-6
    for k in range(400):                        # 40 s of pings, 100 us round trips: a bound of ~50 us
        t = 1000.0 + k * 0.1
        dev.clock.add(t, t / period, t + 1e-4, t / period)
    assert dev.clock.model().residual_us <= pings.TIGHT_US
    assert link.every_s() == 0.01               # the connection's first seconds
    dev._t_open -= 31.0
    assert link.every_s() == 0.0                # past them, with a tight bound: a burst ...
    for _ in range(10):
        dev._on_ping_reply({"ok": True, "index": 1e9, "_t_send": 2000.0, "_t_recv": 2000.0001})
    assert link.every_s() == pytest.approx(5.0, abs=0.1)     # ... then nothing until the next
    dev.power_enable(Permit(), watchdog_ms=1000)
    assert link.soon == 1 and link.every_s() == 0.25
    dev.power_disable()
    assert link.every_s() == pytest.approx(5.0, abs=0.1)
    assert [c for c, _a in link.sent] == ["power", "power"]
