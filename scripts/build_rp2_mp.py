#!/usr/bin/env python3
"""Build MicroPython's rp2 port with the firmware frozen in, into a cache directory.

Why: the board's firmware must be proven on the real rp2 port (its PIO, DMA, IRQ and USB CDC code),
not only on the QEMU image. rp2040js (tools/rp2emu) runs the RP2040 (RPI_PICO) image; nothing is
downloaded: the MicroPython tree (with pico-sdk 2.2.0, TinyUSB, micropython-lib filled in) and
picotool come from ../shared/vendor, the compiler is the distribution's arm-none-eabi-gcc.

Output, cached by a hash of the inputs (the two tarballs, this recipe, the compiler's version):
<cache>/<hash>/powerrig-RPI_PICO-<firmware hash>.bin (the flash image, loaded at 0x10000000) and
<cache>/<hash>/mpy-cross (the same tree's cross compiler), where <cache> is $POWERRIG_RP2_CACHE or
~/.cache/powerrig/rp2-mp. Prints the directory on success. About 75 s on 2 cores the first time; the
build folder is kept, so a firmware change recompiles the frozen modules and relinks in seconds.

The RP2040 image freezes firmware/powerrig_fw (FROZEN; board/ goes into its filesystem, tools/rp2emu);
main.py stays in the flash filesystem. ``--board RPI_PICO2`` builds the board's own image, for the
RP2350 the interposer carries, with firmware/powerrig_fw and firmware/board frozen in, Thumb-2
kernels included, compiled by the port's own cross compiler for the M33 (-march=armv7m):
<cache>/<hash>/powerrig-RPI_PICO2-<firmware hash>.uf2, the file a lab drags onto the board's BOOTSEL
drive (docs/bring-up.md); no emulator here runs an RP2350, so its kernels are counted under QEMU
(docs/firmware-budget.md). Another ~80 s, again when the firmware changes.

Exit codes: 0 built (or cached), 3 no source / tools (the message says how to get them), 1 build failed.
Needs gcc-arm-none-eabi, libnewlib-arm-none-eabi, cmake, make (scripts/setup.sh installs them).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_qemu_mp import VM_FRAMES_ON_STACK, Unavailable, _unpack, _vendor_dirs, amend, run_main  # noqa: E402  (one vendor search for both images)

RECIPE = "rp2/pico-sdk-2.2.0/v3"         # bump when the build recipe below changes
BOARDS = ("RPI_PICO", "RPI_PICO2")
HOW_TO_GET = ("MicroPython rp2 source not found: put micropython-rp2-*.tar.gz and picotool-2.2.0.tar.gz into "
              "../shared/vendor/ next to the repository, or set MICROPYTHON_RP2_SRC and PICOTOOL_SRC to them")
MISSING_TOOLS = ("{tool} not found: install gcc-arm-none-eabi, libnewlib-arm-none-eabi and cmake "
                 "(scripts/setup.sh does, or: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi cmake)")


def cache_root() -> Path:
    env = os.environ.get("POWERRIG_RP2_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "powerrig" / "rp2-mp"


def find_sources() -> tuple[Path, Path]:
    """(micropython-rp2 tarball, picotool tarball)."""
    mp, pt = os.environ.get("MICROPYTHON_RP2_SRC"), os.environ.get("PICOTOOL_SRC")
    if mp and pt:
        if not (Path(mp).is_file() and Path(pt).is_file()):
            raise Unavailable(f"MICROPYTHON_RP2_SRC={mp} or PICOTOOL_SRC={pt} is not a file; " + HOW_TO_GET)
        return Path(mp), Path(pt)
    for d in _vendor_dirs():
        mps, pts = sorted(d.glob("micropython-rp2-*.tar.gz")), sorted(d.glob("picotool-*.tar.gz"))
        if mps and pts:
            return mps[-1], pts[-1]
    raise Unavailable(HOW_TO_GET)


def _key(*files: Path) -> str:
    h = hashlib.sha256(RECIPE.encode())
    h.update(subprocess.run(["arm-none-eabi-gcc", "--version"], capture_output=True, text=True).stdout.encode())
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def _run(cmd: list[str], log: Path, cwd: Path | None = None, env: dict | None = None) -> None:
    with open(log, "a") as lf:
        lf.write(f"\n$ {' '.join(cmd)}\n")
        lf.flush()
        r = subprocess.run(cmd, cwd=cwd, env=env, stdout=lf, stderr=subprocess.STDOUT)
    if r.returncode:
        raise RuntimeError(f"build failed: {' '.join(cmd)} (log: {log})")


FIRMWARE = Path(__file__).resolve().parent.parent / "firmware"
PACKAGES = ("powerrig_fw", "board")
# the packages frozen into each image (main.py stays in the filesystem). The RP2040's image freezes the
# pure-Python application only; board/ goes into its filesystem as .mpy files (tools/rp2emu). Frozen
# there (with the freezer amended below) board/ runs as fast, but one tier run lost intervals in a
# client stream (docs/emulator.md, "How the firmware gets onto the board"): not understood yet.
FROZEN = {"RPI_PICO": ("powerrig_fw",), "RPI_PICO2": PACKAGES}

# mpy-tool, MicroPython's freezer, places frozen native code for ARMv6-M on 2-byte boundaries (it groups
# the M0+ with the Thumb-2 cores). The ARMv6-M native emitter needs 4: it loads each 32-bit constant
# and each long jump's offset pc-relative from a word it pads into place assuming the code starts on a
# word (py/asmthumb.c, asm_thumb_mov_reg_i32: "sanity check that generated code is aligned"). At a
# 2-byte start every such load reads the half-words beside the constant: frozen board/ code crashed
# the emulated RP2040 in its first reducer call (an unaligned read at a garbage address) while the
# same .mpy loaded into the (word-aligned) heap ran. ARMv7-M code loads constants with movw/movt and
# is unaffected (the RP2350). tests/test_rp2_build.py checks the amendment.
ALIGN_ARMV6M_NATIVE_CODE = (
    "tools/mpy-tool.py", "        if config.native_arch in (\n            MP_NATIVE_ARCH_ARMV6,\n",
    "        if config.native_arch in (\n            MP_NATIVE_ARCH_ARMV6,\n"
    "            MP_NATIVE_ARCH_ARMV6M,  # powerrig: pc-relative literals need a word start\n")

# The USB CDC's POLLOUT only when a whole 64-byte packet fits in TinyUSB's transmit FIFO. As shipped,
# poll says writable at one byte free, and a write of more than the room left waits for the host, up to
# MICROPY_HW_USB_CDC_TX_TIMEOUT (500 ms: shared/tinyusb/mp_usbd_cdc.c, mp_usbd_cdc_tx_strn): a host
# that stopped reading held one pass of the emulated RP2040 486 ms and cost 185,500 samples (issue 43).
# The firmware's UsbLink writes at most 64 bytes after each poll that said writable, so with this
# change a write never waits; a frame that finds the queue full is dropped and counted instead.
# tests/micropython/mcu_overrun.py runs the link against both polls (fwtest/tinyusb_cdc.py).
USB_POLL_WRITABLE_PACKET = (
    "shared/tinyusb/mp_usbd_cdc.c",
    "(!tud_cdc_connected() || (tud_cdc_connected() && tud_cdc_write_available() > 0))) {\n",
    "(!tud_cdc_connected() || (tud_cdc_connected() && tud_cdc_write_available() >= 64))) {  "
    "/* powerrig: scripts/build_rp2_mp.py */\n")


def firmware_hash(firmware: Path = FIRMWARE, packages: tuple[str, ...] = PACKAGES) -> str:
    """A hash of the firmware packages frozen into an image (rebuilt when they change)."""
    h = hashlib.sha256()
    for f in sorted(f for pkg in packages for f in (firmware / pkg).rglob("*.py")):
        h.update(str(f.relative_to(firmware)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def image_name(board: str, firmware: Path = FIRMWARE) -> str:
    ext = "bin" if board == "RPI_PICO" else "uf2"        # rp2040js loads the flat image; a lab the UF2
    return f"powerrig-{board}-{firmware_hash(firmware, FROZEN[board])}.{ext}"


def compile_armv6m(cross: Path, firmware: Path, package: str, into) -> dict[str, str]:
    """Every module of ``package`` compiled by ``cross`` for ARMv6-M (the RP2040's Cortex-M0+);
    ``into(name, mpy_bytes)`` gets each that compiles. Returns {"pkg/file.py": "" or mpy-cross's
    reason}: a module that does not compile (the Thumb-2 kernels) is one an RP2040 board does not
    carry, so the firmware's start-up choice of kernels (board/arch.py) is what runs."""
    out: dict[str, str] = {}
    tmp = cross.parent / f".probe-{os.getpid()}.mpy"
    for py in sorted((firmware / package).glob("*.py")):
        name = f"{package}/{py.name}"
        r = subprocess.run([str(cross), "-march=armv6m", "-s", name, "-o", str(tmp), str(py)],
                           capture_output=True, text=True)
        out[name] = ((r.stderr or r.stdout).strip().splitlines() or ["error"])[-1] if r.returncode else ""
        if not r.returncode and into is not None:
            into(f"{package}/{py.stem}.mpy", tmp.read_bytes())
    tmp.unlink(missing_ok=True)
    return out


def _manifest(out: Path, board: str, firmware: Path) -> Path:
    """The port's own frozen modules plus the board's frozen firmware packages (FROZEN)."""
    lines = ['include("$(PORT_DIR)/boards/manifest.py")']
    for pkg in FROZEN[board]:
        lines.append(f"package({pkg!r}, base_path={str(firmware)!r})")
    m = out / f"manifest-powerrig-{board}.py"
    m.write_text("\n".join(lines) + "\n")
    return m


def build(board: str = "RPI_PICO", firmware: Path = FIRMWARE) -> Path:
    """The cache directory holding the board's image (image_name()) with ``firmware`` frozen in, and
    mpy-cross, building them if needed."""
    if board not in BOARDS:
        raise Unavailable(f"board {board} is not one of {', '.join(BOARDS)}")
    mp_tar, pt_tar = find_sources()
    for tool in ("arm-none-eabi-gcc", "cmake", "make"):
        if not shutil.which(tool):
            raise Unavailable(MISSING_TOOLS.format(tool=tool))
    out = cache_root() / _key(mp_tar, pt_tar)
    image, cross = out / image_name(board, firmware), out / "mpy-cross"
    if image.exists() and cross.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:           # parallel test workers: one builds, the others wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        if image.exists() and cross.exists():
            return out
        log = out / f"build-{board}.log"
        log.write_text("")
        tree, pt_tree, pt_inst = out / "src", out / "picotool", out / "picotool-inst"
        if not (tree / "ports" / "rp2").is_dir():
            shutil.rmtree(tree, ignore_errors=True)
            _unpack(mp_tar, tree)
        jobs = str(min(4, os.cpu_count() or 1))
        if not (pt_inst / "lib" / "cmake" / "picotool").is_dir():
            # picotool turns the ELF into the UF2/bin images; without it pico-sdk tries to download it
            shutil.rmtree(pt_tree, ignore_errors=True)
            _unpack(pt_tar, pt_tree)
            bld = pt_tree / "build"
            bld.mkdir()
            _run(["cmake", f"-DPICO_SDK_PATH={tree / 'lib' / 'pico-sdk'}", f"-DCMAKE_INSTALL_PREFIX={pt_inst}",
                  ".."], log, cwd=bld)
            _run(["make", "-j", jobs], log, cwd=bld)
            _run(["make", "install"], log, cwd=bld)
        amend(tree, ALIGN_ARMV6M_NATIVE_CODE)
        amend(tree, VM_FRAMES_ON_STACK)         # (build_qemu_mp: the main loop's frames off the heap)
        amend(tree, USB_POLL_WRITABLE_PACKET)
        if not cross.exists():
            _run(["make", "-j", jobs, "-C", str(tree / "mpy-cross")], log)
        if not cross.exists():
            shutil.copy2(tree / "mpy-cross" / "build" / "mpy-cross", cross.with_suffix(".tmp"))
            os.replace(cross.with_suffix(".tmp"), cross)
        # the build folder is kept after a build that succeeded (a firmware change then recompiles the
        # frozen modules and relinks: seconds, not a whole port build), and removed after one that
        # failed: a configure that failed once leaves a cache that links an empty 3 KB image without
        # an error (../shared/vendor/README.md)
        bdir = tree / "ports" / "rp2" / f"build-{board}"
        if not (bdir / ".powerrig-ok").exists():
            shutil.rmtree(bdir, ignore_errors=True)
        # makemanifest.py regenerates the frozen modules only when a source is newer than its output:
        # a module taken out of the manifest would stay frozen in. Without the output it starts afresh.
        (bdir / "frozen_content.c").unlink(missing_ok=True)
        # picotool through the environment: CMAKE_ARGS on make's command line would replace the port
        # Makefile's own CMAKE_ARGS (its -DMICROPY_BOARD), and every board would build as RPI_PICO
        env = dict(os.environ, CMAKE_PREFIX_PATH=str(pt_inst))
        cmd = ["make", "-j", jobs, "-C", str(tree / "ports" / "rp2"), f"BOARD={board}",
               f"FROZEN_MANIFEST={_manifest(out, board, firmware)}"]
        built = bdir / ("firmware.bin" if board == "RPI_PICO" else "firmware.uf2")
        try:
            _run(cmd, log, env=env)
            if not built.exists() or built.stat().st_size < 100_000:
                raise RuntimeError(f"build of {board} left no usable {built.name} (log: {log})")
        except RuntimeError:
            shutil.rmtree(bdir, ignore_errors=True)
            raise
        (bdir / ".powerrig-ok").touch()
        shutil.copy2(built, image.with_suffix(".tmp"))
        os.replace(image.with_suffix(".tmp"), image)
    return out


def main() -> int:
    board = sys.argv[sys.argv.index("--board") + 1] if "--board" in sys.argv else "RPI_PICO"
    return run_main("build_rp2_mp", lambda: build(board))


if __name__ == "__main__":
    sys.exit(main())
