"""The whole virtual rig in one background process: a virtual SSD, the endpoint the impersonated
nvme-cli and fio talk to, and a virtual interposer whose front end measures that SSD's rails.

    powerrig sim start [--profile d5-p5336]   -> one JSON line: port, endpoint, nvme and fio commands
    powerrig sim list
    powerrig sim stop [ID | --all]

Several rigs can run at once; each registers a JSON file in the simulator directory
(powerrig.core.rig_registry), which is how `powerrig devices` finds them.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from powerrig.core import rig_registry
from powerrig.sim.bench.calbench import BenchFixture, ReferenceMeter, ReferenceServer
from powerrig.sim.interposer.board import Faults, VirtualInterposer
from powerrig.sim.qemu.drive import QemuDrive
from powerrig.sim.qemu import image as qemu_image
from powerrig.sim.processes import RigError, children as _children, stop  # noqa: F401 - the rig's API
from powerrig.sim.ssd import profile as profiles
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.power import PowerSpec
from powerrig.sim.ssd.server import SsdServer

DEFAULT_PROFILE = "d5-p5336"
QEMU_DRIVE = "qemu"       # not a profile: the drive is QEMU's NVMe controller in a guest (sim/qemu)
BOOT_TIMEOUT_S = 330.0    # a QEMU guest boots in 2-3 s on an idle machine; a loaded one takes longer
TOOLS_DIR = Path(__file__).with_name("tools")      # the impersonated nvme-cli and fio (sim/tools)


def tool_command(tool: str, endpoint: str) -> list[str]:
    """The argv prefix a runner uses instead of `nvme` / `fio` to reach this rig's virtual SSD.

    The tool's file run by path with ``-S -P`` (no ``site``, no script directory on sys.path; the
    file puts the package root there itself), not the powerrig CLI nor ``-m``: a sweep starts these
    processes several times per step, and 16 virtual rigs on 2 cores start many at once. Without the
    CLI's argparse/logging and the drive model (numpy) a start went from ~0.25 s to ~0.1 s of CPU;
    without ``site`` (the venv's .pth files: ~45 ms here) and the heavy standard modules to about
    half that (docs/scale.md, "Many virtual rigs on one host"). The modules one start imports are
    counted by tests/test_lab_scale.py."""
    return [sys.executable, "-S", "-P", str(TOOLS_DIR / f"{tool}_cli.py"), "--endpoint", endpoint]


def tool_launcher(tool: str, endpoint: str, folder) -> list[str]:
    """The virtual rig's ``nvme`` or ``fio`` as the one program a prefix may be
    (powerrig.dut.commands.check_program: no option words): ``folder/bin/<tool>``, a POSIX sh script
    that execs :func:`tool_command` with the caller's arguments (sh adds about a millisecond to a
    start). Written whole, then moved into place: a reader never sees half a script, and a link put
    where it goes is replaced, not followed."""
    d = Path(folder) / "bin"
    d.mkdir(parents=True, exist_ok=True)
    path = d / tool
    tmp = d / f".{tool}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o755)
    with os.fdopen(fd, "w") as f:
        f.write(f"#!/bin/sh\nexec {shlex.join(tool_command(tool, endpoint))} \"$@\"\n")
    os.replace(tmp, path)
    return [str(path)]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve(profile: str, rig_id: str, root: Path, seed: int, drift_ppm: float, calibrated: bool = True,
          owner: int | None = None) -> int:
    """Run one rig in the foreground until SIGTERM/SIGINT, or until the ``owner`` process is gone.
    ``calibrated=False`` leaves the interposer with its board's raw gain and offset errors (no factory
    calibration), for calibration runs."""
    rig_dir = root / rig_id
    rig_dir.mkdir(parents=True, exist_ok=True)
    if profile == QEMU_DRIVE:
        drive = QemuDrive(rig_dir, f"QEMU{rig_id.upper()}").start()     # the real NVMe stack in a guest
        load, server, drive_state = drive.power, drive, drive.state()
    else:
        drive = VirtualSSD(profile, seed=seed)
        endpoint = str(rig_dir / "ssd.sock")
        server = SsdServer({"/dev/nvme0": drive}, endpoint)
        server.start()
        load = drive
        drive_state = {"endpoint": endpoint, "controller": "/dev/nvme0",
                       "namespaces": [f"/dev/nvme0n{k + 1}" for k in range(getattr(drive.profile, "namespaces", 1))],
                       "nvme": tool_launcher("nvme", endpoint, rig_dir), "fio": tool_launcher("fio", endpoint, rig_dir),
                       "serial": drive.sn, "host": server.host}
    fixture = BenchFixture(load)            # the reference meter's outputs can take a rail over
    faults = json.loads(os.environ.get("POWERRIG_SIM_FAULTS", "{}"))    # tests: e.g. {"stall_at": 8, "stall_for": 5}
    # the drive's power model (sim/ssd/power.py PowerSpec), e.g. {"defect_rate": 1.0} for a weak PLP capacitor
    power = PowerSpec.for_rail("12V" if profile == QEMU_DRIVE else drive.profile.rail,
                               **json.loads(os.environ.get("POWERRIG_SIM_POWER", "{}")))
    sim = VirtualInterposer(load=fixture, seed=seed, drift_ppm=drift_ppm, faults=Faults(seed=seed, **faults),
                            state_dir=str(rig_dir / "board"), calibrated=calibrated, power=power).start()
    if profile != QEMU_DRIVE:
        server.io["/dev/nvme0"].attach(sim.drive)     # the endpoint's I/O sees the interposer's switches
    reference = ReferenceServer(ReferenceMeter(sim.frontend, fixture, seed=seed)).start()
    state = {"id": rig_id, "pid": os.getpid(), "owner": owner, "profile": profile, "port": sim.port, **drive_state,
             "started": time.time(), "reference": reference.resource, "log": str(rig_dir / "rig.log")}
    rig_registry.register(state, root)
    asked = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: asked.set())
    try:
        while not asked.wait(1.0):
            if owner and not _pid_alive(owner):
                # a sweep, the GUI or a test session started us and was killed: nobody will stop us
                print(f"powerrig sim rig {rig_id}: its owner (pid {owner}) is gone; stopping", flush=True)
                break
    finally:
        reference.stop()
        sim.stop()
        server.stop()
        rig_registry.unregister(rig_id, root)
    return 0


def start(profile: str = DEFAULT_PROFILE, seed: int = 1, drift_ppm: float = 35.0, timeout: float = 20.0,
          calibrated: bool = True, owned: bool = False) -> dict:
    """Start a rig in the background and return its state once it is ready. ``owned``: the rig ends
    with this process however it ends (a killed sweep must not leave a rig burning CPU); `powerrig sim
    start` leaves it False, its rigs live until `powerrig sim stop`."""
    if profile == QEMU_DRIVE:
        try:
            qemu_image.find()
        except qemu_image.ImageError as e:
            raise RigError(str(e)) from None
        timeout = max(timeout, BOOT_TIMEOUT_S)
    elif profile not in profiles.available() and not Path(profile).is_file():
        raise RigError(f"unknown drive profile {profile!r}; available: {', '.join(profiles.available())} "
                       f"(or {QEMU_DRIVE!r}: the real NVMe stack in a QEMU guest)")
    root = rig_registry.root()
    root.mkdir(parents=True, exist_ok=True)
    rig_id = uuid.uuid4().hex[:8]
    with open(root / f"{rig_id}.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "powerrig.sim.rig", "serve", "--profile", profile, "--id",
                                 rig_id, "--seed", str(seed), "--drift-ppm", str(drift_ppm)]
                                + ([] if calibrated else ["--uncalibrated"])
                                + (["--owner", str(os.getpid())] if owned else []),
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    _children[proc.pid] = proc
    state_file = rig_registry.state_file(rig_id, root)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state_file.exists():
            return json.loads(state_file.read_text())
        if proc.poll() is not None:
            tail = (root / f"{rig_id}.log").read_text().strip().splitlines()[-1:]
            raise RigError(f"the virtual rig exited during start-up: {tail[0] if tail else 'no output'}")
        time.sleep(0.05)
    proc.kill()
    raise RigError(f"the virtual rig did not come up within {timeout:g} s; see {root / (rig_id + '.log')}")


running = rig_registry.running   # rigs whose process is alive (`powerrig sim list`, the demo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m powerrig.sim.rig")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--profile", default=DEFAULT_PROFILE)
    s.add_argument("--id", required=True)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--drift-ppm", type=float, default=35.0)
    s.add_argument("--uncalibrated", action="store_true")
    s.add_argument("--owner", type=int, default=None, help="stop when this process is gone")
    a = ap.parse_args(argv)
    return serve(a.profile, a.id, rig_registry.root(), a.seed, a.drift_ppm, calibrated=not a.uncalibrated,
                 owner=a.owner)


if __name__ == "__main__":
    raise SystemExit(main())
