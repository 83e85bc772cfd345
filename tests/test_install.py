"""powerrig installed from a wheel, not run from a checkout: the wheel is built from a copy of the
source tree and installed (non-editable) into a fresh virtualenv, then used from a directory outside
the checkout with no PYTHONPATH. The firmware's powerrig_fw and the rails definition must come with
it (before, wire.py found firmware/ and rails.py found hw/ through the checkout's directories).

The fresh venv gets powerrig from the wheel only; its third-party dependencies (numpy, pyserial, ...)
are lent by the test's own environment through a path entry, so the test needs no network.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import REPO

SOURCES = ("setup.cfg", "setup.py", "pyproject.toml", "README.md", "host_app", "firmware/powerrig_fw", "hw")


def _run(*cmd, cwd=None, env=None, timeout=120) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, venv bin, environment) of a fresh venv holding powerrig installed from its wheel."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for rel in SOURCES:
        s, d = REPO / rel, src / rel
        if s.is_dir():
            shutil.copytree(s, d, symlinks=True, ignore=ignore)   # keep rails.toml a link, as in git
        else:
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, d)
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src)
    wheels = list((tmp / "dist").glob("powerrig-*.whl"))
    assert len(wheels) == 1, wheels

    venv = tmp / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    py = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheels[0])
    # dependencies from this environment's site-packages: a plain path line, so the editable
    # powerrig registered there (a .pth of its own) is NOT activated in the fresh venv
    site = Path(_run(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "zz_lent_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "POWERRIG_RAILS")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    away = tmp / "elsewhere"
    away.mkdir()
    return py, venv / "bin", env, away, site


def test_installed_package_imports_from_the_venv_not_the_checkout(installed):
    py, _bin, env, away, site = installed
    code = ("import json, powerrig, powerrig.interposer.frames, powerrig.core.rails, powerrig_fw, powerrig.sim.interposer.board;"
            "print(json.dumps({'powerrig': powerrig.__file__, 'fw': powerrig_fw.__file__,"
            " 'rails': powerrig.core.rails.rails().names, 'version': powerrig.interposer.frames.fw.VERSION}))")
    out = json.loads(_run(py, "-c", code, cwd=away, env=env).stdout)
    for key in ("powerrig", "fw"):
        assert Path(out[key]).is_relative_to(site), f"{key} imported from {out[key]}, not the fresh venv"
        assert not Path(out[key]).is_relative_to(REPO)
    assert out["rails"][:2] == ["12V", "3V3"]
    assert out["version"] >= 1


def test_packaged_rails_definition_is_a_copy_of_hw_rails_toml(installed):
    _py, _bin, _env, _away, site = installed
    packaged = site / "powerrig" / "rails.toml"
    assert packaged.is_file() and not packaged.is_symlink()
    assert packaged.read_bytes() == (REPO / "hw" / "rails.toml").read_bytes()


def test_installed_command_streams_from_a_virtual_interposer(installed):
    _py, bin_, env, away, _site = installed
    assert _run(bin_ / "powerrig", "--version", cwd=away, env=env).stdout.strip().startswith("powerrig ")
    r = _run(bin_ / "powerrig", "stream", "--port", "sim", "--seconds", "0.5", "--json", "--quiet",
             cwd=away, env=env, timeout=90)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["samples"] >= 400           # 0.5 s of 1 ms intervals
    assert summary["crc_errors"] == 0


def test_the_results_web_page_templates_are_in_the_wheel(installed):
    """`powerrig serve` from a wheel: its Jinja2 templates are package data (setup.cfg)."""
    *_, site = installed
    names = {p.name for p in (site / "powerrig" / "web" / "templates").glob("*.html")}
    assert {"base.html", "index.html", "run.html", "step.html", "curves.html", "compare.html"} <= names, names
