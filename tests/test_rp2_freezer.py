"""MicroPython's freezer, amended by scripts/build_rp2_mp.py: frozen ARMv6-M machine code starts on a word.

mpy-tool places frozen native code for the M0+ on 2-byte boundaries, but the ARMv6-M native emitter
loads 32-bit constants pc-relative from words padded into place for a word start (py/asmthumb.c):
frozen so, board/'s viper code crashed the emulated RP2040 (docs/emulator.md). The build amends the
tree's mpy-tool; these tests freeze a viper function with it, and with the rule as shipped.

Inputs: the vendored MicroPython/picotool tarballs, arm-none-eabi-gcc and cmake (scripts/setup.sh);
missing ones skip with the reason, and FAIL under CI=true.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import build_qemu_mp  # noqa: E402
import build_rp2_mp  # noqa: E402

pytestmark = pytest.mark.timeout(900)   # the first build, on a loaded machine, can take minutes
VIPER = "import micropython\n@micropython.viper\ndef f(x: int) -> int:\n    return x + 0x12345678\n"


@pytest.fixture(scope="module")
def tree():
    """The cache folder of the RP2040 build: its amended source tree and its mpy-cross."""
    try:
        return build_rp2_mp.build("RPI_PICO")
    except build_qemu_mp.Unavailable as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"RP2040 image cannot be built under CI: {e}")
        pytest.skip(str(e))


def frozen_alignment(out, tool, tmp_path) -> int:
    """The alignment mpy-tool declares for a frozen ARMv6-M viper function (one with a 32-bit constant)."""
    src, mpy = tmp_path / "v.py", tmp_path / "v.mpy"
    src.write_text(VIPER)
    r = subprocess.run([str(out / "mpy-cross"), "-march=armv6m", "-o", str(mpy), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    qstrs = out / "src" / "ports" / "rp2" / "build-RPI_PICO" / "genhdr" / "qstrdefs.preprocessed.h"
    env = dict(os.environ, PYTHONPATH=str(out / "src" / "py"))       # its makeqstrdata
    r = subprocess.run([sys.executable, str(tool), "-f", "-q", str(qstrs), str(mpy)], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    m = re.search(r"static const byte fun_data_\w+\[\d+\] __attribute__\(\(section[^;]*?aligned \((\d+)\)", r.stdout)
    assert m, r.stdout[-2000:]
    return int(m.group(1))


def test_the_amended_freezer_word_aligns_armv6m_machine_code(tree, tmp_path):
    assert frozen_alignment(tree, tree / "src" / "tools" / "mpy-tool.py", tmp_path) == 4


def test_the_freezer_as_shipped_would_not(tree, tmp_path):
    """The same function through the rule as MicroPython ships it: 2 (what crashed the emulated M0+)."""
    old, new = build_rp2_mp._MPY_TOOL_ALIGN_4
    shipped = tmp_path / "mpy-tool.py"
    shipped.write_text((tree / "src" / "tools" / "mpy-tool.py").read_text().replace(new, old))
    assert frozen_alignment(tree, shipped, tmp_path) == 2


def test_a_freezer_without_the_rule_to_amend_is_refused(tmp_path):
    """A MicroPython whose mpy-tool no longer has the alignment rule is an error, not a silent build."""
    tool = tmp_path / "tools" / "mpy-tool.py"
    tool.parent.mkdir()
    tool.write_text("# an mpy-tool that aligns differently\n")
    with pytest.raises(RuntimeError, match="alignment rule was not found"):
        build_rp2_mp.align_armv6m_native_code(tmp_path)
    old, _new = build_rp2_mp._MPY_TOOL_ALIGN_4
    tool.write_text("x = 1\n" + old + "            MP_NATIVE_ARCH_XTENSA,\n")
    build_rp2_mp.align_armv6m_native_code(tmp_path)
    build_rp2_mp.align_armv6m_native_code(tmp_path)            # a second run leaves it as it is
    assert tool.read_text().count("MP_NATIVE_ARCH_ARMV6M") == 1
