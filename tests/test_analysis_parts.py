"""Building blocks of the analysis, each against a brute-force or hand-worked reference."""
import math

import numpy as np
import pytest

from powerrig.testing import synthetic as S
from powerrig.analysis import ArraySource, analyse
from powerrig.analysis import stats as ST
from powerrig.analysis import windows as W
from powerrig.analysis.checks import pcm1, pwr6
from powerrig.analysis.command_energy import command_energy
from powerrig.analysis.kernels import piece_max_of_sum, prefix_sum, window_block_max
from powerrig.analysis.descriptors import number, ocp_peak_limit, power_states, transition_latency_us
from powerrig.analysis.phases import Phase
from powerrig.analysis.result import PhaseResult, WindowFigure
from powerrig.analysis.steady_state import steady_state
from powerrig.analysis.thermal import smart_readings, throttled_between
from powerrig.analysis.waf import waf_samples, waf_series
from powerrig.analysis.windows import ChunkWindows, SlidingMax, WindowMax, WindowSums
from powerrig.core.timeline import NVME, Event


@pytest.mark.parametrize("chunk", [1, 7, 1000, 10**6])
def test_sliding_max_equals_brute_force_across_chunks_and_gaps(chunk):
    rng = np.random.default_rng(chunk)
    x = rng.normal(10, 2, 20_000)
    x[5000:5030] = np.nan
    x[12345:12345 + 25] += 40
    sm = SlidingMax([1, 25, 1000], position=100)
    for s in range(0, len(x), chunk):
        sm.feed(x[s:s + chunk])
    for r in sm.results:
        w = r.window
        means = np.array([x[k:k + w].mean() for k in range(len(x) - w + 1)])
        ok = ~np.isnan(means)
        assert r.value == pytest.approx(means[ok].max(), rel=1e-12)
        assert r.end == 100 + int(np.nanargmax(means)) + w
        assert r.windows == len(means) and r.skipped == int((~ok).sum())


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("chunk", [1, 7, 1000, 10**6])
def test_exact_window_sums_equal_brute_force_in_any_range_across_chunks_and_gaps(chunk, sign):
    """analyse() asks WindowSums(exact=True) for the best window in many ranges of every chunk. Below
    zero (a rail's small negative readings), a gap's windows, summed over its NaN set to 0, are the
    highest sums there: they must still never be chosen, nor raise a block's maximum."""
    rng = np.random.default_rng(chunk + 1)
    x = sign * rng.normal(10, 2, 20_000).astype(np.float32)
    x[5000:5030] = np.nan
    x[12345:12345 + 25] += 40
    ranges = [(100, 20_100), (100, 5_100), (4_000, 6_000), (5_100, 5_130), (12_000, 12_400), (19_900, 20_100)]
    ws = WindowSums([1, 25, 1000], position=100, exact=True)
    got = {(w, r): WindowMax(w) for w in ws.windows for r in ranges}
    for s in range(0, len(x), chunk):
        cws = ws.feed(x[s:s + chunk])
        for (w, (a, b)), res in got.items():
            cw = cws[ws.windows.index(w)]
            if cw is not None:
                res.update(cw.best(a, b))
    assert all(c is None for c in ws.flush())                  # every complete window was returned
    x64 = x.astype(np.float64)
    for (w, (a, b)), res in got.items():
        means = np.array([x64[k - 100:k - 100 + w].mean() for k in range(a, min(b, 20_100 - w + 1))])
        ok = ~np.isnan(means)
        assert res.windows == len(means) and res.skipped == int((~ok).sum()), (w, a, b)
        if not ok.any():                                          # no window there, or all in the gap
            assert res.end < 0 and math.isnan(res.value), (w, a, b)
            continue
        assert res.value == pytest.approx(means[ok].max(), rel=1e-12), (w, a, b)
        assert res.end == a + int(np.nanargmax(means)) + w, (w, a, b)


def test_exact_best_window_through_block_maxima_is_the_first_argmax_of_its_range():
    """ChunkWindows.best on exact sums given as an array: the same window as np.argmax over the range
    (the first of tied maxima, a gap's -inf never chosen unless all are, NaN taken as the greatest), at
    any range edges. Sums made from a prefix go through the block maxima (kernels.first_max_of_windows):
    the next test, and the gaps of test_exact_window_sums_equal_brute_force_in_any_range_across_chunks_and_gaps."""
    rng = np.random.default_rng(42)
    n = 40_000
    for case in range(4):
        sums = np.round(rng.normal(0, 1, n), 1)                 # many ties at the top
        sums[rng.random(n) < 0.2] = -np.inf
        if case == 1:
            sums[:] = -np.inf
            sums[[7_000, 31_000]] = 5.0                          # two equal maxima blocks apart
        if case == 2:
            sums[[9_999, 25_000]] = np.nan
        cw = ChunkWindows(10, 500, sums, None, 0.0, None, 0)
        for _ in range(300):
            k0 = int(rng.integers(0, n - 1))
            k1 = int(rng.integers(k0 + 1, n + 1))
            total, start, count, _ = cw.best(500 + k0, 500 + k1)
            k = k0 + int(np.argmax(sums[k0:k1]))
            assert (start, count) == (500 + k, k1 - k0)
            assert total == sums[k] or (math.isnan(total) and math.isnan(sums[k]))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")     # inf - inf: the NaN case itself
@pytest.mark.parametrize("case", ["ties", "one block", "nan", "inf"])
def test_every_phase_s_best_window_in_one_call_is_np_argmax_of_its_range(case):
    """ChunkWindows.best_many (kernels.first_max_of_windows) answers every range of a chunk's exact
    sums at once: the same (sum, start, windows) as best() range by range and as np.argmax over the
    sums (the first of tied maxima, NaN the greatest), for ranges inside one block, across many, empty
    or past the sums, at block edges."""
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(3, 1, 30_000), 1).astype(np.float32)    # coarse values: many tied sums
    if case == "one block":
        x[:] = 1.0
    if case == "nan":                                               # a NaN sum: inf - inf in the prefix
        x[12_345] = np.inf
        x[12_400] = -np.inf
    if case == "inf":
        x[20_000] = np.inf
    ws = WindowSums([25], position=100, exact=True)
    [cw] = ws.feed(x)
    sums = cw.sums[0:len(cw.sums)]
    edges = [0, 1, 1023, 1024, 1025, 4095, 4096, 4097, 12_300, 20_000, len(sums) - 1, len(sums)]
    k0 = np.array([int(v) for v in rng.integers(-50, len(sums), 400)] + edges * 2)
    k1 = np.array([int(a + v) for a, v in zip(k0[:400], rng.integers(-5, 12_000, 400))] +
                  [e + d for e in edges for d in (1, 4096)])
    got = cw.best_many(cw.start + k0, cw.start + k1)

    def same(g):                                                    # NaN spelled out: equal answers compare equal
        return g if g is None else tuple("nan" if v != v else v for v in g)
    assert [same(g) for g in got] == [same(cw.best(int(a), int(b))) for a, b in zip(cw.start + k0, cw.start + k1)]
    for a, b, g in zip(k0, k1, got):
        a, b = max(0, a), min(len(sums), b)
        if b <= a:
            assert g is None
            continue
        k = a + int(np.argmax(sums[a:b]))
        assert g[1:] == (cw.start + k, b - a, 0)
        assert g[0] == sums[k] or (math.isnan(g[0]) and math.isnan(sums[k]))


def test_exact_window_sums_read_from_the_prefix_equal_whole_array_passes():
    """WindowSums(exact=True) never writes a window length's sums out: its prefix (kernels.prefix_sum,
    np.cumsum's additions), the per-block maxima read straight from it (kernels.window_block_max) and
    the sums a phase reads (windows.PrefixSums, gaps at -inf) equal numpy's whole-array passes."""
    rng = np.random.default_rng(11)
    for n in (3 * W._BLOCK + 5, 2 * W._BLOCK, 1000):
        x = rng.normal(10, 2, n)
        c = prefix_sum(x, np.empty(n + 7))
        np.testing.assert_array_equal(c, np.concatenate([[0.0], np.cumsum(x)]))
        x32 = x.astype(np.float32)                      # a capture's samples: added as float64
        np.testing.assert_array_equal(prefix_sum(x32, np.empty(n + 1)),
                                      np.concatenate([[0.0], np.cumsum(x32, dtype=np.float64)]))
        for w, a in ((1, 0), (1000, 17), (100, W._BLOCK - 3)):
            e = n - w + 1
            if e <= a:
                continue
            want = c[a + w:e + w] - c[a:e]
            sums = W.PrefixSums(c, a, e, w, None)
            assert len(sums) == e - a and sums[-1] == want[-1] and sums[3] == want[3]
            np.testing.assert_array_equal(sums[:], want)
            np.testing.assert_array_equal(sums[5:e], want[5:])
            cw = ChunkWindows(w, a, want, None, 0.0, None, 0)
            np.testing.assert_array_equal(window_block_max(c, a, e, w, W._BLOCK), cw._block_max())
            bad = rng.random(e - a) < 0.1
            gappy = W.PrefixSums(c, a, e, w, bad)
            np.testing.assert_array_equal(gappy[:], np.where(bad, -np.inf, want))
            assert gappy[int(np.flatnonzero(bad)[0])] == -np.inf


def test_exact_windows_through_the_prefix_give_the_best_window_numpy_finds():
    """The best window of any range of starts, found through the block maxima and the sums made on
    demand, is numpy's argmax over all the sums (first on ties), with and without gaps."""
    rng = np.random.default_rng(12)
    x = np.round(rng.normal(10, 2, 20_000), 1)               # rounded: ties between windows
    x[7_000:7_050] = np.nan
    for w in (1, 100, 1000):
        ws = WindowSums([w], exact=True)
        (cw,) = ws.feed(x)
        v = np.where(np.isnan(x), 0.0, x)
        c = np.concatenate([[0.0], np.cumsum(v)])
        sums = c[w:] - c[:-w]
        gap = np.concatenate([[0], np.cumsum(np.isnan(x))])
        sums[(gap[w:] - gap[:-w]) > 0] = -np.inf
        for s0, s1 in ((0, len(sums)), (6_000, 8_000), (3, 4_500), (19_000 - w, 19_001 - w)):
            total, start, n, skipped = cw.best(s0, s1)
            k = s0 + int(np.argmax(sums[s0:s1]))
            assert (total, start, n) == (sums[k], k, s1 - s0)
            assert skipped == int(np.isinf(sums[s0:s1]).sum())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_piece_summaries_equal_two_pass_sums_at_any_level_and_spread(dtype):
    """Segments (one compiled pass, kernels.piece_summaries) takes each piece's squared deviations as
    sum(y^2) - sum(y)^2 / n over values shifted by one of the chunk's; a piece far from the shift with
    almost no spread falls back to two passes; a piece wholly lost has no extremes (NaN)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([np.full(1000, 2.0), 25 + rng.normal(0, 1e-3, 3000), np.full(500, 7.5),
                        10 + rng.normal(0, 2, 4000), 25 + rng.normal(0, 1e-5, 3000)]).astype(dtype)
    x[6000:6010] = np.nan
    bounds = np.array([0, 1, 1000, 2500, 4000, 4500, 6000, 6010, 8500, 11500], np.intp)
    seg = ST.Segments(x, bounds)
    assert seg.nanmask is not None and seg.min.dtype == dtype
    for i in range(len(bounds) - 1):
        v = x[bounds[i]:bounds[i + 1]].astype(np.float64)
        v = v[~np.isnan(v)]
        assert seg.n[i] == len(v) and seg.lost[i] == bounds[i + 1] - bounds[i] - len(v)
        if not len(v):
            assert seg.total[i] == 0.0 and np.isnan(seg.min[i]) and np.isnan(seg.max[i]) and seg.m2[i] == 0.0
            continue
        assert seg.total[i] == pytest.approx(v.sum(), rel=1e-14)
        assert (seg.min[i], seg.max[i]) == (v.min(), v.max())
        m2 = float(((v - v.mean()) ** 2).sum())
        if v.min() == v.max():
            assert seg.m2[i] == 0.0                       # a constant piece: exactly no spread
        else:
            assert seg.m2[i] == pytest.approx(m2, rel=1e-9), i
    whole = ST.Segments(x[:6000], bounds[:6])
    assert whole.nanmask is None and not whole.lost.any()     # a chunk with no gap pays for no mask


@pytest.mark.parametrize("rails", [1, 2, 3])
def test_summed_piece_maxima_are_the_float64_sums_maxima_ignoring_gaps(rails):
    """Each piece's maximum of the rails' float64 sum, added in order (a NaN interval is passed
    over; a piece of NaN only has none): what numpy's adds and fmax.reduceat give."""
    rng = np.random.default_rng(rails)
    cols = [rng.normal(5, 2, 5000).astype(np.float32) for _ in range(rails)]
    cols[0][100:300] = np.nan
    cols[-1][250:260] = np.nan
    bounds = np.array([0, 1, 100, 200, 300, 2999, 5000], np.intp)
    cols[0][4000] = cols[0][3000] = cols[0][3500] = 1e6         # a tie: the first one is where the peak lies
    want = cols[0].astype(np.float64)
    for c in cols[1:]:
        want = want + c
    piece_max, piece_at = piece_max_of_sum(cols, bounds)
    np.testing.assert_array_equal(piece_max, np.fmax.reduceat(want, bounds[:-1]))
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        if np.isnan(want[a:b]).all():
            assert np.isnan(piece_max[i]) and piece_at[i] == -1
        else:                                                   # where _take_peak places a peak: the first
            assert piece_at[i] == a + int(np.nanargmax(want[a:b])) == a + int(np.argmax(want[a:b] == piece_max[i]))
    assert piece_at[5] == 3000 or rails > 1            # one rail: three equal maxima, the first
    assert np.isnan(piece_max[2:4]).all() and not np.isnan(piece_max[[0, 1, 4, 5]]).any()


def test_series_stats_exact_and_histogram_percentiles(monkeypatch):
    rng = np.random.default_rng(3)
    x = rng.gamma(4.0, 2.0, 300_000)
    x[100:200] = np.nan
    monkeypatch.setattr(ST, "EXACT_LIMIT", 50_000)       # force the histogram path
    s = ST.SeriesStats(1e-3)
    for k in range(0, len(x), 40_000):
        s.feed(x[k:k + 40_000])
    v = x[~np.isnan(x)]
    assert s.n == len(v) and s.lost == 100
    assert s.mean == pytest.approx(v.mean(), rel=1e-12) and s.std == pytest.approx(v.std(), rel=1e-9)
    assert s.energy_j == pytest.approx(v.sum() * 1e-3, rel=1e-12)
    res = (v.max() - v.min()) * 1.5 * 2 / ST.BINS             # histogram resolution (padded range)
    for q, got in zip(ST.PERCENTILES, s.percentiles().values()):
        assert abs(got - np.percentile(v, q)) <= 2 * res


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binning_counts_values_inside_and_outside_the_edges_as_clipping_does(dtype):
    """The histogram's counts (kernels.bin_counts) are those of numpy computing each bin in the
    values' dtype and clipping every value to the first and last bin, inside the edges and beyond."""
    rng = np.random.default_rng(8)
    s = ST.SeriesStats(1e-3, value_range=(10.0, 20.0))
    s.keep([rng.uniform(10.0, 20.0, ST.EXACT_LIMIT + 1).astype(dtype)], False)    # to the histogram
    inside = rng.uniform(10.0, 20.0, 70_007).astype(dtype)
    beyond = rng.uniform(5.0, 25.0, 70_007).astype(dtype)
    for v in (inside, beyond, np.array([10.0, 20.0], dtype), np.array([9.999999, 20.000002], dtype)):
        f = (v - dtype(10.0)) * dtype(ST.BINS / 10.0)                 # in the values' dtype
        want = np.bincount(np.clip(f, 0, ST.BINS - 1).astype(np.intp), minlength=ST.BINS)
        before = s._hist.copy()
        s.keep([v], False)
        np.testing.assert_array_equal(s._hist - before, want)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 11, 101, 20_001])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_percentiles_by_selection_equal_numpy_bit_for_bit(n, dtype):
    """A phase's exact percentiles come from a partial selection, not a sort: the same numbers as
    np.percentile, also with ties (rounded values) and reversed input, and the kept values twice."""
    rng = np.random.default_rng(n)
    for v in (rng.normal(10, 2, n), np.round(rng.normal(10, 2, n), 1), np.sort(rng.normal(10, 2, n))[::-1]):
        v = v.astype(dtype)
        for qs in (ST.PERCENTILES, (0, 25, 50, 75, 100), (99.9, 0.1, 50)):
            assert ST.percentiles_of(v.copy(), qs).tolist() == np.percentile(v, qs).tolist()
        s = ST.SeriesStats(1e-3)
        s.feed(v[: n // 2])
        s.feed(v[n // 2:])
        want = np.percentile(v, ST.PERCENTILES).tolist()
        assert list(s.percentiles().values()) == want and list(s.percentiles().values()) == want


def test_the_order_of_the_selections_is_searched_once_per_set_of_percentiles_not_per_phase_length():
    """Phases of a real capture differ in length: the search for the order of the nested partitions
    (61 us) must not run for every length, yet every length still gives numpy's values."""
    rng = np.random.default_rng(3)
    ST._nested_order.cache_clear()
    for n in range(20_000, 20_040):
        v = rng.normal(10, 2, n).astype(np.float32)
        assert ST.percentiles_of(v.copy(), ST.PERCENTILES).tolist() == np.percentile(v, ST.PERCENTILES).tolist()
    assert ST._nested_order.cache_info().misses == 1
    for n in (1, 2, 3):         # percentiles sharing a rank: ordered from the ranks, still numpy's values
        v = rng.normal(10, 2, n)
        assert ST.percentiles_of(v.copy(), ST.PERCENTILES).tolist() == np.percentile(v, ST.PERCENTILES).tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_percentiles_through_integer_order_keys_equal_numpy_for_any_sign(dtype):
    """A phase selects its percentiles on integer keys made from the float bits (positive values:
    the bits themselves; else negatives' magnitude bits flipped): the same values as np.percentile
    with negatives, infinities, ties and values split over several runs."""
    rng = np.random.default_rng(7)
    for centre, spread in ((-5.0, 3.0), (0.0, 1.0), (1000.0, 1e-3), (10.0, 2.0)):
        v = rng.normal(centre, spread, 5001)
        v[::97] = np.round(v[::97], 1)
        v[[3, 400]] = [np.inf, -np.inf] if centre == 0.0 else v[[3, 400]]
        v = v.astype(dtype)
        s = ST.SeriesStats(1e-3)
        with np.errstate(invalid="ignore"):         # inf - inf in the moments of the infinite case
            for part in np.array_split(v, 3):
                s.feed(part)
        got = np.array(list(s.percentiles().values()))
        want = np.percentile(v, ST.PERCENTILES)
        assert got.tolist() == want.tolist()
        assert np.signbit(got).tolist() == np.signbit(want).tolist()


def test_an_error_in_the_side_thread_reaches_the_caller(monkeypatch):
    """Phase figures are finished on a second thread: a failure there must raise in analyse(), not vanish."""
    def broken(self, qs=ST.PERCENTILES):
        raise RuntimeError("percentiles broke")
    monkeypatch.setattr(ST.SeriesStats, "percentiles", broken)
    src = ArraySource.from_blocks(S.interval_blocks(30.0))
    with pytest.raises(RuntimeError, match="percentiles broke"):
        analyse(src)


def test_energy_is_compensated_over_ten_hours_of_intervals():
    s = ST.SeriesStats(1e-3)
    chunk = np.full(1_000_000, 7.3)
    for _ in range(36):
        s.feed(chunk)
    s.feed_edge(7.3, 0.25)
    assert s.energy_j == pytest.approx(7.3 * (36_000 + 0.25e-3), rel=1e-14)


def test_descriptors_accept_old_and_new_nvme_cli_spellings():
    new = S.id_ctrl()
    st = power_states(new)
    assert st[0].max_power_w == pytest.approx(25.0) and st[3].non_operational
    assert st[1].idle_power_w == pytest.approx(5.0) and st[3].active_power_w is None
    old = {"psds": [{"max_power": "2500", "flags": "0x1", "entry_lat": "5", "exit_lat": "7",
                     "idle_power": 0, "idle_scale": 0, "active_power": 0, "active_scale": 0, "active_work_scale": 0},
                    {"max_power": 900, "flags": 2, "entry_lat": 5000, "exit_lat": 9000}]}
    st = power_states(old)
    assert st[0].max_power_w == pytest.approx(0.25) and not st[0].non_operational   # MXPS=1: 0.0001 W
    assert st[1].non_operational and st[1].max_power_w == pytest.approx(9.0)
    assert transition_latency_us(st, 0, 1) == 7 + 5000
    assert number("3,200,631,791,616") == 3200631791616 and number("12.000000") == 12.0 and number(None) is None


@pytest.mark.parametrize("map_w, limit", [(10, 15), (25, 37.5), (27, 37.5), (29, 37.5), (40, 52)])
def test_pcm3_limits(map_w, limit):
    assert ocp_peak_limit(map_w) == pytest.approx(limit)


def _result(duration_s, value, lost_s=0.0, ps=0, kind="workload", invalid=None):
    ph = Phase("p", kind, 0, duration_s * 1000, ps)
    w = WindowFigure(value, 1.0, 2.0, 10, 0)
    tot = {"mean_w": value, "energy_j": value * duration_s, "intervals": 1}
    return PhaseResult(ph, 0.0, duration_s, duration_s, {"total": tot}, lost_s, w, w, w, True, value, invalid)


def test_check_verdicts_partial_fail_invalid():
    st = power_states(S.id_ctrl())
    assert pcm1(_result(1000, 20.0), st, 1e-3).status == "pass"
    assert pcm1(_result(60, 20.0), st, 1e-3).status == "partial"            # too short to pass
    assert pcm1(_result(60, 26.0), st, 1e-3).status == "fail"               # a max over the limit fails anyway
    assert pcm1(_result(1000, 20.0, lost_s=1.0), st, 1e-3).status == "partial"
    assert pcm1(_result(1000, 20.0), st, 5e-3).status == "partial"          # sampled too slowly
    assert pcm1(_result(1000, 20.0, invalid="throttled"), st, 1e-3).status == "invalid"
    assert pcm1(_result(1000, 20.0, ps=None), st, 1e-3).status == "info"    # no limit known
    assert pwr6(_result(30, 4.8, kind="idle_window")).status == "pass"
    assert pwr6(_result(30, 5.2, kind="idle_window")).status == "marginal"   # within 5 % of 5.25 W
    assert pwr6(_result(30, 5.3, kind="idle_window")).status == "fail"
    assert pwr6(_result(12, 4.0, kind="idle_window")).status == "partial"


def test_steady_state_snia_window():
    assert steady_state([100, 60, 80, 99, 100, 101, 100, 102])["first_round"] == 4
    drift = steady_state([100, 104, 108, 112, 116])          # 16 % range but 16 % slope excursion
    assert not drift["steady"] and drift["slope_excursion"] == pytest.approx(16 / 108)
    assert not steady_state([1, 2])["steady"]


def test_waf_series_cumulative_instant_clamped_and_reset():
    ev = [Event(NVME, "fdp stats", t, t + 0.01, result={"hbmw": h, "mbmw": m})
          for t, h, m in [(0, 0, 0), (60, 1000, 2300), (120, 1000, 2400), (180, 3000, 4400), (240, 10, 10), (300, 110, 115)]]
    ev.append(Event(NVME, "smart-log", 5, 6, result={"data_units_written": "1,000", "physical_media_units_written": {"hi": 0, "lo": 5}}))
    rows = waf_series(waf_samples(ev))
    assert [r["source"] for r in rows] == ["fdp"] * 4                        # FDP preferred; reset skipped
    assert rows[0]["waf_instant"] == pytest.approx(2.3) and rows[0]["waf_cumulative"] == pytest.approx(2.3)
    assert math.isinf(rows[1]["waf_instant"]) and rows[1]["waf_instant_clamped"] == 5.0
    assert rows[2]["waf_cumulative"] == pytest.approx(4400 / 3000)
    assert rows[3]["waf_instant"] == pytest.approx(1.05)                     # series restarted after the reset


def test_thermal_throttling_detected_from_counters():
    ev = [Event(NVME, "smart-log", 10, 10.1, result={"temperature": 330, "thm_temp1_trans_count": 0}),
          Event(NVME, "smart-log", 50, 50.1, result={"temperature": 355, "thm_temp1_trans_count": "2"})]
    r = smart_readings(ev)
    assert r[0][1]["temperature_c"] == pytest.approx(56.85)
    assert "thm_temp1_trans_count 0 -> 2" in throttled_between(r, 20, 40)
    assert throttled_between(r, 0, 5) is None


def test_throttled_phase_verdicts_are_invalid():
    tr = S.interval_trace([S.Segment("idle", 2, {"12V": 5}), S.Segment("w", 3, {"12V": 12}, kind="workload",
                           meta={"power_state": 0}), S.Segment("idle", 2, {"12V": 5})], rails=("12V",))
    model = S.clock(tr.first_index)
    tl = list(S.timeline(tr, model))
    u = float(model.utc(tr.first_index))
    tl += [Event(NVME, "smart-log", u + 1, u + 1.01, result={"thm_temp2_trans_count": 1}),
           Event(NVME, "smart-log", u + 6, u + 6.01, result={"thm_temp2_trans_count": 3})]
    an = analyse(ArraySource.from_blocks(tr.blocks, model), tl, {"drive": {"id_ctrl": S.id_ctrl()}})
    w = [c for c in an.checks if c.phase == "w"]
    assert w and all(c.status == "invalid" for c in w)


def test_command_energy_above_preceding_level_and_settle_time():
    dt = 1e-3
    p = np.full(3000, 5.0)
    p[500:520] = 15.0            # 20 ms burst of +10 W: 0.2 J above the level before
    p[520:] = 8.0                # then a new steady level
    c = command_energy(p, 0, 500.0, 505.0, dt, 500, latency_s=0.01)
    assert c.before_w == pytest.approx(5.0) and c.after_w == pytest.approx(8.0)
    assert c.settle_s == pytest.approx(0.020)
    assert c.energy_above_j == pytest.approx(0.2)


def test_flat_signal_refines_through_the_shared_prefix_and_stays_exact(monkeypatch):
    # an idle drive: near-ties everywhere, so the candidate windows span whole ranges and the chunk's
    # one shared float64 prefix is used; the best window must still be the float64 brute force's
    from powerrig.analysis import windows as W
    made = []
    real = W._SharedPrefix.get

    def spy(self, span):
        c = real(self, span)
        if c is not None:
            made.append(len(c))
        return c

    monkeypatch.setattr(W._SharedPrefix, "get", spy)
    rng = np.random.default_rng(11)
    x = (5.0 + rng.normal(0, 1e-4, 60_000)).astype(np.float32)
    sm = SlidingMax([1000, 10_000])
    for s in range(0, len(x), 16_384):
        sm.feed(x[s:s + 16_384])
    assert made, "the shared prefix was never used"
    x64 = x.astype(np.float64)
    c = np.concatenate([[0.0], np.cumsum(x64)])
    for r in sm.results:
        sums = c[r.window:] - c[:-r.window]
        assert r.end - r.window == int(np.argmax(sums))
        assert r.value == pytest.approx(sums.max() / r.window, rel=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")     # inf - inf: the NaN itself
def test_block_maxima_made_ahead_are_those_made_at_the_first_question():
    """ChunkWindows.ready (a reading thread with time to spare) makes the same block maxima the first
    question would, and the same best windows follow; with a gap the maxima keep its -inf."""
    rng = np.random.default_rng(11)
    x = rng.normal(-10, 2, 50_000).astype(np.float32)
    for gap in (False, True):
        if gap:
            x[20_000:20_050] = np.nan
        made = []
        for ahead in (True, False):
            cws = WindowSums([1000, 100], position=0, exact=True).feed(x)
            if ahead:
                for cw in cws:
                    cw.ready()
                    assert cw._bmax is not None
            made.append(([cw._block_max().tolist() for cw in cws], [cw.best(100, 40_000) for cw in cws]))
        assert made[0] == made[1]
        sums = WindowSums([1000], position=0, exact=True).feed(x)[0].sums
        whole = np.array([sums[k] for k in range(len(sums) // W._BLOCK * W._BLOCK)]).reshape(-1, W._BLOCK).max(axis=1)
        assert made[0][0][0] == whole.tolist()


def test_window_block_maxima_hold_a_nan_or_an_infinity_as_numpy_s_max_does():
    """kernels.window_block_max takes a block's sums through eight running maxima, which pass a NaN
    over; a block holding a NaN or an infinity is scanned again one sum at a time: the same maxima as
    np.max over each block, for blocks of finite sums, with one NaN, one +inf, or -inf throughout."""
    rng = np.random.default_rng(21)
    block = W._BLOCK
    c = np.concatenate([[0.0], np.cumsum(rng.normal(10, 2, 12 * block))])
    c[2 * block + 300] = np.nan                     # two NaN sums (one as the window's end, one as its start)
    c[6 * block: 7 * block] = -np.inf               # sums ending there: -inf; starting there: +inf
    c[9 * block + 5] = np.inf                       # the sum ending there: +inf (one starting there: -inf)
    for w, a in ((1, 0), (37, 3), (block, 0)):
        e = a + (len(c) - 1 - w + 1 - a) // block * block
        with np.errstate(invalid="ignore"):         # (inf - inf: the NaN sums wanted here)
            sums = c[a + w:e + w] - c[a:e]
        want = sums.reshape(-1, block).max(axis=1)
        np.testing.assert_array_equal(window_block_max(c, a, e, w, block), want)
        assert np.isnan(want).any() and np.isposinf(want).any() and np.isfinite(want).sum() >= 3
        if w == block:
            assert np.isneginf(want).any()          # a whole block of -inf sums


def test_events_are_placed_in_one_call_with_the_values_one_by_one_gives():
    from powerrig.analysis.pipeline import _placer
    src = ArraySource.from_blocks(S.interval_blocks(1.0), S.clock(0, utc0=1.7e9, drift_ppm=20.0))
    events = [Event(NVME, f"c{k}", 1.7e9 + 0.01 * k, 1.7e9 + 0.01 * k + 0.003) for k in range(20)]
    events.append(Event(NVME, "running", 1.7e9 + 0.5))          # no end yet
    calls = []

    def to_sid(t):
        calls.append(np.ndim(t))
        return src.sample_id(t)
    place = _placer(to_sid, events)
    assert calls == [1]                                          # every event's times in one array call
    for e in events:
        for t in (e.t_start, e.t_end):
            if t is not None:
                assert place(t) == src.sample_id(t) and isinstance(place(t), float)
    assert calls == [1]                                          # ... and each read back, not asked again
    assert place(1.7e9 + 0.1234) == src.sample_id(1.7e9 + 0.1234) and calls[-1] == 0   # other times: one by one
    with pytest.raises(ValueError):                              # no clock: raised, as before, for analyse to say
        _placer(ArraySource.from_blocks(S.interval_blocks(1.0)).sample_id, events)


def test_a_phase_s_instantaneous_maximum_skips_a_gap_that_covers_pieces_whole_or_in_part():
    """The phases' highest instantaneous total (the rails' p_max summed per interval) is numpy's nanmax
    over the phase's whole intervals, also where a gap spans a phase edge: one piece then has no value
    at all and the next one only in part."""
    model = S.clock(0, utc0=1.7e9, drift_ppm=20.0)
    src = ArraySource.from_blocks(S.interval_blocks(150.0, rows_per_block=30_000), model)
    for name in src.cols:
        src.cols[name] = np.array(src.cols[name], np.float64)
        src.cols[name][9_000:32_500] = np.nan    # the idle window's first pieces, and into the first workload
    total = src.cols["p_max_12V"] + src.cols["p_max_3V3"]
    an = analyse(src, list(S.alternating_timeline(150.0, model, period_s=60.0)), chunk=20_000)
    checked = 0
    for r in an.phases:
        lo, hi = math.ceil(r.phase.start), math.floor(r.phase.stop)
        part = total[lo:hi]
        if hi > lo and not np.isnan(part).all():
            assert r.inst_max_w == float(np.nanmax(part)), r.name
            checked += 1
    assert checked >= 5 and any(math.ceil(r.phase.start) < 30_000 <= math.floor(r.phase.stop) for r in an.phases)
