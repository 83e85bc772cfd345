"""A throw-away QEMU guest with an emulated NVMe controller: the drive host of a `qemu` rig.

The guest runs the distribution's nvme-cli and fio on the real Linux NVMe driver (image.py). This
side boots it, holds the one connection to its command agent (a virtio-serial port; ``AgentLink``)
and talks QMP to it (``Qmp``: hot-plug, injected critical warnings). QEMU's trace of every NVMe
command goes to ``trace.log`` (trace.py reads it for the power model; it is never an input to where
powerrig places events).
"""
from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from powerrig.core.errors import PowerrigError
from powerrig.sim.processes import die_with_parent
from powerrig.sim.qemu import priority
from powerrig.sim.qemu.image import QEMU, find

# the NVMe events the power model needs: each command's kind and size, submit and completion
TRACE_EVENTS = ("pci_nvme_io_cmd", "pci_nvme_admin_cmd", "pci_nvme_read", "pci_nvme_write",
                "pci_nvme_enqueue_req_completion")
NVME_ID = "nvme0"
BUS = "rp1"
# a subsystem guest adds Format NVM's per-namespace line: which namespaces a format really erased
SUBSYS_TRACE_EVENTS = ("pci_nvme_format_set",)
# one vCPU: with two on this 2-core TCG host the guest kernel stalled now and then (an RCU stall with
# its grace-period kthread starved on CPU 0, a 44-70 s soft lockup on the other, nvme-cli and the agent
# silent after: 1 quiet serial run of the tier in 4, twice in ~10 `make test`); one vCPU has no other
# CPU to wait for, passed 5 runs of 5 and ran no slower (docs/qemu-nvme.md, "One vCPU").
# POWERRIG_QEMU_SMP overrides it.
SMP = 1


def default_smp() -> int:
    """The guest's vCPU count: ``POWERRIG_QEMU_SMP`` if it is a positive integer, else ``SMP``."""
    v = os.environ.get("POWERRIG_QEMU_SMP", "")
    return int(v) if v.isdigit() and int(v) > 0 else SMP


@dataclass(frozen=True)
class Namespace:
    """One ``nvme-ns`` of a subsystem guest: its nsid, the controller (index) whose bus carries it,
    and ``shared`` (attached to every controller of the subsystem) or private to that controller.
    Its data lives in ``nvm-ns<nsid>.img`` in the run directory (a sparse file the host can read:
    the truth of what was written or erased there)."""
    nsid: int
    ctrl: int = 0
    shared: bool = False
    size: str = "64M"


@dataclass(frozen=True)
class Subsystem:
    """An NVM subsystem (QEMU 7.2 ``nvme-subsys``): ``controllers`` controllers with the same serial,
    each behind its own PCIe root port, and these namespaces. The default: nsid 1 and 2 private to
    controller 0, nsid 3 private to controller 1, nsid 4 shared by both (the layout a dual-port
    enterprise drive has, small enough to format in a blink)."""
    controllers: int = 2
    namespaces: tuple[Namespace, ...] = (Namespace(1), Namespace(2), Namespace(3, ctrl=1),
                                         Namespace(4, shared=True))
    nqn: str = "nqn.2026-11.io.powerrig:subsys0"
    # another drive beside the subsystem: its own controller (no subsystem) with this serial and one
    # namespace ``other_nsid`` (an nsid the subsystem does not use, so the trace tells them apart)
    other_serial: str | None = None
    other_nsid: int = 7
    other_size: str = "16M"

    def controller_ids(self) -> list[str]:
        """QEMU's device ids of the controllers (QMP's handles; the guest names its own)."""
        return [f"nvme{k}" for k in range(self.controllers)]


class GuestError(PowerrigError):
    """The QEMU guest did not start, or its agent or QMP went away."""


@dataclass
class Reply:
    rc: int
    stdout: bytes
    stderr: bytes
    t_guest_start: float
    t_guest_end: float


class AgentLink:
    """The host end of the guest agent's virtio-serial port (guest/agent.sh has the protocol): many
    commands in flight at once, each answered whole, matched by id."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._lock = threading.Lock()
        self._next = 0
        self._waiting: dict[str, list] = {}     # id -> [threading.Event, result]
        self._closed: str | None = None
        self._reader = threading.Thread(target=self._read, name="qemu-agent", daemon=True)
        self._reader.start()

    def _new(self) -> tuple[str, threading.Event, list]:
        with self._lock:
            self._next += 1
            i = str(self._next)
            slot = [threading.Event(), None]
            self._waiting[i] = slot
        return i, slot[0], slot

    def _send(self, line: str) -> float:
        """Send one line; the host time just before it went (a clock sample's lower bound)."""
        if self._closed:
            raise GuestError(f"the guest agent is gone ({self._closed})")
        with self._lock:
            t = time.time()
            self.sock.sendall(line.encode() + b"\n")
        return t

    def _wait(self, i: str, ev: threading.Event, slot: list, timeout: float | None):
        if not ev.wait(timeout):
            with self._lock:
                self._waiting.pop(i, None)
            raise TimeoutError(f"the guest agent did not answer within {timeout:g} s")
        if isinstance(slot[1], Exception):
            raise slot[1]
        return slot[1]

    def sync(self, timeout: float = 5.0) -> float:
        """The guest's clock (epoch s), read by the agent as soon as the request arrives."""
        return self.sync_sample(timeout)[1]

    def sync_sample(self, timeout: float = 5.0) -> tuple[float, float, float]:
        """(host time the request left, the guest's clock on its arrival, host time its answer
        arrived less the guest's time between the request's arrival and the answer leaving): stamped
        here at the socket, so the relay's and its client's own delays stay out of the bounds, and
        the guest's own (agent.sh) too."""
        i, ev, slot = self._new()
        t_send = self._send(f"{i} SYNC")
        t_guest, t_recv = self._wait(i, ev, slot, timeout)
        return t_send, t_guest, t_recv

    def run(self, script: str, stdin: bytes | None = None, timeout: float | None = None) -> Reply:
        i, ev, slot = self._new()
        line = f"{i} {base64.b64encode(script.encode()).decode()}"
        if stdin:
            line += " " + base64.b64encode(stdin).decode()
        self._send(line)
        return self._wait(i, ev, slot, timeout)

    def _read(self) -> None:
        buf = b""
        cur = None            # [id, t0, out lines, err lines, part]
        try:
            while True:
                d = self.sock.recv(1 << 16)
                t_recv = time.time()
                if not d:
                    raise EOFError("the guest closed the agent port")
                buf += d
                *lines, buf = buf.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace")
                    if line.startswith("SYNC "):
                        # the guest's clock on the request's arrival and as the answer left (NTP's
                        # T2 and T3): the answer's arrival less the guest's time between bounds the
                        # offset as if the guest had answered at once (an older agent: one stamp)
                        _, i, t, *t_left = line.split()
                        self._deliver(i, (float(t), t_recv - (float(t_left[0]) - float(t) if t_left else 0.0)))
                    elif line.startswith("BEGIN "):
                        _, i, t0 = line.split()
                        cur = [i, float(t0), [], [], "out"]
                    elif line.startswith("STDERR ") and cur:
                        cur[4] = "err"
                    elif line.startswith("END ") and cur:
                        _, i, rc, t1 = line.split()
                        self._deliver(i, Reply(int(rc), base64.b64decode("".join(cur[2])),
                                               base64.b64decode("".join(cur[3])), cur[1], float(t1)))
                        cur = None
                    elif cur:
                        (cur[2] if cur[4] == "out" else cur[3]).append(line)
        except (OSError, EOFError, ValueError) as e:
            self._closed = str(e) or type(e).__name__
            with self._lock:
                waiting, self._waiting = self._waiting, {}
            for slot in waiting.values():
                slot[1] = GuestError(f"the guest agent is gone ({self._closed})")
                slot[0].set()

    def _deliver(self, i: str, result) -> None:
        with self._lock:
            slot = self._waiting.pop(i, None)
        if slot is not None:
            slot[1] = result
            slot[0].set()


class Qmp:
    """A QMP connection (one of the guest's monitors): commands in order, events kept with the host
    time they arrived."""

    def __init__(self, path: str, timeout: float = 30.0, proc: subprocess.Popen | None = None):
        self.sock = _connect(str(path), timeout, proc)
        self.f = self.sock.makefile("rwb", buffering=0)
        self.events: list[tuple[float, dict]] = []
        self._lock = threading.Lock()
        json.loads(self.f.readline())                    # the greeting
        self.execute("qmp_capabilities")

    def _message(self, when: str) -> dict:
        """The next QMP message (a reply or an event); GuestError when QEMU closed the socket."""
        line = self.f.readline()
        if not line:
            raise GuestError(f"QMP closed {when}")
        return json.loads(line)

    def execute(self, cmd: str, **args) -> dict:
        """The command's "return"; GuestError with QEMU's message when it fails."""
        msg = {"execute": cmd, **({"arguments": args} if args else {})}
        with self._lock:
            self.f.write(json.dumps(msg).encode() + b"\n")
            while True:
                r = self._message(f"during {cmd}")
                if "event" in r:
                    self.events.append((time.time(), r))
                    continue
                if "error" in r:
                    raise GuestError(f"QMP {cmd}: {r['error'].get('desc', r['error'])}")
                return r.get("return", {})

    def wait_event(self, name: str, timeout: float = 30.0) -> tuple[float, dict]:
        """(host time it arrived, event): one already received, else the next one of that name."""
        with self._lock:
            for k, (t, e) in enumerate(self.events):
                if e.get("event") == name:
                    return self.events.pop(k)
            self.sock.settimeout(timeout)
            try:
                while True:
                    r = self._message(f"while waiting for {name}")
                    if "event" in r:
                        if r["event"] == name:
                            return time.time(), r
                        self.events.append((time.time(), r))
            except (socket.timeout, TimeoutError):
                raise GuestError(f"no QMP event {name} within {timeout:g} s") from None
            finally:
                self.sock.settimeout(None)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _connect(path: str, timeout: float, proc: subprocess.Popen | None = None) -> socket.socket:
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(path)
            return s
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if time.monotonic() > deadline or (proc is not None and proc.poll() is not None):
                raise GuestError(f"cannot connect to {path}") from None
            time.sleep(0.01)


class Guest:
    """One QEMU guest: q35, TCG, one vCPU (``SMP``), the NVMe controller behind a hot-plug capable
    root port, a 1 GiB namespace in a sparse file, the agent port and two QMP monitors (the rig's,
    and ``world.qmp`` for whoever plays the world: pulling the drive, injecting a warning)."""

    def __init__(self, rundir: str | os.PathLike, serial: str, img_size: str = "1G", mem_mb: int = 1024,
                 smp: int | None = None, trace: bool = True, subsystem: Subsystem | None = None,
                 multipath: bool | None = None, extra_trace: tuple[str, ...] = ()):
        """``subsystem``: instead of the one controller with one namespace, an NVM subsystem of
        several controllers (same serial) and namespaces, private and shared (Subsystem).
        ``multipath``: the guest kernel's native NVMe multipath (``nvme_core.multipath``): None
        leaves the kernel's default (on), False turns it off (one block device per controller and
        namespace), True asks for it explicitly. ``extra_trace``: more of QEMU's trace events (a
        measurement's: benchmarks/qemu_admin_stages.py's doorbell and MSI-X stamps). ``smp``: vCPUs
        (None: ``default_smp()``)."""
        self.rundir = Path(rundir)
        self.rundir.mkdir(parents=True, exist_ok=True)
        self.serial, self.img_size, self.mem_mb, self.trace = serial, img_size, mem_mb, trace
        self.smp = default_smp() if smp is None else smp
        self.subsystem, self.multipath, self.extra_trace = subsystem, multipath, tuple(extra_trace)
        self.img = self.rundir / "nvm.img"
        self.proc: subprocess.Popen | None = None
        self.agent: AgentLink | None = None
        self.qmp: Qmp | None = None
        self.boot_s: float | None = None

    @property
    def trace_log(self) -> Path:
        return self.rundir / "trace.log"

    @property
    def world_qmp(self) -> Path:
        return self.rundir / "world.qmp"

    def nvme_device(self, ctrl: int = 0) -> dict:
        """QMP device_add arguments that bring the controller (back) under the same names (for a
        subsystem guest, controller ``ctrl``; its namespaces are the subsystem's)."""
        if self.subsystem is None:
            return {"driver": "nvme", "id": NVME_ID, "serial": self.serial, "drive": "nvm", "bus": BUS}
        return {"driver": "nvme", "id": self.subsystem.controller_ids()[ctrl], "serial": self.serial,
                "subsys": "subsys0", "bus": f"rp{ctrl + 1}"}

    def ns_image(self, nsid: int) -> Path:
        """A subsystem guest's namespace data (host side)."""
        return self.rundir / f"nvm-ns{nsid}.img"

    def _images(self) -> list[tuple[Path, str]]:
        if self.subsystem is None:
            return [(self.img, self.img_size)]
        sub = self.subsystem
        out = [(self.ns_image(n.nsid), n.size) for n in sub.namespaces]
        return out + ([(self.ns_image(sub.other_nsid), sub.other_size)] if sub.other_serial else [])

    def _nvme_args(self) -> list[str]:
        if self.subsystem is None:
            return ["-drive", f"file={self.img},if=none,id=nvm,format=raw",
                    "-device", f"pcie-root-port,id={BUS},chassis=1,slot=1",
                    "-device", "nvme," + ",".join(f"{k}={v}" for k, v in self.nvme_device().items() if k != "driver")]
        sub = self.subsystem
        ids = sub.controller_ids()
        a = ["-device", f"nvme-subsys,id=subsys0,nqn={sub.nqn}"]
        for k in range(len(ids)):
            d = self.nvme_device(k)
            a += ["-device", f"pcie-root-port,id={d['bus']},chassis={k + 1},slot={k + 1}",
                  "-device", "nvme," + ",".join(f"{key}={v}" for key, v in d.items() if key != "driver")]
        for n in sub.namespaces:
            a += ["-drive", f"file={self.ns_image(n.nsid)},if=none,id=ns{n.nsid},format=raw",
                  "-device", f"nvme-ns,drive=ns{n.nsid},nsid={n.nsid},bus={ids[n.ctrl]},"
                             f"shared={'on' if n.shared else 'off'}"]
        if sub.other_serial:
            k, o = len(ids) + 1, sub.other_nsid
            a += ["-device", f"pcie-root-port,id=rp{k},chassis={k},slot={k}",
                  "-device", f"nvme,id=other,serial={sub.other_serial},bus=rp{k}",
                  "-drive", f"file={self.ns_image(o)},if=none,id=ns{o},format=raw",
                  "-device", f"nvme-ns,drive=ns{o},nsid={o},bus=other"]
        return a

    def argv(self) -> list[str]:
        kernel, initrd = find()
        r = self.rundir
        a = [QEMU, "-machine", "q35,accel=tcg", "-cpu", "max", "-smp", str(self.smp), "-m", str(self.mem_mb),
             "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
             "-bios", "/usr/share/qemu/qboot.rom" if Path("/usr/share/qemu/qboot.rom").is_file() else "bios.bin",
             "-serial", f"file:{r}/console.log", "-kernel", str(kernel), "-initrd", str(initrd),
             "-append", "console=ttyS0 loglevel=4 rdinit=/init panic=-1" + (
                 "" if self.multipath is None else f" nvme_core.multipath={'Y' if self.multipath else 'N'}"),
             "-qmp", f"unix:{r}/rig.qmp,server=on,wait=off", "-qmp", f"unix:{self.world_qmp},server=on,wait=off",
             "-device", "virtio-serial-pci,id=vser",
             "-chardev", f"socket,id=agent,path={r}/agent.sock,server=on,wait=off",
             "-device", "virtserialport,bus=vser.0,chardev=agent,name=agent"] + self._nvme_args()
        if self.trace:
            a += ["-msg", "timestamp=on", "-D", str(self.trace_log)]
            for ev in TRACE_EVENTS + (SUBSYS_TRACE_EVENTS if self.subsystem is not None else ()) + self.extra_trace:
                a += ["-trace", f"enable={ev}"]
        return a

    def start(self, timeout: float = 300.0) -> "Guest":
        t0 = time.time()
        for img, size in self._images():
            if not img.exists():
                with open(img, "wb") as f:
                    f.truncate(_bytes(size))
        self._log = open(self.rundir / "qemu.log", "wb")
        # the guest ends with the process that started it, however that ends (a killed rig leaves no QEMU)
        self.proc = subprocess.Popen(self.argv(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=priority.ahead(die_with_parent(os.getpid()), *priority.settings()))
        try:
            self.qmp = Qmp(self.rundir / "rig.qmp", timeout, self.proc)
            self.agent = AgentLink(_connect(str(self.rundir / "agent.sock"), timeout, self.proc))
            # bytes sent before the guest opens its port are dropped: ask until the agent answers
            # (each try waits longer: on a loaded machine the answer itself can take seconds)
            deadline, wait = t0 + timeout, 0.3
            while True:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise GuestError(f"the QEMU guest did not come up within {timeout:g} s; see "
                                     f"{self.rundir}/console.log and qemu.log")
                try:
                    self.agent.sync(timeout=wait)
                    break
                except TimeoutError:
                    wait = min(5.0, wait * 1.5)
        except BaseException:
            self.stop()
            raise
        self.boot_s = time.time() - t0
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                if self.qmp is not None:
                    self.qmp.execute("quit")
            except (GuestError, OSError):
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.qmp is not None:
            self.qmp.close()
        if getattr(self, "_log", None):
            self._log.close()


def _bytes(size: str) -> int:
    s = str(size).strip().upper()
    mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(s[-1:], 1)
    return int(float(s.rstrip("KMG")) * mult)
