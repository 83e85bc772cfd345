"""powerrig's pytest plugin (registered through the `pytest11` entry point): power tests written as
plain pytest tests, on a real rig or the virtual one.

Options (prefixed, so no other plugin's can clash; the unprefixed names are deprecated aliases):
--powerrig-rig (port, rfc2217:// URL, sim:PROFILE or sim:qemu: the real NVMe stack in a QEMU guest),
--powerrig-dut (controller), --powerrig-dut-serial,
--powerrig-dut-host (where nvme-cli and fio run), --powerrig-results (database), --powerrig-inventory
(TOML list of rigs; with pytest-xdist each worker takes its own).
Fixtures: ``rig`` (the interposer), ``dut`` (nvme-cli/fio on the drive), ``capture`` (records a
block of work as a phase and returns its figures), ``power_state`` (parametrised over the drive's
operational states), ``results`` (the results store), ``powerrig_record`` (keeps a figure in the JUnit
XML in a form Jenkins' xunit and GitLab take). Helpers ``assert_at_most`` / ``assert_within`` fail
with measured, limit and tolerance and record every measured value.
Tests without --powerrig-rig that use these fixtures are skipped, so the plugin is harmless elsewhere.
"""
from __future__ import annotations

import contextlib
import os
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest


# Every option is prefixed (--powerrig-...) so that no other plugin's --rig or --results can clash with
# it. The old names still work for now: they are rewritten to the new ones (with a deprecation warning)
# unless another plugin has claimed them.
OPTIONS = {  # new name: (old name, help)
    "--powerrig-rig": ("--rig", "interposer: serial port, rfc2217://host:port[?ign_set_control] or sim:PROFILE"),
    "--powerrig-dut": ("--dut", "drive controller (default /dev/nvme0, or the virtual rig's)"),
    "--powerrig-dut-serial": ("--dut-serial", "serial number the drive must have"),
    "--powerrig-dut-host": ("--dut-host", "drive host every nvme-cli and fio call runs on (collection "
                                          "too): ssh://user@host:port (default: this host)"),
    "--powerrig-results": ("--results", "results database (SQLite file or SQLAlchemy URL)"),
    "--powerrig-inventory": ("--inventory", "TOML file of rigs ([[rig]] name, port, drive, serial, "
                                            "drive_host); each xdist worker takes one"),
}
_DEPRECATED = pytest.StashKey[list]()
FIGURES_SECTION = "Captured stdout powerrig figures"     # "Captured stdout ..." sections reach system-out


def pytest_addoption(parser):
    g = parser.getgroup("powerrig", "powerrig power tests")
    for name, (_old, text) in OPTIONS.items():
        g.addoption(name, default=None, dest=_dest(name), help=text)


def _dest(name: str) -> str:
    return name[2:].replace("-", "_")


def _opt(config, name: str):
    return config.getoption(_dest(name), None)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """--rig, --dut, ... (the names before the prefix) become --powerrig-rig, ... when no other plugin
    nor conftest (loaded by now) has an option of that name; pytest parses ``args`` after this hook."""
    yield
    taken = {n for o in _all_options(parser) for n in o.names()} - set(OPTIONS)
    used = []
    for i, a in enumerate(args):
        if a == "--":
            break
        for new, (old, _h) in OPTIONS.items():
            if old not in taken and (a == old or a.startswith(old + "=")):
                args[i] = new + a[len(old):]
                used.append(old)
    early_config.stash[_DEPRECATED] = used


def _all_options(parser) -> list:
    """Every option registered so far (pytest keeps them in its parser's groups)."""
    try:
        return list(parser._anonymous.options) + [o for g in parser._groups for o in g.options]
    except AttributeError:          # a pytest whose parser is laid out otherwise: rewrite all old names
        return []


def pytest_configure(config):
    """Options that reach nvme-cli, fio or ssh are checked before any test is collected: a bad one is
    pytest's usage error (one line, exit 4), not an error in every test that uses the rig."""
    config.pluginmanager.register(_FiguresToSuite(config), "powerrig-figures")
    for old in config.stash.get(_DEPRECATED, []):
        new = next(n for n, (o, _h) in OPTIONS.items() if o == old)
        config.issue_config_time_warning(pytest.PytestDeprecationWarning(
            f"powerrig: {old} is deprecated, use {new} (the old name can clash with other plugins)"), 2)
    if _opt(config, "--powerrig-rig") or _opt(config, "--powerrig-inventory"):
        try:
            _slot(config)
        except (OSError, tomllib.TOMLDecodeError, KeyError) as e:
            raise pytest.UsageError(f"--powerrig-inventory {_opt(config, '--powerrig-inventory')}: "
                                    f"cannot read it ({e})") from None


@dataclass
class RigSlot:
    name: str
    port: str
    drive: str | None = None
    serial: str | None = None
    drive_host: str | None = None


def _checked(slot: RigSlot, where: str) -> RigSlot:
    """The values that reach nvme-cli, fio and ssh, checked by the door to other programs: a bad one
    is a one-line usage error before any test runs."""
    from powerrig.core.errors import PowerrigError
    from powerrig.dut.commands import check_device
    from powerrig.dut.remote import drive_host
    from powerrig.interposer.rfc2217 import check_url
    try:
        if slot.drive is not None:
            check_device("drive (--powerrig-dut)", slot.drive)
        drive_host(slot.drive_host)
        if slot.port.startswith("rfc2217://"):
            check_url(slot.port)
    except PowerrigError as e:
        raise pytest.UsageError(f"{where}: {e}") from None
    return slot


def _slot(config) -> RigSlot | None:
    inv = _opt(config, "--powerrig-inventory")
    if inv:
        rigs = tomllib.loads(Path(inv).read_text()).get("rig", [])
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        k = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
        if k >= len(rigs):
            raise pytest.UsageError(f"--powerrig-inventory {inv} lists {len(rigs)} rigs; worker {worker} has none "
                                    "(use -n at most the number of rigs)")
        r = rigs[k]
        return _checked(RigSlot(r.get("name", f"rig{k}"), r["port"], r.get("drive"), r.get("serial"),
                                r.get("drive_host")), f"--powerrig-inventory {inv} rig {k}")
    port = _opt(config, "--powerrig-rig")
    if not port:
        return None
    return _checked(RigSlot(port, port, _opt(config, "--powerrig-dut"), _opt(config, "--powerrig-dut-serial"),
                            _opt(config, "--powerrig-dut-host")), "powerrig pytest options")


@dataclass
class Rig:
    """The interposer and the bench around it for this session (or worker)."""
    slot: RigSlot
    handle: object
    dev: object


@dataclass
class Dut:
    """Drive control: nvme-cli and fio runners, the controller, its namespace and identity."""
    nvme: object
    fio: object
    controller: str
    namespace: str
    ident: object
    serial: str | None            # the serial writes are guarded with (None: writes are refused)
    out: Path = field(default_factory=lambda: Path("."))

    def operational_states(self) -> list[int]:
        return [s.ps for s in self.ident.power_states if not s.non_operational]

    def run_fio(self, name: str, rw="write", bs="128k", iodepth=128, runtime=3.0, **kw):
        from powerrig.dut.fio import FioJob, FioPlan
        job = FioJob(name, rw=rw, bs=bs, iodepth=iodepth, runtime=runtime, time_based=True,
                     filename=self.namespace, direct=True, **kw)
        return self.fio.run(FioPlan([job]), self.out / "fio" / f"{name}-{time.time_ns()}", serial=self.serial)


@pytest.fixture(scope="session")
def rig(request, tmp_path_factory):
    slot = _slot(request.config)
    if slot is None:
        pytest.skip("no rig: pass --powerrig-rig PORT|rfc2217://host:port|sim:PROFILE (or --powerrig-inventory)")
    from powerrig.sweep.plan_rig import RigHandle, open_interposer
    if slot.port.startswith("sim:"):
        from powerrig.sim import rig as simrig
        os.environ.setdefault("POWERRIG_SIM_DIR", str(tmp_path_factory.mktemp("sim")))
        st = simrig.start(slot.port[4:], owned=True)
        handle = RigHandle(st["port"], st["nvme"], st["fio"], st["controller"], st["namespaces"],
                           f"{slot.name}:{st['id']}", st["id"], st, st.get("host"),
                           st.get("drive_host") or slot.drive_host)      # a QEMU rig's drive is in its guest
    else:
        handle = RigHandle(slot.port, ["nvme"], ["fio"], slot.drive or "/dev/nvme0",
                           [(slot.drive or "/dev/nvme0") + "n1"], slot.name, drive_host=slot.drive_host)
    dev = open_interposer(handle.port, what="--powerrig-rig")
    yield Rig(slot, handle, dev)
    dev.close()
    handle.close()


@pytest.fixture(scope="session")
def dut(rig, tmp_path_factory):
    from powerrig.core.timeline import Timeline

    h = rig.handle
    tl = Timeline()
    nvme, fio = h.runners(tl)
    ident = nvme.id_ctrl(h.controller)
    want = rig.slot.serial
    if want and want.strip() != ident.sn.strip():
        pytest.exit(f"--powerrig-dut-serial {want!r} but the drive at {h.controller} has serial {ident.sn.strip()!r}", 2)
    # the serial writes are guarded with: the one named (--powerrig-dut-serial / inventory), or the one a virtual
    # rig names for its drive; never the drive's own answer, which would make the guard a formality
    named = want.strip() if want else (h.info.get("serial") if h.sim_id else None)
    return Dut(nvme, fio, h.controller, h.namespaces[0], ident, named,
               tmp_path_factory.mktemp("dut"))


class Captured:
    """Figures of one captured block (filled when the ``with`` block ends)."""

    def __init__(self, name: str):
        self.name = name
        self.figures: dict = {}
        self.analysis = None
        self.path: Path | None = None
        self.trace = None           # the block's NVMe commands traced on the drive host (dut/nvmetrace.NvmeTrace)

    def __getitem__(self, k):
        return self.figures[k]


@pytest.fixture
def capture(rig, dut, tmp_path, powerrig_record):
    """``with capture("name") as c: <work>``; then c["mean_w"], c["max_1s_w"], c["mib_s"] ..."""
    from powerrig.analysis import analyse
    from powerrig.capture import CaptureReader
    from powerrig.core.timeline import PHASE, Timeline
    from powerrig.capture.recorder import Recorder

    @contextlib.contextmanager
    def _capture(name: str = "block", interval_us: int = 1000):
        c = Captured(name)
        tl = Timeline()
        dut.nvme.timeline = dut.fio.timeline = tl
        c.path = tmp_path / f"{name}.jls"
        meta = {"device": rig.dev.description, "drive": {"id_ctrl": _asdict(dut.ident), "sn": dut.serial}}
        seen: list[tuple[float, float]] = []         # (host time, device seconds covered) per progress report
        rec = Recorder(rig.dev, c.path, interval_us=interval_us, metadata=meta, timeline=tl,
                       on_progress=lambda p: seen.append((time.time(), p.covered_s)), progress_every_s=0.1)
        rec.start()
        _wait(lambda: seen, 15.0)                     # the stream is flowing before the block starts
        from powerrig.sweep import command_trace      # the block's admin commands placed from the drive host's kernel
        ctrace = command_trace.recorder(rig.handle, f"pytest-{name}-{time.time_ns()}")
        ps = dut.nvme.get_power_state(dut.controller).power_state
        ev = tl.begin(PHASE, f"block:{name}", meta={"power_state": ps})
        try:
            yield c
        finally:
            tl.end(ev)
            fio_phases = [e for e in tl.events(kind=PHASE) if e.name.startswith("fio:")]
            # data lags the host clock by the link's latency: wait until the block's end (+ margin) is in
            t0, c0 = seen[0] if seen else (time.time(), 0.0)
            _wait(lambda: seen and seen[-1][1] - c0 >= ev.t_end - t0 + 1.0, 15.0)
            c.trace = command_trace.place(tl, *ctrace)[0]
            rec.stop()
            res = rec.wait(30)
        with CaptureReader(c.path) as cap:
            an = analyse(cap, cap.events, cap.metadata)
        r = next(p for p in an.phases if p.name == f"block:{name}")
        c.analysis = an
        c.figures = {"power_state": ps, "mean_w": r.mean_w, "energy_j": r.energy_j, "max_1s_w": r.max_1s.value_w,
                     "max_100ms_w": r.max_100ms.value_w,
                     "max_10s_w": r.max_10s.value_w, "peak_100us_w": r.peak_100us.value_w,
                     "duration_s": r.duration_s, "lost_s": r.lost_s,
                     "lost_frames": (res.summary or {}).get("dropped_frames", 0) if res else None}
        if fio_phases:          # throughput and watts over the fio jobs themselves (not the whole block)
            span = max(e.t_end for e in fio_phases) - min(e.t_start for e in fio_phases)
            work = [p for p in an.phases if p.name in {e.name for e in fio_phases}]
            t = sum(p.duration_s - p.lost_s for p in work)
            w = sum(p.energy_j for p in work) / t if t > 0 else float("nan")
            c.figures["mib_s"] = sum(e.meta.get("io_bytes", 0) for e in fio_phases) / max(1e-9, span) / 2**20
            c.figures["work_mean_w"] = w
            c.figures["mib_s_per_w"] = c.figures["mib_s"] / w if w and w == w else float("nan")
        for k, v in c.figures.items():
            powerrig_record(f"{name}.{k}", v)
        if r.lost_s:
            import warnings
            warnings.warn(f"capture {name}: {r.lost_s:.3f} s lost in gaps; maxima skip windows over gaps "
                          "(the figures are partial)", stacklevel=3)
    return _capture


def _wait(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def _asdict(x):
    from dataclasses import asdict
    return asdict(x)


@pytest.fixture(scope="session")
def results(request):
    from powerrig.results import ResultStore
    return ResultStore(_opt(request.config, "--powerrig-results"))     # None: the user's store (core/paths.py)


def pytest_generate_tests(metafunc):
    if "power_state" not in metafunc.fixturenames:
        return
    slot = _slot(metafunc.config)
    states = [0]
    if slot is not None and slot.port == "sim:qemu":
        states = [0]                     # QEMU's NVMe controller has one power state
    elif slot is not None and slot.port.startswith("sim:"):
        from powerrig.sim.ssd.profile import load
        states = [s.ps for s in load(slot.port[4:]).states if not s.nops]
    elif slot is not None:
        states = [s.ps for s in _collection_ident(metafunc.config, slot).power_states if not s.non_operational]
    metafunc.parametrize("power_state", states, ids=[f"PS{s}" for s in states])


_IDENT = pytest.StashKey[object]()


def _collection_ident(config, slot: RigSlot):
    """The drive's id-ctrl for parametrising power_state, read once per session ON the drive host
    (--powerrig-dut-host), never with this host's nvme-cli; a failure is one usage-error line."""
    if _IDENT not in config.stash:
        from powerrig.core.errors import PowerrigError
        from powerrig.dut import runners
        try:
            nvme, _ = runners({"drive_host": slot.drive_host})
            config.stash[_IDENT] = nvme.id_ctrl(slot.drive or "/dev/nvme0")
        except PowerrigError as e:
            raise pytest.UsageError(f"power_state: cannot read the drive's power states: {e}") from None
    return config.stash[_IDENT]


# -- figures in the JUnit XML ------------------------------------------------------------------------
# pytest's record_property writes <properties> inside <testcase>, which Jenkins' xunit (junit-10 XSD)
# rejects. The plugin's figures go instead to (1) a "Captured stdout" section of the test's report,
# which pytest writes into that testcase's <system-out> with -o junit_logging=system-out (GitLab shows
# it per test), and (2) the <testsuite>'s <properties> as "<test id>::<figure>", valid in every
# junit_family. Both travel with the report, so they work under pytest-xdist too.
_FIGURES = pytest.StashKey[list]()


@pytest.fixture
def powerrig_record(request):
    """record(name, value): keep a measured figure in the JUnit XML in a form every CI parser takes."""
    figures = request.node.stash.setdefault(_FIGURES, [])

    def record(name: str, value) -> None:
        figures.append((str(name), value))
    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    figures = item.stash.get(_FIGURES, [])
    if figures and report.when == "teardown":       # every figure is in by then (capture, asserts)
        report.sections.append((FIGURES_SECTION, "".join(f"{n} = {v}\n" for n, v in figures)))
    return report


class _FiguresToSuite:
    """On the controller (or the only process): each report's figures into the testsuite properties."""

    def __init__(self, config):
        self.config = config

    def pytest_runtest_logreport(self, report):
        from _pytest.junitxml import xml_key
        xml = self.config.stash.get(xml_key, None)       # None without --junitxml, and on an xdist worker
        text = "".join(c for name, c in report.sections if name == FIGURES_SECTION)
        if report.when != "teardown" or xml is None or not text:
            return
        for line in text.splitlines():
            name, _, value = line.partition(" = ")
            xml.add_global_property(f"{report.nodeid}::{name}", value)


# -- datasheet assertions ---------------------------------------------------------------------------
def _record(record_property, name, measured, limit, tol):
    """record_property: the powerrig_record fixture (or any record(name, value), pytest's own too)."""
    if record_property is not None:
        record_property(f"{name}.measured", measured)
        record_property(f"{name}.limit", limit)
        record_property(f"{name}.tolerance_pct", tol * 100)


def assert_at_most(name: str, measured: float, limit: float, tolerance: float = 0.0, record_property=None):
    """measured <= limit x (1 + tolerance): maximum power per state, OCP limits, idle power."""
    _record(record_property, name, measured, limit, tolerance)
    allowed = limit * (1 + tolerance)
    assert measured == measured, f"{name}: nothing measured (NaN: the data was lost or too short), limit {limit:.3f}"
    assert measured <= allowed, (f"{name}: measured {measured:.3f}, limit {limit:.3f} (tolerance "
                                 f"{tolerance * 100:g}% -> {allowed:.3f}): over by {measured - allowed:.3f}")


def assert_within(name: str, measured: float, expected: float, tolerance: float, record_property=None):
    """|measured - expected| <= tolerance x expected: a datasheet figure with its tolerance."""
    _record(record_property, name, measured, expected, tolerance)
    assert measured == measured, f"{name}: nothing measured (NaN: the data was lost or too short), limit {expected:.3f}"
    assert abs(measured - expected) <= tolerance * abs(expected), (
        f"{name}: measured {measured:.3f}, limit {expected:.3f} +- {tolerance * 100:g}% "
        f"({100 * (measured - expected) / expected:+.1f}%)")
