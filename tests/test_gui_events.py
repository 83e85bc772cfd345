"""Events on the plot's time axis as a reader needs them: background drive polls (the 5 s temperature
smart-log, get/set-feature) as ticks on one quiet track instead of a forest of labels; fio:/measure:
phase names that never overlap however close their phases start (lanes, then cut by pixel width);
idle and workload phases shaded in the report's colours."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("pytestqt")
import pyqtgraph as pg  # noqa: E402

from gui_helpers import private_settings, show_synthetic  # noqa: E402
from powerrig.core.timeline import NVME, PHASE, POWER_STATE, Event  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402
from powerrig.testing import synthetic as S  # noqa: E402


@pytest.fixture
def window(qapp, qtbot, tmp_path):
    private_settings(tmp_path)
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    win.resize(1366, 768)
    win.show()
    yield win, svc
    win.close()


def _stream(svc, qtbot, seconds=60.0):
    src = show_synthetic(svc, seconds)
    src.clock = S.clock(first_index=src.first_index)
    qtbot.waitUntil(lambda: svc.captures.source is src, timeout=10_000)
    return src, (lambda t: float(src.utc(t / src.interval_s)))


def _labels(lv):
    """Every event label shown: (its text, its scene rectangle)."""
    out = []
    for it in lv._event_items:
        lab = it.name_label if isinstance(it, pg.LinearRegionItem) else it.label
        if it.isVisible() and lab.isVisible() and lab.textItem.toPlainText():
            lab.updateTransform(force=True)
            out.append((lab.textItem.toPlainText(), lab.sceneBoundingRect()))
    return out


def test_background_polls_are_ticks_on_a_quiet_track_not_labels(window, qtbot):
    win, svc = window
    src, utc = _stream(svc, qtbot)
    lv = win.live_view
    lv.pause()
    polls = [("smart-log", ["nvme", "smart-log", "/dev/nvme0"]), ("get-feature power", None),
             ("set-feature power", ["nvme", "set-feature", "/dev/nvme0", "--feature-id=2", "--value=1"])]
    n = 0
    for t in range(1, 59, 1):                      # a poll a second (every kind), for a minute
        name, argv = polls[t % 3]
        svc.timeline.add(Event(NVME, name, utc(t + 0.3), utc(t + 0.31), argv=argv))
        n += 1
    svc.timeline.add(Event(NVME, "format", utc(30.5), utc(31.0), argv=["nvme", "format", "/dev/nvme0"]))
    svc.timeline.add(Event(NVME, "set-feature power", utc(40.5), utc(40.6),   # saved: not a volatile poll
                           argv=["nvme", "set-feature", "/dev/nvme0", "--feature-id=2", "--value=1", "--save"]))
    lv.show_all()
    lv._draw_events()
    lines = [it for it in lv._event_items if isinstance(it, pg.InfiniteLine)]
    assert sorted(it.event_name for it in lines) == ["format", "set-feature power"]     # the rest: no labels
    q = lv.quiet_item
    assert q.isVisible() and len(q.opts["x0"]) == n
    (x0, x1), (y0, y1) = lv.plot.getViewBox().viewRange()
    # the ticks sit on a thin track at the bottom of the plot, each at its poll's time
    assert max(q.opts["y1"]) - y0 <= 0.05 * (y1 - y0) and min(q.opts["y0"]) == pytest.approx(y0)
    assert sorted(q.opts["x0"])[0] == pytest.approx(1.3, abs=2e-3)
    # the track follows the view: zoomed where no poll is, it is gone
    lv.plot.setXRange(200.0, 210.0, padding=0)
    lv._draw_events()
    assert not q.isVisible()


def test_phase_names_never_overlap_at_any_zoom(window, qtbot):
    """A sweep's step: fio:<job> and measure:<job> start together, idle dwells between, a power-state
    change beside each; at the whole capture and zoomed, no two labels shown overlap, every phase in
    view has its name shown whole or cut with an ellipsis, never something else."""
    win, svc = window
    src, utc = _stream(svc, qtbot)
    lv = win.live_view
    lv.pause()
    names = {}
    t = 1.0
    for k, job in enumerate(["seq-write-128k", "rand-read-4k-qd32", "seq-read-128k", "rand-write-4k"] * 3):
        for name, a, b in ((f"idle ps{k % 3}", t, t + 1.0), (f"fio:{job}", t + 1.0, t + 4.0),
                           (f"measure:{job}", t + 1.05, t + 3.9)):
            svc.timeline.add(Event(PHASE, name, utc(a), utc(b), meta={} if name.startswith("idle") else {"rw": "write"}))
            names[name] = names.get(name, 0) + 1
        svc.timeline.add(Event(POWER_STATE, f"ps{k % 3}", utc(t + 0.01), utc(t + 0.02), meta={"power_state": k % 3}))
        t += 4.5
    for view in ((0.0, 60.0), (0.0, 12.0), (3.0, 7.0), (20.0, 22.0)):
        lv.plot.setXRange(*view, padding=0)
        lv._draw_events()
        lv.plot.grab()                                    # painted as a user sees it
        shown = _labels(lv)
        assert shown, view
        for i, (ta, ra) in enumerate(shown):
            for tb, rb in shown[i + 1:]:
                assert not ra.intersects(rb), (view, ta, tb, ra, rb)
        full = {it.event_name for it in lv._event_items}
        for text, _r in shown:
            assert text in full or (text.endswith("…") and any(n.startswith(text[:-1]) for n in full)), text
    # zoomed in on one step, its fio and measure phases and the idle before it are all named in full
    lv.plot.setXRange(1.0, 5.5, padding=0)
    lv._draw_events()
    lv.plot.grab()
    texts = {text for text, _r in _labels(lv)}
    assert {"idle ps0", "fio:seq-write-128k", "measure:seq-write-128k"} <= texts, texts


def test_idle_and_workload_phases_shaded_as_the_report_shades_them(window, qtbot):
    from matplotlib.colors import to_hex

    from powerrig.capture_report import KIND_COLOURS
    win, svc = window
    src, utc = _stream(svc, qtbot, seconds=20.0)
    lv = win.live_view
    lv.pause()
    svc.timeline.add(Event(PHASE, "idle ps0", utc(1.0), utc(5.0)))
    svc.timeline.add(Event(PHASE, "fio:seq-write", utc(6.0), utc(12.0), meta={"rw": "write", "bs": "128k"}))
    lv.show_all()
    lv._draw_events()
    regions = {it.event_name: it for it in lv._event_items if isinstance(it, pg.LinearRegionItem)}
    for name, kind in (("idle ps0", "idle"), ("fio:seq-write", "workload")):
        shade = regions[name].brush.color()
        assert shade.name() == to_hex(KIND_COLOURS[kind]), (name, shade.name())


def test_an_opened_captures_idle_between_workloads_is_shaded_as_idle(qtbot, tmp_path, window):
    """The report shades every idle phase green, the ones no event names too (the time between
    workloads its analysis finds); an opened capture's plot shades the same spans green, its
    workloads orange."""
    from powerrig.capture.writer import CaptureWriter
    from powerrig.gui.live_view.widget import PHASE_COLOURS
    from powerrig.gui.source import FileSource
    win, svc = window
    model = S.clock(first_index=0)
    path = tmp_path / "alt.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}, timeline=S.alternating_timeline(40.0, model, period_s=20.0),
                       clock=model) as w:
        for b in S.interval_blocks(40.0, rows_per_block=5000, period_s=20.0):
            w.write(b)
    svc.captures.open(path)
    qtbot.waitUntil(lambda: isinstance(svc.captures.source, FileSource) and svc.captures.analysis is not None,
                    timeout=30_000)
    lv = win.live_view
    qtbot.waitUntil(lambda: len([it for it in lv._event_items if isinstance(it, pg.LinearRegionItem)]) >= 3,
                    timeout=10_000)
    an = svc.captures.analysis
    idle = sorted((r.start_s, r.stop_s) for r in an.phases if r.kind == "idle")
    work = sorted((r.start_s, r.stop_s) for r in an.phases if r.kind == "workload")
    assert idle and work
    shaded = {}
    for it in lv._event_items:
        if isinstance(it, pg.LinearRegionItem):
            a, b = it.getRegion()
            shaded[(round(a, 3), round(b, 3))] = it.brush.color().name()
    for spans, kind in ((idle, "idle"), (work, "workload")):
        for a, b in spans:
            assert shaded.get((round(a, 3), round(b, 3))) == PHASE_COLOURS[kind], (kind, a, b, shaded)


def test_whole_capture_of_a_long_recording_shows_its_first_phase_and_every_poll(qtbot, tmp_path, window):
    """An hour of a drive polled every 5 s is 720 events; the plot of an opened capture places all of
    them (a live stream's last 300 only): its first phase is drawn at "Whole capture", every poll a
    tick on the quiet track."""
    from powerrig.capture.writer import CaptureWriter
    from powerrig.core.timeline import Timeline
    from powerrig.gui.source import FileSource
    win, svc = window
    model = S.clock(first_index=0)
    seconds, n_polls = 120.0, 400
    tl = Timeline()
    utc = lambda t: float(model.utc(t / S.PERIOD_S))     # noqa: E731 - the capture's clock at t s
    tl.add(Event(PHASE, "fio:first-job", utc(2.0), utc(6.0), meta={"rw": "write", "bs": "128k"}))
    for k in range(n_polls):
        t = 8.0 + k * 0.25
        tl.add(Event(NVME, "smart-log", utc(t), utc(t + 0.01), argv=["nvme", "smart-log", "/dev/nvme0"]))
    path = tmp_path / "long.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}, timeline=tl, clock=model) as w:
        for b in S.interval_blocks(seconds, rows_per_block=10_000):
            w.write(b)
    svc.captures.open(path)
    qtbot.waitUntil(lambda: isinstance(svc.captures.source, FileSource) and svc.captures.analysis is not None,
                    timeout=30_000)
    lv = win.live_view
    lv.show_all()
    lv._draw_events()
    names = {it.event_name for it in lv._event_items if isinstance(it, pg.LinearRegionItem)}
    assert "fio:first-job" in names, names
    assert len(lv.quiet_item.opts["x0"]) == n_polls
