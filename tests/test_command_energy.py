"""Power-state transitions timed from the rails (analysis/transitions.py) and energy per I/O class
(analysis/io_energy.py), against what the virtual SSD's model did (a clock of the test's own: no
waiting) and against synthetic rails of a known energy per I/O."""
from __future__ import annotations

import json
import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from powerrig.analysis.descriptors import transition_limit_s
from powerrig.analysis.io_energy import classes, io_energy, size_label
from powerrig.analysis.transitions import time_transition
from powerrig.sim.ssd.model import JobLoad
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sweep import measure

DT = 1e-4


class _Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def _rails(ssd, t0, t1, dt=DT, noise_w=0.05, seed=1):
    """Interval means of the model's power (its 4 us instants, as the interposer averages them: the
    drive's program pulses alias in a few points per interval) plus measurement noise."""
    n = int(round((t1 - t0) / dt))
    k = max(1, int(round(dt / 4e-6)))
    sub = (np.arange(k) + 0.5) / k * dt
    t = (t0 + np.arange(n)[:, None] * dt + sub[None, :]).ravel()
    p = ssd.power_at(t).reshape(n, k).mean(axis=1)
    return p + np.random.default_rng(seed).normal(0, noise_w, n)


@pytest.mark.parametrize("old,new,dt", [(0, 2, 1e-4), (2, 0, 1e-4), (1, 2, 1e-3), (0, 1, 1e-3)])
def test_transition_latency_from_the_submission_matches_the_models_switch(old, new, dt):
    clk = _Clock(1000.0)
    ssd = VirtualSSD("d5-p5336", clock=clk)
    ssd.set_power_state(old, t=1000.0)
    ssd.start_io([JobLoad("w", "write", 131072, 32)], 60.0, t=1000.2)
    t_sub = 1001.0 + 0.37 * dt                        # anywhere inside an interval
    clk.t = t_sub
    eff = ssd.set_power_state(new, t=t_sub)
    clk.t = 1002.0
    p = _rails(ssd, 1000.0, 1002.0, dt)
    st = ssd.profile.state
    limit = (st(old).exlat_us + st(new).enlat_us) * 1e-6
    tr = time_transition(p, 0, (t_sub - 1000.0) / dt, dt, limit, old, new)
    assert tr.note is None
    # the drive switched at eff (half of EXLAT + ENLAT after it took the command): found within 1 ms
    assert tr.latency_s == pytest.approx(eff - t_sub, abs=0.0005 if dt < 1e-3 else 0.001)
    assert tr.latency_s <= tr.settle_s <= limit and tr.verdict == "pass"
    assert abs(tr.after_w - tr.before_w) > 2.0
    # a tighter limit than the drive needs fails, with the measured settle beside it
    tight = time_transition(p, 0, (t_sub - 1000.0) / dt, dt, 0.5 * limit, old, new)
    assert tight.verdict == "fail" and tight.settle_s > 0.5 * limit


def _ps0_to_ps2_rails() -> np.ndarray:
    """The virtual SSD's rails over 2 s, moved from PS0 to PS2 (one idle level) at 1 s."""
    clk = _Clock(1000.0)
    ssd = VirtualSSD("d5-p5336", clock=clk)
    clk.t = 1001.0
    ssd.set_power_state(2, t=1001.0)
    clk.t = 1002.0
    p = _rails(ssd, 1000.0, 1002.0)
    return p


def test_transition_between_states_of_one_idle_level_has_no_latency_and_says_why():
    p = _ps0_to_ps2_rails()
    tr = time_transition(p, 0, 1.0 / DT, DT, 0.12, 0, 2)
    assert math.isnan(tr.latency_s) and "did not change" in tr.note and tr.verdict != "fail"
    # a verdict is given only on what the note says was timed: the transient's end (the report had shown
    # "pass, settle 61 ms" beside "no step to time"); with nothing moving, no settle and no verdict
    if math.isnan(tr.settle_s):
        assert tr.verdict == "n/a" and "nothing moved" in tr.note
    else:
        assert tr.verdict in ("pass", "marginal") and "the settle is where the set-feature's transient ended" in tr.note
    flat = np.full(20_000, 5.0)
    still = time_transition(flat, 0, 10_000, DT, 0.12, 0, 2)
    assert math.isnan(still.settle_s) and still.verdict == "n/a" and "nothing moved: no step to time" in still.note
    bump = flat.copy()
    bump[10_000:10_300] += 2.0                  # 30 ms of transient, back to the same level
    moved = time_transition(bump, 0, 10_000, DT, 0.12, 0, 2)
    assert moved.settle_s == pytest.approx(0.030, abs=0.002) and moved.verdict == "pass"
    assert "no step to time a latency; the settle is where the set-feature's transient ended" in moved.note


def test_a_gap_over_either_side_of_a_transition_is_said_not_averaged_into_nan():
    """A capture gap (lost samples are NaN) over the whole window before the command, or over the
    level after it: the change is stored n/a with why, no NaN level and no numpy warning."""
    p = _ps0_to_ps2_rails()
    sub = 1.0 / DT
    for lost, side in ((slice(0, int(sub)), "before"), (slice(int(sub) + 100, len(p)), "after")):
        q = p.copy()
        q[lost] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tr = time_transition(q, 0, sub, DT, 0.12, 0, 2)
        assert tr.verdict == "n/a" and math.isnan(tr.settle_s) and f"no samples {side}" in tr.note
    # one lost sample before it is not a gap over the window: timed as before
    q = p.copy()
    q[int(sub) - 50] = np.nan
    assert "did not change" in time_transition(q, 0, sub, DT, 0.12, 0, 2).note


def test_a_latency_the_drive_does_not_report_is_no_limit_with_why():
    """ENLAT / EXLAT of 0 is "not reported" (libnvme struct nvme_id_psd, NVMe base spec's Power State
    Descriptor): a sum with such a term bounds nothing. A change is still timed and stored, n/a with why."""
    assert transition_limit_s({0: 60000}, 60000, 1) == (pytest.approx(0.12), "")
    assert transition_limit_s({0: 0, 3: 1200, 4: 9000}, 60000, 1)[0] is None         # the state left unknown
    for exlat, enlat, unreported in (({0: 0}, 210, "does not report EXLAT of PS0 ("),
                                     ({0: 1200}, 0, "does not report ENLAT of PS1 ("),
                                     ({0: 0}, 0, "reports neither EXLAT of PS0 nor ENLAT of PS1 ("),
                                     ({0: 0, 1: 0, 3: 1200}, 5,
                                      "does not report EXLAT of PS0, PS1 (the state left is unknown) (")):
        limit, why = transition_limit_s(exlat, enlat, 1)
        assert limit is None and f"the drive {unreported}" in why and "struct nvme_id_psd" in why
        assert "\n" not in why
    # the virtual client drive, PS1 -> PS3 (EXLAT(1) 0, ENLAT(3) 210 us): timed the same; 0 read as 0 us failed it
    clk = _Clock(1000.0)
    ssd = VirtualSSD("client-apst", clock=clk)
    ssd.set_apst(False)                     # the commanded change alone
    ssd.set_power_state(1, t=1000.0)
    clk.t = 1001.0
    ssd.set_power_state(3, t=1001.0)
    clk.t = 1002.0
    p = _rails(ssd, 1000.0, 1002.0, noise_w=0.005)
    st = ssd.profile.state
    limit, why = transition_limit_s({1: st(1).exlat_us}, st(3).enlat_us, 3)
    assert limit is None and "EXLAT of PS1 (" in why
    tr = time_transition(p, 0, 1.0 / DT, DT, math.nan, 1, 3, no_limit=why)
    as_zero = time_transition(p, 0, 1.0 / DT, DT, (0 + st(3).enlat_us) * 1e-6, 1, 3)
    assert tr.settle_s == as_zero.settle_s > st(3).enlat_us * 1e-6 and as_zero.verdict == "fail"
    assert tr.verdict == "n/a" and tr.note == why
    # the host's view (sweep/measure.py): stored n/a with the why; no limit and no why (no id-ctrl): nothing
    sf = SimpleNamespace(name="set-feature power", settle_s=0.004, duration_s=0.001, start_s=1.0, before_w=1.1,
                         after_w=0.07)
    an = SimpleNamespace(commands=[sf], info={"interval_s": DT})
    assert measure.transition(an, None, 1, 3) == []
    settle, after = measure.transition(an, None, 1, 3, no_limit=why)
    assert settle["value"] == 0.004 and after["value"] == pytest.approx(0.003)
    assert after["outcome"] == "n/a" and after["upper"] is None and after["requirement_met"] is None
    assert json.loads(after["notes"])["why"] == why
    both = json.loads(measure.transition(an, None, 1, 3, apst_from_s=1.002, no_limit=why)[1]["notes"])["why"]
    assert "an APST move began 0.0020 s after" in both and both.endswith(why)
    judged = measure.transition(an, 0.12, 1, 3, no_limit="")[1]
    assert judged["outcome"] == "pass" and judged["upper"] == 0.12 and judged["requirement_met"]


def _synthetic(rate_fn, e_j, base_w, seconds, dt=1e-3, seed=2, kind_write=False, nbytes=4096):
    """Rails of a known energy per I/O: base + the energy of each I/O in the interval it lies in."""
    rng = np.random.default_rng(seed)
    n = int(seconds / dt)
    t = np.arange(n) * dt
    counts = rng.poisson(rate_fn(t) * dt)
    mids = np.concatenate([t[k] + rng.uniform(0, dt, c) for k, c in enumerate(counts) if c])
    p = base_w + counts * e_j / dt + rng.normal(0, 0.02, n)
    io = {"submit": mids - 5e-5, "complete": mids + 5e-5, "bytes": np.full(len(mids), float(nbytes)),
          "write": np.full(len(mids), kind_write), "slba": rng.integers(0, 1 << 30, len(mids)).astype(float),
          "blocks": np.full(len(mids), nbytes / 512)}
    return p, io


def test_io_energy_recovers_a_known_energy_per_io_with_its_interval():
    e_true, base = 80e-6, 5.5
    # idle for 1 s, then I/O at a rate that wanders (as a real workload's does)
    p, io = _synthetic(lambda t: np.where(t < 1.0, 0.0, 20000 + 8000 * np.sin(t * 7)), e_true, base, 4.0)
    [got] = io_energy(p, 0.0, 1e-3, io, [(1.0, 4.0)], (0.0, 1.0))
    assert got.io_class == "read 4 KiB rand" and got.count > 50000
    assert got.ci_low_j < e_true < got.ci_high_j
    assert got.energy_j == pytest.approx(e_true, rel=0.01) and got.baseline_w == pytest.approx(base, abs=0.01)
    assert got.ci_high_j - got.ci_low_j < 0.02 * e_true


def test_io_energy_separates_two_classes_and_refuses_ones_it_cannot_tell_apart():
    rng = np.random.default_rng(5)
    p1, io1 = _synthetic(lambda t: 15000 + 10000 * np.sin(t * 5), 60e-6, 5.0, 3.0, seed=3)
    p2, io2 = _synthetic(lambda t: 2000 + 1500 * np.cos(t * 3), 900e-6, 0.0, 3.0, seed=4, kind_write=True,
                         nbytes=131072)
    p = p1 + p2
    io = {k: np.concatenate([io1[k], io2[k]]) for k in io1}
    got = {g.io_class: g for g in io_energy(p, 0.0, 1e-3, io, [(0.0, 3.0)], None)}
    assert set(got) == {"read 4 KiB rand", "write 128 KiB rand"}
    assert got["read 4 KiB rand"].energy_j == pytest.approx(60e-6, rel=0.03)
    assert got["write 128 KiB rand"].energy_j == pytest.approx(900e-6, rel=0.03)
    # the same I/Os labelled as two classes that always come together: not separable, said so
    twin = {k: np.concatenate([io1[k], io1[k]]) for k in io1}
    twin["write"] = np.concatenate([np.zeros(len(io1["write"]), bool), np.ones(len(io1["write"]), bool)])
    out = io_energy(p1, 0.0, 1e-3, twin, [(0.0, 3.0)], None)
    assert len(out) == 2 and all(math.isnan(g.energy_j) and "cannot be told apart" in g.note for g in out)
    del rng


def test_io_classes_by_kind_size_and_pattern():
    assert [size_label(b) for b in (512, 4096, 6000, 131072, 1 << 20, 4 << 20)] == \
        ["4 KiB", "4 KiB", "8 KiB", "128 KiB", "1 MiB", "1 MiB"]
    n = 6
    io = {"submit": np.arange(n, dtype=float), "complete": np.arange(n) + 0.5, "bytes": np.full(n, 131072.0),
          "write": np.zeros(n, bool), "slba": np.arange(n) * 256.0, "blocks": np.full(n, 256.0)}
    assert set(classes(io)) == {"read 128 KiB seq"}
    io["slba"] = np.array([0, 9000, 512, 77777, 3, 1e6])
    assert set(classes(io)) == {"read 128 KiB rand"}


def test_transition_timing_is_not_moved_by_a_gap_in_the_rails():
    clk = _Clock(1000.0)
    ssd = VirtualSSD("d5-p5336", clock=clk)
    ssd.start_io([JobLoad("w", "write", 131072, 32)], 60.0, t=1000.2)
    clk.t = 1001.0
    eff = ssd.set_power_state(2, t=1001.0)
    clk.t = 1002.0
    p = _rails(ssd, 1000.0, 1002.0)
    p[int(1.2 / DT):int(1.25 / DT)] = np.nan          # 50 ms lost in a gap after the switch
    tr = time_transition(p, 0, 1.0 / DT, DT, 0.12, 0, 2)
    assert tr.latency_s == pytest.approx(eff - 1001.0, abs=0.0005) and tr.settle_s < 0.07 and tr.verdict == "pass"
