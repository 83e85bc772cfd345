"""The FTL makes write amplification emerge; the Micron FDP table comes out of it within 15 %."""
from __future__ import annotations

import numpy as np
import pytest

from powerrig.sim.ssd.ftl import Ftl, WriteStream, run_streams
from powerrig.sim.ssd.model import JobLoad, operating_point
from powerrig.sim.ssd.profile import load

# Micron, FMS 2025 (REFERENCE.md): (WAF, MiB/s, W, MiB/s per W)
MICRON = {
    ("distinct", False, 0): (2.3, 2000, 13.09, 155),
    ("distinct", True, 0): (1.05, 5000, 12.36, 408),
    ("uniform", False, 0): (2.0, 2000, 12.95, 157),
    ("uniform", True, 0): (1.05, 5000, 12.28, 409),
    ("uniform", True, 1): (1.05, 1937, 6.47, 1937 / 6.47),   # FDP in the 10 W state
}
BLOCK_KIB = {"distinct": [4, 8, 16, 32, 64, 128, 4, 128], "uniform": [128] * 8}


def micron_point(workload: str, fdp: bool, ps: int):
    prof = load("micron-fdp")
    jobs = [JobLoad(f"j{k}", "write", kib * 1024, 32, offset_frac=k / 8, size_frac=1 / 8, handle=k if fdp else 0)
            for k, kib in enumerate(BLOCK_KIB[workload])]
    return operating_point(prof, ps, jobs, fdp=fdp)


@pytest.mark.parametrize("case", sorted(MICRON))
def test_micron_fdp_table_reproduced_within_15_percent(case):
    waf, mibps, watts, eff = MICRON[case]
    op = micron_point(*case)
    got = (op.waf, op.write_MiBps, op.watts, op.write_MiBps / op.watts)
    for name, want, have in zip(("WAF", "MiB/s", "W", "MiB/s/W"), (waf, mibps, watts, eff), got):
        assert have == pytest.approx(want, rel=0.15), f"{case} {name}: model {have:.3f} vs published {want}"
    # host bandwidth = media bandwidth / WAF (the consistency line of the table)
    assert op.write_MiBps == pytest.approx(op.detail["media_write_Bps"] / 2**20 / op.waf, rel=1e-9)


def test_fdp_beats_non_fdp_on_efficiency_by_more_than_2x():
    assert micron_point("uniform", True, 0).write_MiBps / micron_point("uniform", True, 0).watts > \
        2 * micron_point("uniform", False, 0).write_MiBps / micron_point("uniform", False, 0).watts


def test_single_sequential_stream_has_no_write_amplification():
    ftl = Ftl(4000, 32, 0.08)
    st = run_streams(ftl, [WriteStream(0, 4000, 1.0)])
    assert st.waf == pytest.approx(1.0, abs=0.01)


def test_random_overwrites_amplify_and_more_spare_helps():
    def waf(op):
        return run_streams(Ftl(4000, 32, op), [WriteStream(0, 4000, 1.0, random=True)], fills=5, measure_fills=2).waf
    tight, roomy = waf(0.08), waf(0.30)
    assert tight > 2.5 and roomy < tight


def test_mixed_rates_in_one_handle_amplify_separate_handles_do_not():
    streams = [WriteStream(k * 1000, 1000, r) for k, r in enumerate([1, 2, 4, 8])]
    shared = run_streams(Ftl(4000, 32, 0.08, handles=1), streams).waf
    separate = run_streams(Ftl(4000, 32, 0.08, handles=4), streams, handles=[0, 1, 2, 3]).waf
    assert shared > 1.5 and separate < 1.05


def test_gc_data_stays_with_its_handle():
    ftl = Ftl(2000, 16, 0.1, handles=2)
    run_streams(ftl, [WriteStream(0, 1000, 1.0, random=True), WriteStream(1000, 1000, 3.0, random=True)], handles=[0, 1],
                fills=3, measure_fills=1)
    mapped = ftl.l2p >= 0
    owners = ftl.owner[ftl.l2p[mapped] // ftl.ru_pages]
    lpn = np.flatnonzero(mapped)
    assert np.all(owners == (lpn >= 1000).astype(int))
