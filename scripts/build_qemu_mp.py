#!/usr/bin/env python3
"""Build MicroPython for an emulated Cortex-M (QEMU mps2-an385) into a cache directory.

Why: the firmware's hot path must fit an instruction budget on ARMv7-M, and QEMU's ``-icount shift=0``
counts executed instructions exactly. This builds that image (and the matching mpy-cross) once per
MicroPython source, so the test tier and benchmarks/bench_firmware.py can run firmware on it.

Source, first found wins:
  1. $MICROPYTHON_SRC: a MicroPython source tree or a micropython-*.tar.gz
  2. ../shared/vendor/micropython-*.tar.gz next to the repository (or next to its main worktree, or
     next to the local repository it was cloned from)
Output: <cache>/<hash>/firmware.elf and <cache>/<hash>/mpy-cross, where <cache> is
$POWERRIG_QEMU_CACHE or ~/.cache/powerrig/qemu-mp. Prints the directory on success.

Exit codes: 0 built (or cached), 3 no source / tools (the message says how to get them), 1 build failed.
Needs gcc-arm-none-eabi, libnewlib-arm-none-eabi (scripts/setup.sh installs them).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RECIPE = "mps2-an385/heap-400k/v2"       # bump when the build recipe below changes
HEAP_SIZE = 400 * 1024                   # about what MicroPython's rp2 port leaves for the heap on an RP2350
HOW_TO_GET = ("MicroPython source not found: set MICROPYTHON_SRC to a MicroPython checkout or release tarball "
              "(git clone https://github.com/micropython/micropython), or put micropython-*.tar.gz into "
              "../shared/vendor/ next to the repository")
MISSING_TOOLS = ("arm-none-eabi-gcc not found: install gcc-arm-none-eabi and libnewlib-arm-none-eabi "
                 "(scripts/setup.sh does, or: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)")


# MicroPython gives a bytecode function whose frame (its locals and value stack) is over 11 words a frame
# on the heap, taken with gc_alloc at the call and freed at its return (py/objfun.c,
# VM_MAX_STATE_ON_STACK), and falls back to the C stack when that fails: under heap_lock it fails at
# once, so heap_lock never sees these allocations. The main loop's own functions have frames of 14 to
# 32 words (Device.poll 20, Burst.observe 17, ClockPing.answer 25): every pass made several, and in a
# fragmented heap each one searched the allocation table for a run of free blocks. On the emulated
# RP2040 that stalled the main loop behind its DMA ring for good (docs/emulator.md). Every image built
# here keeps frames of up to VM_FRAME_WORDS on the C stack; tests/test_rp2_build.py checks that every
# firmware function fits.
VM_FRAME_WORDS = 32
VM_FRAMES_ON_STACK = ("py/objfun.c", "#define VM_MAX_STATE_ON_STACK (sizeof(mp_uint_t) * 11)\n",
                      f"#define VM_MAX_STATE_ON_STACK (sizeof(mp_uint_t) * {VM_FRAME_WORDS})  "
                      "/* powerrig: scripts/build_qemu_mp.py */\n")


def amend(tree: Path, change: tuple[str, str, str]) -> None:
    """One change this project makes to MicroPython's source before building: (file, old, new), the
    old text replaced once. A source without the old text is an error, never a silent build."""
    rel, old, new = change
    path = tree / rel
    text = path.read_text()
    if new in text:
        return
    if text.count(old) != 1:
        raise RuntimeError(f"{path}: {old.strip()!r} not found; this MicroPython differs from the one the build "
                           "was written for (scripts/build_qemu_mp.py, scripts/build_rp2_mp.py)")
    path.write_text(text.replace(old, new))


class Unavailable(Exception):
    """The image cannot be built on this machine (no source or no toolchain): a reason to skip."""


def cache_root() -> Path:
    env = os.environ.get("POWERRIG_QEMU_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "powerrig" / "qemu-mp"


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _vendor_dirs():
    """../shared/vendor next to this checkout; for a git worktree, next to the main checkout; for a
    clone of a local repository (CI's fresh clone), next to the repository it was cloned from."""
    yield REPO.parent / "shared" / "vendor"
    common = _git("rev-parse", "--path-format=absolute", "--git-common-dir")
    if common:
        yield Path(common).parent.parent / "shared" / "vendor"
    origin = _git("config", "--get", "remote.origin.url")
    if origin.startswith("file://"):
        origin = origin[len("file://"):]
    if origin and "://" not in origin and not (":" in origin.split("/")[0]):   # a path, not host:path
        yield Path(origin).expanduser().resolve().parent / "shared" / "vendor"


def find_source() -> Path:
    env = os.environ.get("MICROPYTHON_SRC")
    if env:
        p = Path(env).expanduser()
        if p.is_dir() and (p / "ports" / "qemu").is_dir():
            return p
        if p.is_file() and p.name.endswith((".tar.gz", ".tgz")):
            return p
        raise Unavailable(f"MICROPYTHON_SRC={env} is neither a MicroPython tree (with ports/qemu) nor a tarball; "
                          + HOW_TO_GET)
    for d in _vendor_dirs():
        found = sorted(d.glob("micropython-*.tar.gz"))
        if found:
            return found[-1]
    raise Unavailable(HOW_TO_GET)


def _source_key(src: Path) -> str:
    h = hashlib.sha256(RECIPE.encode())
    if src.is_file():
        with open(src, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    else:   # a tree: its git commit if it has one, else its path and the port's Makefile
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True).stdout.strip()
        h.update((head or str(src.resolve())).encode())
        h.update((src / "ports" / "qemu" / "Makefile").read_bytes())
    return h.hexdigest()[:16]


def _unpack(src: Path, dest: Path) -> Path:
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("build*", ".git"))
        return dest
    tmp = dest.with_name(dest.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(src) as tf:
        tf.extractall(tmp, filter="data")
    tops = [p for p in tmp.iterdir() if p.is_dir()]
    root = tops[0] if len(tops) == 1 and not (tmp / "ports").exists() else tmp
    root.rename(dest) if root != tmp else tmp.rename(dest)
    shutil.rmtree(tmp, ignore_errors=True)
    return dest


def build(verbose: bool = False) -> Path:
    """The cache directory holding firmware.elf and mpy-cross, building them if needed."""
    src = find_source()
    if not shutil.which("arm-none-eabi-gcc"):
        raise Unavailable(MISSING_TOOLS)
    out = cache_root() / _source_key(src)
    elf, cross = out / "firmware.elf", out / "mpy-cross"
    if elf.exists() and cross.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:          # parallel test workers: one builds, the others wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        if elf.exists() and cross.exists():
            return out
        tree = out / "src"
        if not (tree / "ports" / "qemu").is_dir():
            shutil.rmtree(tree, ignore_errors=True)
            _unpack(src, tree)
        amend(tree, VM_FRAMES_ON_STACK)
        # the port's default frozen manifest wants the micropython-lib submodule; freeze only its own file
        (tree / "lib" / "micropython-lib").mkdir(parents=True, exist_ok=True)
        (tree / "lib" / "micropython-lib" / "README.md").write_text("placeholder: not needed by this build\n")
        manifest = out / "manifest.py"
        manifest.write_text('freeze("$(PORT_DIR)/test-frzmpy", "frozen_const.py")\n')
        jobs = str(min(4, os.cpu_count() or 1))
        quiet = None if verbose else subprocess.DEVNULL
        log = out / "build.log"
        with open(log, "w") as lf:
            for cmd in (["make", "-j", jobs, "-C", str(tree / "mpy-cross")],
                        ["make", "-j", jobs, "-C", str(tree / "ports" / "qemu"), "BOARD=MPS2_AN385",
                         f"FROZEN_MANIFEST={manifest}", f"MICROPY_HEAP_SIZE={HEAP_SIZE}"]):
                r = subprocess.run(cmd, stdout=lf if quiet else None, stderr=subprocess.STDOUT if quiet else None)
                if r.returncode:
                    raise RuntimeError(f"build failed: {' '.join(cmd)} (log: {log})")
        shutil.copy2(tree / "ports" / "qemu" / "build-MPS2_AN385" / "firmware.elf", elf.with_suffix(".tmp"))
        shutil.copy2(tree / "mpy-cross" / "build" / "mpy-cross", cross.with_suffix(".tmp"))
        (tree / "tools" / "mpremote" / "mpremote" / "romfs.py").exists() and shutil.copy2(
            tree / "tools" / "mpremote" / "mpremote" / "romfs.py", out / "romfs.py")
        os.replace(cross.with_suffix(".tmp"), cross)
        os.replace(elf.with_suffix(".tmp"), elf)
    return out


def run_main(name: str, build_fn) -> int:
    """A build script's exit: the directory printed (0), or why not (3: unavailable, 1: failed)."""
    try:
        out = build_fn()
    except Unavailable as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 3
    except RuntimeError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


def main() -> int:
    return run_main("build_qemu_mp", lambda: build(verbose="-v" in sys.argv))


if __name__ == "__main__":
    sys.exit(main())
