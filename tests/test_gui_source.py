"""The plot's sources answer per-point min/mean/max equal to numpy over the same intervals, with NaN for
gaps, and the live source's memory does not grow with the stream."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.capture.writer import CaptureWriter
from powerrig.gui.source import FileSource, LiveSource
from powerrig.testing import synthetic as S


def _blocks(seconds, **kw):
    return list(S.interval_blocks(seconds, rows_per_block=3000, period_s=2.0, **kw))


def _truth(blocks, signal):
    rails = blocks[0].rails
    p = np.concatenate([b.p for b in blocks])
    if signal == "p_total":
        return p.sum(axis=1)
    f, r = signal.split("_", 1)
    k = rails.index(r)
    return np.concatenate([getattr(b, f)[:, k] for b in blocks])


@pytest.mark.parametrize("level_rows", [1, 8, 64])
def test_live_summaries_equal_numpy(level_rows):
    blocks = _blocks(20.0)                        # 20 000 rows at 1 ms
    src = LiveSource.for_block(blocks[0], rows=1 << 15, bins=1 << 12, factor=8, levels=4)
    for b in blocks:
        src.feed(b)
    n_pts = 100
    r0, rows_per_pt = 512, level_rows * 2         # aligned to the level's bins
    t0 = r0 * src.interval_s
    t1 = (r0 + n_pts * rows_per_pt) * src.interval_s
    s = src.summaries(t0, t1, n_pts, ["p_12V", "p_total", "v_3V3"])
    assert len(s) == n_pts
    for sig in ("p_12V", "p_total", "v_3V3"):
        x = _truth(blocks, sig)[r0:r0 + n_pts * rows_per_pt].reshape(n_pts, rows_per_pt)
        np.testing.assert_allclose(s.mean[sig], x.mean(axis=1), rtol=1e-6)
        np.testing.assert_allclose(s.min[sig], x.min(axis=1), rtol=1e-6)
        np.testing.assert_allclose(s.max[sig], x.max(axis=1), rtol=1e-6)


def test_live_gaps_are_nan_and_listed():
    blocks = list(S.drop_rows(_blocks(4.0), 1000, 500))
    src = LiveSource.for_block(blocks[0])
    for b in blocks:
        src.feed(b)
    s = src.summaries(0.0, 4.0, 40, ["p_total"])           # 100 rows per point
    assert np.isnan(s.mean["p_total"][10:15]).all()
    assert np.isfinite(s.mean["p_total"][:10]).all() and np.isfinite(s.mean["p_total"][15:]).all()
    assert src.gaps(0, 4) == [(pytest.approx(1.0), pytest.approx(1.5))]


def test_live_memory_is_bounded():
    src = LiveSource(("12V", "3V3"), 1e-3, rows=1 << 12, bins=1 << 10, factor=8, levels=4)
    before = src.memory_bytes()
    for b in S.interval_blocks(120.0, rows_per_block=10_000):
        src.feed(b)
    assert src.memory_bytes() == before
    assert src.length == 120_000
    # the whole stream is still summarised at a coarse level; the oldest rows are gone from level 0
    s = src.summaries(0.0, 120.0, 50, ["p_12V"])
    assert np.isfinite(s.mean["p_12V"][:-1]).all()
    assert src.held()[0] > 0


def test_file_summaries_equal_numpy(tmp_path):
    blocks = _blocks(30.0)
    path = tmp_path / "c.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}}) as w:
        for b in blocks:
            w.write(b)
    src = FileSource(path)
    try:
        n_pts = 60
        s = src.summaries(0.0, 30.0, n_pts, ["p_12V", "p_total"])
        assert len(s) == 58            # 500 rows per point snap to 512: 58 whole points fit in 30 s
        n_pts = len(s)
        step = int(round(s.step_s / src.interval_s))
        for sig in ("p_12V", "p_total"):
            x = _truth(blocks, sig)[:n_pts * step].reshape(n_pts, step).astype(np.float32)
            np.testing.assert_allclose(s.mean[sig], x.mean(axis=1, dtype=np.float64), rtol=1e-5)
            np.testing.assert_allclose(s.min[sig], x.min(axis=1), rtol=1e-6)
            np.testing.assert_allclose(s.max[sig], x.max(axis=1), rtol=1e-6)
        # a zoom into an unaligned short range reads the intervals themselves
        s = src.summaries(1.2345, 1.3, 13, ["p_12V"])
        x = _truth(blocks, "p_12V")[1234:1300].astype(np.float32)
        step = int(round(s.step_s / src.interval_s))
        assert step == 6 and s.t[0] == pytest.approx(1.234)
        np.testing.assert_allclose(s.max["p_12V"], x[:len(s) * step].reshape(len(s), step).max(axis=1), rtol=1e-6)
    finally:
        src.close()
