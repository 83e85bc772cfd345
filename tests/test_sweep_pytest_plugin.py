"""The pytest plugin: the example sweeps pass on the virtual rig from a new directory, a wrong
datasheet limit fails with measured, limit and tolerance, the JUnit XML holds the measured values,
and with -n 2 each xdist worker takes its own rig from the inventory."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "fixtures" / "sweeps"


def pytest_cmd(*args: str) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
    if not any(ep.value == "powerrig.pytest_plugin" for ep in entry_points(group="pytest11")):
        cmd += ["-p", "powerrig.pytest_plugin"]     # this checkout's entry point is not installed yet
    return cmd + list(args)


@pytest.fixture
def newdir(tmp_path, monkeypatch):
    d = tmp_path / "lab"
    d.mkdir()
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path / "sim"))
    monkeypatch.setenv("POWERRIG_SWEEP_SECONDS", "1.5")
    yield d
    run_cli("sim", "stop", "--all")


def run_pytest(cwd: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    # a session of its own: not one of this run's xdist workers (make test runs this file under -n)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    return subprocess.run(pytest_cmd(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow
def test_example_sweeps_pass_and_junit_holds_the_measured_values(newdir):
    shutil.copy(EXAMPLES / "test_power_states.py", newdir)
    r = run_pytest(newdir, "-q", "--powerrig-rig", "sim:d5-p5336", "--junitxml", "j.xml", "-k", "PS0 or PS2 or idle")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "5 passed" in r.stdout, r.stdout[-2000:]
    props = {name: float(v) for name, v in suite_figures(newdir / "j.xml").items()
             if name.endswith(("measured", "mean_w", "mib_s"))}
    assert props["PS2 write 1 s max power.measured"] <= 10.0 + 1e-6
    assert 600 < props["PS2-seq-write.mib_s"] < 800           # the D5-P5336 writes ~687 MiB/s in PS2
    assert 5.0 < props["idle.mean_w"] < 6.0


def suite_figures(junit: Path) -> dict:
    """The plugin's figures from the testsuite's properties ("<test id>::<figure>"), by figure name."""
    return {p.get("name").rpartition("::")[2]: p.get("value")
            for p in ET.parse(junit).getroot().find("testsuite").find("properties")}


def test_without_a_rig_the_fixtures_skip(newdir):
    shutil.copy(EXAMPLES / "test_power_states.py", newdir)
    r = run_pytest(newdir, "-q", "-k", "idle")
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout[-2000:]


@pytest.mark.slow
def test_wrong_datasheet_limit_fails_with_measured_limit_and_tolerance(newdir):
    (newdir / "test_wrong.py").write_text(
        "from powerrig.pytest_plugin import assert_at_most\n"
        "def test_ps2(rig, dut, capture, powerrig_record):\n"
        "    dut.nvme.set_power_state(dut.controller, 2)\n"
        "    with capture('w') as c:\n"
        "        dut.run_fio('w', rw='write', runtime=1.5)\n"
        "    assert_at_most('PS2 max power', c['max_1s_w'], 6.0, tolerance=0.05, record_property=powerrig_record)\n")
    r = run_pytest(newdir, "-q", "--powerrig-rig", "sim:d5-p5336", "--junitxml", "j.xml")
    assert r.returncode == 1, r.stdout[-2000:]
    assert "PS2 max power: measured 9." in r.stdout and "limit 6.000 (tolerance 5% -> 6.300)" in r.stdout, r.stdout[-3000:]
    props = suite_figures(newdir / "j.xml")
    assert float(props["PS2 max power.measured"]) > 9.0 and props["PS2 max power.limit"] == "6.0"


@pytest.mark.slow
def test_two_workers_take_two_rigs_from_the_inventory(newdir):
    pytest.importorskip("xdist")
    shutil.copy(EXAMPLES / "test_power_states.py", newdir)
    shutil.copy(EXAMPLES / "two-sim-rigs.toml", newdir)
    (newdir / "test_which.py").write_text(
        "import os\n"
        "def test_rig_name(rig, record_property):\n"
        "    record_property('rig', rig.slot.name)\n"
        "    record_property('port', rig.handle.port)\n"
        "    record_property('worker', os.environ.get('PYTEST_XDIST_WORKER'))\n"
        "def test_rig_name_again(rig, record_property):\n"
        "    record_property('rig', rig.slot.name)\n"
        "    record_property('port', rig.handle.port)\n"
        "    record_property('worker', os.environ.get('PYTEST_XDIST_WORKER'))\n")
    r = run_pytest(newdir, "-q", "-n", "2", "--powerrig-inventory", "two-sim-rigs.toml", "--junitxml", "j.xml",
                   "-k", "rig_name or (PS0 and read) or idle")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    cases = list(ET.parse(newdir / "j.xml").iter("testcase"))
    seen = {}
    for case in cases:
        p = {x.get("name"): x.get("value") for x in case.iter("property")}
        if "worker" in p:
            seen.setdefault(p["worker"], set()).add((p["rig"], p["port"]))
    # every worker used exactly one rig, and no rig (port) served two workers
    assert all(len(v) == 1 for v in seen.values()), seen
    ports = [next(iter(v))[1] for v in seen.values()]
    assert len(set(ports)) == len(ports)
