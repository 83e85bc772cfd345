"""The layers hold: import-linter's contracts (.importlinter, drawn in docs/architecture.md) are kept,
and the modules that used to tie layers together have homes of their own: the registry of running
virtual rigs (devices and sim.rig imported each other) and the CLI's port resolver."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import REPO, VENV_BIN
from powerrig.interposer import discovery
from powerrig.core import rig_registry
from powerrig.cli._ports import SIM_PORT, resolve_port


def test_import_contracts_are_kept():
    r = subprocess.run([str(VENV_BIN / "lint-imports"), "--config", str(REPO / ".importlinter"), "--no-cache"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"lint-imports found broken layer contracts:\n{r.stdout}\n{r.stderr}"
    assert "0 broken" in r.stdout


FACES = ("cli/", "gui/", "web/", "pytest_plugin.py", "demo.py", "__main__.py")
LOCAL_IMPORTS_OUTSIDE_FACES = 20


def local_imports(root) -> list[str]:
    """Every import statement inside a function body, outside the faces (which load their commands'
    and widgets' packages on demand on purpose), as "path:line: text"."""
    found = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith(FACES):
            continue
        lines = p.read_text().split("\n")
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{rel}:{n.lineno}: {lines[n.lineno - 1].strip()}" for n in ast.walk(fn)
                          if isinstance(n, (ast.Import, ast.ImportFrom))]
    return found


def test_imports_sit_at_the_top_outside_the_faces():
    """A function-local import hides an edge of the graph (the one cycle left lived in two of them):
    outside the faces only the deliberate late loads remain (an optional extra, matplotlib at the first
    figure, a module also run with python -m), each with its reason beside it."""
    found = local_imports(REPO / "host_app" / "powerrig")
    assert len(found) <= LOCAL_IMPORTS_OUTSIDE_FACES, \
        f"{len(found)} function-local imports outside the faces (at most {LOCAL_IMPORTS_OUTSIDE_FACES}); " \
        "move these to the module's top or say why they load late:\n" + "\n".join(found)


def test_the_local_import_count_sees_a_function_local_import(tmp_path):
    """The count is not blind: a module with one import in a function and one at the top counts one."""
    pkg = tmp_path / "pkg"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "m.py").write_text("import os\n\n\ndef f():\n    import json\n    return json\n")
    (pkg / "cli" / "c.py").write_text("def g():\n    import json\n")
    assert local_imports(pkg) == ["m.py:5: import json"]


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv(rig_registry.ENV_DIR, str(tmp_path))
    procs = []

    def fake_rig(rig_id: str, port: str) -> subprocess.Popen:
        """A live process that looks like a rig to the registry (same command-line markers)."""
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "powerrig.sim.rig", rig_id])
        procs.append(p)
        deadline = time.monotonic() + 10
        while not rig_registry.is_alive(p.pid, rig_id) and time.monotonic() < deadline:
            time.sleep(0.01)          # /proc/PID/cmdline is empty until the exec has completed
        rig_registry.register({"id": rig_id, "pid": p.pid, "port": port})
        return p

    yield fake_rig
    for p in procs:
        p.kill()
        p.wait()


def test_device_discovery_finds_live_rigs_without_importing_the_simulator(registry, tmp_path):
    registry("r1", "/dev/pts/998")
    ports = discovery.candidate_ports()
    assert "/dev/pts/998" in ports
    # the discovery code reads the registry, not the simulator (it used to import powerrig.sim.rig)
    code = ("import sys, powerrig.interposer.discovery as d; d.candidate_ports();"
            "print([m for m in sys.modules if m.split('.')[:2] == ['powerrig', 'sim']])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, **{rig_registry.ENV_DIR: str(tmp_path)}))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_registrations_of_dead_or_foreign_processes_are_dropped(registry, tmp_path):
    from powerrig.sim import rig

    live = registry("alive1", "/dev/pts/997")
    dead = registry("dead1", "/dev/pts/996")
    dead.kill()
    dead.wait()
    # a pid that exists but is not a rig (our own test process): a reused pid must not count
    rig_registry.register({"id": "foreign", "pid": os.getpid(), "port": "/dev/pts/995"})
    assert [r["id"] for r in rig.running()] == ["alive1"]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["alive1.json"]
    assert json.loads((tmp_path / "alive1.json").read_text())["pid"] == live.pid


def test_the_cli_passes_real_ports_through_untouched():
    assert resolve_port("/dev/ttyACM0") == "/dev/ttyACM0"
    assert resolve_port("rfc2217://rack3:4001") == "rfc2217://rack3:4001"
    assert SIM_PORT == "sim"


def test_cli_modules_resolve_ports_through_the_cli_not_the_simulator():
    for name in ("stream", "record"):
        text = (REPO / "host_app" / "powerrig" / "cli" / f"{name}.py").read_text()
        assert re.search(r"from powerrig\.cli\._ports import [^\n]*\bresolve_port\b", text)
        assert "powerrig.sim.interposer.launch import resolve_port" not in text


def test_every_gui_widget_is_held_to_the_services_contract():
    """A new panel folder is covered too: every gui/<panel>/widget.py (and the window) is a source of
    the contract that keeps widgets off the domain packages (they go through gui/services)."""
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(REPO / ".importlinter")
    sources = set(cfg["importlinter:contract:gui-widgets-through-services"]["source_modules"].split())
    gui = REPO / "host_app" / "powerrig" / "gui"
    panels = {f"powerrig.gui.{p.parent.name}" for p in gui.glob("*/widget.py")}
    assert panels and panels <= sources, panels - sources
    assert {"powerrig.gui.core", "powerrig.gui.main_window"} <= sources


def test_the_gui_core_loads_no_domain_module():
    """gui/core.py is the bus (workers, error/status/busy/tick), not the application: importing it
    brings in no interposer, drive, capture, analysis or sweep code."""
    code = ("import sys, powerrig.gui.core; "
            "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('powerrig.') "
            "and m.split('.')[1] not in ('core', 'gui')}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
