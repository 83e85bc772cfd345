"""The multimeter shows what the plot shows: after File > Open the whole capture's figures (not the
live stream still arriving), the live stream's again when the plot goes back to live; power noise
around zero is shown as 0 at the meter's resolution, never as -0.0005 W."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")

from powerrig.analysis.selection import range_figures  # noqa: E402
from powerrig.capture.writer import CaptureWriter  # noqa: E402
from powerrig.gui.multimeter.widget import Multimeter, _fmt, resolution_w  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402
from powerrig.gui.source import FileSource, LiveSource  # noqa: E402
from powerrig.testing import synthetic as S  # noqa: E402


def _cell(meter, row: str, col: int) -> str:
    rows = [meter.table.verticalHeaderItem(k).text() for k in range(meter.table.rowCount())]
    return meter.table.item(rows.index(row), col).text()


def test_multimeter_follows_the_plotted_source(qtbot, tmp_path):
    path = tmp_path / "busy.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in S.interval_blocks(12.0, rows_per_block=2000, period_s=4.0):
            w.write(b)
    svc = Services(capture_dir=tmp_path / "captures")
    meter = Multimeter(svc)
    qtbot.addWidget(meter)
    try:
        blocks = S.interval_blocks(30.0, rows_per_block=1000, period_s=40.0, seed=3)   # idle at first
        live = LiveSource.for_block(next(blocks))
        fed = [next(blocks) for _ in range(3)]
        for b in fed:
            live.feed(b)
        svc.recording.live = live
        qtbot.waitUntil(lambda: svc.captures.source is live and meter.table.rowCount() == 3, timeout=10_000)
        live_energy = _cell(meter, "total", 4)
        # the total's 100 us peak: the highest sum of the rails' peaks in one interval, as the analysis sums them
        peaks = np.concatenate([b.p_peak for b in fed]).astype(np.float64)
        assert _cell(meter, "total", 3) == f"{np.nanmax(peaks.sum(axis=1)):.4f}" != "—"
        assert _cell(meter, "12V", 3) == f"{np.nanmax(peaks[:, 0]):.4f}"
        assert "Since the recording began" in meter.title.text()

        svc.captures.open(path)                                    # File > Open
        qtbot.waitUntil(lambda: isinstance(svc.captures.source, FileSource) and bool(meter.file_rows), timeout=30_000)
        own = FileSource(path)
        try:
            whole = range_figures(own.analysis_source(), 0.0, own.duration_s)
        finally:
            own.close()
        assert "busy.jls" in meter.title.text()
        # the analysis' capture phase and the range pass without it give the same rows
        from powerrig.analysis.pipeline import analyse
        from powerrig.gui.services.captures import whole_capture_figures
        own = FileSource(path)
        try:
            r = own.reader
            with_an = whole_capture_figures(r, analyse(r, r.events, r.metadata))
            alone = whole_capture_figures(r)
        finally:
            own.close()
        assert with_an.keys() == alone.keys() == {"12V", "3V3", "total"}
        for k in with_an:
            for a, b in zip(with_an[k], alone[k]):
                assert a == b or a == pytest.approx(b, rel=1e-9), (k, with_an[k], alone[k])
        assert _cell(meter, "total", 4) == f"{whole.energy_j['total']:.3f}" != live_energy
        assert _cell(meter, "total", 3) == f"{with_an['total'][3]:.4f}" != "—"
        assert with_an["total"][3] > max(with_an["12V"][3], with_an["3V3"][3])   # both rails' peaks in one interval
        assert _cell(meter, "12V", 0) == f"{whole.mean_w['12V']:.4f}"
        for _ in range(5):                                          # the stream goes on behind the capture
            live.feed(next(blocks))
        qtbot.wait(300)                                             # several ticks: the live data announced
        assert _cell(meter, "total", 4) == f"{whole.energy_j['total']:.3f}"

        svc.captures.show_live()                                    # Back to live
        qtbot.waitUntil(lambda: "Since the recording began" in meter.title.text(), timeout=10_000)
        qtbot.waitUntil(lambda: _cell(meter, "total", 4) == f"{live.total_sum[live.col['p_total']] * live.interval_s:.3f}",
                        timeout=10_000)
    finally:
        svc.shutdown()


def test_power_noise_around_zero_shows_as_zero_at_the_meters_resolution(qtbot, tmp_path):
    step_12v = resolution_w("12V", ["12V", "3V3"])
    assert 0.001 < step_12v < 0.01                  # 12 V x the ADC's current LSB (rails.toml)
    assert resolution_w("total", ["12V", "3V3"]) > step_12v
    assert _fmt(-0.0005, 4, step_12v) == "0.0000"   # the 12 V min: noise, not a reading
    assert _fmt(0.0005, 4, step_12v) == "0.0000"
    assert _fmt(-0.05, 4, step_12v) == "-0.0500"    # further below zero than a step: shown (a wiring fault)
    assert _fmt(-0.00001, 4) == "0.0000"            # never "-0.0000"
    assert _fmt(5.4981, 4, step_12v) == "5.4981"
    # in the table, as the meter shows an opened capture's rows
    svc = Services(capture_dir=tmp_path / "captures")
    meter = Multimeter(svc)
    qtbot.addWidget(meter)
    try:
        class Src:
            rails = ("12V", "3V3")
            path = tmp_path / "x.jls"
            duration_s = 1.0
            reader = None
        src = Src()
        svc.captures.source = src
        meter.show_file(src, {"12V": (0.0002, -0.0005, 0.001, None, 0.0), "3V3": (1.2, 1.1, 1.3, 1.4, 1.2),
                              "total": (1.2002, 1.0995, 1.301, None, 1.2)})
        assert _cell(meter, "12V", 1) == "0.0000" and _cell(meter, "3V3", 1) == "1.1000"
    finally:
        svc.shutdown()
