"""The capture layout the field's tools read (format 2): one JLS source per rail with current,
voltage and power, gpi[n], UTC on every signal, events as annotations on every rail's power;
`pyjls csv` exports every signal; a capture written the old way (format 1) still opens and analyses."""
import json
import subprocess
import sys

import numpy as np
import pyjls
import pytest

from powerrig.analysis import analyse
from powerrig.capture import CaptureReader, CaptureWriter
from powerrig.capture import layout as L
from powerrig.core.blocks import IntervalBlock
from powerrig.testing import synthetic as S
from test_capture import SEGS   # idle, a write workload, idle


@pytest.fixture(scope="module")
def trace():
    tr = S.interval_trace(SEGS, rows_per_block=700)
    return tr, S.clock(tr.first_index)


def write_capture(path, tr, model):
    """A powerrig capture as `powerrig record` writes it (the synthetic rig's blocks, events, clock)."""
    with CaptureWriter(path, metadata={"device": {"device": "powerrig-interposer", "serial": "E6614"}},
                       timeline=S.timeline(tr, model), clock=model) as w:
        for b in tr.blocks:
            b.dig_or[:] = np.where(np.arange(len(b)) % 3 == 0, 0b101, 0b001)   # activity always, marker every 3rd
            w.write(b)
    return path


@pytest.fixture(scope="module")
def capture(tmp_path_factory, trace):
    tr, model = trace
    return write_capture(tmp_path_factory.mktemp("layout") / "new.jls", tr, model)


def test_one_source_per_rail_with_the_fields_names_and_utc_everywhere(capture, trace):
    tr, _ = trace
    whole = IntervalBlock.concat(tr.blocks)
    with pyjls.Reader(str(capture)) as r:
        by_source = {}
        for sid, sig in r.signals.items():
            if sid:
                by_source.setdefault(r.sources[sig.source_id].name, {})[sig.name] = sid
        assert set(by_source) == {"12V", "3V3", "powerrig"}
        for k, rail in enumerate(("12V", "3V3")):
            names = by_source[rail]
            assert {"current", "voltage", "power"} <= set(names)
            for field, name in (("i", "current"), ("v", "voltage"), ("p", "power")):
                np.testing.assert_allclose(r.fsr(names[name], 0, len(whole)), getattr(whole, field)[:, k], rtol=1e-6)
        assert {"gpi[0]", "gpi[1]", "gpi[2]"} <= set(by_source["12V"])
        # one 0/1 sample per interval, across blocks of 700 rows, ending with the capture
        marker = np.concatenate([(np.arange(len(b)) % 3 == 0) for b in tr.blocks]).astype(np.uint8)
        for bit, want in ((0, np.ones_like(marker)), (1, np.zeros_like(marker)), (2, marker)):
            got = per_sample(r, by_source["12V"][f"gpi[{bit}]"])
            np.testing.assert_array_equal(got, want)
        assert "p_total" in by_source["powerrig"]
        for sid, sig in r.signals.items():
            if sid:                     # every signal maps samples to UTC (viewers and pyjls csv need it)
                t = r.sample_id_to_timestamp(sid, [0, sig.length - 1])
                assert t[1] > t[0]
        # the events as annotations on each rail's power
        for rail in ("12V", "3V3"):
            texts = []
            r.annotations(by_source[rail]["power"], 0, lambda *a: texts.append(a[4]) and False)
            assert any("write" in str(t) for t in texts), texts


def test_new_and_old_captures_read_and_analyse_alike(tmp_path, capture, trace):
    tr, model = trace
    old = write_format1(tmp_path / "old.jls", tr, model)
    figures = []
    for path in (capture, old):
        with CaptureReader(path) as cap:
            assert cap.closed_cleanly, cap.recovery_note
            an = analyse(cap, cap.events, cap.metadata)
            write = next(p for p in an.phases if p.name == "write")
            figures.append((cap.length, len(cap.events), write.mean_w))
    assert figures[0][0] == figures[1][0] and figures[0][1] == figures[1][1] == 1
    assert figures[0][2] == pytest.approx(figures[1][2], rel=1e-9)
    assert figures[0][2] == pytest.approx(11.3, rel=0.02)


def _pyjls_csv(path, out, *extra):
    return subprocess.run([sys.executable, "-m", "pyjls", "csv", str(path), str(out), "--count", "50", *extra],
                          capture_output=True, text=True, timeout=300)


def test_pyjls_csv_exports_every_signal(tmp_path, capture, trace):
    with pyjls.Reader(str(capture)) as r:
        signals = {sid: s.name for sid, s in r.signals.items() if sid}
    assert len(signals) == 18                  # 2 rails x 6, p_total, dig_or, dig_and, gpi[0..2]
    out = tmp_path / "all.csv"
    run = _pyjls_csv(capture, out)             # every signal, aligned points
    assert run.returncode == 0, run.stderr[-600:]
    rows = out.read_text().splitlines()
    assert len(rows) >= 50 and all(str(sid) in rows[0] or name in rows[0] for sid, name in signals.items()), rows[0]
    for sid in signals:                       # and each one alone
        one = _pyjls_csv(capture, tmp_path / f"{sid}.csv", "--signals", str(sid))
        assert one.returncode == 0, f"{signals[sid]}: {one.stderr[-400:]}"
    # the defect this layout fixes: format 1 had UTC entries on p_total only
    tr, model = trace
    old = _pyjls_csv(write_format1(tmp_path / "old.jls", tr, model), tmp_path / "old.csv")
    assert old.returncode != 0 and "PARAMETER_INVALID" in old.stderr + old.stdout


def write_format1(path, tr, model):
    """A capture as powerrig wrote them before format 2: one source, every signal named field_rail, UTC
    entries and annotations on p_total only."""
    blocks = tr.blocks
    rails = tuple(blocks[0].rails)
    w = pyjls.Writer(str(path))
    w.source_def(1, name="powerrig", vendor="powerrig", model="interposer", version="", serial_number="")
    ids, sid = {}, 1
    for name, units in [(L.rail_signal(f, r), u) for r in rails for f, u in L.RAIL_FIELDS] + [("p_total", "W")]:
        w.signal_def(sid, 1, pyjls.SignalType.FSR, pyjls.DataType.F32, 1000, samples_per_data=1024,
                     sample_decimate_factor=128, entries_per_summary=1024, summary_decimate_factor=20,
                     name=name, units=units)
        ids[name], sid = sid, sid + 1
    for name in ("dig_or", "dig_and"):
        w.signal_def(sid, 1, pyjls.SignalType.FSR, pyjls.DataType.U8, 1000, samples_per_data=1024,
                     sample_decimate_factor=128, entries_per_summary=1024, summary_decimate_factor=20,
                     name=name, units="")
        ids[name], sid = sid, sid + 1
    b0 = blocks[0]
    meta = {"device": {"device": "test"}, "format": {"name": "powerrig-capture", "version": 1},
            "layout": {"rails": list(rails), "interval_samples": b0.interval_samples,
                       "sample_period_s": b0.sample_period_s, "interval_s": b0.interval_s, "sample_rate_hz": 1000,
                       "first_index": b0.first_index, "signals": ids}}
    w.user_data(L.UD_METADATA, json.dumps(meta).encode())
    whole = IntervalBlock.concat(blocks)
    for k, r in enumerate(rails):
        for f, _ in L.RAIL_FIELDS:
            w.fsr(ids[L.rail_signal(f, r)], 0, np.ascontiguousarray(getattr(whole, f)[:, k], np.float32))
    w.fsr(ids["p_total"], 0, np.ascontiguousarray(whole.p.sum(axis=1), np.float32))
    for n in ("dig_or", "dig_and"):
        w.fsr(ids[n], 0, np.ascontiguousarray(getattr(whole, n), np.uint8))
    for sid_at in (0, len(whole) - 1):
        raw = whole.first_index + sid_at * whole.interval_samples
        w.user_data(L.UD_CLOCK, json.dumps({"sample_id": sid_at, "raw_index": int(raw), "utc": float(model.utc(raw)),
                                            "model": model.to_dict()}).encode())
        w.utc(ids["p_total"], sid_at, pyjls.time64.as_time64(float(model.utc(raw))))
    for e in S.timeline(tr, model):
        if e.t_end is not None:
            w.user_data(L.UD_EVENT, json.dumps(e.to_dict()).encode())
    w.user_data(L.UD_CLOSE, json.dumps({"length": len(whole), "gaps": 0, "gap_intervals": 0,
                                        "valid_intervals": len(whole), "energy_j": {}, "stats": {}}).encode())
    w.close()
    return path


@pytest.mark.parametrize("length", [1000, 1001, 1003, 1007, 2053])
def test_pyjls_csv_over_every_signal_on_lengths_that_are_and_are_not_multiples_of_8(tmp_path, length):
    """Issue 41 item 7: the 1-bit gpi signals were padded to a whole byte (up to 7 samples past the
    capture's end), and `pyjls csv` over all signals then asked the others for samples past theirs
    (rd_fsr_statistics PARAMETER_INVALID) on 7 of 8 lengths. Every signal now ends where the capture does."""
    path = tmp_path / f"c{length}.jls"
    model = S.clock(0)
    with CaptureWriter(path, metadata={"device": {"device": "powerrig-interposer", "serial": "E6614"}},
                       clock=model) as w:
        for b in S.interval_blocks(length * 1e-3, rows_per_block=300):
            b.dig_or[:] = np.arange(len(b)) % 5 == 0
            w.write(b)
    with pyjls.Reader(str(path)) as r:
        lengths = {s.name: s.length for sid, s in r.signals.items() if sid}
        gpi = {s.name: per_sample(r, sid) for sid, s in r.signals.items() if sid and s.name.startswith("gpi[")}
    assert set(lengths.values()) == {length}, lengths
    want = np.concatenate([np.arange(len(b)) % 5 == 0 for b in S.interval_blocks(length * 1e-3, rows_per_block=300)])
    np.testing.assert_array_equal(gpi["gpi[0]"].astype(bool), want)   # every sample, the last ones too
    run = _pyjls_csv(path, tmp_path / "all.csv")
    assert run.returncode == 0, run.stderr[-600:]
    with CaptureReader(path) as cap:
        assert cap.closed_cleanly and cap.length == length


def per_sample(r, sid) -> np.ndarray:
    """A digital signal's samples, one value each (u1 is stored packed, little-endian)."""
    s = r.signals[sid]
    data = np.asarray(r.fsr(sid, 0, s.length))
    if s.data_type == pyjls.DataType.U1:
        return np.unpackbits(data.view(np.uint8), bitorder="little")[:s.length]
    return data
