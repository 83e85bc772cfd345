"""The virtual SSD's power at 4 us (sim/ssd/waveform.py): program bursts under writes, GC episodes under
sustained random writes, an overshoot at a power-state change, smaller read pulses; the model's means
unchanged; the same numbers for the same seed, however the instants are asked for."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.sim.ssd.drive import SsdError, VirtualSSD
from powerrig.sim.ssd.model import JobLoad
from powerrig.sim.ssd.profile import load

RATE = 250_000                    # the interposer's samples per second per rail
SEQ_WRITE = [JobLoad("w", "write", 131072, 128)]
RAND_WRITE = [JobLoad("w", "randwrite", 4096, 128)]
SEQ_READ = [JobLoad("r", "read", 131072, 128)]


class Clock:
    def __init__(self, t=1_700_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


def running(jobs, seconds=2.0, seed=1, ps=0):
    """(instants, watts) of ``seconds`` at 4 us, 1 s after ``jobs`` began, and the drive."""
    clk = Clock()
    ssd = VirtualSSD("d5-p5336", clock=clk, seed=seed)
    if ps:
        ssd.set_power_state(ps, t=clk.t)
        clk.t += 1.0
    if jobs:
        ssd.start_io(jobs, 3600.0)
    clk.t += 1.0
    t = clk.t + np.arange(int(seconds * RATE)) / RATE
    clk.t = float(t[-1])
    return t, ssd.power_at(t), ssd


def window_means(p, n):
    return p[:len(p) // n * n].reshape(-1, n).mean(axis=1)


def peak_100us(p):
    c = np.cumsum(np.r_[0.0, p])
    return float(((c[25:] - c[:-25]) / 25).max())


def test_seq_write_bursts_put_the_100_us_peak_over_1_3x_its_mean_with_the_mean_unchanged():
    _, p, ssd = running(SEQ_WRITE)
    level = ssd.operating_point().watts                       # the model's phase mean (published D5-P5336)
    for second in window_means(p, RATE):
        assert second == pytest.approx(level, rel=0.01)
    assert peak_100us(p) >= 1.3 * p.mean()
    assert peak_100us(p) <= 1.5 * ssd.profile.state(0).mp_w    # and within OCP PCM-3 (1.5 x MAP)
    assert p.max() > peak_100us(p) + 2.0                      # the 4 us samples see more than 100 us windows
    ms = window_means(p, 250)
    assert ms.std() < 0.03 * p.mean()                         # ... and a 1 ms meter almost nothing
    assert p.std() > 0.15 * p.mean()


def test_a_power_state_change_overshoots_both_levels_for_less_than_a_millisecond():
    clk = Clock()
    ssd = VirtualSSD("d5-p5336", clock=clk)
    clk.t += 1.0
    ssd.start_io([JobLoad("r", "read", 131072, 1, rate_bps=50e6)], 3600.0)   # light I/O: small read pulses
    clk.t += 1.0
    t_set = clk.t
    t_switch = ssd.set_power_state(1)
    t = np.arange(t_set - 0.02, t_switch + 0.05, 4e-6)
    clk.t = float(t[-1])
    p = ssd.power_at(t)
    before, after = p[t < t_set].mean(), p[t > t_switch + 0.02].mean()
    noise = max(p[t < t_set].max(), p[t > t_switch + 0.02].max())          # the pulses' own tops, both sides
    over = np.flatnonzero(p > noise + 0.5)
    assert len(over) and t[over[0]] >= t_switch - 4e-6           # an overshoot, at the switch, over both levels
    assert p.max() > max(before, after) + 1.0
    assert t[over[-1]] - t[over[0]] < 1e-3                       # gone within a millisecond
    assert 20e-6 <= t[over[-1]] - t[over[0]]                     # ... after tens of us (ringing on a decay)


def test_gc_episodes_raise_the_power_of_sustained_random_writes_and_not_of_sequential_ones():
    _, p, ssd = running(RAND_WRITE, seconds=4.0)
    op = ssd.operating_point()
    assert op.waf > 2.0                                          # the FTL says this workload copies data back
    assert p.mean() == pytest.approx(op.watts, rel=0.01)
    tens = window_means(p, 2500)                                 # 10 ms means
    raised = tens > 1.1 * p.mean()
    assert 0.05 < raised.mean() < 0.8                            # episodes, not a new level
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, raised.astype(int), 0])))[::2]
    assert runs.max() >= 4                                       # lasting tens of ms
    _, q, _ = running(SEQ_WRITE, seconds=4.0)                    # WAF 1: nothing to collect
    assert np.all(np.abs(window_means(q, 2500) / q.mean() - 1.0) < 0.02)


def test_reads_pulse_smaller_and_shorter_than_writes():
    _, r, _ = running(SEQ_READ)
    _, w, _ = running(SEQ_WRITE)
    assert r.max() > 1.1 * r.mean()                               # read pulses show at 4 us ...
    assert peak_100us(r) < 1.15 * r.mean()                        # ... a 100 us window averages most away
    assert r.max() / r.mean() < w.max() / w.mean() and peak_100us(r) / r.mean() < peak_100us(w) / w.mean()


def test_same_seed_same_waveform_in_any_passes_and_another_seed_differs():
    t, p, ssd = running(SEQ_WRITE, seconds=0.2)
    _, again, _ = running(SEQ_WRITE, seconds=0.2)
    assert np.array_equal(p, again)
    parts = np.concatenate([ssd.power_at(x) for x in np.array_split(t, 37)])      # other pass boundaries
    assert np.allclose(parts, p, rtol=0, atol=1e-9)
    sparse = ssd.power_at(t[::997])                              # the drive's own meter asks for sparse instants
    assert np.allclose(sparse, p[::997], rtol=0, atol=1e-9)
    _, other, _ = running(SEQ_WRITE, seconds=0.2, seed=2)
    assert not np.allclose(other, p) and other.mean() == pytest.approx(p.mean(), rel=0.01)


def test_the_drives_own_meter_reads_the_mean_not_the_pulses():
    t, p, ssd = running(SEQ_WRITE, seconds=0.5)
    metered = ssd._power_metered(t)
    assert np.ptp(metered) < 0.01 * p.mean() and metered.mean() == pytest.approx(p.mean(), rel=0.01)


def test_a_waveform_the_frame_cannot_hold_is_one_clear_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('format = 1\nextends = "d5-p5336"\nname = "bad"\n'
                   '[power.waveform]\nprogram_width_us = [100.0, 200.0]\nprogram_height = [1.5, 1.6]\n')
    with pytest.raises(SsdError, match="lower the height or the width"):
        VirtualSSD(load(bad))
    (tmp_path / "typo.toml").write_text('format = 1\nextends = "d5-p5336"\nname = "typo"\n'
                                        '[power.waveform]\nprogram_hieght = [1.5, 1.6]\n')
    with pytest.raises(SsdError, match="unknown keys \\['program_hieght'\\]"):
        VirtualSSD(load(tmp_path / "typo.toml"))
