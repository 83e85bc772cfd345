"""`powerrig import`: Joulescope UI recordings (JLS files written with pyjls as the UI writes them:
one source per unit, current/voltage/power at 1 MHz, UTC entries) and a meter's CSV with a mapping
file become captures that analysis, checks, efficiency and the report run on; fio's JSON output and
powerrig's own events log merge on as events."""
from __future__ import annotations

import json
import re

import numpy as np
import pyjls
import pytest

from conftest import run_cli
from powerrig.analysis import analyse
from powerrig.capture import CaptureReader
from powerrig.core.timeline import NVME, Event, Timeline

T0 = 1_790_000_000.0          # UTC of the recordings' start
TIME64_SECOND = 1 << 30
EPOCH = 1514764800


def t64(unix: float) -> int:
    return int(round((unix - EPOCH) * TIME64_SECOND))


def joulescope_ui_file(path, serial, volts, amps_idle, amps_busy, busy, fs=1_000_000, seconds=2.0, ppm=0.0,
                      spike=False):
    """A recording as the Joulescope UI writes one unit: source 1 = the JS220, signals current, voltage,
    power (f32, at the UI's sample rate), UTC entries every 0.25 s on each."""
    n = int(seconds * fs)
    rate = fs * (1 + ppm * 1e-6)                  # the unit's crystal against the host's UTC
    t = T0 + np.arange(n) / rate
    amps = np.where((t >= busy[0]) & (t < busy[1]), amps_busy, amps_idle).astype(np.float32)
    if spike:
        amps[int(0.4 * fs):int(0.4 * fs) + 100] *= 4            # one 100 us spike
    volts_a = np.full(n, volts, np.float32)
    w = pyjls.Writer(str(path))
    w.source_def(1, name="JS220-" + serial, vendor="Jetperch", model="JS220", version="1.2.3", serial_number=serial)
    for sid, name, units in ((1, "current", "A"), (2, "voltage", "V"), (3, "power", "W")):
        w.signal_def(sid, 1, pyjls.SignalType.FSR, pyjls.DataType.F32, fs, name=name, units=units)
    for sid, data in ((1, amps), (2, volts_a), (3, amps * volts_a)):
        w.fsr(sid, 0, data)
        for k in range(0, n, fs // 4):
            w.utc(sid, k, t64(T0 + k / rate))
    w.close()
    return path


def fio_json(path, end_utc, runtime_s, io_bytes):
    doc = {"fio version": "fio-3.36", "timestamp": int(end_utc), "timestamp_ms": int(end_utc * 1000),
           "jobs": [{"jobname": "seq-read-128k", "job options": {"rw": "read", "bs": "128k", "iodepth": "32"},
                     "job_runtime": int(runtime_s * 1000),
                     "read": {"io_bytes": io_bytes, "bw_bytes": int(io_bytes / runtime_s)},
                     "write": {"io_bytes": 0, "bw_bytes": 0}}]}
    path.write_text("note: a line fio prints first\n" + json.dumps(doc))
    return path


def test_joulescope_recordings_one_per_rail_import_and_analyse(tmp_path):
    busy = (T0 + 0.8, T0 + 1.6)
    a = joulescope_ui_file(tmp_path / "js-12v.jls", "003512", 12.0, 0.4, 0.9, busy, ppm=30, spike=True)
    b = joulescope_ui_file(tmp_path / "js-3v3.jls", "003688", 3.3, 0.1, 0.3, busy, ppm=-30)
    ev = fio_json(tmp_path / "fio.json", busy[1], busy[1] - busy[0], 800 * 2**20)
    out = tmp_path / "cap.jls"
    r = run_cli("import", "joulescope", f"12V={a}", f"3V3={b}", "--events", str(ev), "--out", str(out))
    assert r.returncode == 0, r.stderr
    with CaptureReader(out) as cap:
        assert cap.rails == ("12V", "3V3") and cap.metadata["source"]["sample_s"] == pytest.approx(1e-6)
        an = analyse(cap, cap.events, cap.metadata)
    ph = next(p for p in an.phases if p.name == "seq-read-128k")
    assert ph.mean_w == pytest.approx(12.0 * 0.9 + 3.3 * 0.3, rel=2e-3)
    # the spike on the 12 V unit: 4 x 0.4 A for 100 us is the exact 100 us peak (plus 3.3 V's idle)
    assert np.nanmax([p.peak_100us.value_w for p in an.phases]) == pytest.approx(12 * 1.6 + 3.3 * 0.1, rel=0.01)
    pcm2 = next(c for c in an.checks if c.check == "OCP PCM-2" and c.phase == ph.name)
    assert not any("sampling requirement" in n for n in pcm2.notes)    # 1 us samples: the peak is measured
    [eff] = an.efficiency                            # MiB/s per W, from fio's bytes and the imported power
    assert eff["mib_s_per_w"] == pytest.approx((800 / 0.8) / ph.mean_w, rel=0.01)
    rep = run_cli("report", str(out), "--out", str(tmp_path / "rep"))
    assert rep.returncode == 0, rep.stderr


def test_meter_csv_with_a_mapping_imports_and_checks_say_its_sampling_is_too_slow(tmp_path):
    rows = ["Time (s),V1,I1 (mA),V2,I2"]
    for k in range(300):                          # 10 ms apart, 3 s; busy 1.0 .. 2.0 s
        busy = 100 <= k < 200
        rows.append(f"{k * 0.01:.2f},12.0,{900 if busy else 400},3.3,{0.3 if busy else 0.1}")
    csv = tmp_path / "meter.csv"
    csv.write_text("\n".join(rows) + "\n")
    mapping = tmp_path / "meter.toml"
    mapping.write_text('instrument = "bench DMM logger"\n[time]\ncolumn = "Time (s)"\nunits = "s"\n'
                       'start_utc = "2026-09-21T12:00:00Z"\n'
                       '[rails.12V]\nvoltage = { column = "V1", units = "V" }\ncurrent = { column = "I1 (mA)", units = "mA" }\n'
                       '[rails.3V3]\nvoltage = { column = "V2", units = "V" }\ncurrent = { column = "I2", units = "A" }\n')
    from datetime import datetime, timezone
    t0 = datetime(2026, 9, 21, 12, tzinfo=timezone.utc).timestamp()
    tl = Timeline([Event("phase", "seq-write-128k", t0 + 1.0, t0 + 2.0, meta={"workload": True}),
                   Event(NVME, "set-feature power", t0 + 0.2, t0 + 0.21)])
    log = tmp_path / "events.jsonl"
    tl.to_jsonl(log)
    out = tmp_path / "cap.jls"
    r = run_cli("import", "csv", str(csv), "--mapping", str(mapping), "--events", str(log), "--out", str(out))
    assert r.returncode == 0, r.stderr
    with CaptureReader(out) as cap:
        an = analyse(cap, cap.events, cap.metadata)
    ph = next(p for p in an.phases if p.name == "seq-write-128k")
    assert ph.mean_w == pytest.approx(12 * 0.9 + 3.3 * 0.3, rel=0.01)
    pcm2 = next(c for c in an.checks if c.check == "OCP PCM-2" and c.phase == ph.name)
    assert not pcm2.requirement_met and "every 10 ms" in pcm2.notes[0], pcm2.notes
    # nothing is overwritten, a mapping naming a missing column is one line
    again = run_cli("import", "csv", str(csv), "--mapping", str(mapping), "--out", str(out))
    assert again.returncode == 2 and "exists" in again.stderr and again.stderr.count("\n") == 1
    mapping.write_text(mapping.read_text().replace('"V2"', '"V9"'))
    bad = run_cli("import", "csv", str(csv), "--mapping", str(mapping), "--out", str(tmp_path / "x.jls"))
    assert bad.returncode == 2 and "no column 'V9'" in bad.stderr and bad.stderr.count("\n") == 1
    assert not (tmp_path / "x.jls").exists()


# ---- issue 41 item 2: an N6705C datalog with overloads, and binning that never drops an interval ----------
N6705C_MAPPING = ('instrument = "Keysight N6705C data logger"\n[time]\ncolumn = "Time (s)"\nunits = "s"\n'
                  'start_utc = "2026-11-20T09:00:00Z"\n'
                  '[rails.12V]\nvoltage = { column = "Volt avg 1", units = "V" }\n'
                  'current = { column = "Curr avg 1", units = "A" }\n'
                  '[rails.3V3]\nvoltage = { column = "Volt avg 2", units = "V" }\n'
                  'current = { column = "Curr avg 2", units = "A", range = [-0.1, 3.0] }\n')


def n6705c_log(path, n, period_s, overloads=(), nans=(), out_of_range=(), decimals=6):
    """A datalog as the N6705C exports it: a time column and each channel's mean V and I per period, in
    the instrument's number format; an overload is its overflow 9.9E+37, a period with no reading 9.91E+37."""
    rng = np.random.default_rng(n)
    k = np.arange(n)
    i12 = 0.4 + 0.5 * ((k * period_s) % 2.0 >= 1.0) + rng.normal(0, 0.01, n)
    v12 = 12.0 - 0.05 * i12
    i33 = 0.1 + 0.2 * ((k * period_s) % 0.5 >= 0.25)
    v33 = np.full(n, 3.3)
    text = {"i12": [f"{x:.6E}" for x in i12], "i33": [f"{x:.6E}" for x in i33]}
    valid = np.ones(n, bool)
    for at in overloads:
        text["i12"][at] = "9.900000E+37"
        valid[at] = False
    for at in nans:
        text["i33"][at] = "9.910000E+37"
        valid[at] = False
    for at in out_of_range:
        text["i33"][at] = "4.500000E+00"         # beyond the mapping's range for the 3.3 V channel
        valid[at] = False
    rows = ["Sample,Time (s),Volt avg 1,Curr avg 1,Volt avg 2,Curr avg 2"]
    rows += [f"{j},{j * period_s:.{decimals}f},{v12[j]:.6E},{text['i12'][j]},{v33[j]:.6E},{text['i33'][j]}" for j in k]
    path.write_text("\n".join(rows) + "\n")
    truth = {"12V": float(np.sum((v12 * i12)[valid]) * period_s), "3V3": float(np.sum((v33 * i33)[valid]) * period_s)}
    return path, truth, int((~valid).sum())


def _close_record(cap):
    from powerrig.capture import layout as L
    import pyjls as _p
    with _p.Reader(str(cap)) as r:
        docs = []
        r.user_data(lambda tag, data: docs.append(json.loads(bytes(data))) if tag == L.UD_CLOSE else None)
    return docs[-1]


def test_an_n6705c_log_with_overloads_at_10_ms_imports_its_valid_energy_and_counts_the_overloads(tmp_path):
    overloads = list(range(700, 705)) + [1500]
    log, truth, bad = n6705c_log(tmp_path / "dlog.csv", 3000, 0.01, overloads=overloads, nans=[2100, 2101],
                                 out_of_range=[2500])
    mapping = tmp_path / "n6705c.toml"
    mapping.write_text(N6705C_MAPPING)
    for interval_us, per_row in ((None, 1), (1000, 10)):        # the meter's own 10 ms, and 1 ms
        out = tmp_path / f"cap{interval_us}.jls"
        r = run_cli("import", "csv", str(log), "--mapping", str(mapping), "--out", str(out),
                    *(["--interval-us", str(interval_us)] if interval_us else []))
        assert r.returncode == 0, r.stderr
        assert "RuntimeWarning" not in r.stderr and "overflow" not in r.stderr
        with CaptureReader(out) as cap:
            assert cap.interval_s == pytest.approx(0.01 / per_row)
            assert cap.length == 3000 * per_row                       # no interval lost to binning
            assert sum(g["intervals"] for g in cap.gaps) == bad * per_row
            assert {g["reason"] for g in cap.gaps} == {"invalid"}
            imported = cap.metadata["imported"]
            assert imported["invalid"]["12V"]["current"] == {"overload": 6, "not_a_number": 0, "out_of_range": 0}
            assert imported["invalid"]["3V3"]["current"] == {"overload": 0, "not_a_number": 2, "out_of_range": 1}
            assert imported["invalid_samples"] == bad
            assert imported["resampling"]["meter_interval_s"] == pytest.approx(0.01)
            p12 = cap.samples("p_12V")
            assert np.isnan(p12[700 * per_row:705 * per_row]).all() and np.nanmax(p12) < 20   # never averaged in
        energy = _close_record(out)["energy_j"]
        for rail in ("12V", "3V3"):
            assert energy[rail] == pytest.approx(truth[rail], rel=1e-3), (interval_us, rail)
        print(f"N6705C 10 ms log, {bad} invalid records, imported at {interval_us or 10000} us: energy "
              f"12V {energy['12V']:.4f} J (truth {truth['12V']:.4f}), 3V3 {energy['3V3']:.4f} J (truth {truth['3V3']:.4f})")


@pytest.mark.parametrize("period_s,interval_us", [(0.001, 1000), (0.01, 1000), (0.001, 10000)])
def test_binning_is_exact_no_interval_is_lost_and_coverage_is_stated(tmp_path, period_s, interval_us):
    """A clean log lost 30.4 % of its 1 ms intervals to float truncation, and a 10 ms log 90 % at 1 ms."""
    n = 4000
    log, truth, _ = n6705c_log(tmp_path / "clean.csv", n, period_s, decimals=3)
    mapping = tmp_path / "m.toml"
    mapping.write_text(N6705C_MAPPING)
    out = tmp_path / "cap.jls"
    r = run_cli("import", "csv", str(log), "--mapping", str(mapping), "--out", str(out), "--interval-us", str(interval_us))
    assert r.returncode == 0, r.stderr
    with CaptureReader(out) as cap:
        assert cap.gaps == [] and cap.length == int(round(n * period_s / (interval_us * 1e-6)))
        cov = cap.metadata["imported"]["resampling"]["coverage"]
        assert cov == {"full": cap.length, "partial": 0, "none": 0, "partial_runs": []}
    energy = _close_record(out)["energy_j"]
    assert energy["12V"] == pytest.approx(truth["12V"], rel=1e-6)


# ---- issue 41 item 1: a Joulescope file's units enumerated and each mapped explicitly -----------------------
JS_UI_VERSION = json.dumps({"fw": "1.2.1", "fpga": "1.2.1", "hw": "H"})


class Unit:
    """One Joulescope's recording: its serial, sample rate, crystal error, UTC of its first sample, the
    device counter of that sample, and the load it saw (V, A over host UTC)."""

    def __init__(self, serial, fs, volts, amps_idle, amps_busy, busy, ppm=0.0, start=T0, counter0=0, spike=False):
        self.serial, self.fs, self.ppm, self.start, self.counter0 = serial, fs, ppm, start, counter0
        self.rate = fs * (1 + ppm * 1e-6)
        n = int(2.0 * fs)
        t = start + np.arange(n) / self.rate
        self.amps = np.where((t >= busy[0]) & (t < busy[1]), amps_busy, amps_idle).astype(np.float32)
        if spike:
            self.amps[int(0.4 * fs):int(0.4 * fs) + fs // 10_000] *= 4
        self.volts = np.full(n, volts, np.float32)
        self.t = t

    def energy(self, t0, t1):
        """Independent integration: every sample whose host time falls in [t0, t1), V x I over 1/rate."""
        m = (self.t >= t0) & (self.t < t1)
        return float(np.sum(self.volts[m].astype(np.float64) * self.amps[m]) / self.rate)


def joulescope_recording(path, units, shape="ui", chunk_s=0.05):
    """A JLS file laid out as Jetperch's own writers lay it out. ``ui``: joulescope_ui's SignalRecord
    (widgets/signal_record/signal_record.py): one source per unit named MODEL-SERIAL (vendor "Jetperch LLC",
    version the firmware JSON), signal ids in the order data first arrives (units interleaved), names
    current/voltage/power/current_range (f32 A, V, W; u8), each unit's device sample ids, a UTC entry at
    its first data and at stop. ``driver``: pyjoulescope_driver's Record (record.py): one unit, source
    1 MODEL-SERIAL (vendor "Jetperch", version ""), current and voltage, UTC entries every minute and at close."""
    w = pyjls.Writer(str(path))
    ui = shape == "ui"
    for k, u in enumerate(units, start=1):
        w.source_def(k, name=f"JS220-{u.serial}", vendor="Jetperch LLC" if ui else "Jetperch", model="JS220",
                     version=JS_UI_VERSION if ui else "", serial_number=u.serial)
    fields = [("current", "A", pyjls.DataType.F32), ("voltage", "V", pyjls.DataType.F32)]
    if ui:
        fields += [("power", "W", pyjls.DataType.F32), ("current_range", "", pyjls.DataType.U8)]
    ids, sid = {}, 1
    for name, units_, dtype in fields:            # arrival order: each field of every unit in turn
        for k, u in enumerate(units, start=1):
            w.signal_def(sid, k, pyjls.SignalType.FSR, dtype, u.fs, name=name, units=units_)
            ids[(u.serial, name)] = sid
            sid += 1
    for u in units:
        step = int(chunk_s * u.fs)
        n = len(u.amps)
        data = {"current": u.amps, "voltage": u.volts, "power": u.amps * u.volts,
                "current_range": np.where(u.amps > 0.18, 0, 1).astype(np.uint8)}
        last = None
        for a in range(0, n, step):
            counter, utc = u.counter0 + a, t64(u.start + a / u.rate)
            for name, *_ in fields:
                s = ids[(u.serial, name)]
                if a == 0:
                    w.utc(s, counter, utc)
                w.fsr(s, counter, np.ascontiguousarray(data[name][a:a + step]))
            last = (counter, utc)
        for name, *_ in fields:
            w.utc(ids[(u.serial, name)], *last)
    w.close()
    return path


@pytest.fixture(scope="module")
def two_units(tmp_path_factory):
    d = tmp_path_factory.mktemp("js2")
    busy = (T0 + 0.8, T0 + 1.6)
    a = Unit("003512", 1_000_000, 12.0, 0.4, 0.9, busy, ppm=30, counter0=7_340_032, spike=True)
    b = Unit("003688", 500_000, 3.3, 0.1, 0.3, busy, ppm=-30, start=T0 + 0.01, counter0=123_456)
    return d, joulescope_recording(d / "both.jls", [a, b]), (a, b)


def _energies_and_window(out):
    with CaptureReader(out) as cap:
        t0, t1 = cap.utc(0), cap.utc(0) + cap.length * cap.interval_s
        means = {r: float(np.nanmean(cap.samples(f"v_{r}"))) for r in cap.rails}
        meta = cap.metadata
    return _close_record(out)["energy_j"], (t0, t1), means, meta


def test_a_two_unit_joulescope_file_imports_each_unit_onto_its_rail(two_units):
    d, both, (a, b) = two_units
    out = d / "cap.jls"
    r = run_cli("import", "joulescope", f"12V={both}#003512", f"3V3={both}#JS220-003688", "--out", str(out))
    assert r.returncode == 0, r.stderr
    energy, (t0, t1), volts, meta = _energies_and_window(out)
    assert volts["12V"] == pytest.approx(12.0, rel=1e-6) and volts["3V3"] == pytest.approx(3.3, rel=1e-6)
    for rail, u in (("12V", a), ("3V3", b)):
        truth = u.energy(t0, t1)
        assert energy[rail] == pytest.approx(truth, rel=1e-3), rail
        print(f"two units in one file: {rail} {energy[rail]:.6f} J, independent integration {truth:.6f} J, "
              f"{(energy[rail] / truth - 1) * 100:+.4f} %")
    units = meta["imported"]["units"]
    assert units["12V"]["serial"] == "003512" and units["3V3"]["serial"] == "003688"
    assert units["12V"]["model"] == "JS220" and units["12V"]["source"] == "JS220-003512"
    assert units["12V"]["sample_rate_hz"] == 1_000_000 and units["3V3"]["sample_rate_hz"] == 500_000
    assert units["3V3"]["current_range"] == {"recorded": True, "codes": [0, 1], "widest": "10 A", "narrowest": "180 mA"}
    assert meta["device"]["serial"] == "003512,003688"


def test_an_ambiguous_mapping_is_refused_in_one_line_that_lists_the_units(two_units):
    d, both, _ = two_units
    cases = [((f"12V={both}", f"3V3={both}"), rf"{both} holds 2 Joulescope units: JS220-003512 \(serial 003512\), "
                                               rf"JS220-003688 \(serial 003688\); name the unit of each rail, e.g. "
                                               rf"12V={both}#003512"),
             ((f"12V={both}#003688", f"3V3={both}#3688"), r"rails 12V and 3V3 both name unit JS220-003688"),
             ((f"12V={both}#004000", f"3V3={both}#003688"), rf"{both} holds no unit '004000'; its units: "
                                                            r"JS220-003512 \(serial 003512\), JS220-003688")]
    for args, says in cases:
        out = d / "refused.jls"
        r = run_cli("import", "joulescope", *args, "--out", str(out))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert re.search(says, r.stderr), r.stderr
        assert "Traceback" not in r.stderr and not out.exists()


@pytest.mark.parametrize("shape", ["ui", "driver"])
def test_one_file_per_unit_as_the_ui_and_the_driver_write_them(tmp_path, shape):
    busy = (T0 + 0.8, T0 + 1.6)
    a = Unit("003512", 1_000_000, 12.0, 0.4, 0.9, busy, ppm=25, counter0=99_000_000)
    b = Unit("003688", 1_000_000, 3.3, 0.1, 0.3, busy, ppm=-20, start=T0 + 0.003)
    fa = joulescope_recording(tmp_path / "a.jls", [a], shape)
    fb = joulescope_recording(tmp_path / "b.jls", [b], shape)
    out = tmp_path / "cap.jls"
    r = run_cli("import", "joulescope", f"12V={fa}", f"3V3={fb}#003688", "--out", str(out))
    assert r.returncode == 0, r.stderr
    energy, (t0, t1), _, meta = _energies_and_window(out)
    for rail, u in (("12V", a), ("3V3", b)):
        assert energy[rail] == pytest.approx(u.energy(t0, t1), rel=1e-3), rail
    assert meta["imported"]["units"]["3V3"]["vendor"] == ("Jetperch LLC" if shape == "ui" else "Jetperch")
    if shape == "driver":
        assert meta["imported"]["units"]["12V"]["current_range"] == {"recorded": False}


def test_nan_samples_in_a_joulescope_recording_are_counted_gaps_and_never_poison_the_peaks(tmp_path):
    """A JS220 marks samples it could not measure as NaN (the UI writes them so): the intervals holding
    them are gaps, counted; every other interval's mean and 100 us peak stay measured."""
    busy = (T0 + 0.8, T0 + 1.6)
    a = Unit("003512", 1_000_000, 12.0, 0.4, 0.9, busy, spike=True)
    a.amps[300_000:300_050] = np.nan                    # 50 us inside interval 300
    a.volts[1_200_400] = np.nan                         # one sample inside interval 1200
    f = joulescope_recording(tmp_path / "a.jls", [a])
    out = tmp_path / "cap.jls"
    r = run_cli("import", "joulescope", f"12V={f}", "--out", str(out))
    assert r.returncode == 0, r.stderr
    with CaptureReader(out) as cap:
        assert [(g["sample_id"], g["intervals"], g["reason"]) for g in cap.gaps] == [(300, 1, "invalid"), (1200, 1, "invalid")]
        peak = cap.samples("p_peak_12V")
        assert np.isfinite(peak[1300:]).all() and np.nanmax(peak) == pytest.approx(12 * 1.6, rel=0.01)
        assert cap.metadata["imported"]["units"]["12V"]["invalid_samples"] == 51
    ok = np.isfinite(a.amps) & np.isfinite(a.volts)
    truth = float(np.sum((a.volts.astype(np.float64) * a.amps)[ok & (a.t < T0 + 2.0)]) / a.rate)
    lost = 2 * 1000 * 12.0 * 0.4 / a.rate                # the two lost intervals' share of the truth, about
    assert _close_record(out)["energy_j"]["12V"] == pytest.approx(truth - lost, rel=1e-3)
