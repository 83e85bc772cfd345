"""A finalised capture's float32 signals read straight from the file's pages (capture/direct_read.py):
the same values as pyjls bit for bit, across data and index chunk edges, and a damaged chunk refused so
that pyjls reports it as before."""
import json
import math
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pyjls
import pytest

from powerrig.capture import CaptureReader
from powerrig.analysis import pipeline as P
from powerrig.analysis.pipeline import analyse
from powerrig.capture import direct_read as D
from powerrig.core.array_pool import ArrayPool
from powerrig.core.errors import CaptureError
from powerrig.testing import synthetic as S

SECONDS = 140.3          # 137 data chunks of 1,024 intervals per signal: two level-1 index chunks of 130


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return S.interval_capture(tmp_path_factory.mktemp("direct") / "c.jls", SECONDS, "direct-test")


def _float_signals(path):
    r = pyjls.Reader(str(path))
    sigs = {s.signal_id: s for s in r.signals.values() if s.signal_type == 0 and s.data_type == D.F32}
    return r, sigs


def test_this_host_reads_directly():
    assert D.available(), "x86-64 with SSE 4.2 expected (the CI host); elsewhere pyjls reads everything"


def test_direct_read_gives_pyjls_values_bit_for_bit(capture):
    r, sigs = _float_signals(capture)
    d = D.DirectRead(capture, {i: (s.sample_id_offset, s.samples_per_data) for i, s in sigs.items()})
    assert sorted(d._heads) == sorted(sigs) and len(sigs) == 13
    rng = np.random.default_rng(7)
    for sid, s in sigs.items():
        n = s.length
        spd = s.samples_per_data
        offsets = d._chunk_offsets(sid)
        assert len(offsets) == -(-n // spd) == 138          # every data chunk, through both index chunks
        ranges = [(0, n), (0, 1), (n - 1, 1), (spd - 1, 2), (130 * spd - 3, 10), (n - spd - 5, spd + 5)]
        ranges += [(int(a), int(rng.integers(1, n - a + 1))) for a in rng.integers(0, n, 12)]
        for start, k in ranges:
            got = d.read(sid, start, k)
            assert got is not None and got.dtype == np.float32
            assert got.tobytes() == r.fsr(sid, start, k).tobytes(), (s.name, start, k)
    d.close()


def test_the_capture_reader_reads_float_signals_directly_and_digital_ones_through_pyjls(capture, monkeypatch):
    with CaptureReader(capture) as cap:
        direct = {n: cap.samples(n, 1000, 90_000) for n in cap.signals}
        assert isinstance(cap._direct, D.DirectRead)
    monkeypatch.setenv("POWERRIG_DIRECT_READ", "0")
    with CaptureReader(capture) as cap:
        via_pyjls = {n: cap.samples(n, 1000, 90_000) for n in cap.signals}
        assert cap._direct is False
    assert direct.keys() == via_pyjls.keys()
    for n in direct:
        assert direct[n].dtype == via_pyjls[n].dtype and direct[n].tobytes() == via_pyjls[n].tobytes(), n


def _damaged_copy(capture, tmp_path, name, where):
    """A copy with one byte flipped in chunk 40 of signal ``name``: ``where`` bytes into the chunk."""
    dst = tmp_path / "damaged.jls"
    shutil.copyfile(capture, dst)
    with CaptureReader(capture) as cap:
        sid = cap._id(name)
        cap.samples(name, 0, 10)
        off = int(cap._direct._chunk_offsets(sid)[40])
    data = bytearray(dst.read_bytes())
    data[off + where] ^= 0x10
    dst.write_bytes(bytes(data))
    return dst, sid


def test_a_damaged_payload_is_refused_and_reported_as_pyjls_reports_it(capture, tmp_path, monkeypatch):
    dst, sid = _damaged_copy(capture, tmp_path, "p_total", 48 + 400)     # a sample's byte
    with CaptureReader(dst) as cap:
        assert cap.closed_cleanly and not cap.read_from_copy      # the file's own header still says whole
        # the chunks before the damage read directly, and equal the undamaged file's
        with CaptureReader(capture) as good:
            assert cap.samples("p_total", 0, 40 * 1024).tobytes() == good.samples("p_total", 0, 40 * 1024).tobytes()
        assert cap._direct.read(sid, 40 * 1024, 10) is None             # the CRC does not match: declined
        with pytest.raises(CaptureError, match="damaged where it was read"):
            cap.samples("p_total", 39 * 1024, 42 * 1024)
    monkeypatch.setenv("POWERRIG_DIRECT_READ", "0")
    with CaptureReader(dst) as cap:                                       # pyjls alone says the same
        with pytest.raises(CaptureError, match="damaged where it was read"):
            cap.samples("p_total", 39 * 1024, 42 * 1024)


def test_a_damaged_chunk_header_is_refused_there_only(capture, tmp_path):
    """A flipped bit in a data chunk's header (its item_prev) fails the header CRC: direct reading
    declines for reads that touch it, and pyjls reads (or refuses) those as it always did."""
    dst, sid = _damaged_copy(capture, tmp_path, "p_12V", 9)
    with CaptureReader(dst) as cap, CaptureReader(capture) as good:
        assert cap._fsr(sid, 0, 40 * 1024).tobytes() == good.samples("p_12V", 0, 40 * 1024).tobytes()
        assert cap._direct.read(sid, 40 * 1024 + 5, 10) is None
        assert cap._direct.read(sid, 41 * 1024, 1024).tobytes() == good.samples("p_12V", 41 * 1024, 42 * 1024).tobytes()


def test_a_damaged_index_leaves_the_signal_to_pyjls(capture, tmp_path):
    r, sigs = _float_signals(capture)
    with CaptureReader(capture) as cap:
        sid = cap._id("p_3V3")
    d = D.DirectRead(capture, {i: (s.sample_id_offset, s.samples_per_data) for i, s in sigs.items()})
    index_at = int(d._heads[sid][1])
    d.close()
    dst = tmp_path / "index.jls"
    data = bytearray(capture.read_bytes())
    data[index_at + 32 + 16 + 8 * 3] ^= 0x01                             # the index's fourth chunk offset
    dst.write_bytes(bytes(data))
    d = D.DirectRead(dst, {i: (s.sample_id_offset, s.samples_per_data) for i, s in sigs.items()})
    assert d._chunk_offsets(sid) is None and d.read(sid, 0, 10) is None
    other = next(i for i in sigs if i != sid)
    assert d.read(other, 0, 10) is not None                              # the other signals are unaffected
    d.close()


def test_a_capture_read_from_a_repaired_copy_is_read_through_pyjls(capture, tmp_path):
    cut = tmp_path / "cut.jls"
    cut.write_bytes(capture.read_bytes()[: capture.stat().st_size // 2])
    with CaptureReader(cut) as cap:
        assert cap.read_from_copy
        cap.samples("p_total", 0, 100)
        assert cap._direct is False


def test_the_pool_reads_again_only_into_arrays_nothing_else_holds():
    pool = ArrayPool()
    cols = {"free": np.arange(8, dtype=np.float32), "kept": np.arange(8, dtype=np.float32)}
    view = cols["kept"][2:5]                           # as a phase keeps its values for the percentiles
    assert pool.give_back(cols) == 1                   # the chunk's dict is the only holder of "free"
    assert pool.take(8, np.float32) is cols["free"]
    assert pool.take(8, np.float32) is not cols["kept"]                     # held by the view: never given
    assert view.base is cols["kept"] and pool.take(7, np.float32).shape == (7,)   # another length: new
    assert pool.give_back({"v": view}) == 0            # a view is never taken: its base may be held


def test_an_analysis_over_many_chunks_is_the_same_with_the_pool_as_without(capture, monkeypatch):
    """Phases keep views of the chunks for their exact percentiles: reading into a recycled array
    they still see would change their figures. Small chunks, so that phases span many of them."""
    tl = S.alternating_timeline(SECONDS, S.clock(0), first_index=0, period_s=7.0)
    path = S.interval_capture(capture.parent / "phases.jls", SECONDS, "pool", timeline=tl)
    given = []
    real = ArrayPool.give_back
    monkeypatch.setattr(ArrayPool, "give_back", lambda self, cols: given.append(real(self, cols)) or given[-1])
    with CaptureReader(path) as cap:
        with_pool = analyse(cap, cap.events, cap.metadata, chunk=3000)
    assert sum(given) > 40                             # the pool was used
    monkeypatch.setattr(ArrayPool, "give_back", lambda self, cols: 0)
    with CaptureReader(path) as cap:
        without = analyse(cap, cap.events, cap.metadata, chunk=3000)
    assert len(with_pool.phases) == len(without.phases) > 20
    for a, b in zip(with_pool.phases + with_pool.checks, without.phases + without.checks):
        assert _plain(a) == _plain(b), f"the pool changed {getattr(a, 'phase', a)!r:.80}"


def test_chunks_made_ahead_on_the_reading_thread_give_the_figures_of_one_thread(capture, monkeypatch):
    """The reading thread cuts, summarises and sums the windows of the next chunks while the phases
    read this one's: the window sums' work arrays must still hold this chunk's (a ring of them)."""
    tl = S.alternating_timeline(SECONDS, S.clock(0), first_index=0, period_s=7.0)
    path = S.interval_capture(capture.parent / "ahead.jls", SECONDS, "ahead", timeline=tl)
    figures, made_ahead = {}, []
    for threads in ("2", "1", "2, every chunk's maxima made ahead"):
        monkeypatch.setenv("POWERRIG_ANALYSIS_THREADS", threads[0])
        if "ahead" in threads:      # the reading thread always finds the queue full: it takes on the spare work
            monkeypatch.setattr(P.queue.Queue, "full", lambda self: True)
            ready = P._Chunk.ready
            monkeypatch.setattr(P._Chunk, "ready", lambda c: (made_ahead.append(c.c0), ready(c))[-1])
        with CaptureReader(path) as cap:
            figures[threads] = analyse(cap, cap.events, cap.metadata, chunk=3000)
    assert made_ahead == sorted(set(made_ahead)) and len(made_ahead) >= 40      # every chunk, once, in order
    one = figures["1"]
    assert any(not math.isnan(r.max_1s.value_w) for r in one.phases)
    for two in (figures["2"], figures["2, every chunk's maxima made ahead"]):
        assert len(two.phases) == len(one.phases) > 20
        for a, b in zip(two.phases + two.checks, one.phases + one.checks):
            assert _plain(a) == _plain(b), f"made ahead, {getattr(a, 'phase', a)!r:.80} changed"


def test_the_reading_thread_takes_on_the_phases_work_only_while_it_would_wait_and_keeps_the_order():
    """_prefetched's ``spare``: run on an item made while the queue is full (the consumer busy), so the
    split of the work follows the slower thread; the items still come once each, in order."""
    spared, busy_over = [], threading.Event()

    def spare(item):
        spared.append(item)
        busy_over.set()

    items = P._prefetched(iter(range(6)), 1, spare)
    got = [next(items)]
    assert busy_over.wait(10), "the reading thread never took on spare work while the consumer was busy"
    got += list(items)
    assert got == list(range(6)) and spared and set(spared) <= set(range(1, 6))


def test_a_consumer_that_stops_early_does_not_leave_the_reading_thread_waiting():
    """The phases' thread stops taking chunks (an error, a closed generator) while the queue is full and
    the reading thread has nothing left but the end to hand over: it must not wait on the queue for
    ever, nor the consumer on it."""
    taken = P._prefetched(iter(range(2)), 1)
    assert next(taken) == 0
    time.sleep(0.3)                     # item 1 in the queue, which is full; the end waiting to go in
    closer = threading.Thread(target=taken.close, daemon=True)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "closing the pass waited for ever on its reading thread"


def test_an_error_on_the_reading_thread_reaches_the_caller(capture, monkeypatch):
    monkeypatch.setenv("POWERRIG_ANALYSIS_THREADS", "2")

    def broken(*a):
        raise RuntimeError("summaries broke")
    monkeypatch.setattr(P, "Segments", broken)
    with CaptureReader(capture) as cap, pytest.raises(RuntimeError, match="summaries broke"):
        analyse(cap, cap.events, cap.metadata, chunk=3000)


def _plain(r) -> str:
    """Every figure of a result (NaN spelled out, so that equal results compare equal)."""
    return json.dumps(r.to_dict() if hasattr(r, "to_dict") else repr(r), sort_keys=True, default=repr)


def test_a_capture_cut_short_while_it_is_read_is_refused_not_a_crash(capture, tmp_path):
    """Another program overwrites the capture in place (``cp`` over it, a recording to the same path)
    while a reader has it open: a mapped read past the new end would be SIGBUS, the end of the
    process. The read declines, and pyjls reports the file as damaged. In a child process, so that a
    crash is seen as one."""
    victim = tmp_path / "victim.jls"
    shutil.copyfile(capture, victim)
    code = textwrap.dedent(f"""
        import os
        from powerrig.capture import CaptureReader
        from powerrig.core.errors import CaptureError
        with CaptureReader({str(victim)!r}) as cap:
            cap.samples("p_total", 0, 1000)                    # mapped and indexed
            os.truncate({str(victim)!r}, os.path.getsize({str(victim)!r}) // 3)
            try:
                cap.samples("p_total", 100_000, 130_000)
                print("read")
            except CaptureError as e:
                print("refused:", e)
            print("direct:", cap._direct._map is not None)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])      # -7 would be SIGBUS
    assert "direct: False" in r.stdout and ("refused:" in r.stdout or "read" in r.stdout), r.stdout


@pytest.mark.parametrize("direct", ["1", "0"])
def test_a_capture_written_again_at_its_path_leaves_whoever_reads_it_the_old_one(tmp_path, monkeypatch, direct):
    """`record --overwrite`, a sweep run again into its folder: the new capture is a new file, so a report
    or the GUI still reading the old one (from its pages, or through pyjls) reads it whole, not a file
    emptied and refilled under it."""
    monkeypatch.setenv("POWERRIG_DIRECT_READ", direct)
    path = S.interval_capture(tmp_path / "c.jls", 30.0, "first")
    with CaptureReader(path) as old:
        before = {n: old.samples(n, 0, old.length) for n in ("p_total", "p_12V", "v_3V3")}
        S.interval_capture(path, 12.0, "second")
        assert {n: old.samples(n, 0, old.length).tobytes() for n in before} == {n: v.tobytes() for n, v in before.items()}
        assert old.length == 30_000 and old.metadata["device"]["device"] == "first"
    with CaptureReader(path) as new:
        assert new.length == 12_000 and new.metadata["device"]["device"] == "second"
