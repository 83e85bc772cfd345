"""The live plot's own behaviour, on a live source fed synthetic blocks (no rig): the band item's
geometry, the minimap of the whole capture (live and from a capture file) and its draggable range,
markers that pan the view when dragged to an edge and markers that float with the live stream."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402

from powerrig.capture.writer import CaptureWriter  # noqa: E402
from powerrig.gui.band import BandCurve  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402
from powerrig.gui.source import LiveSource  # noqa: E402
from powerrig.testing import synthetic as S  # noqa: E402


@pytest.fixture
def window(qapp, qtbot, tmp_path):
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp_path / "settings"))
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    win.resize(1200, 800)
    win.show()
    yield win, svc
    win.close()


def _live(svc, qtbot, seconds=60.0):
    """A live source holding ``seconds`` of a 1 ms stream; returns it and a feeder of more blocks."""
    blocks = S.interval_blocks(seconds + 60.0, rows_per_block=1000, period_s=20.0)
    src = None
    fed = 0
    for b in blocks:
        if src is None:
            src = LiveSource.for_block(b)
        src.feed(b)
        fed += 1
        if src.duration_s >= seconds:
            break
    svc.recording.live = src                              # the captures service's tick shows it
    qtbot.waitUntil(lambda: svc.captures.source is src, timeout=10_000)

    def more(seconds_more):
        end = src.duration_s + seconds_more
        for b in blocks:
            src.feed(b)
            if src.duration_s >= end:
                break
    return src, more


def test_band_rectangles_cover_each_point_from_min_to_max(qapp):
    item = BandCurve("#1f77b4", "w")
    t = np.array([0.5, 1.5, 2.5, 3.5])
    mean = np.array([1.0, 2.0, np.nan, 3.0])
    lo = np.array([0.5, 1.0, np.nan, np.nan])           # no min at the last point: the mean is used
    hi = np.array([1.5, 4.0, np.nan, np.nan])
    item.set_summary(t, mean, lo, hi, 1.0)
    from PySide6.QtGui import QTransform
    tr = QTransform(10, 0, 0, -10, 0, 100)              # 10 px per unit, y up
    n = item._device_rects(tr)
    assert n == 3                                       # the point with no data leaves a hole
    r = item._rects[:n]
    assert r[:, 0].tolist() == [0, 10, 30]              # each point one column of its width
    assert r[:, 2].tolist() == [9, 19, 39]
    assert r[:, 1].tolist() == [85, 60, 70]             # top = max, bottom = min (device y grows down)
    assert r[:, 3].tolist() == [95, 90, 70]
    path = item.line.path                               # the NaN breaks the mean line: a new subpath
    last = path.elementAt(path.elementCount() - 1)
    assert last.isMoveTo() and last.x == 3.5
    assert sum(path.elementAt(k).isMoveTo() for k in range(path.elementCount())) == 2


def test_minimap_shows_the_whole_live_capture_and_moves_the_plot(window, qtbot):
    win, svc = window
    src, _more = _live(svc, qtbot, 60.0)
    mm = win.minimap
    qtbot.waitUntil(lambda: mm.overview is not None, timeout=10_000)
    s = mm.overview
    assert s.t[0] == pytest.approx(0.0, abs=0.1)
    assert s.t[-1] + s.step_s == pytest.approx(src.duration_s, rel=0.02)
    assert len(s) <= mm.view.getViewBox().width() + 1     # never more points than pixels
    # the visible range is the region; dragging the region moves the plot and stops following
    (x0, x1), _ = win.live_view.plot.getViewBox().viewRange()
    assert mm.region.getRegion() == pytest.approx((x0, x1))
    mm.region.setRegion((20.0, 25.0))
    (x0, x1), _ = win.live_view.plot.getViewBox().viewRange()
    assert (x0, x1) == pytest.approx((20.0, 25.0))
    assert not win.live_view.following
    qtbot.waitUntil(lambda: win.live_view.last_summary is not None and win.live_view.last_summary.t[0] < 20.5
                    and win.live_view.last_summary.t[0] >= 19.5, timeout=10_000)


def test_minimap_of_an_opened_capture_file(window, qtbot, tmp_path):
    win, svc = window
    path = tmp_path / "two-minutes.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in S.interval_blocks(120.0, rows_per_block=20_000, period_s=40.0):
            w.write(b)
    svc.captures.open(path)
    qtbot.waitUntil(lambda: win.minimap.overview is not None and hasattr(svc.captures.source, "reader"), timeout=20_000)
    qtbot.waitUntil(lambda: win.minimap.overview.t[-1] > 100, timeout=10_000)
    s = win.minimap.overview
    m = s.mean["p_total"]
    # the synthetic stream alternates 20 s idle and 20 s active: both levels are in the overview
    assert np.nanmin(m) < 0.5 * np.nanmax(m)
    win.minimap.show_range(50.0, 60.0)
    (x0, x1), _ = win.live_view.plot.getViewBox().viewRange()
    assert (x0, x1) == pytest.approx((50.0, 60.0))


def test_marker_dragged_to_the_edge_pans_the_view(window, qtbot):
    win, svc = window
    _live(svc, qtbot, 60.0)
    lv = win.live_view
    lv.zoom_to(10.0, 20.0)
    lv.place_markers(12.0, 15.0)
    (x0, x1), _ = lv.plot.getViewBox().viewRange()
    m = lv.marker_b
    m.moving = True                                   # as pyqtgraph's drag sets it
    try:
        m.setValue(x1 - 0.001 * (x1 - x0))               # dragged onto the right edge
    finally:
        m.moving = False
    (y0, y1), _ = lv.plot.getViewBox().viewRange()
    assert y1 > x1 and y1 - y0 == pytest.approx(x1 - x0)       # panned right, same zoom
    assert y0 + lv.EDGE * (y1 - y0) * 0.99 <= m.value() <= y1 - lv.EDGE * (y1 - y0) * 0.99
    assert lv.marker_a.value() == pytest.approx(12.0)            # the other marker stays on its data
    m.moving = True
    try:
        m.setValue(y0)                                            # and onto the left edge
    finally:
        m.moving = False
    (z0, _z1), _ = lv.plot.getViewBox().viewRange()
    assert z0 < y0


def test_markers_float_with_the_live_stream(window, qtbot):
    win, svc = window
    src, more = _live(svc, qtbot, 30.0)
    lv = win.live_view
    qtbot.waitUntil(lambda: lv.following and lv.last_summary is not None, timeout=10_000)
    end = src.duration_s
    lv.place_markers(end - 4.0, end - 1.0)
    lv.float_markers(True)
    assert lv.float_button.isChecked()
    more(5.0)
    new_end = src.duration_s
    qtbot.waitUntil(lambda: lv.marker_b.value() == pytest.approx(new_end - 1.0, abs=1e-6), timeout=10_000)
    assert lv.marker_a.value() == pytest.approx(new_end - 4.0, abs=1e-6)
    # the multimeter's figures follow: the markers service's figures moved too
    qtbot.waitUntil(lambda: svc.markers.times is not None
                    and svc.markers.times[1] == pytest.approx(new_end - 1.0, abs=1e-6), timeout=10_000)
    # without floating, markers stay on their data while the stream goes on
    lv.float_markers(False)
    more(3.0)
    qtbot.waitUntil(lambda: lv._seen_length == src.length, timeout=10_000)
    assert lv.marker_b.value() == pytest.approx(new_end - 1.0, abs=1e-6)


def test_event_lines_scrolled_away_are_reused_not_recreated(window, qtbot):
    """A stream polls the drive every 5 s. The line of an event that leaves the view is hidden and
    reused by the next event that enters it (creating and deleting the Qt items of every poll left
    ~3 KB each behind in the GUI thread's heap); a reused line shows its new event's name at its new
    time; the hidden spares are bounded."""
    import pyqtgraph as pg
    import shiboken6

    from powerrig.core.timeline import NVME, PHASE, POWER_STATE, Event
    from powerrig.gui.live_view.widget import EVENT_KINDS
    win, svc = window
    src, _more = _live(svc, qtbot, seconds=60.0)
    src.clock = S.clock(first_index=src.first_index)        # the recorder's clock model, in a stream
    lv = win.live_view
    lv.pause()

    def utc(t):
        return float(src.utc(t / src.interval_s))
    names, kinds = {}, {}
    for k in range(56):                    # an event a second: labelled nvme-cli commands (not background polls), every 4th a state change
        name = "write {q=32}" if k == 20 else (f"PS{k % 5}-{k}" if k % 4 == 3 else f"format {k}")
        names[name] = k + 2.5                               # (never on a view's edge)
        kinds[name] = POWER_STATE if k % 4 == 3 else NVME   # braces: shown as typed, not a format
        svc.timeline.add(Event(kinds[name], name, utc(names[name]), utc(names[name]) + 1e-3))
    svc.timeline.add(Event(PHASE, "seq read", utc(30.0), utc(33.0)))

    def event_lines():
        return [it for it in lv.plot.getViewBox().addedItems
                if isinstance(it, pg.InfiniteLine) and it not in (lv.marker_a, lv.marker_b)]
    seen, shown, most = {}, set(), 0
    for x0 in np.arange(0.0, 56.0, 4.0):                    # scroll across, one step per frame
        lv.plot.setXRange(x0, x0 + 4.0, padding=0)
        lv._draw_events()
        lines = [it for it in lv._event_items if isinstance(it, pg.InfiniteLine)]
        most = max(most, len(lines))
        for it in lines:
            seen[id(it)] = it
            text = it.label.textItem.toPlainText()
            shown.add(text)
            assert it.isVisible() and it.value() == pytest.approx(names[text], abs=1e-3), (x0, text)
            colour = EVENT_KINDS[str(kinds[text])]                  # a reused line takes its new kind's colour
            assert it.pen.color().name() == it.label.color.name() == colour, (x0, text)
        visible = {it.label.textItem.toPlainText() for it in event_lines() if it.isVisible()}
        want = {n for n, t in names.items() if x0 - 4.0 <= t <= x0 + 8.0}
        assert visible == want, x0
        regions = [it for it in lv._event_items if isinstance(it, pg.LinearRegionItem)]
        assert [r.name_label.textItem.toPlainText() for r in regions] == (["seq read"] if x0 - 4 <= 33 and 30 <= x0 + 8 else [])
    assert shown == set(names)
    assert len(seen) <= most        # every line ever drawn is one of the few alive at once (56 without reuse)
    # the whole capture at once draws every event; a view with none keeps a bounded number hidden
    lv.plot.setXRange(0.0, 60.0, padding=0)
    lv._draw_events()
    assert len([it for it in event_lines() if it.isVisible()]) == 56
    drawn = [(it, it.label, it.label.textItem) for it in event_lines()]
    lv.plot.setXRange(200.0, 210.0, padding=0)
    lv._draw_events()
    assert lv._event_items == []
    assert not any(it.isVisible() for it in event_lines())
    assert len(event_lines()) == lv.SPARE_EVENT_ITEMS
    # the rest are deleted, label and text included (left to Python's garbage collector, the C++ label
    # outlived its line, ~10 KB for every drive poll of an overnight stream)
    kept = {id(it) for it in event_lines()}
    dropped = [o for group in drawn if id(group[0]) not in kept for o in group]
    assert len(dropped) == 3 * (56 - lv.SPARE_EVENT_ITEMS)
    qtbot.waitUntil(lambda: not any(shiboken6.isValid(o) for o in dropped), timeout=5_000)


def test_an_event_redrawn_only_when_its_placement_moves(window, qtbot):
    """The live clock is refitted every second: an event moved by microseconds keeps its item (a redraw
    of every event at every refit churned Qt items overnight), one moved by a re-based clock is drawn
    again where it now lies."""
    import pyqtgraph as pg

    from powerrig.core.timeline import NVME, Event
    win, svc = window
    src, _more = _live(svc, qtbot, seconds=20.0)
    src.clock = S.clock(first_index=src.first_index)
    lv = win.live_view
    lv.pause()
    at = float(src.utc(10.5 / src.interval_s))
    svc.timeline.add(Event(NVME, "format", at, at + 1e-3))
    lv.plot.setXRange(8.0, 14.0, padding=0)

    def line():
        lines = [it for it in lv._event_items if isinstance(it, pg.InfiniteLine)]
        assert len(lines) == 1
        return lines[0]
    lv._draw_events()
    first = line()
    assert first.value() == pytest.approx(10.5, abs=1e-6)
    src.clock = S.clock(first_index=src.first_index, utc0=1.7e9 - 5e-6)     # a refit: 5 us later
    lv._draw_events()
    assert line() is first and first.value() == pytest.approx(10.5, abs=1e-6)
    src.clock = S.clock(first_index=src.first_index, utc0=1.7e9 + 0.5)      # re-based: 0.5 s earlier
    lv._draw_events()
    assert line().value() == pytest.approx(10.0, abs=1e-4)                    # (35 ppm of 0.5 s: 17.5 us)


def test_finished_worker_jobs_are_freed(qapp, qtbot, tmp_path):
    """Every live frame runs a job: none may outlive its delivered result (a leak of one job per frame
    grew the process over a long stream), and outcomes arrive on the GUI thread, failures without a
    handler as the window's error."""
    import gc
    import threading

    from powerrig.core.errors import PowerrigError
    from powerrig.gui.core import _Job
    svc = Services(capture_dir=tmp_path)
    got, threads, errors = [], set(), []
    svc.core.error.connect(errors.append)

    def record(r):
        threads.add(threading.current_thread())
        got.append(r)
    for k in range(200):
        svc.core.run(lambda k=k: k, done=record)

    def boom():
        raise PowerrigError("the drive is gone; check the cable")
    svc.core.run(boom, done=record)
    qtbot.waitUntil(lambda: len(got) == 200 and svc.core.pending == 0, timeout=20_000)
    assert sorted(got) == list(range(200))
    assert threads == {threading.main_thread()}
    assert errors == ["the drive is gone; check the cable"]
    svc.core.pool.waitForDone(20_000)

    def alive(kind):
        gc.collect()
        return sum(isinstance(o, kind) for o in gc.get_objects())
    qtbot.waitUntil(lambda: alive(_Job) == 0, timeout=20_000)
    svc.shutdown()


def test_a_job_that_outlives_its_core_is_dropped_quietly(qapp, caplog, tmp_path):
    """A window closed while a worker still runs (an nvme-cli call hung past the shutdown's wait): the
    job's outcome has nowhere to go and is dropped with a debug line, not a traceback in the pool."""
    import logging
    import threading

    import shiboken6
    from PySide6.QtCore import QThreadPool
    svc = Services(capture_dir=tmp_path)
    go, ran = threading.Event(), threading.Event()

    def slow():
        go.wait(10)
        ran.set()
        return 1
    pool = QThreadPool()
    svc.core.run(slow, pool=pool)
    shiboken6.delete(svc.core)                # the core and its results object are gone
    with caplog.at_level(logging.DEBUG, logger="powerrig.gui.core"):
        go.set()
        assert pool.waitForDone(10_000)
    assert ran.is_set()
    assert [r for r in caplog.records if "outcome dropped" in r.getMessage()]


def test_a_job_finishing_after_shutdown_calls_nothing(qapp, qtbot, tmp_path):
    """The live view's own pool is not the core's: a summary job still running when the window shuts
    down finishes after it, when its widget may be deleted. Its outcome calls nothing, and nothing new
    starts after shutdown (a widget's frame timer firing late)."""
    import threading

    from PySide6.QtCore import QThreadPool
    svc = Services(capture_dir=tmp_path)
    go, called = threading.Event(), []

    def slow():
        go.wait(10)
        return 1
    pool = QThreadPool()
    svc.core.run(slow, pool=pool, done=called.append, failed=called.append)
    svc.shutdown()                            # waits for the core's pools, not this one
    go.set()
    assert pool.waitForDone(10_000)
    qtbot.wait(200)                           # the queued outcome is delivered (to no one)
    svc.core.run(lambda: 2, done=called.append)
    svc.core.pool.waitForDone(10_000)
    qtbot.wait(200)
    assert called == [] and svc.core.pending == 0


def test_a_closed_capture_says_so_instead_of_crashing(tmp_path):
    from powerrig.gui.source.file import FileSource, SourceClosed
    path = tmp_path / "short.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in S.interval_blocks(5.0, rows_per_block=5000):
            w.write(b)
    src = FileSource(path)
    assert np.isfinite(src.summaries(0.0, 5.0, 100, ["p_total"]).mean["p_total"]).all()
    src.close()
    with pytest.raises(SourceClosed, match="closed"):
        src.summaries(0.0, 5.0, 100, ["p_total"])
