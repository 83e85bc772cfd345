"""QEMU's NVMe trace, read as it is written: every command the real Linux driver sent the emulated
controller, with its queue, kind, size, submit and completion time (host UTC: ``-msg timestamp=on``).

This is the virtual world's truth: the power model (power.py) follows it, and the benchmark measures
powerrig's placement against it. Nothing that places events or phases may read it (a real drive has
no such trace); .importlinter forbids it.

Lines (QEMU 7.2): ``PID@EPOCH.us:pci_nvme_io_cmd cid 896 nsid 0x1 sqid 2 opc 0x2 opname 'NVME_NVM_CMD_READ'``,
``pci_nvme_read cid 896 nsid 1 nlb 8 count 4096 lba 0x0``, ``pci_nvme_write cid .. opname '..' nsid ..
nlb .. count N lba ..``, ``pci_nvme_admin_cmd cid 4 sqid 0 opc 0x6 opname '...'`` and
``pci_nvme_enqueue_req_completion cid 896 cqid 2 dw0 .. dw1 .. status 0x0``.
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_LINE = re.compile(r"^\d+@(\d+\.\d+):(pci_nvme_\w+) (.*)$")
_KV = re.compile(r"(\w+) ('[^']*'|\S+)")


@dataclass
class Command:
    """One NVMe command as the controller saw it."""
    qid: int
    cid: int
    opname: str            # e.g. NVME_NVM_CMD_READ, NVME_ADM_CMD_FORMAT_NVM
    t_submit: float
    nbytes: int = 0
    t_complete: float | None = None
    status: int | None = None
    t_seen: float | None = None    # when this host read its submit line (the tail's lag)
    nsid: int | None = None        # an I/O command's namespace (admin lines carry none)

    @property
    def kind(self) -> str:
        """read, write, admin or other (flush, write zeroes, ...)."""
        if self.qid == 0:
            return "admin"
        if self.opname.endswith("_READ"):
            return "read"
        if self.opname.endswith("_WRITE"):
            return "write"
        return "other"


class TraceParser:
    """Trace lines -> Commands: ``feed(line)`` returns a new Command on its submit line (its size
    and completion are filled in by later lines) or None."""

    def __init__(self):
        self.open: dict[tuple[int, int], Command] = {}
        self._last_io: dict[int, Command] = {}        # cid -> the I/O command its read/write line belongs to
        self.completed = 0

    def feed(self, line: str, t_seen: float | None = None) -> Command | None:
        m = _LINE.match(line)
        if not m:
            return None
        t, ev, rest = float(m.group(1)), m.group(2), m.group(3)
        kv = dict(_KV.findall(rest))
        if ev in ("pci_nvme_io_cmd", "pci_nvme_admin_cmd"):
            c = Command(int(kv.get("sqid", 0)), int(kv["cid"]), kv.get("opname", "").strip("'"), t, t_seen=t_seen,
                        nsid=int(kv["nsid"], 16) if "nsid" in kv else None)
            self.open[(c.qid, c.cid)] = c
            if ev == "pci_nvme_io_cmd":
                self._last_io[c.cid] = c
            return c
        if ev in ("pci_nvme_read", "pci_nvme_write"):
            c = self._last_io.get(int(kv["cid"]))
            if c is not None:
                c.nbytes = int(kv.get("count", 0))
            return None
        if ev == "pci_nvme_enqueue_req_completion":
            c = self.open.pop((int(kv["cqid"]), int(kv["cid"])), None)
            if c is not None:
                c.t_complete = t
                c.status = int(kv.get("status", "0"), 16)
                self.completed += 1
            return None
        return None


# I/O commands that change a namespace's data (QEMU 7.2's names)
CHANGING_IO = ("NVME_NVM_CMD_WRITE", "NVME_NVM_CMD_WRITE_ZEROES", "NVME_NVM_CMD_DSM", "NVME_NVM_CMD_COPY",
               "NVME_ZONED_CMD_ZONE_APPEND")


def changed_namespaces(lines) -> dict[int, set[str]]:
    """nsid -> {"write", "format"}: the namespaces whose data these trace lines changed. Writes
    (and write zeroes, deallocate, copy) by their I/O command's nsid; Format NVM by its
    ``pci_nvme_format_set`` line, one per namespace it really formatted (a broadcast nsid
    0xffffffff shows as each namespace of the controller; the guest must trace that event:
    machine.SUBSYS_TRACE_EVENTS). The controller is not in the trace: nsids are the subsystem's."""
    out: dict[int, set[str]] = {}
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if not m:
            continue
        ev, kv = m.group(2), dict(_KV.findall(m.group(3)))
        if ev == "pci_nvme_io_cmd" and kv.get("opname", "").strip("'") in CHANGING_IO:
            out.setdefault(int(kv["nsid"], 16), set()).add("write")
        elif ev == "pci_nvme_format_set":
            out.setdefault(int(kv["nsid"]), set()).add("format")
    return out


def read_all(path: str | Path) -> list[Command]:
    """Every command in a trace file (the offline truth)."""
    p, out = TraceParser(), []
    with open(path, errors="replace") as f:
        for line in f:
            c = p.feed(line)
            if c is not None:
                out.append(c)
    return out


class TraceTail:
    """Follows a trace file from a thread: ``on_command(Command)`` for each new command (its size
    and completion arrive later on the same object, under ``lock``); ``read_through`` is the host
    time of the last moment the file was read to its end (everything QEMU wrote before is seen)."""

    def __init__(self, path: str | Path, on_command, poll_s: float = 0.0005):
        self.path, self.on_command, self.poll_s = Path(path), on_command, poll_s
        self.parser = TraceParser()
        self.lock = threading.Lock()
        self.read_through = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="qemu-trace", daemon=True)

    def start(self) -> "TraceTail":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _run(self) -> None:
        while not self.path.exists() and not self._stop.wait(0.01):
            pass
        with open(self.path, errors="replace") as f:
            part = ""
            while not self._stop.is_set():
                t_read = time.time()
                chunk = f.read()             # everything written so far: what QEMU stamped before t_read
                if chunk:
                    now = time.time()
                    lines = (part + chunk).split("\n")
                    part = lines.pop()
                    with self.lock:
                        for line in lines:
                            c = self.parser.feed(line, now)
                            if c is not None:
                                self.on_command(c)
                # (a busy trace never reads empty: the mark moves with every read, not only at a pause)
                self.read_through = t_read
                if not chunk:
                    time.sleep(self.poll_s)
