"""Marker figures are the analysis' own: over the same range they equal what analyse() reports for a
phase there, from the live source's full-rate rows and from the capture file alike."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

pytest.importorskip("PySide6")

from powerrig.analysis.pipeline import analyse  # noqa: E402
from powerrig.analysis.source import ArraySource  # noqa: E402
from powerrig.capture.writer import CaptureWriter  # noqa: E402
from powerrig.core.timeline import PHASE, Event  # noqa: E402
from powerrig.analysis.selection import SelectionError, range_figures  # noqa: E402
from powerrig.gui.source import FileSource, LiveSource  # noqa: E402
from powerrig.testing import synthetic as S  # noqa: E402

FIRST = 1_000_000


def _setup():
    blocks = list(S.interval_blocks(12.0, rows_per_block=2500, period_s=4.0, first_index=FIRST))
    model = S.clock(first_index=FIRST)
    src = ArraySource.from_blocks(blocks, model)
    a_s, b_s = 2.3456, 9.8765            # marker times, s from the start (edges inside intervals)
    spi = blocks[0].interval_samples
    utc = model.utc([FIRST + a_s / src.interval_s * spi, FIRST + b_s / src.interval_s * spi])
    ev = Event(PHASE, "between-markers", float(utc[0]), float(utc[1]), meta={"rw": "randread", "bs": "4k"})
    an = analyse(src, [ev], {})
    phase = next(r for r in an.phases if r.name == "between-markers")
    return blocks, a_s, b_s, phase


def test_markers_equal_the_analysis_on_the_live_source():
    blocks, a_s, b_s, phase = _setup()
    live = LiveSource.for_block(blocks[0])
    for b in blocks:
        live.feed(b)
    fig = range_figures(live, b_s, a_s)             # marker order does not matter
    assert fig.dt_s == pytest.approx(b_s - a_s)
    # the phase's edges went through host UTC (1.7e9 s: 0.2 us resolution), moving the partial edge
    # intervals' weights by ~1e-4: energy agrees to 1e-7; the whole intervals (mean, max) exactly
    for k in ("12V", "3V3", "total"):
        assert fig.energy_j[k] == pytest.approx(phase.rails[k]["energy_j"], rel=1e-7)
        assert fig.mean_w[k] == pytest.approx(phase.rails[k]["mean_w"], rel=1e-12)
        assert fig.max_w[k] == pytest.approx(phase.rails[k]["max_w"], rel=1e-12)


def test_markers_equal_the_analysis_on_the_capture_file(tmp_path):
    blocks, a_s, b_s, phase = _setup()
    path = tmp_path / "m.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in blocks:
            w.write(b)
    src = FileSource(path)
    try:
        fig = range_figures(src.analysis_source(), a_s, b_s)
    finally:
        src.close()
    # the file holds float32 samples: equal to the analysis to float32 precision
    for k in ("12V", "3V3", "total"):
        assert fig.energy_j[k] == pytest.approx(phase.rails[k]["energy_j"], rel=1e-6)
        assert fig.mean_w[k] == pytest.approx(phase.rails[k]["mean_w"], rel=1e-6)


def test_markers_older_than_memory_are_refused_with_a_hint():
    blocks = list(S.interval_blocks(10.0, rows_per_block=2000))
    live = LiveSource.for_block(blocks[0], rows=2000)
    for b in blocks:
        live.feed(b)
    with pytest.raises(SelectionError, match="open its capture"):
        range_figures(live, 1.0, 9.5)
    assert range_figures(live, 8.5, 9.5).dt_s == pytest.approx(1.0)


def _capture(path, seconds=12.0, **kw):
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in S.interval_blocks(seconds, rows_per_block=2000, period_s=4.0, **kw):
            w.write(b)
    return path


def test_markers_reset_with_the_source(qtbot, tmp_path):
    """Markers placed on one source are cleared when the plot changes source (a capture opened, a
    sweep started): the lines leave the plot, the Markers button pops up and the multimeter says how
    to place them again; never the old times measuring data they were not placed on."""
    from powerrig.gui.main_window import MainWindow
    from powerrig.gui.services import Services
    from gui_helpers import private_settings, show_synthetic

    private_settings(tmp_path)
    path = _capture(tmp_path / "before.jls")
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    qtbot.addWidget(win)
    lv, meter = win.live_view, win.multimeter

    def placed():
        return svc.markers.times is not None and meter.figures is not None and lv.marker_a.scene() is not None

    def cleared():
        return (svc.markers.times is None and meter.figures is None and lv.marker_a.scene() is None
                and not lv.markers_button.isChecked() and meter.marker_table.rowCount() == 0
                and "press Markers" in meter.marker_label.text())
    try:
        show_synthetic(svc, 10.0)
        lv.show_markers(True)
        qtbot.waitUntil(placed, timeout=30_000)
        svc.captures.open(path)                                   # File > Open
        qtbot.waitUntil(lambda: isinstance(svc.captures.source, FileSource), timeout=30_000)
        qtbot.waitUntil(cleared, timeout=30_000)
        lv.markers_button.setChecked(True)                        # placed again, on the capture
        qtbot.waitUntil(placed, timeout=30_000)
        on_block = svc.recording.follow_sweep()                   # Run: a sweep's stream on the plot
        for b in S.interval_blocks(3.0, rows_per_block=1000, seed=3):
            on_block(b)
        qtbot.waitUntil(lambda: svc.captures.source is svc.recording.live, timeout=30_000)
        qtbot.waitUntil(cleared, timeout=30_000)
    finally:
        svc.shutdown()


def test_markers_after_whole_capture_land_inside_the_data_they_can_measure(qtbot, tmp_path):
    """A long live stream with no file behind it (a sweep's): "Whole capture" shows all of it, the
    live view holds only its newest rows at full rate; pressing Markers places A and B inside those
    rows and the multimeter measures them (no "older than ... the live view holds")."""
    from powerrig.gui.main_window import MainWindow
    from powerrig.gui.services import Services
    from gui_helpers import private_settings

    private_settings(tmp_path)
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    qtbot.addWidget(win)
    errors = []
    svc.core.error.connect(errors.append)
    try:
        blocks = list(S.interval_blocks(40.0, rows_per_block=1000, period_s=4.0))
        live = LiveSource.for_block(blocks[0], rows=10_000)         # 10 s at full rate of a 40 s stream
        for b in blocks:
            live.feed(b)
        svc.captures.show(live)
        lv = win.live_view
        lv.show_all()
        (x0, x1), _ = lv.plot.getViewBox().viewRange()
        assert x0 <= 1.0 and x1 >= 39.0
        lv.markers_button.setChecked(True)
        qtbot.waitUntil(lambda: win.multimeter.figures is not None, timeout=30_000)
        first, _end = live.held()
        a, b = sorted((lv.marker_a.value(), lv.marker_b.value()))
        assert first * live.interval_s <= a < b <= live.duration_s
        fig = win.multimeter.figures
        assert (fig.t_a, fig.t_b) == (a, b) and fig.energy_j["total"] > 0
        assert not errors
    finally:
        svc.shutdown()


def test_markers_older_than_memory_are_read_from_the_recording_file(qtbot, tmp_path):
    """The window's own recording: the live view holds 10 s at full rate, its capture file all 40 s;
    markers over the first seconds are measured from the file, equal to the file's own figures."""
    from powerrig.gui.multimeter.widget import Multimeter
    from powerrig.gui.services import Services

    path = _capture(tmp_path / "live-rec.jls", seconds=40.0)
    svc = Services(capture_dir=tmp_path / "captures")
    meter = Multimeter(svc)
    qtbot.addWidget(meter)
    try:
        blocks = list(S.interval_blocks(40.0, rows_per_block=2000, period_s=4.0))   # what was recorded
        live = LiveSource.for_block(blocks[0], rows=10_000)
        for b in blocks:
            live.feed(b)
        svc.recording.live, svc.recording.live_capture = live, path
        qtbot.waitUntil(lambda: svc.captures.source is live, timeout=10_000)
        assert svc.markers.measurable() == (0.0, pytest.approx(40.0))
        svc.markers.set(2.0, 7.0)
        own = FileSource(path)
        try:
            want = range_figures(own.analysis_source(), 2.0, 7.0)
        finally:
            own.close()
        qtbot.waitUntil(lambda: meter.figures is not None, timeout=30_000)
        assert meter.figures.energy_j["total"] == pytest.approx(want.energy_j["total"], rel=1e-9)
        # without the file (a sweep's stream) the same markers are refused with the reason
        svc.recording.live_capture = None
        assert svc.markers.measurable()[0] == pytest.approx(30.0, abs=0.01)
        svc.markers.set(2.0, 7.0, quiet=True)
        qtbot.waitUntil(lambda: "older than" in meter.marker_label.text(), timeout=30_000)
    finally:
        svc.shutdown()
