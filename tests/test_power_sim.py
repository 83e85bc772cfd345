"""Power actions through the real pty path (issue 29): the client, the firmware's Device and
powerrig_fw.actions on the virtual interposer's board, a raw burst around each edge, the analysis."""
from __future__ import annotations

import sys
import threading
import time

import pytest

from powerrig.analysis import power_events
from powerrig.core.errors import DeviceError
from powerrig.dut.commands import Permit
from powerrig.interposer.client import Interposer
from powerrig.sim.interposer.board import VirtualInterposer
from powerrig.sim.ssd.power import SteadyLoad

PERMIT = Permit("power", frozenset({"/dev/nvme0"}), "SN")     # what dut.destructive.power hands over


@pytest.fixture
def board():
    old = sys.getswitchinterval()
    sys.setswitchinterval(100e-6)          # as `powerrig sim interposer` runs it
    sim = VirtualInterposer(load=SteadyLoad()).start()
    try:
        with Interposer.open(sim.port) as dev:
            yield sim, dev
    finally:
        sim.stop()
        sys.setswitchinterval(old)


def test_nothing_switches_before_the_session_enabled_it(board):
    sim, dev = board
    with pytest.raises(DeviceError, match="enable"):
        dev.power_sequence([{"output": "12V", "level": 0, "after_us": 2000}])
    with pytest.raises(DeviceError, match="permit"):
        dev.power_enable(None)
    with pytest.raises(DeviceError, match="permit"):
        dev.power_enable(Permit("format", frozenset({"/dev/nvme0"})))
    assert sim.drive.truth == [] and dev.power_status()["enabled"] is False


def test_cycles_through_the_pty_land_where_reported_and_measure_the_model(board):
    sim, dev = board
    assert dev.power_enable(PERMIT, 5000)["enabled"]
    for _ in range(3):
        out = {}
        # the burst triggers on the restore's inrush (12 V above 30 W; the drive draws 6 W) and keeps
        # the 12 ms before it, so the cut 8 ms earlier and its hold-up are in it too
        th = threading.Thread(target=lambda: out.setdefault("b", dev.burst(
            pre=3000, post=1000, trigger="threshold", rail="12V", above_w=30.0, timeout=30)))
        th.start()
        dev.power_sequence([{"output": "12V", "level": 0, "after_us": 200000},
                            {"output": "12V", "level": 1, "after_us": 8000}])
        cut_edge, on_edge = dev.power_edges(2)
        th.join()
        b = out["b"]
        cut, on = sim.drive.truth[-2:]
        v, i, _ = b.rail("12V")
        at = power_events.find_fall(i)
        assert b.first_index + at == cut_edge["index"]                    # the report says where it fell
        rise = at + power_events.find_rise(i[at:])
        assert b.first_index + rise == on_edge["index"]
        assert on_edge["index"] - cut_edge["index"] == on_edge["requested"] - cut_edge["requested"] == 2000
        assert power_events.holdup_s(v, at, 9.0, 4e-6) == pytest.approx(cut["holdup_s"], rel=0.05)
        ir = power_events.inrush(i, rise, 4e-6, 1000)
        assert ir["peak_a"] == pytest.approx(on["inrush_peak_a"], rel=0.05)
        assert ir["charge_c"] == pytest.approx(on["inrush_charge_c"], rel=0.05)
    truth = sim.truth()["power"]
    assert [e[3] for e in truth["edges"]][-2:] == [cut_edge["index"], on_edge["index"]]
    assert dev.power_disable()["state"]["12V"] == 1


def test_a_host_gone_silent_gets_the_drive_powered_again(board):
    sim, dev = board
    dev.power_enable(PERMIT, 100)
    dev.power_sequence([{"output": "12V", "level": 0, "after_us": 2000}])
    dev.power_edges(1)
    assert sim.drive.level["12V"] == 0
    dev.stop_pinging()                    # the host stops talking (its pings end), the link stays open
    deadline = time.monotonic() + 5
    restored = []
    while not (sim.drive.level["12V"] == 1 and restored) and time.monotonic() < deadline:
        time.sleep(0.02)                  # (the board restores first, then sends its notice: wait for both)
        restored = [d for d in list(dev.link.notices) if d.get("event") == "power_restored"]
    assert sim.drive.level["12V"] == 1
    assert restored and restored[0]["why"].startswith("watchdog") and restored[0]["outputs"] == ["12V"]
