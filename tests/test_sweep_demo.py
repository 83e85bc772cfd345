"""`make demo` is the D5-P5336 power-state sweep: every row agrees with the published figures (drive
level, as the profile derives them) within 15 %. Shorter timing than the demo, same plan."""
from __future__ import annotations

import pytest

from powerrig.sweep.demo import print_table, run


@pytest.mark.slow
def test_demo_sweep_matches_published_d5_p5336_within_15_percent(tmp_path, simdir):
    # half the demo's quick windows: the figures compared are the simulated drive's steady levels (its
    # transitions settle within 120 ms), so 1.5 s of each gives the same means as 3 s
    run_id, rows, store = run(tmp_path / "demo", overrides={"settle_s": 0.25, "idle_s": 0.75, "measure_s": 1.5})
    lines = []
    print_table(rows, lines.append)
    assert len(rows) == 6 and {(r["ps"], r["direction"]) for r in rows} == {(p, d) for p in (0, 1, 2)
                                                                           for d in ("read", "write")}
    for r in rows:
        for k in ("diff MiB/s %", "diff W %", "diff MiB/s/W %"):
            assert abs(r[k]) <= 15.0, "\n".join(lines)
        assert r["idle W"] == pytest.approx(5.5, rel=0.05)
    assert len(store.steps(run_id)) == 9
    assert store.run(run_id)["status"] == "done"


def test_the_demo_table_never_says_minus_zero_percent():
    """Throughput equal to the published figure but for a hair below reads +0.0%, not -0.0%."""
    row = {"ps": 0, "direction": "read", "MiB/s": 4331.0, "pub MiB/s": 4331.1, "diff MiB/s %": -0.002,
           "W": 9.28, "pub W": 10.2, "diff W %": -9.02, "MiB/s/W": 466.7, "pub MiB/s/W": 424.7,
           "diff MiB/s/W %": 9.89, "idle W": 5.5}
    lines: list[str] = []
    print_table([row], lines.append)
    assert "+0.0%" in lines[-1] and "-0.0%" not in lines[-1] and "-9.0%" in lines[-1] and "+9.9%" in lines[-1]
