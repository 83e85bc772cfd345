"""Run firmware scripts on MicroPython for an emulated Cortex-M (QEMU mps2-an385, ARMv7-M).

Why: the RP2350's budget is counted in instructions, and QEMU's ``-icount shift=0`` advances the
guest clock 1 ns per executed instruction, so ``time.ticks_diff(t1, t0) * 1000`` inside a script is
an exact, deterministic instruction count (resolution 1000 instructions: measure many samples).

How: scripts/build_qemu_mp.py builds the image once (cached). Each run packs the firmware
(powerrig_fw, board), the test vectors and the script, compiled with that build's mpy-cross for
armv7m (as `make firmware` does for the board), into a ROMFS image that QEMU loads at the address
the port mounts as /rom; the REPL then imports the script and QEMU ends with machine.reset().

    from qemu import run_script, available
    out = run_script(Path("tests/micropython/fw_vectors.py"), args=["/rom/vectors"])
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import build_qemu_mp  # noqa: E402

ROMFS_ADDR = 0x21000000      # MICROPY_HW_ROMFS_PART0_START of the MPS2_AN385 board
ROMFS_MAX = 0x00400000
END = "@@END"
# compiled into the image's romfs: the pure firmware, the board's kernels and the shared vectors
FIRMWARE_DIRS = (("powerrig_fw", REPO / "firmware" / "powerrig_fw"), ("board", REPO / "firmware" / "board"),
                 ("fwtest", HERE / "fwtest"))      # the DMA and USB stand-ins (tests only)
VECTORS = REPO / "tests" / "vectors"


class QemuUnavailable(Exception):
    """Why the emulated Cortex-M cannot run here (no source, toolchain or qemu-system-arm)."""


def image_dir() -> Path:
    """The cached build (firmware.elf, mpy-cross), built now if needed; QemuUnavailable if it cannot be."""
    if not shutil.which("qemu-system-arm"):
        raise QemuUnavailable("qemu-system-arm not found: install qemu-system-arm (scripts/setup.sh does)")
    try:
        return build_qemu_mp.build()
    except build_qemu_mp.Unavailable as e:
        raise QemuUnavailable(str(e)) from None


def available() -> str | None:
    """None when the emulated Cortex-M can run, else the reason it cannot (a skip message)."""
    try:
        image_dir()
    except QemuUnavailable as e:
        return str(e)
    return None


def _romfs_writer(img: Path):
    spec = importlib.util.spec_from_file_location("_mp_romfs", img / "romfs.py")
    if spec is None or not (img / "romfs.py").exists():
        from mpremote.romfs import VfsRomWriter   # the installed mpremote has the same writer
        return VfsRomWriter()
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.VfsRomWriter()


def _compile(cross: Path, src: Path, cache: Path) -> bytes:
    """src compiled to .mpy for armv7m, cached by content (so a run rebuilds only what changed)."""
    data = src.read_bytes()
    key = hashlib.sha256(data + str(src.name).encode()).hexdigest()[:20]
    out = cache / f"{key}.mpy"
    if not out.exists():
        tmp = cache / f"{key}.{os.getpid()}.tmp"
        r = subprocess.run([str(cross), "-march=armv7m", "-s", src.name, "-o", str(tmp), str(src)],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"mpy-cross failed on {src}: {r.stderr.strip()}")
        os.replace(tmp, out)
    return out.read_bytes()


def build_romfs(img: Path, job: str, extra: dict[str, bytes] | None = None) -> bytes:
    """A ROMFS image: powerrig_fw/ and board/ as .mpy, vectors/, _job.mpy (the script) and _run.py."""
    cache = img / "mpy"
    cache.mkdir(exist_ok=True)
    cross = img / "mpy-cross"
    w = _romfs_writer(img)
    for name, d in FIRMWARE_DIRS:
        w.opendir(name)
        for f in sorted(d.glob("*.py")):
            w.mkfile(f.stem + ".mpy", _compile(cross, f, cache))
        w.closedir()
    w.opendir("vectors")
    for f in sorted(VECTORS.iterdir()):
        if f.suffix in (".bin", ".json"):
            w.mkfile(f.name, f.read_bytes())
    w.closedir()
    with tempfile.TemporaryDirectory() as t:
        jp = Path(t) / "_job.py"
        jp.write_text(job)
        w.mkfile("_job.mpy", _compile(cross, jp, cache))
    for name, data in (extra or {}).items():
        w.mkfile(name, data)
    w.mkfile("_run.py", (
        "import sys\n"
        "try:\n"
        "    import _job\n"
        "except BaseException as e:\n"
        "    sys.print_exception(e)\n"
        f"    print('{END}', 1)\n"
        "else:\n"
        f"    print('{END}', 0)\n"
    ).encode())
    rom = w.finalise()
    if len(rom) > ROMFS_MAX:
        raise RuntimeError(f"romfs image of {len(rom)} bytes exceeds the {ROMFS_MAX}-byte partition")
    return rom


class ScriptFailed(AssertionError):
    """The script raised on the emulated MCU; the message holds its output and traceback."""


def run_source(source: str, args: list[str] | None = None, timeout: float = 300.0) -> str:
    """Run MicroPython source on the emulated Cortex-M; its printed output (ScriptFailed if it raised)."""
    img = image_dir()
    job = f"ARGS = {list(args or [])!r}\n" + source
    rom = build_romfs(img, job)
    with tempfile.TemporaryDirectory() as t:
        romfile = Path(t) / "romfs.img"
        romfile.write_bytes(rom)
        cmd = ["qemu-system-arm", "-machine", "mps2-an385", "-nographic", "-monitor", "null", "-semihosting",
               "-icount", "shift=0", "-serial", "stdio",
               "-device", f"loader,file={romfile},addr={ROMFS_ADDR:#x},force-raw=on",
               "-kernel", str(img / "firmware.elf")]
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = bytearray()
        sent = False
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no result from QEMU within {timeout:.0f} s; output so far:\n"
                                       + out.decode(errors="replace")[-3000:])
                ready, _, _ = select.select([p.stdout], [], [], min(left, 1.0))
                if ready:
                    chunk = os.read(p.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    out += chunk
                if not sent and b">>> " in out:
                    p.stdin.write(b"import _run\r")
                    p.stdin.flush()
                    sent = True
                i = out.find(END.encode())
                if i >= 0 and b">>> " in out[i:]:
                    break
        finally:
            p.kill()
            p.wait()
    text = out.decode(errors="replace").replace("\r\n", "\n")
    start = text.find("import _run\n")
    body = text[start + len("import _run\n"):] if start >= 0 else text
    end = body.rfind(END)
    if end < 0:
        raise ScriptFailed("QEMU ended without a result:\n" + text[-3000:])
    status = body[end + len(END):].split()[0]
    body = body[:end]
    if status != "0":
        raise ScriptFailed(body[-5000:])
    return body


def run_script(path: Path, args: list[str] | None = None, timeout: float = 300.0) -> str:
    return run_source(Path(path).read_text(), args, timeout)


def instructions(us: int) -> int:
    """ticks_us elapsed under -icount shift=0 -> instructions executed (1 ns each)."""
    return us * 1000


if __name__ == "__main__":   # python tests/micropython/qemu.py SCRIPT.py [ARG...]
    try:
        print(run_script(Path(sys.argv[1]), sys.argv[2:]), end="")
    except QemuUnavailable as e:
        print(f"skipped: {e}", file=sys.stderr)
        sys.exit(3)
