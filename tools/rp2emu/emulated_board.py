#!/usr/bin/env python3
"""The emulated interposer board on a pseudo-terminal: the real rp2 image, firmware/ in its flash,
AD7380s fed from a waveform, its USB CDC at /dev/pts/N for the unmodified host.

    with EmulatedBoard(codes, workdir) as board:        # codes: n x 7 int16 (powerrig.sim.interposer.frontend layout)
        subprocess.run(["powerrig", "stream", "--port", board.port, ...])
        print(board.stats())                             # the converters' and the emulator's counters

or from a shell (prints the port, runs until Ctrl-C):
    python tools/rp2emu/emulated_board.py [--seconds 3] [--rate 0.05] [--echo]

What it prepares (docs/emulator.md): the flash image with firmware/powerrig_fw frozen in
(scripts/build_rp2_mp.py, cached by its hash), a LittleFS image at the rp2 port's storage offset
(main.py as source, board/ compiled for ARMv6-M by the same tree's mpy-cross, calibration.json, as a
board is deployed), the boot ROM copied from
../shared/vendor, the waveform file, and the pty whose master the Node runner (run.mjs) inherits.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import build_qemu_mp  # noqa: E402  (the one search for ../shared/vendor)
import build_rp2_mp  # noqa: E402

FS_OFFSET = 0xA0000          # RPI_PICO: 2 MB flash - MICROPY_HW_FLASH_STORAGE_BYTES (1408 KB)
FS_BYTES = 1408 * 1024
FS_BLOCK = 4096
BOOTROM = "rp2040js-bootrom-b1.ts"


class Unavailable(Exception):
    """An input of the emulator tier is missing on this machine (the message says how to get it)."""


def node_ready() -> str | None:
    """None when Node and the pinned rp2040js are installed, else what to do."""
    if not shutil.which("node"):
        return "node not found: install nodejs and npm (scripts/setup.sh does)"
    if not (HERE / "node_modules" / "rp2040js" / "package.json").exists():
        return f"rp2040js not installed: run `npm ci` in {HERE} (scripts/setup.sh does)"
    return None


def bootrom() -> Path:
    """The RP2040 boot ROM beside run.mjs, copied from ../shared/vendor (it is not committed). Each
    caller copies into a file of its own and renames it into place: the test files of the emulator
    tier start their boards at once on a fresh clone, and with one shared temporary name the second
    rename found the first had taken it (CI, 1 Dec: nine tests in error at setup)."""
    dest = HERE / "bootrom-b1.mjs"
    if dest.exists():
        return dest
    for d in build_qemu_mp._vendor_dirs():
        src = d / BOOTROM
        if src.exists():
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
            os.close(fd)
            try:
                shutil.copyfile(src, tmp)
                os.replace(tmp, dest)       # whole either way: the last of several identical copies wins
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            return dest
    raise Unavailable(f"the RP2040 boot ROM {BOOTROM} is not in ../shared/vendor next to the repository")


def image(firmware: Path = REPO / "firmware") -> Path:
    """The flash image of the rp2 port for RPI_PICO with firmware/powerrig_fw frozen in (built on first
    use, ~75-170 s; a change to powerrig_fw recompiles and relinks in the kept build folder)."""
    try:
        cache = build_rp2_mp.build("RPI_PICO", firmware)
    except build_qemu_mp.Unavailable as e:
        raise Unavailable(str(e)) from None
    return cache / build_rp2_mp.image_name("RPI_PICO", firmware)


def pin_map(firmware: Path = REPO / "firmware") -> dict:
    """The board's pins as firmware/board/pins.py names them (the emulated wiring follows the firmware)."""
    src = (firmware / "board" / "pins.py").read_text()
    p = {k: int(v) for k, v in re.findall(r"^(\w+)\s*=\s*const\((\d+)\)", src, re.M)}
    n = p.get("ADC_SDO_COUNT", 3)
    return {"sclk": p["ADC_SCLK"], "cs": p["ADC_CS"], "sdi": p.get("ADC_SDI", -1),
            "sdo": [p["ADC_SDO_BASE"] + k for k in range(n)],
            "dig": [p["DIG_BASE"] + k for k in range(p.get("DIG_COUNT", 3))]}


def flash_filesystem(out: Path, mpy_cross: Path, firmware: Path = REPO / "firmware",
                     calibration: dict | None = None) -> dict:
    """A LittleFS image as the rp2 port mounts it (block 4 KB, prog 256 B), written to ``out``: main.py
    as source, board/ compiled for ARMv6-M by the image's own mpy-cross (its viper and asm_thumb code
    runs from the heap), and calibration.json. powerrig_fw is frozen into the image
    (scripts/build_rp2_mp.py): its bytecode stays in flash, the RP2040's RAM is left to the heap, and
    its names are in the image's sorted qstr pools. Returns {"files": [...], "not_for_armv6m": [...]}:
    the modules an RP2040 board does not carry (the Thumb-2 kernels; the firmware then takes its
    ARMv6-M path)."""
    from littlefs import LittleFS

    fs = LittleFS(block_size=FS_BLOCK, block_count=FS_BYTES // FS_BLOCK, prog_size=256, read_size=32,
                  lookahead_size=32)
    files: list[str] = []
    fs.mkdir("board")

    def put(name: str, data: bytes) -> None:
        with fs.open(name, "wb") as f:
            f.write(data)
        files.append(name)
    result = build_rp2_mp.compile_armv6m(mpy_cross, firmware, "board", put)
    put("main.py", (firmware / "main.py").read_bytes())
    if calibration is not None:
        put("calibration.json", json.dumps(calibration).encode())
    out.write_bytes(bytes(fs.context.buffer))
    return {"files": files, "not_for_armv6m": [f"{k}: {v}" for k, v in result.items() if v]}


class EmulatedBoard:
    """One emulated board process; ``port`` is the pty the host opens."""

    def __init__(self, codes: np.ndarray, workdir: Path, rate: float = 0.0, calibration: dict | None = None,
                 echo: bool = False, wall_limit_s: float = 0.0, ready_timeout_s: float = 120.0,
                 firmware: Path = REPO / "firmware", runner_args: tuple[str, ...] = ()):
        self.runner_args = tuple(runner_args)
        self.codes = np.ascontiguousarray(codes, dtype="<i2")
        self.workdir = Path(workdir)
        self.rate = rate
        self.calibration = calibration
        self.echo = echo
        self.wall_limit_s = wall_limit_s
        self.ready_timeout_s = ready_timeout_s
        self.firmware = Path(firmware)
        self.proc: subprocess.Popen | None = None
        self.port = ""
        self.filesystem: dict = {}
        self._master = self._slave = -1

    def start(self) -> "EmulatedBoard":
        why = node_ready()
        if why:
            raise Unavailable(why)
        rom, fw = bootrom(), image(self.firmware)
        self.workdir.mkdir(parents=True, exist_ok=True)
        fs_img, wave = self.workdir / "flash-fs.bin", self.workdir / "waveform.i16"
        self.filesystem = flash_filesystem(fs_img, fw.parent / "mpy-cross", self.firmware, self.calibration)
        wave.write_bytes(self.codes.tobytes())
        self.stats_path = self.workdir / "stats.json"
        pins = pin_map(self.firmware)
        pin_arg = (f"sclk={pins['sclk']},cs={pins['cs']},sdi={pins['sdi']},sdo={':'.join(map(str, pins['sdo']))},"
                   f"dig={':'.join(map(str, pins['dig']))}")
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)                 # bytes as they are: no echo, no line discipline
        os.set_blocking(self._master, False)
        self.port = os.ttyname(self._slave)
        cmd = ["node", str(HERE / "run.mjs"), "--fw", str(fw), "--bootrom", str(rom),
               "--fs", str(fs_img), "--fs-offset", str(FS_OFFSET), "--waveform", str(wave),
               "--stride", str(self.codes.shape[1]), "--pins", pin_arg, "--pty-fd", str(self._master),
               "--stats", str(self.stats_path), "--rate", str(self.rate)]
        if self.wall_limit_s:
            cmd += ["--wall", str(self.wall_limit_s)]
        if self.echo:
            cmd.append("--echo")
        cmd += list(self.runner_args)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=None if self.echo else open(self.workdir / "runner.log", "w"),
                                     pass_fds=(self._master,), preexec_fn=self._child_setup)
        os.close(self._master)                  # the runner holds it now
        self._master = -1
        line = self._readline(self.ready_timeout_s)
        if line != "ready":
            self.close()
            log = (self.workdir / "runner.log").read_text()[-2000:] if (self.workdir / "runner.log").exists() else ""
            raise RuntimeError(f"the emulated board did not enumerate its USB within {self.ready_timeout_s:g} s "
                               f"(runner said {line!r}; log: {log})")
        return self

    @staticmethod
    def _child_setup() -> None:
        """In the runner's process: it ends when this process ends."""
        try:
            import ctypes

            ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)      # PR_SET_PDEATHSIG
        except OSError:
            pass

    def _readline(self, timeout: float) -> str:
        import select

        end = time.monotonic() + timeout
        buf = b""
        while time.monotonic() < end and self.proc.poll() is None:
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                buf += os.read(self.proc.stdout.fileno(), 256)
                if b"\n" in buf:
                    return buf.split(b"\n")[0].decode(errors="replace").strip()
        return buf.decode(errors="replace").strip()

    def flush_log(self, timeout: float = 60.0) -> None:
        """The runner's stats and time log written now (SIGUSR1), returning once they are: a write that
        ends after this call began started after every event the host had seen by then, as the
        runner logs and writes on one thread. Instead of sleeping past its half-second write."""
        def stamp():
            try:
                st = os.stat(self.stats_path)
                return st.st_ino, st.st_mtime_ns
            except OSError:
                return None
        before = stamp()
        self.proc.send_signal(signal.SIGUSR1)
        end = time.monotonic() + timeout
        while stamp() == before:
            if time.monotonic() > end or self.proc.poll() is not None:
                raise RuntimeError(f"the emulated board wrote no stats within {timeout:g} s of SIGUSR1")
            time.sleep(0.01)

    def stats(self) -> dict:
        try:
            return json.loads(self.stats_path.read_text())
        except (OSError, ValueError):
            return {}

    def close(self) -> dict:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._slave >= 0:
            os.close(self._slave)
            self._slave = -1
        return self.stats()

    def __enter__(self) -> "EmulatedBoard":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def demo_codes(seconds: float) -> tuple[np.ndarray, dict]:
    """The host simulator's scripted load through its front-end model: (codes, factory calibration)."""
    sys.path.insert(0, str(REPO / "host_app"))
    from powerrig.sim.interposer.frontend import FrontEnd, ScriptedLoad

    fe = FrontEnd(ScriptedLoad(), seed=3)
    t = np.arange(int(seconds / 4e-6)) * 4e-6
    codes, _truth = fe.sample(t)
    return codes, fe.factory_calibration()


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Run the emulated interposer board on a pseudo-terminal.")
    ap.add_argument("--seconds", type=float, default=4.0, help="waveform length (it repeats), default 4")
    ap.add_argument("--rate", type=float, default=0.0, help="emulated s per wall s at most (0: free-running)")
    ap.add_argument("--workdir", default="out/rp2emu", help="where the images and stats go")
    ap.add_argument("--echo", action="store_true", help="copy the board's USB output to stderr")
    ap.add_argument("--firmware", default=str(REPO / "firmware"), help="the firmware folder to load (default: firmware/)")
    a = ap.parse_args()
    codes, cal = demo_codes(a.seconds)
    try:
        with EmulatedBoard(codes, Path(a.workdir), rate=a.rate, calibration=cal, echo=a.echo,
                           firmware=Path(a.firmware)) as b:
            print(b.port, flush=True)
            while b.proc.poll() is None:
                time.sleep(1)
    except (Unavailable, RuntimeError) as e:
        print(f"emulated_board: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
