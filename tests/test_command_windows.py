"""Per-command energy never counts a neighbour (analysis/command_energy.py, pipeline._commands): a command's
window ends where the next event that changes the load begins (a workload starting or stopping,
another command) and says so; its level before starts after the last one; an energy below zero is
either inside the level's noise (then 0) or carries why. The case of issue 40: an id-ctrl read just
before fio starts and a smart-log just after it stops."""
from __future__ import annotations

import math

import numpy as np
import pytest

from powerrig.analysis import ArraySource, analyse
from powerrig.analysis.command_energy import command_energy
from powerrig.core.timeline import FIO, NVME, PHASE, Event
from powerrig.testing import synthetic as S


def test_a_window_ends_at_the_next_load_edge_and_says_so():
    dt = 1e-3
    p = np.full(4000, 5.0)
    p[1300:1800] = np.linspace(5.0, 21.0, 500)   # a workload starts 300 ms after the command, ramping up
    p[1800:] = 21.0
    whole = command_energy(p, 0, 1000.0, 1010.0, dt, 500)
    assert whole.energy_above_j > 3.0     # the old rule: the workload's ramp counted as the read's energy
    cut = command_energy(p, 0, 1000.0, 1010.0, dt, 500, end_at=1300.0, cut_by="fio starting")
    assert cut.energy_above_j == pytest.approx(0.0, abs=1e-9) and cut.cut_short == "cut at 300.0 ms by fio starting"


def test_the_level_before_starts_after_the_last_edge_and_a_negative_says_why():
    dt = 1e-3
    p = np.full(4000, 5.0)
    p[:800] = 21.0                        # the workload stopped 200 ms before the command
    p[1000:1050] = 7.0
    old = command_energy(p, 0, 1000.0, 1010.0, dt, 500)
    assert old.energy_above_j < -0.3      # the level before held the workload: minus joules for a log read
    new = command_energy(p, 0, 1000.0, 1010.0, dt, 500, pre_from=800.0, before_by="fio stopping")
    assert new.before_w == pytest.approx(5.0) and new.energy_above_j == pytest.approx(0.1, rel=1e-6)
    p2 = np.full(4000, 8.0)
    p2[1000:] = 5.0                       # a set-feature to a lower state
    down = command_energy(p2, 0, 1000.0, 1010.0, dt, 500, kind="power_state")
    assert down.energy_above_j < 0 and "new state draws less" in down.note
    noisy = command_energy(np.full(4000, 5.0) + np.random.default_rng(1).normal(0, 0.002, 4000), 0, 1000.0, 1010.0,
                           dt, 500)
    assert noisy.energy_above_j >= 0 and (noisy.note is None or "noise" in noisy.note)


def test_a_command_just_after_a_load_change_has_no_level_before_and_says_so():
    """The tail of a workload decays for tens of ms: a level taken over the 3 ms between fio stopping and
    a smart-log (seen in make test) made the read -0.4 mJ; it has no level of its own then, said so."""
    dt = 1e-3
    p = np.full(4000, 5.498)
    p[:1000] = 21.0                               # fio stops at 1000 ...
    p[1000:1040] = 5.498 + 0.01 * np.exp(-np.arange(40) / 10.0)    # ... its tail decays for ~40 ms
    soon = command_energy(p, 0, 1003.0, 1064.0, dt, 500, pre_from=1000.0, before_by="fio")
    assert math.isnan(soon.energy_above_j) and math.isnan(soon.before_w)
    assert soon.note == "no steady level before: fio ended 3.0 ms before the command (a level needs 50 ms)"
    later = command_energy(p, 0, 1200.0, 1261.0, dt, 500, pre_from=1000.0, before_by="fio")
    assert later.before_w == pytest.approx(5.498, abs=1e-3) and not math.isnan(later.energy_above_j)
    at_50 = command_energy(p, 0, 1050.0, 1111.0, dt, 500, pre_from=1000.0, before_by="fio")
    assert not math.isnan(at_50.before_w) and "no steady level" not in (at_50.note or "")     # 50 ms is a level


def test_no_command_of_a_workload_step_counts_the_workload():
    """A synthetic step: idle, an id-ctrl 100 ms before fio starts, a smart-log 100 ms after it stops:
    neither gets the workload's joules, and no energy is negative without a reason."""
    tr = S.interval_trace([S.Segment("idle", 3, {"12V": 5.5}), S.Segment("w", 4, {"12V": 21.0}, kind="workload",
                                                                          meta={"power_state": 0}),
                           S.Segment("idle", 3, {"12V": 5.5})], rails=("12V",))
    model = S.clock(tr.first_index)
    u0 = float(model.utc(tr.first_index))
    ev = [Event(FIO, "fio", u0 + 3.0, u0 + 7.0, ok=True),
          Event(PHASE, "measure:w", u0 + 3.0, u0 + 7.0, ok=True, meta={"rw": "write", "bs": 131072, "iodepth": 128}),
          Event(NVME, "id-ctrl", u0 + 2.9, u0 + 2.95, ok=True), Event(NVME, "smart-log", u0 + 7.1, u0 + 7.15, ok=True)]
    an = analyse(ArraySource.from_blocks(tr.blocks, model), ev, {})
    got = {c.name: c for c in an.commands}
    assert set(got) == {"id-ctrl", "smart-log"}
    assert abs(got["id-ctrl"].energy_above_j) < 0.05 and "fio" in got["id-ctrl"].cut_short
    assert abs(got["smart-log"].energy_above_j) < 0.05 and got["smart-log"].before_w == pytest.approx(5.5, abs=0.01)
    for c in an.commands:
        assert math.isnan(c.energy_above_j) or c.energy_above_j >= 0 or c.note, c
