"""Capture files: round trip, gaps, events, clock anchors, kill -9, bad files."""
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from powerrig.testing import synthetic as S
from powerrig.capture import CaptureReader, CaptureWriter
from powerrig.core.errors import CaptureError
from powerrig.core.timeline import NOTE, Event, Timeline
from powerrig.core.blocks import IntervalBlock

SEGS = [S.Segment("idle", 2.0, {"12V": 5.0, "3V3": 0.25}),
        S.Segment("write", 2.0, {"12V": 11.0, "3V3": 0.3}, kind="workload", meta={"rw": "write"}),
        S.Segment("idle", 1.5, {"12V": 5.0, "3V3": 0.25})]


@pytest.fixture(scope="module")
def trace():
    tr = S.interval_trace(SEGS, rows_per_block=700)
    return tr, S.clock(tr.first_index)


def _write(path, tr, model, blocks=None, **kw):
    with CaptureWriter(path, metadata={"device": {"device": "test"}}, timeline=S.timeline(tr, model),
                       clock=model, **kw) as w:
        for b in blocks if blocks is not None else tr.blocks:
            w.write(b)
    return path


def test_round_trip_signals_events_metadata(tmp_path, trace):
    tr, model = trace
    path = _write(tmp_path / "c.jls", tr, model)
    whole = IntervalBlock.concat(tr.blocks)
    with CaptureReader(path) as cap:
        assert cap.closed_cleanly and cap.length == len(whole) and cap.rails == ("12V", "3V3")
        for k, rail in enumerate(cap.rails):
            for field in ("v", "i", "p", "p_min", "p_max", "p_peak"):
                np.testing.assert_allclose(cap.samples(f"{field}_{rail}"), getattr(whole, field)[:, k], rtol=1e-6)
        np.testing.assert_allclose(cap.samples("p_total"), whole.p.sum(axis=1), rtol=1e-6)
        assert [e.name for e in cap.events] == ["write"] and cap.events[0].meta == {"rw": "write"}
        assert cap.metadata["device"] == {"device": "test"} and "pyjls" in cap.metadata["software"]
        # the writer's compensated totals agree with the data
        e = cap.close_record["energy_j"]["12V"]
        assert e == pytest.approx(whole.p[:, 0].sum() * 1e-3, rel=1e-12)


def test_chunks_equal_whole_read_and_summaries_match_numpy(tmp_path, trace):
    tr, model = trace
    with CaptureReader(_write(tmp_path / "c.jls", tr, model)) as cap:
        whole = cap.samples("p_12V")
        parts = [c["p_12V"] for _, c in cap.chunks(["p_12V"], 10, cap.length - 7, chunk=999)]
        np.testing.assert_array_equal(np.concatenate(parts), whole[10:-7])
        st = cap.range_stats("p_12V", 100, 4100)
        ref = whole[100:4100].astype(np.float64)
        assert st["mean"] == pytest.approx(ref.mean(), rel=1e-6)
        assert st["max"] == pytest.approx(ref.max()) and st["min"] == pytest.approx(ref.min())
        s = cap.summaries("p_12V", 0, cap.length, 11)
        assert len(s["mean"]) == 11 and s["max"].max() == pytest.approx(ref.max() if ref.max() >= whole.max() else whole[:11 * s["increment"]].max())


def test_event_placement_uses_the_stored_clock(tmp_path, trace):
    tr, model = trace
    with CaptureReader(_write(tmp_path / "c.jls", tr, model)) as cap:
        ev = cap.events[0]
        _, a, b = tr.bounds[1]
        truth = (a - tr.first_index) / 250
        err_s = abs(cap.sample_id(ev.t_start) - truth) * cap.interval_s
        assert err_s < 200e-6
        # a drift of 35 ppm over the capture is visible without the model: the track follows it
        assert cap.utc(cap.length) - cap.utc(0) == pytest.approx(cap.duration_s / (1 + 35e-6), abs=1e-6)
        assert [e.name for e in cap.events_in(int(truth) + 10, int(truth) + 20)] == ["write"]
        assert cap.events_in(0, int(truth) - 10) == []


def test_gaps_become_nan_rows_and_records(tmp_path, trace):
    tr, model = trace
    blocks = list(S.drop_rows(tr.blocks, 1000, 120, "overrun"))
    # and one jump in the index the stream did not report: the writer fills it
    b = blocks[-1]
    jumped = IntervalBlock(b.end_index + 50 * 250, 250, b.sample_period_s, b.rails, b.v, b.i, b.p, b.p_min,
                           b.p_max, b.p_peak, b.dig_or, b.dig_and, b.valid)
    with CaptureReader(_write(tmp_path / "g.jls", tr, model, blocks + [jumped])) as cap:
        p = cap.samples("p_12V")
        assert np.isnan(p[1000:1120]).all() and not np.isnan(p[999]) and not np.isnan(p[1120])
        assert [(g["sample_id"], g["intervals"], g["reason"]) for g in cap.gaps] == [
            (1000, 120, "overrun"), (len(tr.blocks and IntervalBlock.concat(tr.blocks)), 50, "missing")]
        assert cap.close_record["gap_intervals"] == 170
        # summaries wholly inside a gap are NaN, never pyjls's +-DBL_MAX start values
        sm = cap.summaries("p_12V", 1000, 1120, n=12)
        assert np.isnan(sm["min"]).all() and np.isnan(sm["max"]).all() and np.isnan(sm["mean"]).all()
        assert np.isnan(cap.range_stats("p_12V", 1010, 1110)["max"])


def test_no_clock_means_events_cannot_be_placed(tmp_path, trace):
    tr, _ = trace
    with CaptureWriter(tmp_path / "n.jls", timeline=Timeline([Event(NOTE, "x", 1.0, 2.0)])) as w:
        for b in tr.blocks:
            w.write(b)
    with CaptureReader(tmp_path / "n.jls") as cap:
        assert cap.events[0].name == "x"
        with pytest.raises(CaptureError, match="no clock"):
            cap.sample_id(1.0)


def test_bad_files_give_clear_errors(tmp_path, trace):
    tr, model = trace
    with pytest.raises(CaptureError, match="not found"):
        CaptureReader(tmp_path / "missing.jls")
    (tmp_path / "empty.jls").write_bytes(b"")
    with pytest.raises(CaptureError, match="empty"):
        CaptureReader(tmp_path / "empty.jls")
    (tmp_path / "text.jls").write_text("time,current\n0,1\n")
    with pytest.raises(CaptureError, match="not a JLS"):
        CaptureReader(tmp_path / "text.jls")
    import pyjls
    with pyjls.Writer(str(tmp_path / "foreign.jls")) as w:      # a JLS file from another tool
        w.source_def(1, name="other")
        w.signal_def(1, 1, pyjls.SignalType.FSR, pyjls.DataType.F32, 1000, name="current", units="A")
        w.fsr(1, 0, np.zeros(100, np.float32))
    with pytest.raises(CaptureError, match="not a powerrig capture"):
        CaptureReader(tmp_path / "foreign.jls")
    # truncated: a good capture cut short opens with what survived, flagged unclean
    path = _write(tmp_path / "t.jls", tr, model)
    data = path.read_bytes()
    cut = tmp_path / "cut.jls"
    cut.write_bytes(data[: len(data) * 2 // 3])
    try:
        cap = CaptureReader(cut)
    except CaptureError as e:
        assert "cannot be read" in str(e) or "not a powerrig" in str(e)
    else:
        assert not cap.closed_cleanly and cap.length < len(IntervalBlock.concat(tr.blocks))
        cap.close()
    with pytest.raises(CaptureError, match="must end in .jls"):
        CaptureWriter(tmp_path / "x.csv")


def test_interval_that_does_not_divide_a_second_is_refused(tmp_path):
    b = IntervalBlock.gap(0, 10, 75, 4e-6, ("12V",), "link")   # 300 us
    w = CaptureWriter(tmp_path / "r.jls")
    with pytest.raises(CaptureError, match="divides one second"):
        w.write(b)


RECORDER = textwrap.dedent("""
    import sys, time
    from powerrig.testing import synthetic as S
    from powerrig.capture import CaptureWriter
    from powerrig.core.timeline import Timeline, PHASE
    model = S.clock(0, utc0=time.time())
    tl = Timeline()
    with CaptureWriter(sys.argv[1], metadata={"device": {"device": "kill-test"}}, timeline=tl, clock=model,
                       flush_every_s=0.2, anchor_every_s=1.0) as w:
        n = 0
        for b in S.interval_blocks(3600, rows_per_block=100):
            w.write(b)
            n += len(b)
            if n % 1000 == 0:
                e = tl.begin(PHASE, f"second {n // 1000}")
                tl.end(e)
            if n == 3000:
                print("ready", flush=True)
            time.sleep(0.02)      # ~5x real time
""")


def test_capture_killed_with_sigkill_still_opens(tmp_path):
    path = tmp_path / "killed.jls"
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    proc = subprocess.Popen([sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)
        t_kill = time.monotonic()
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=10)
    with CaptureReader(path) as cap:
        assert not cap.closed_cleanly and "NOT closed cleanly" in cap.info()
        assert cap.metadata["device"]["device"] == "kill-test"
        # written about 5 s of data per second of wall time: lose at most ~2 s of data
        assert cap.length >= 3000 + 1000
        p = cap.samples("p_total")
        assert not np.isnan(p).any()
        assert len(cap.events) >= cap.length // 1000 - 2
        assert cap.clock is not None and cap.sample_id(cap.utc(1234.0)) == pytest.approx(1234.0)
    del t_kill


@pytest.mark.parametrize("n", [7, 2000, 3999, 5500])
def test_summaries_cover_the_whole_range(tmp_path, trace, n):
    """Plots ask for n points: those points must span the capture, not its first n * (len // n) rows."""
    tr, model = trace
    with CaptureReader(_write(tmp_path / "c.jls", tr, model)) as cap:
        s = cap.summaries("p_12V", 0, cap.length, n)
        end = s["sample_id"][-1] + s["increment"]
        assert cap.length - s["increment"] < end <= cap.length
        assert len(s["mean"]) <= n


def test_metadata_with_numpy_values_round_trips_through_the_one_converter(tmp_path, trace):
    from pathlib import Path

    from powerrig.core.json_values import dumps, plain
    tr, model = trace
    meta = {"plan": {"steps": np.arange(3), "bs": np.int64(4096), "w": np.float32(1.5)}, "out": Path("/x/y.jls"),
            "thing": object()}
    with CaptureWriter(tmp_path / "m.jls", metadata=meta, clock=model) as w:
        w.write(tr.blocks[0])
        w.update_metadata(limits=np.array([1.0, 2.5]))
    with CaptureReader(tmp_path / "m.jls") as cap:
        assert cap.metadata["plan"] == {"steps": [0, 1, 2], "bs": 4096, "w": 1.5}
        assert cap.metadata["out"] == "/x/y.jls" and cap.metadata["limits"] == [1.0, 2.5]
        assert cap.metadata["thing"].startswith("<object")     # metadata never stops a recording
    with pytest.raises(TypeError, match="not JSON serialisable"):
        dumps({"thing": object()})                              # strict by default (commands on the wire)
    assert plain(np.float64(2.0)) == 2.0 and dumps([np.int8(3)], compact=True) == "[3]"


class _NanClock:
    """A clock whose UTC cannot be stored in the JLS UTC track (NaN)."""

    def model(self):
        return self

    def utc(self, raw):
        return float("nan")

    def index(self, utc):
        return 0.0

    def to_dict(self):
        return S.clock(0).to_dict()


def test_a_utc_entry_jls_refuses_is_logged_not_swallowed(tmp_path, trace, caplog):
    tr, _ = trace
    with caplog.at_level("WARNING", logger="powerrig.capture.writer"):
        with CaptureWriter(tmp_path / "u.jls", clock=_NanClock()) as w:
            for b in tr.blocks:
                w.write(b)
    assert any("JLS UTC entry" in r.getMessage() for r in caplog.records)   # before: `except Exception: pass`
    with CaptureReader(tmp_path / "u.jls") as cap:
        assert cap.closed_cleanly and cap.length == len(IntervalBlock.concat(tr.blocks))


def test_analysis_reads_only_a_missing_clock_as_no_clock(trace, caplog):
    from powerrig.analysis import analyse
    from powerrig.analysis.pipeline import NothingToAnalyse
    from powerrig.analysis.source import ArraySource
    from powerrig.core.errors import PowerrigError
    tr, model = trace
    events = list(S.timeline(tr, model))
    src = ArraySource.from_blocks(tr.blocks)                 # no clock: a warning, whole-capture figures
    with caplog.at_level("INFO", logger="powerrig.analysis.pipeline"):
        a = analyse(src, events)
    assert any("cannot be placed" in w for w in a.warnings) and len(a.phases) == 1
    assert any("cannot be placed" in r.getMessage() for r in caplog.records)

    class Broken(ArraySource):
        def sample_id(self, utc):
            raise TypeError("a bug in the clock code")
    with pytest.raises(TypeError, match="a bug"):           # before: read as "no clock", figures silently partial
        analyse(Broken.from_blocks(tr.blocks, model), events)
    empty = ArraySource.from_blocks([IntervalBlock.gap(0, 1, 250, 4e-6, ("12V",), "link")])
    empty.length = 0
    with pytest.raises(NothingToAnalyse) as e:
        analyse(empty)
    assert isinstance(e.value, PowerrigError) and isinstance(e.value, ValueError)


def test_events_are_written_once_each_as_they_finish_in_any_order(tmp_path, trace):
    """The writer reads the timeline from its first unwritten event on (an overnight timeline holds
    thousands); an event that finishes after later ones is still written once, when it ends."""
    tr, model = trace
    t0 = float(model.utc(tr.blocks[0].first_index))
    tl = Timeline()
    long = tl.begin(NOTE, "long")                       # still open while the short ones finish
    long.t_start = t0 + 0.1
    for k in range(50):
        tl.add(Event(NOTE, f"short{k}", t0 + 0.2 + k * 0.01, t0 + 0.21 + k * 0.01))
    with CaptureWriter(tmp_path / "e.jls", metadata={"device": {"device": "t"}}, timeline=tl, clock=model) as w:
        half = len(tr.blocks) // 2
        for b in tr.blocks[:half]:
            w.write(b)
        Timeline.end(long)
        tl.add(Event(NOTE, "late", t0 + 1.0, t0 + 1.1))
        for b in tr.blocks[half:]:
            w.write(b)
    with CaptureReader(tmp_path / "e.jls") as cap:
        names = [e.name for e in cap.events]
    assert sorted(names) == sorted(["long", "late"] + [f"short{k}" for k in range(50)])   # each once


def test_a_timeline_that_keeps_few_events_still_gets_every_event_into_the_capture(tmp_path, trace):
    """A window streaming overnight holds only its recent events (Timeline(keep=...)); the capture
    written meanwhile has all of them."""
    tr, model = trace
    t0 = float(model.utc(tr.blocks[0].first_index))
    tl = Timeline(keep=5)
    with CaptureWriter(tmp_path / "k.jls", metadata={"device": {"device": "t"}}, timeline=tl, clock=model) as w:
        for k, b in enumerate(tr.blocks):
            for j in range(4):
                tl.add(Event(NOTE, f"poll{k}-{j}", t0 + 0.01 * (4 * k + j), t0 + 0.01 * (4 * k + j) + 0.005))
            w.write(b)
    assert tl.added == 4 * len(tr.blocks) and len(tl) <= 5 + 4 and tl.dropped == tl.added - len(tl)
    with CaptureReader(tmp_path / "k.jls") as cap:
        names = sorted(e.name for e in cap.events)
    assert names == sorted(f"poll{k}-{j}" for k in range(len(tr.blocks)) for j in range(4))
