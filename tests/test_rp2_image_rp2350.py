"""The board's own image: MicroPython's rp2 port built for the RP2350 with the firmware frozen in.

No emulator here runs an RP2350 (rp2040js is an RP2040; the Thumb-2 kernels are counted under QEMU,
tests/test_firmware_qemu.py). What can be proven without silicon is proven here, with the field's own
tool: picotool reads the UF2 a lab would flash and says which chip, which image type, and which
modules are frozen in. A firmware module that the port's cross compiler cannot compile for the M33
fails the build; one left out of the image fails the comparison with firmware/.

Inputs: the vendored MicroPython/picotool tarballs, arm-none-eabi-gcc and cmake (scripts/setup.sh);
missing ones skip with the reason, and FAIL under CI=true. ~80 s the first time, cached after.
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


@pytest.fixture(scope="module")
def picotool_info():
    try:
        out = build_rp2_mp.build("RPI_PICO2")
    except build_qemu_mp.Unavailable as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"RP2350 image cannot be built under CI: {e}")
        pytest.skip(str(e))
    uf2 = out / build_rp2_mp.image_name("RPI_PICO2")
    r = subprocess.run([str(out / "picotool-inst" / "bin" / "picotool"), "info", "-a", str(uf2)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def field(info: str, name: str) -> str:
    """One 'name: value' field of picotool's listing, continuation lines joined."""
    m = re.search(rf"^ {re.escape(name)}:\s+(.*(?:\n {{2,}}\S.*)*)", info, re.M)
    assert m, f"picotool printed no {name!r}:\n{info}"
    return " ".join(m.group(1).split())


def test_the_image_is_for_the_rp2350_as_a_secure_arm_image(picotool_info):
    assert field(picotool_info, "target chip") == "RP2350"
    assert field(picotool_info, "image type") == "ARM Secure"
    assert field(picotool_info, "pico_board") == "pico2"
    assert re.search(r"family ID 'rp2350-arm-s'", picotool_info), picotool_info.splitlines()[0]


def test_every_firmware_module_is_frozen_in_the_image(picotool_info):
    frozen = {m.strip() for m in field(picotool_info, "frozen modules").split(",")}
    want = {f"{pkg}/{p.stem}" if p.stem != "__init__" else pkg   # picotool names them by path
            for pkg in ("powerrig_fw", "board") for p in (REPO / "firmware" / pkg).glob("*.py")}
    assert want <= frozen, f"not frozen: {sorted(want - frozen)}"
    assert "main" not in frozen      # main.py stays on the filesystem, so a user can replace it
