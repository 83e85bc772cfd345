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


def test_marker_figures_follow_the_plotted_source(qtbot, tmp_path):
    """Open a capture, place markers, then the plot follows a sweep's stream: the multimeter's marker
    figures are recomputed over the stream (as it grows past the markers), and over the capture again
    when it is reopened; never the figures of a source the plot no longer shows."""
    from powerrig.gui.services import Services
    from powerrig.gui.multimeter.widget import Multimeter

    path = tmp_path / "before.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in S.interval_blocks(12.0, rows_per_block=2000, period_s=4.0):
            w.write(b)
    svc = Services(capture_dir=tmp_path / "captures")
    meter = Multimeter(svc)
    qtbot.addWidget(meter)
    a_s, b_s = 2.0, 7.0

    def shows(expected):
        fig = meter.figures
        return fig is not None and (fig.t_a, fig.t_b) == (a_s, b_s) and all(
            fig.energy_j[k] == pytest.approx(expected.energy_j[k], rel=1e-12) for k in ("12V", "3V3", "total"))

    try:
        svc.captures.open(path)
        qtbot.waitUntil(lambda: isinstance(svc.captures.source, FileSource), timeout=30_000)
        svc.markers.set(a_s, b_s)
        own = FileSource(path)      # a reader of its own: one pyjls reader is not shared between threads
        try:
            from_file = range_figures(own.analysis_source(), a_s, b_s)
        finally:
            own.close()
        qtbot.waitUntil(lambda: shows(from_file), timeout=30_000)

        # a sweep's stream, idle (5 W) over the markers where the capture was active for 3 of 5 s
        on_block = svc.recording.follow_sweep()
        blocks = list(S.interval_blocks(10.0, rows_per_block=1000, period_s=40.0, seed=3))
        for b in blocks[:4]:                                  # 4 s: the markers reach past its end
            on_block(b)
        qtbot.waitUntil(lambda: svc.captures.source is svc.recording.live, timeout=30_000)
        partial = range_figures(svc.recording.live, a_s, b_s)
        qtbot.waitUntil(lambda: shows(partial), timeout=30_000)
        assert partial.energy_j["total"] < 0.6 * from_file.energy_j["total"]   # not the capture's figures
        for b in blocks[4:]:                                  # the stream grows past B: recomputed
            on_block(b)
        whole = range_figures(svc.recording.live, a_s, b_s)
        assert whole.energy_j["total"] > 1.5 * partial.energy_j["total"]
        qtbot.waitUntil(lambda: shows(whole), timeout=30_000)

        svc.captures.open(path)                               # and back to the capture
        qtbot.waitUntil(lambda: shows(from_file), timeout=30_000)
    finally:
        svc.shutdown()
