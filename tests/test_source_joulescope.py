"""The Joulescope source against a fake at pyjoulescope_driver's v1 API (Driver.device_paths, open,
publish, subscribe -> callbacks of {sample_id, sample_rate, decimate_factor, utc, time_map, data}):
two units, one per rail, on crystals 40 ppm apart, reduced to intervals on one UTC grid."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from powerrig.capture import CaptureReader
from powerrig.capture.recorder import Recorder
from powerrig.core.errors import InstrumentError
from powerrig.sources.joulescope import SAMPLE_RATE, JoulescopeSource, time64_of_unix

T0 = 1_790_000_000.0


class FakeUnit:
    """A JS220 feeding a known load: rail power steps at UTC T0 + 0.5 s, and one 100 us spike."""

    def __init__(self, path, volts, amps, ppm, start_delay_s, nan_at=()):
        self.path, self.volts, self.amps, self.ppm, self.delay = path, volts, amps, ppm, start_delay_s
        self.nan_at = nan_at            # sample ids the unit marks invalid (NaN), as a JS220 does
        self.subs, self.ctrl, self.fs = {}, {}, None

    def rate(self):        # the unit's counter in host seconds: its crystal runs ppm fast
        return SAMPLE_RATE * (1 + self.ppm * 1e-6)

    def utc(self, sid):
        return T0 + self.delay + sid / self.rate()

    def amps_at(self, t):
        a = np.where(t >= T0 + 0.5, self.amps * 2, self.amps)
        spike = (t >= T0 + 0.7) & (t < T0 + 0.7 + 100e-6)
        return np.where(spike, a * 5, a)

    def emit(self, sid, n):
        t = self.utc(sid + np.arange(n))
        tm = {"offset_time": time64_of_unix(self.utc(0)), "offset_counter": 0, "counter_rate": self.rate()}
        amps = self.amps_at(t)
        amps[np.isin(sid + np.arange(n), self.nan_at)] = np.nan
        for sig, data in (("i", amps), ("v", np.full(n, self.volts))):
            topic = f"{self.path}/s/{sig}/!data"
            if topic in self.subs and self.ctrl.get(sig):
                self.subs[topic](topic, {"sample_id": sid, "sample_rate": SAMPLE_RATE, "decimate_factor": 1,
                                         "utc": time64_of_unix(t[0]), "time_map": tm,
                                         "data": data.astype(np.float32)})


class FakeDriver:
    def __init__(self, units):
        self.units = {u.path: u for u in units}
        self.opened = []

    def device_paths(self):
        return list(self.units)

    def open(self, path, mode="restore"):
        self.opened.append(path)

    def close(self, path):
        pass

    def publish(self, topic, value, timeout=None):
        path, _, sub = topic.partition("/s/") if "/s/" in topic else topic.rpartition("/h/")
        if topic.endswith("/h/fs"):
            self.units[topic[:-len("/h/fs")]].fs = value
        elif topic.endswith("/ctrl"):
            sig = topic.split("/s/")[1].split("/")[0]
            self.units[topic.split("/s/")[0]].ctrl[sig] = value

    def subscribe(self, topic, flags, fn, timeout=None):
        self.units[topic.split("/s/")[0]].subs[topic] = fn

    def unsubscribe(self, topic, fn, timeout=None):
        self.units[topic.split("/s/")[0]].subs.pop(topic, None)


def _pump(driver, seconds, chunk=20_000):
    for u in driver.units.values():
        for sid in range(0, int(seconds * SAMPLE_RATE), chunk):
            u.emit(sid, chunk)


def test_two_units_one_per_rail_are_reduced_on_one_utc_grid(tmp_path):
    a = FakeUnit("u/js220/003512", 12.0, 0.5, ppm=+20, start_delay_s=0.0003, nan_at=np.arange(300_400, 300_410))
    b = FakeUnit("u/js220/003688", 3.3, 0.2, ppm=-20, start_delay_s=0.0011)
    drv = FakeDriver([a, b])
    src = JoulescopeSource.open({"12V": "3512", "3V3": "003688"}, driver=drv)
    assert drv.opened == [a.path, b.path] and src.sampling.peak_exact and src.sampling.sample_s == 1e-6
    out = tmp_path / "js.jls"
    rec = Recorder(src, out, interval_us=1000, seconds=1.0)
    t = threading.Thread(target=rec.run)
    t.start()
    import time
    deadline = time.monotonic() + 10
    while not all(u.ctrl.get("i") and u.ctrl.get("v") for u in (a, b)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert a.fs == b.fs == SAMPLE_RATE
    _pump(drv, 1.1)
    t.join(30)
    assert rec.result.end_reason == "duration", rec.result
    with CaptureReader(out) as cap:
        assert cap.rails == ("12V", "3V3") and cap.length == 1000
        assert cap.metadata["source"]["peak_exact"] and cap.metadata["device"]["device"] == "Joulescope"
        # the step at T0 + 0.5 s lands on the same interval on both rails, whatever each unit's clock
        step = int(round(float(cap.sample_id(T0 + 0.5))))
        for rail, unit in (("12V", a), ("3V3", b)):
            i = cap.samples(f"i_{rail}")
            assert i[step - 2] == pytest.approx(unit.amps, rel=1e-6)
            assert i[step + 1] == pytest.approx(2 * unit.amps, rel=1e-6)
            jump = int(np.argmax(np.diff(i[:900]) > unit.amps * 0.5)) + 1
            assert abs(jump - step) <= 1
        # the 100 us spike: its window mean is the exact peak on the 12 V rail
        peak = np.nanmax(cap.samples("p_peak_12V"))
        assert peak == pytest.approx(12.0 * 1.0 * 5, rel=0.02)
        assert np.nanmax(cap.samples("p_12V")) < peak / 3        # the 1 ms mean dilutes it
        # ten samples the 12 V unit marked invalid: one interval, a counted gap, NaN on both rails
        [gap] = cap.gaps
        assert gap["intervals"] == 1 and gap["reason"] == "invalid" and cap.metadata["stream"]["gap_intervals"] == 1
        assert np.isnan(cap.samples("p_total")[gap["sample_id"]]) and np.isfinite(cap.samples("p_total")).sum() == 999
        assert np.isfinite(cap.samples("p_peak_12V")[gap["sample_id"] + 2:]).all()


def test_a_serial_not_connected_is_one_line():
    drv = FakeDriver([FakeUnit("u/js220/003512", 12.0, 0.5, 0, 0)])
    with pytest.raises(InstrumentError, match=r"no Joulescope with serial 9999 for rail 3V3; connected: u/js220/003512"):
        JoulescopeSource.open({"12V": "3512", "3V3": "9999"}, driver=drv)
