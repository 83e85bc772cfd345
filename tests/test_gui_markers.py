"""Marker figures are the analysis' own: over the same range they equal what analyse() reports for a
phase there, from the live source's full-rate rows and from the capture file alike."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")

from powerrig.analysis.pipeline import analyse  # noqa: E402
from powerrig.analysis.source import ArraySource  # noqa: E402
from powerrig.capture.writer import CaptureWriter  # noqa: E402
from powerrig.events import PHASE, Event  # noqa: E402
from powerrig.gui.core import MarkerError, range_figures  # noqa: E402
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
    with pytest.raises(MarkerError, match="open its capture"):
        range_figures(live, 1.0, 9.5)
    assert range_figures(live, 8.5, 9.5).dt_s == pytest.approx(1.0)
