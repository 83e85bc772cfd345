"""What scripts/build_rp2_mp.py and build_qemu_mp.py change in MicroPython before building, checked.

1. Frames on the C stack. MicroPython puts the frame of a bytecode function with more than 11 words of
   locals and value stack on the heap (gc_alloc at the call, freed at the return), and falls back to
   the C stack when that fails, as it always does under heap_lock: the heap-locked pass tests never saw
   it, while on the board every main-loop pass made several such allocations and a fragmented heap
   stalled the emulated RP2040 (docs/emulator.md). The images keep frames of up to VM_FRAME_WORDS on
   the C stack; here every firmware function's frame, read from the .mpy files the image's own
   mpy-cross makes, must fit.
2. Frozen ARMv6-M machine code starts on a word. mpy-tool places frozen native code for the M0+ on
   2-byte boundaries, but the ARMv6-M native emitter loads 32-bit constants pc-relative from words
   padded into place for a word start (py/asmthumb.c): frozen so, board/'s viper code crashed the
   emulated RP2040. The freezer is amended; a viper function is frozen with it and as shipped.

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
    _rel, old, new = build_rp2_mp.ALIGN_ARMV6M_NATIVE_CODE
    shipped = tmp_path / "mpy-tool.py"
    shipped.write_text((tree / "src" / "tools" / "mpy-tool.py").read_text().replace(new, old))
    assert frozen_alignment(tree, shipped, tmp_path) == 2


def test_a_source_without_the_text_to_amend_is_refused(tmp_path):
    """A MicroPython whose source no longer has the text a change replaces is an error, not a silent build."""
    tool = tmp_path / "tools" / "mpy-tool.py"
    tool.parent.mkdir()
    tool.write_text("# an mpy-tool that aligns differently\n")
    with pytest.raises(RuntimeError, match="not found; this MicroPython differs"):
        build_qemu_mp.amend(tmp_path, build_rp2_mp.ALIGN_ARMV6M_NATIVE_CODE)
    _rel, old, _new = build_rp2_mp.ALIGN_ARMV6M_NATIVE_CODE
    tool.write_text("x = 1\n" + old + "            MP_NATIVE_ARCH_XTENSA,\n")
    build_qemu_mp.amend(tmp_path, build_rp2_mp.ALIGN_ARMV6M_NATIVE_CODE)
    build_qemu_mp.amend(tmp_path, build_rp2_mp.ALIGN_ARMV6M_NATIVE_CODE)     # a second run leaves it as it is
    assert tool.read_text().count("MP_NATIVE_ARCH_ARMV6M") == 1


def frame_limit(tree) -> int:
    """Bytes of frame that go on the C stack in a built tree (py/objfun.c's VM_MAX_STATE_ON_STACK)."""
    m = re.search(r"#define VM_MAX_STATE_ON_STACK \(sizeof\(mp_uint_t\) \* (\d+)\)", (tree / "py" / "objfun.c").read_text())
    assert m, "VM_MAX_STATE_ON_STACK not found"
    return 4 * int(m.group(1))                     # 32-bit ports


def firmware_frames(out, tmp_path) -> dict[str, int]:
    """{"module.function": frame bytes on a 32-bit port} of every bytecode function in firmware/, as the
    image's mpy-cross compiles it for the M0+ (n_state words + 12 bytes per exception handler)."""
    frames = {}
    env = dict(os.environ, PYTHONPATH=str(out / "src" / "py"))
    for py in sorted((REPO / "firmware").glob("*/*.py")):
        mpy = tmp_path / f"{py.parent.name}.{py.stem}.mpy"
        if subprocess.run([str(out / "mpy-cross"), "-march=armv6m", "-o", str(mpy), str(py)], capture_output=True).returncode:
            continue                                  # the Thumb-2 kernels: not on an RP2040
        r = subprocess.run([sys.executable, str(out / "src" / "tools" / "mpy-tool.py"), "-d", str(mpy)],
                           capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        name = None
        for line in r.stdout.splitlines():
            if line.startswith("simple_name:"):
                name = line.split()[1]
            m = re.match(r"\s*prelude: \((\d+), (\d+),", line)
            if m and name:
                frames[f"{mpy.stem}.{name}"] = max(frames.get(f"{mpy.stem}.{name}", 0),
                                                   4 * int(m.group(1)) + 12 * int(m.group(2)))
    return frames


def test_every_firmware_function_keeps_its_frame_off_the_heap(tree, tmp_path):
    """In both images (the board's rp2 port and the QEMU budget image) every firmware function's frame
    goes on the C stack, and the main loop's own would not have with MicroPython as shipped."""
    limit = frame_limit(tree / "src")
    assert limit == 4 * build_qemu_mp.VM_FRAME_WORDS
    assert frame_limit(build_qemu_mp.build() / "src") == limit
    frames = firmware_frames(tree, tmp_path)
    assert len(frames) > 100, sorted(frames)
    over = {k: v for k, v in frames.items() if v > limit}
    assert not over, f"frames over {limit} bytes go on the heap at every call: {over}"
    shipped = 4 * 11
    for hot in ("powerrig_fw.device.poll", "powerrig_fw.burst.observe", "powerrig_fw.ping.answer"):
        assert frames[hot] > shipped, (hot, frames[hot])


def test_the_usb_cdc_says_writable_only_when_a_packet_fits(tree):
    """The image's USB CDC poll says POLLOUT only when a whole 64-byte packet fits in TinyUSB's FIFO, so
    the firmware's 64-byte writes never wait for a host that stopped reading (as shipped: one byte
    free, and a longer write waited up to 500 ms; tests/micropython/mcu_overrun.py runs both)."""
    rel, old, new = build_rp2_mp.USB_POLL_WRITABLE_PACKET
    text = (tree / "src" / rel).read_text()
    assert new in text and old not in text
