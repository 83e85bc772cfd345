"""The test tiers of tests/tiers.toml: which tier each test file is in, so one tier can be run alone
(`pytest -m simulator`) and the per-tier times summed (scripts/tier_times.py). docs/testing.md."""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
TIERS_TOML = TESTS / "tiers.toml"
POSTGRES = "postgres"
SERIAL = "serial"
REALTIME = "realtime"
OWN_LANE = "own_lane"
FIELDS = ("description", "needs", "realtime", "parallel", "files")
FILE_SECONDS = TESTS / "file_seconds.json"
QUIET_LANE = "quiet"


def load(path: Path = TIERS_TOML) -> dict[str, dict]:
    """The [tier.NAME] tables of the registry, in the file's order."""
    return tomllib.loads(Path(path).read_text())["tier"]


def serial_files(path: Path = TIERS_TOML) -> list[str]:
    """The [serial] files of tiers that otherwise run in parallel: run alone after the parallel run
    (`pytest -m serial`), each says why there."""
    return tomllib.loads(Path(path).read_text()).get(SERIAL, {}).get("files", [])


def own_lanes(path: Path = TIERS_TOML) -> list[str]:
    """The tiers whose serial tests run apart from the other serial tests (marked `own_lane`): make
    test runs their files side by side, a core each, before the others; `LANES=2` in a lane of their
    own beside them. An emulated clock that other work slows but cannot shift."""
    return tomllib.loads(Path(path).read_text()).get(SERIAL, {}).get("own_lane", [])


def lane_of(nodeid: str, tier_of: dict[str, str], lanes: list[str]) -> str:
    """The serial run's lane of a test (its pytest node id; ``tier_of``: tier_of_file's map): its tier
    when that has a lane of its own, else the one lane of every other serial test."""
    tier = tier_of.get(Path(nodeid.split("::", 1)[0]).name)
    return tier if tier in lanes else QUIET_LANE


def yield_cpu() -> None:
    """This thread and every process it starts after: SCHED_IDLE, run on the CPU no other task wants.
    Not a nice value: a nice task keeps a core for up to its slice (0.75 ms) when a real-time test's
    thread wakes, SCHED_IDLE is preempted at once (kernel/sched/fair.c, check_preempt_wakeup_fair)."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def file_seconds(path: Path = FILE_SECONDS) -> dict[str, float]:
    """Each test file's summed test time in the last measured `make test` (scripts/tier_times.py
    --file-seconds writes it); empty when there is none."""
    try:
        return {str(k): float(v) for k, v in json.loads(Path(path).read_text()).items()}
    except (OSError, ValueError):
        return {}


def slowest_first(items, seconds: dict[str, float]) -> None:
    """Order the collected tests file by file, the slowest file first, each file's tests in their own
    order. pytest-xdist's loadfile hands files out in collection order (with --no-loadscope-reorder), so
    a 200 s file no longer starts last and keeps one worker busy after the other has finished. A file
    not measured yet counts as the median file."""
    known = sorted(seconds.values())
    median = known[len(known) // 2] if known else 0.0
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(Path(str(item.path)).name, len(first_seen))

    def key(item):
        name = Path(str(item.path)).name
        return (-seconds.get(name, median), first_seen[name])

    items.sort(key=key)


def tier_of_file(tiers: dict[str, dict]) -> dict[str, str]:
    """Test file name -> its tier (the first that lists it; problems() reports a file listed twice)."""
    out: dict[str, str] = {}
    for name, tier in tiers.items():
        for f in tier.get("files", []):
            out.setdefault(f, name)
    return out


def problems(tiers: dict[str, dict], tests: Path = TESTS, serial: list[str] = (),
             lanes: list[str] = ()) -> list[str]:
    """Every way the registry disagrees with the test files in `tests`, one line each."""
    listed = tier_of_file(tiers)
    found: list[str] = [f"[serial] lists {f}, which is in no tier" for f in serial if f not in listed]
    found += [f"[serial] own_lane names {t}, which is no tier" for t in lanes if t not in tiers]
    seen: dict[str, str] = {}
    for name, tier in tiers.items():
        found += [f"tier {name}: no {k!r}" for k in FIELDS if k not in tier or tier[k] in ("", None)]
        for f in tier.get("files", []):
            if f in seen:
                found.append(f"{f} is in two tiers ({seen[f]} and {name}): keep it in one")
            seen[f] = name
            if not (tests / f).is_file():
                found.append(f"tier {name} lists {f}, which is not in {tests}")
    found += [f"{p.name} is in no tier: add it to tests/tiers.toml"
              for p in sorted(tests.glob("test_*.py")) if p.name not in seen]
    return found


def uses_postgres(item) -> bool:
    """A test that runs on PostgreSQL: results_db's postgresql parameter or the pg_cluster fixture."""
    callspec = getattr(item, "callspec", None)
    on_pg = callspec is not None and callspec.params.get("results_db") == "postgresql"
    return on_pg or "pg_cluster" in getattr(item, "fixturenames", ())


def mark(items, tiers: dict[str, dict], tests: Path = TESTS, serial: list[str] = (), own: list[str] = ()) -> None:
    """Mark each test collected from `tests` with its file's tier (and postgres where it uses it, serial
    where its file is in [serial] or its tier does not run in parallel, realtime where its tier waits on
    wall-clock time, own_lane where its tier is in ``own``); a test file the registry does not list
    stops the run."""
    import pytest

    tier_of = tier_of_file(tiers)
    for item in items:
        path = Path(str(item.path))
        if path.parent != tests:
            continue
        tier = tier_of.get(path.name)
        if tier is None:
            raise pytest.UsageError(f"{path.name} is in no test tier: add it to tests/tiers.toml "
                                    f"(docs/testing.md says which tier)")
        item.add_marker(tier)
        if tier != POSTGRES and uses_postgres(item):
            item.add_marker(POSTGRES)
        if path.name in serial or not tiers[tier].get("parallel"):
            item.add_marker(SERIAL)
        if tiers[tier].get("realtime"):
            item.add_marker(REALTIME)
        if tier in own:
            item.add_marker(OWN_LANE)
