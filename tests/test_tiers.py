"""The test tiers (tests/tiers.toml, docs/testing.md): every test file is in exactly one tier, every
tier says what it needs, a file missing from the registry stops collection (tried on a copy of the
registry, the conftest and its helper), `-m TIER` selects one tier, and scripts/tier_times.py sums a
JUnit XML's times per tier."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tier_registry

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"


def test_every_test_file_is_in_exactly_one_tier_and_every_tier_says_what_it_needs():
    tiers = tier_registry.load()
    assert tier_registry.problems(tiers, serial=tier_registry.serial_files(),
                                  lanes=tier_registry.own_lanes()) == []
    on_disk = {p.name for p in TESTS.glob("test_*.py")}
    assert set(tier_registry.tier_of_file(tiers)) == on_disk
    for name, tier in tiers.items():
        assert tier["description"].strip() and tier["needs"].strip(), name
        assert isinstance(tier["realtime"], bool) and isinstance(tier["parallel"], bool), name


def test_problems_names_a_missing_a_doubled_and_a_stale_file(tmp_path):
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / name).write_text("")
    tiers = {"unit": {"description": "d", "needs": "n", "realtime": False, "parallel": True,
                      "files": ["test_a.py", "test_gone.py"]},
             "gui": {"description": "d", "needs": "", "realtime": True, "files": ["test_a.py"]}}
    found = tier_registry.problems(tiers, tmp_path)
    assert "test_b.py is in no tier: add it to tests/tiers.toml" in found
    assert any("test_a.py is in two tiers (unit and gui)" in f for f in found)
    assert any("lists test_gone.py" in f for f in found)
    assert "tier gui: no 'needs'" in found and "tier gui: no 'parallel'" in found
    assert "[serial] lists test_gone2.py, which is in no tier" in tier_registry.problems(tiers, tmp_path,
                                                                                         ["test_gone2.py"])


@pytest.fixture
def copy(tmp_path):
    """A tests folder of its own: the real conftest, its helpers and registry, and two small test files
    whose names the registry lists in different tiers (one parametrized over results_db)."""
    d = tmp_path / "tests"
    d.mkdir()
    for name in ("conftest.py", "tier_registry.py", "qemu_helpers.py", "tiers.toml"):
        shutil.copy(TESTS / name, d / name)
    (d / "test_timebase.py").write_text("def test_pure():\n    pass\n")
    (d / "test_sweep_engine.py").write_text("def test_on_a_store(results_db):\n    pass\n")
    return d


def collect(where: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(where), *args, str(where)],
                          capture_output=True, text=True, timeout=120, cwd=where)


def test_a_file_removed_from_the_registry_fails_collection_in_one_line(copy):
    ok = collect(copy)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    toml = copy / "tiers.toml"
    text = toml.read_text()
    assert text.count('"test_timebase.py",') == 1
    toml.write_text(text.replace('"test_timebase.py",', ""))
    r = collect(copy)
    assert r.returncode != 0
    said = [ln for ln in (r.stdout + r.stderr).splitlines() if "tiers.toml" in ln]
    assert len(said) == 1 and "test_timebase.py is in no test tier: add it to tests/tiers.toml" in said[0]


def test_one_tier_is_selected_by_its_marker_and_postgres_runs_are_postgres_too(copy):
    def ids(*args):
        r = collect(copy, *args)
        assert r.returncode in (0, 5), r.stdout + r.stderr           # 5: nothing selected
        return sorted(ln.split("::", 1)[1] for ln in r.stdout.splitlines() if "::" in ln)

    assert ids("-m", "unit") == ["test_pure"]
    assert ids("-m", "simulator") == ["test_on_a_store[postgresql]", "test_on_a_store[sqlite]"]
    assert ids("-m", "postgres") == ["test_on_a_store[postgresql]"]
    assert ids("-m", "simulator and not postgres") == ["test_on_a_store[sqlite]"]
    assert ids("-m", "gui") == []
    assert len(ids()) == 3
    toml = copy / "tiers.toml"
    toml.write_text(toml.read_text().split("\n[serial]")[0] + '\n[serial]\nfiles = ["test_timebase.py"]\n')
    assert ids("-m", "serial") == ["test_pure"]
    assert len(ids("-m", "not serial")) == 2
    # make test's two runs: the simulator tier is real-time but runs in parallel; a tier with
    # parallel = false waits for the second run whatever [serial] lists
    assert ids("-m", "realtime") == ["test_on_a_store[postgresql]", "test_on_a_store[sqlite]"]
    assert ids("-m", "not serial") == ["test_on_a_store[postgresql]", "test_on_a_store[sqlite]"]
    head, sim = toml.read_text().split("[tier.simulator]")
    toml.write_text(head + "[tier.simulator]" + sim.replace("parallel = true", "parallel = false", 1))
    assert ids("-m", "not serial") == [] and len(ids("-m", "serial")) == 3
    # a tier in [serial] own_lane is marked so: make test runs its serial tests apart, side by side
    assert ids("-m", "own_lane") == []
    toml.write_text(toml.read_text().replace("\n[serial]\n", '\n[serial]\nown_lane = ["unit"]\n', 1))
    assert ids("-m", "serial and own_lane") == ["test_pure"]
    assert ids("-m", "serial and not own_lane") == ["test_on_a_store[postgresql]", "test_on_a_store[sqlite]"]


def test_the_serial_run_puts_an_own_lane_tier_beside_one_lane_of_every_other_serial_test():
    tiers = {"unit": {"files": ["test_a.py"]}, "rp2_emulator": {"files": ["test_c.py"]},
             "qemu_nvme": {"files": ["test_d.py"]}}
    lanes = [tier_registry.lane_of(n, tier_registry.tier_of_file(tiers), ["rp2_emulator"])
             for n in ("tests/test_a.py::test_x", "tests/test_c.py::test_y[p::1]", "tests/test_d.py::K::test_z")]
    assert lanes == ["quiet", "rp2_emulator", "quiet"]
    assert tier_registry.problems(tiers, tier_registry.TESTS, lanes=["rp2_emulatr"])[0] == \
        "[serial] own_lane names rp2_emulatr, which is no tier"
    assert "rp2_emulator" in tier_registry.own_lanes()


def test_make_tests_serial_run_keeps_each_lane_on_one_worker_in_file_order(copy):
    """Two lanes on two workers (--lanes): each worker runs exactly one lane's tests, in collection
    order, even where the measured file times would put the slowest file first; the own lane's
    processes run under SCHED_IDLE, the quiet lane's as before."""
    toml = copy / "tiers.toml"
    text = toml.read_text().replace('own_lane = ["rp2_emulator"]', 'own_lane = ["unit"]')
    text = text.replace('"test_timebase.py",', '"test_timebase.py", "test_z_last.py",')
    toml.write_text(text.replace('"test_sweep_check.py",', '"test_sweep_check.py", "test_a_first.py",'))
    # the own lane yields the CPU (SCHED_IDLE, its children too); the quiet lane keeps the policy this
    # test runs under (itself SCHED_IDLE when run in make test's idle lane)
    for n, policy in (("test_z_last.py", os.SCHED_IDLE), ("test_a_first.py", os.sched_getscheduler(0))):
        (copy / n).write_text(f"import os, subprocess, sys\n\n\ndef test_one():\n"
                              f"    assert os.sched_getscheduler(0) == {policy}\n\n\ndef test_two():\n"
                              f"    subprocess.run([sys.executable, '-c', 'import os; assert os.sched_getscheduler(0) "
                              f"== {policy}'], check=True)\n")
    (copy / "file_seconds.json").write_text('{"test_z_last.py": 100, "test_timebase.py": 1}')
    r = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", str(copy),
                        "-n", "2", "--lanes", "-k", "not on_a_store", str(copy)],
                       capture_output=True, text=True, timeout=180, cwd=copy)
    assert r.returncode == 0, r.stdout + r.stderr
    by_worker: dict[str, list[str]] = {}
    for words in (ln.split() for ln in r.stdout.splitlines() if ln.startswith("[gw") and "PASSED" in ln):
        by_worker.setdefault(words[0], []).append(words[-1].split("/")[-1])
    assert sorted(by_worker.values()) == [
        ["test_a_first.py::test_one", "test_a_first.py::test_two"],
        ["test_timebase.py::test_pure", "test_z_last.py::test_one", "test_z_last.py::test_two"]], by_worker


def test_make_tests_parallel_run_puts_the_files_of_tiers_not_real_time_on_the_last_worker_under_sched_idle(copy):
    """--idle-lane on three workers: the simulator tier's files (real-time) on gw0 and gw1 only, under the
    normal policy; the unit tier's (not real-time) on gw2, under SCHED_IDLE, but for those a real-time
    worker takes once it has no real-time file left."""
    toml = copy / "tiers.toml"
    text = toml.read_text().replace('"test_timebase.py",', '"test_timebase.py", "test_u1.py", "test_u2.py",')
    toml.write_text(text.replace('"test_sweep_check.py",', '"test_sweep_check.py", "test_s1.py", "test_s2.py",'))
    for n in ("test_u1.py", "test_u2.py", "test_s1.py", "test_s2.py"):     # the others keep this test's policy
        (copy / n).write_text("import os, time\n\n\ndef test_one():\n    time.sleep(0.5)\n"
                              "    idle = os.environ['PYTEST_XDIST_WORKER'] == 'gw2'\n"
                              f"    assert os.sched_getscheduler(0) == (os.SCHED_IDLE if idle else {os.sched_getscheduler(0)})\n")
    r = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "--rootdir", str(copy),
                        "-n", "3", "--idle-lane", "-k", "not on_a_store and not test_pure", str(copy)],
                       capture_output=True, text=True, timeout=180, cwd=copy)
    assert r.returncode == 0, r.stdout + r.stderr
    where = {words[-1].split("/")[-1].split("::")[0]: words[0]
             for words in (ln.split() for ln in r.stdout.splitlines() if ln.startswith("[gw") and "PASSED" in ln)}
    assert {where["test_s1.py"], where["test_s2.py"]} <= {"[gw0]", "[gw1]"}, where
    assert "[gw2]" in {where["test_u1.py"], where["test_u2.py"]}, where


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="5">
 <testcase classname="tests.test_timebase" name="test_fit[10]" time="1.5"/>
 <testcase classname="tests.test_timebase" name="test_fit[20]" time="2.25"/>
 <testcase classname="tests.test_sweep_engine" name="test_resume[sqlite]" time="40.0"><properties><property name="cpu_s" value="6.5"/></properties></testcase>
 <testcase classname="tests.test_sweep_engine" name="test_resume[postgresql]" time="45.5"/>
 <testcase classname="tests.test_gui.TestWindow" name="test_open" time="3.0"><skipped/></testcase>
 <testcase classname="tests.test_not_registered" name="test_x" time="0.75"/>
</testsuite></testsuites>
"""


def test_tier_times_sums_a_junit_xml_per_tier(tmp_path):
    xml = tmp_path / "junit.xml"
    xml.write_text(JUNIT)
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tier_times.py"), str(xml)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["unit"] == {"tests": 2, "seconds": 3.8, "cpu_seconds": 0.0}
    assert got["simulator"] == {"tests": 1, "seconds": 40.0, "cpu_seconds": 6.5}
    assert got["postgres"] == {"tests": 1, "seconds": 45.5, "cpu_seconds": 0.0}
    assert got["gui"] == {"tests": 1, "seconds": 3.0, "cpu_seconds": 0.0}
    assert got["(not in tests/tiers.toml)"] == {"tests": 1, "seconds": 0.8, "cpu_seconds": 0.0}
    assert list(got)[:len(tier_registry.load())] == list(tier_registry.load())
    assert "| simulator | yes | parallel | 1 | 0:40 | 0:06 |" in r.stdout
    assert "| gui | yes | parallel | 1 | 0:03 | 0:00 |" in r.stdout
    assert "| all | | | 6 | 1:33 | 0:06 |" in r.stdout


def test_tier_times_sums_make_tests_two_runs_as_one_and_merges_them(tmp_path):
    """make test's parallel and serial runs: one table over both, and one JUnit file holding both."""
    for name in ("parallel.xml", "serial.xml"):
        (tmp_path / name).write_text(JUNIT)
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tier_times.py"), str(tmp_path / "parallel.xml"),
                        str(tmp_path / "serial.xml"), "--merge", str(tmp_path / "junit.xml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["simulator"] == {"tests": 2, "seconds": 80.0, "cpu_seconds": 13.0}
    assert "| all | | | 12 | 3:06 | 0:13 |" in r.stdout
    again = subprocess.run([sys.executable, str(REPO / "scripts" / "tier_times.py"), str(tmp_path / "junit.xml")],
                           capture_output=True, text=True, timeout=60)
    assert json.loads(again.stdout.splitlines()[-1]) == got


def test_tier_times_writes_each_files_seconds_and_the_next_run_takes_the_slowest_file_first(tmp_path):
    """The parallel run hands whole files out in collection order: the slowest measured file goes first,
    an unmeasured one counts as the median, and each file keeps its tests together and in order."""
    (tmp_path / "parallel.xml").write_text(JUNIT)
    out = tmp_path / "file_seconds.json"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tier_times.py"), str(tmp_path / "parallel.xml"),
                        "--file-seconds", str(out)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    seconds = tier_registry.file_seconds(out)
    assert seconds["test_sweep_engine.py"] == 85.5 and seconds["test_timebase.py"] == 3.8
    assert tier_registry.file_seconds(tmp_path / "none.json") == {}

    class Item:
        def __init__(self, name, n):
            self.path, self.n = tmp_path / name, n

    items = [Item("test_timebase.py", 1), Item("test_new.py", 1), Item("test_timebase.py", 2),
             Item("test_sweep_engine.py", 1), Item("test_new.py", 2), Item("test_gui.py", 1)]
    tier_registry.slowest_first(items, {"test_timebase.py": 3.8, "test_sweep_engine.py": 85.5,
                                        "test_gui.py": 3.0})
    assert [(i.path.name, i.n) for i in items] == [
        ("test_sweep_engine.py", 1), ("test_timebase.py", 1), ("test_timebase.py", 2),
        ("test_new.py", 1), ("test_new.py", 2), ("test_gui.py", 1)]


def test_tier_times_says_what_it_cannot_read(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "tier_times.py"), str(tmp_path / "none.xml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "cannot read" in r.stderr


def test_docs_table_lists_every_tier_as_the_registry_does():
    """docs/testing.md's tiers table: one row per registered tier, its real-time and parallel columns as registered."""
    rows = {}
    for line in (REPO / "docs" / "testing.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 5:
            rows[cells[0].strip("`")] = (cells[3] == "**yes**", cells[4] == "yes")
    assert rows == {name: (tier["realtime"], tier["parallel"]) for name, tier in tier_registry.load().items()}
