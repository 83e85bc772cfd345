"""The virtual interposer's cheaper sampling pass gives the same numbers as the plain formulas it
replaced (docs/scale.md, "A streaming rig's pass, fewer calls"): the front end's codes and true power
(rows written in place, a constant digital lane as one value), the sample instants (a float arange
scaled in place) and the 1 ms truth bins (summed along rail-major rows). The reducer's bytes are
tests/test_reducer_equivalence.py's."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.sim.bench.calbench import BenchFixture
from powerrig.sim.interposer import board as sim_board
from powerrig.sim.interposer.frontend import ACTIVITY_BIT, PERST_BIT, FrontEnd
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.model import JobLoad
from powerrig.sim.ssd.power import PoweredDrive

T0 = 1_790_000_000.0
PERIOD_S = 4e-6


def reference_sample(fe: FrontEnd, t: np.ndarray):
    """FrontEnd.sample as it was written before (true_rails, a copy per row, four arrays for the lane)."""
    n = len(t)
    rails = fe.cfg.rails
    raw = np.empty((n, fe.stride), dtype=np.int16)
    now = fe.true_rails(t)
    x = np.empty((2 * len(rails), n))
    for k, r in enumerate(rails):
        x[2 * k], x[2 * k + 1] = now[r.name]
    p = x[0::2] * x[1::2]
    x *= fe._code_scale()
    x += fe._offset_col
    x += fe._noise(n)
    np.rint(x, out=x)
    np.minimum(x, 32767, out=x)
    np.maximum(x, -32768, out=x)
    raw[:, :-1] = x.T
    raw[:, -1] = np.where(fe.load.perst_asserted(t), 0, PERST_BIT).astype(np.int16) + \
        fe.load.activity(t).astype(np.int16) * ACTIVITY_BIT
    return raw, p


def _rig(seed: int):
    now = [T0]
    drive = VirtualSSD("d5-p5336", clock=lambda: now[0], seed=seed)
    powered = PoweredDrive(BenchFixture(drive))
    return now, drive, powered, FrontEnd(powered, seed=seed)


@pytest.mark.parametrize("seed", [1, 2])
def test_sample_is_the_plain_formula_through_io_perst_and_a_cut(seed):
    """Twin rigs (same seeds, same clock) over passes of random length: one sampled by FrontEnd.sample,
    one by the reference; through a write workload (the activity lane lit), PERST# asserted mid-pass
    and a 12 V cut and restore (forced volts, inrush)."""
    a, b = _rig(seed), _rig(seed)
    rng = np.random.default_rng(seed)
    first, lanes = 0, set()
    for k in range(160):
        n = int(rng.integers(1, 3000))
        t = T0 + (first + np.arange(n)) * PERIOD_S
        edge = float(t[n // 2])
        for now, drive, powered, _fe in (a, b):
            now[0] = float(t[-1])
            if k == 20:
                drive.start_io([JobLoad("w", rw="randwrite", bs=4096, iodepth=32)], 0.05, t=edge)
            if k in (60, 70):
                powered.set_output("PERST", 1 if k == 60 else 0, edge)
            if k in (100, 110):
                powered.set_output("12V", 0 if k == 100 else 1, edge)
        raw, truth = a[3].sample(t)
        want_raw, want_p = reference_sample(b[3], t)
        assert raw.tobytes() == want_raw.tobytes(), f"pass {k}"
        got_p = np.stack([truth[r.name] for r in a[3].cfg.rails])
        assert got_p.tobytes() == want_p.tobytes(), f"pass {k}"
        lanes.update(np.unique(raw[:, -1]).tolist())
        first += n
    # PERST# asserted (bit 1 clear) and the LED lit (bit 0 set) were both sampled, and the plain lane
    assert {PERST_BIT, PERST_BIT + ACTIVITY_BIT} <= lanes and min(lanes) < PERST_BIT


def test_block_instants_and_truth_bins_are_the_plain_formulas():
    """_utc_of_block is utc_of_index(first + arange(n)) to the bit; _keep_truth's rail-major sums are
    the sample-major reduceat's."""
    board = object.__new__(sim_board.SimBoard)
    board.period_us, board.boot_us, board.scale, board.utc0 = 4.0, 10_800e6, 1 + 35e-6, T0
    board.frontend = FrontEnd(PoweredDrive(BenchFixture(VirtualSSD("d5-p5336"))), seed=1)
    board.truth_bins = {}
    rng = np.random.default_rng(5)
    want: dict[int, np.ndarray] = {}
    first = int(board.boot_us // board.period_us) + 17
    for _ in range(40):
        n = int(rng.integers(1, 2000))
        idx = first + np.arange(n, dtype=np.int64)
        assert board._utc_of_block(first, n).tobytes() == board.utc_of_index(idx).tobytes()
        truth = {r.name: rng.random(n) * 10 for r in board.frontend.cfg.rails}
        board._keep_truth(first, truth)
        p = np.stack([truth[r.name] for r in board.frontend.cfg.rails], axis=1)
        starts = np.arange(-(first % sim_board.TRUTH_BIN), n, sim_board.TRUTH_BIN)
        starts[0] = 0
        for k, s in enumerate(np.add.reduceat(p, starts, axis=0)):
            bi = first // sim_board.TRUTH_BIN + k
            want[bi] = s if bi not in want else want[bi] + s
        first += n
    assert sorted(board.truth_bins) == sorted(want)
    for bi, s in want.items():
        assert board.truth_bins[bi].tobytes() == s.tobytes()
