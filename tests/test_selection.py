"""A selection's statistics (analysis.selection, what the desktop app's markers read) equal the
analysis of a phase over the same range: same code, same numbers, from an array and a capture file."""
from __future__ import annotations

import pytest

from powerrig.analysis.pipeline import analyse
from powerrig.analysis.selection import SelectionError, range_stats
from powerrig.analysis.source import ArraySource
from powerrig.capture.reader import CaptureReader
from powerrig.capture.writer import CaptureWriter
from powerrig.core.timeline import PHASE, Event
from powerrig.testing import synthetic as S

FIRST = 1_000_000


def _source():
    blocks = list(S.interval_blocks(14.0, rows_per_block=2500, period_s=4.0, first_index=FIRST))
    model = S.clock(first_index=FIRST)
    return blocks, model, ArraySource.from_blocks(blocks, model)


def _phase_over(src, model, blocks, a_s, b_s):
    """analyse() of a phase whose edges are the sample ids of a_s, b_s (placed through the clock)."""
    spi = blocks[0].interval_samples
    utc = model.utc([FIRST + a_s / src.interval_s * spi, FIRST + b_s / src.interval_s * spi])
    ev = Event(PHASE, "sel", float(utc[0]), float(utc[1]))
    return next(r for r in analyse(src, [ev], {}).phases if r.name == "sel")


@pytest.mark.parametrize("a_s,b_s", [(2.2505, 12.7495), (1.2345, 11.9876)])   # edges inside intervals
def test_selection_equals_the_phase_analysis(a_s, b_s):
    blocks, model, src = _source()
    phase = _phase_over(src, model, blocks, a_s, b_s)
    sel = range_stats(src, b_s, a_s)                   # either order
    assert sel.start_s == pytest.approx(phase.start_s, abs=1e-6)
    assert sel.duration_s == pytest.approx(phase.duration_s, abs=1e-6)
    for k in ("12V", "3V3", "total"):
        for f in ("mean_w", "min_w", "max_w"):
            assert sel.rails[k][f] == pytest.approx(phase.rails[k][f], rel=1e-12), (k, f)
        # the phase's edges went through host UTC (0.2 us at 1.7e9 s): partial-interval weights move ~1e-4
        assert sel.rails[k]["energy_j"] == pytest.approx(phase.rails[k]["energy_j"], rel=1e-7)
    assert sel.max_1s.value_w == pytest.approx(phase.max_1s.value_w, rel=1e-9)
    assert sel.max_10s.value_w == pytest.approx(phase.max_10s.value_w, rel=1e-9)
    assert sel.peak_100us.value_w == pytest.approx(phase.peak_100us.value_w, rel=1e-12)
    assert sel.lost_s == pytest.approx(phase.lost_s, abs=1e-9)


def test_selection_on_a_capture_file_equals_its_analysis(tmp_path):
    blocks, model, _ = _source()
    path = tmp_path / "c.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in blocks:
            w.write(b)
    with CaptureReader(path) as cap:
        dt = cap.interval_s
        sel = range_stats(cap, 3.0, 9.0)
        # the same samples as a phase in sample ids (no clock in between): identical figures
        from powerrig.analysis.phases import CAPTURE, Phase
        from powerrig.analysis.pipeline import _phase_pass
        ref = _phase_pass(cap, [Phase("ref", CAPTURE, 3.0 / dt, 9.0 / dt)], list(cap.rails), dt, 1 << 16)[0]
    for k in ("12V", "3V3", "total"):
        assert sel.rails[k] == ref.rails[k]
    assert sel.peak_100us.value_w == ref.peak_100us.value_w


def test_a_range_outside_the_data_is_refused():
    _, _, src = _source()
    with pytest.raises(SelectionError, match="holds no data"):
        range_stats(src, 20.0, 30.0)
