"""Shared fixtures: paths, and virtual interposers started the way a user starts them."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from powerrig.sim import processes as sim_processes

import qemu_helpers
import tier_registry

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
POWERRIG = [sys.executable, "-m", "powerrig"]


# -- the test tiers (tests/tiers.toml, docs/testing.md): `pytest -m TIER` runs one ----------------
def pytest_configure(config):
    for name, tier in tier_registry.load().items():
        config.addinivalue_line("markers", f"{name}: {tier['description']} (needs {tier['needs']})")
    config.addinivalue_line("markers", f"{tier_registry.SERIAL}: a test of a tier that does not run in parallel "
                                       "(tests/tiers.toml parallel = false) or of a file in its [serial] list: make "
                                       "test runs it after the parallel run, one at a time (pytest -m serial)")
    config.addinivalue_line("markers", f"{tier_registry.REALTIME}: a test of a tier that waits on wall-clock time "
                                       "(tests/tiers.toml realtime = true)")
    config.addinivalue_line("markers", f"{tier_registry.OWN_LANE}: a test of a tier in tests/tiers.toml's [serial] "
                                       "own_lane: make test runs its files side by side before the other serial tests")


def pytest_addoption(parser):
    parser.addoption("--lanes", action="store_true",
                     help="with -n: one pytest-xdist worker per lane of the serial run, each running its "
                          "tests in file order (tests/tiers.toml [serial] own_lane)")
    parser.addoption("--idle-lane", action="store_true",
                     help="with -n N: the files of tiers that do not wait on wall-clock time go to the last "
                          "worker, under SCHED_IDLE, the real-time tiers' files to the other N-1 (make test's "
                          "parallel run)")


def pytest_collection_modifyitems(config, items):
    tier_registry.mark(items, tier_registry.load(), serial=tier_registry.serial_files(), own=tier_registry.own_lanes())
    # a pytest-xdist worker of the parallel run hands the slowest files out first; the serial run's
    # lanes keep the files' order (the QEMU files next to each other share one guest)
    if hasattr(config, "workerinput") and not config.getoption("lanes"):
        tier_registry.slowest_first(items, tier_registry.file_seconds())


class LaneScheduling(LoadScopeScheduling):
    """make test's serial run: every test of a lane to one worker, in collection order. (xdist's own
    loadgroup would do it from xdist_group marks, but it renames items through an attribute pytest 9
    no longer reads.)"""
    def __init__(self, config, log=None):
        super().__init__(config, log)
        self._tier_of = tier_registry.tier_of_file(tier_registry.load())
        self._lanes = tier_registry.own_lanes()

    def _split_scope(self, nodeid):           # per test reported: the registry is read once, above
        return tier_registry.lane_of(nodeid, self._tier_of, self._lanes)


class IdleLaneScheduling(LoadScopeScheduling):
    """make test's parallel run: a whole file per worker, slowest first (as --dist loadfile), the files of
    tiers that are not real-time on the last worker, which runs under SCHED_IDLE on the CPU the
    real-time files' workers leave; a real-time worker with no real-time file left takes those too."""
    def __init__(self, config, log=None):
        super().__init__(config, log)
        tiers = tier_registry.load()
        self._tier_of = tier_registry.tier_of_file(tiers)
        self._realtime = {name for name, t in tiers.items() if t.get("realtime")}
        self._idle_id = f"gw{self.numnodes - 1}"

    def _split_scope(self, nodeid):
        return nodeid.split("::", 1)[0]

    def _assign_work_unit(self, node):
        idle = node.gateway.id == self._idle_id
        scope = next((s for s in self.workqueue if (self._tier_of.get(Path(s).name) in self._realtime) != idle),
                     None)
        if scope is None:
            if idle:                        # only real-time files left: not for the idle worker
                node.shutdown()
                return
            scope = next(iter(self.workqueue))
        self.workqueue.move_to_end(scope, last=False)           # the next that popitem(last=False) takes
        super()._assign_work_unit(node)


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("lanes"):
        return LaneScheduling(config, log)
    return IdleLaneScheduling(config, log) if config.getoption("idle_lane") else None


@pytest.hookimpl(tryfirst=True)         # before the test's fixtures start its emulator
def pytest_runtest_setup(item):
    """An own-lane test yields the CPU to the quiet lane beside it: its worker, and every process it
    starts after, run under SCHED_IDLE (tier_registry.yield_cpu), so the quiet lane's real-time tests
    find the machine as idle as alone and the emulated board (whose clock is emulated) takes what they
    leave."""
    if item.config.getoption("lanes") and any(item.get_closest_marker(t) for t in tier_registry.own_lanes()):
        _yield_once()
    if item.config.getoption("idle_lane") and hasattr(item.config, "workerinput"):
        w = item.config.workerinput
        if w["workerid"] == f"gw{int(w['workercount']) - 1}":
            _yield_once()


def _yield_once() -> None:
    if not _yielded:
        tier_registry.yield_cpu()
        _yielded.append(True)


_yielded: list[bool] = []


# -- CPU time per test, beside its wall time in the JUnit XML (scripts/tier_times.py sums both) ------
def _cpu_seconds() -> float:
    """This process's CPU time and that of its children it has waited for (a virtual rig, a guest)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid, location):
    _cpu_start[nodeid] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    if call.when == "teardown" and item.nodeid in _cpu_start:
        item.user_properties.append(("cpu_s", f"{_cpu_seconds() - _cpu_start.pop(item.nodeid):.2f}"))
    yield


_cpu_start: dict[str, float] = {}


# -- the QEMU drive host: one guest for every module that needs it (tests/qemu_helpers.py) ----------
@pytest.fixture(scope="session")
def qemu_drive(tmp_path_factory):
    """The shared QEMU rig's state (fails under CI=true when QEMU or its image is missing)."""
    yield from qemu_helpers.qemu_rig(tmp_path_factory)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if qemu_helpers.last_user(item):        # not at the session's end: the tests after it get the machine
        qemu_helpers.stop_shared()


# -- every test's virtual rigs in a folder of its pytest process's own ------------------------------
@pytest.fixture(autouse=True)
def _rigs_of_this_process(tmp_path_factory, monkeypatch):
    """A test that names no $POWERRIG_SIM_DIR lists and stops the rigs of its own pytest process only
    (with `pytest -n`, one per worker), never those of a test running beside it in another worker."""
    if not os.environ.get("POWERRIG_SIM_DIR"):
        monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path_factory.getbasetemp() / "rigs"))


class SimProcess:
    """`powerrig sim interposer` in a subprocess; .port is the pty it printed."""

    def __init__(self, tmp: Path, *args: str):
        self.truth_path = tmp / "truth.json"
        self.proc = subprocess.Popen([*POWERRIG, "sim", "interposer", "--truth", str(self.truth_path),
                                      "--state-dir", str(tmp / "board"), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = self.proc.stdout.readline().strip()
        if not self.port.startswith("/dev/"):
            raise RuntimeError(f"sim did not print a port: {self.port!r} {self.proc.stderr.read()}")

    def stop(self) -> dict:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)
        return json.loads(self.truth_path.read_text())


@pytest.fixture
def sim(tmp_path):
    made = []

    def start(*args: str) -> SimProcess:
        s = SimProcess(tmp_path / f"sim{len(made)}", *args)
        made.append(s)
        return s

    yield start
    for s in made:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*POWERRIG, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def simdir(tmp_path, monkeypatch):
    """Virtual rigs of this test only (sweeps with `sim:` ports start them), all stopped after it."""
    d = tmp_path / "sim"
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(d))
    yield d
    sim_processes.stop(all_=True)        # `powerrig sim stop --all` in this process: no CLI start per test


def jsonl(path: Path) -> list:
    """The records of a JSON-lines file (a sweep's sweep.jsonl); none when it is not there yet."""
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def missing(why: str):
    """An input a tier needs is missing: skip on a developer's machine, fail under CI=true (make test
    installs every tier's inputs there, so a missing one is a broken setup, not a reason to skip)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"missing under CI=true: {why}")
    pytest.skip(why)


# -- the results database on both backends ------------------------------------------------------
@pytest.fixture(scope="session")
def pg_cluster():
    """One throwaway PostgreSQL server for the session (unix socket only). Missing binaries skip the
    PostgreSQL tier on a developer's machine and fail it under CI=true."""
    from powerrig.testing.postgres import Cluster, PostgresMissing

    try:
        cluster = Cluster().start()
    except PostgresMissing as e:
        missing(f"the PostgreSQL tier: {e}")
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def results_db(request, tmp_path):
    """The results database a test writes: a SQLite file, or a fresh database on the session's PostgreSQL."""
    if request.param == "sqlite":
        return str(tmp_path / "r.sqlite")
    return request.getfixturevalue("pg_cluster").database()
