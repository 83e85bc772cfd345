"""`powerrig import`: Joulescope UI recordings (JLS files written with pyjls as the UI writes them:
one source per unit, current/voltage/power at 1 MHz, UTC entries) and a meter's CSV with a mapping
file become captures that analysis, checks, efficiency and the report run on; fio's JSON output and
powerrig's own events log merge on as events."""
from __future__ import annotations

import json

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
