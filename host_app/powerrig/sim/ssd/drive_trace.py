"""The virtual drive host's kernel trace: ``nvme:nvme_setup_cmd`` / ``nvme:nvme_complete_rq`` text
as Linux 6.1 writes it (drivers/nvme/host/trace.h and trace.c; the formats are quoted in
dut/nvmetrace.py, which parses this text exactly as it parses a real kernel's), for the commands the
virtual SSD really received and the I/O it really moved.

A tracefs instance is one ``Instance``: started by the endpoint's ``trace_start`` request and read
by ``trace_stop`` (sim/ssd/server.py), as dut/nvmetrace.KernelTrace starts and reads one on a real
drive host. Its clock is "mono" (this machine's CLOCK_MONOTONIC, which the virtual drive host
shares), and powerrig's clock markers are written into it as the marker script writes them: the
wall clock read, then the stamp. Admin commands are stamped when the endpoint takes and answers the
request (the virtual controller acts between the two); I/O is laid out from the drive's rates per
job (VirtualSSD.io_segments: each span of constant rate), one command per block at even spacing,
completing after the profile's command latency plus the transfer. ``SimTrace`` is the recorder the
sweep uses on a virtual rig (the endpoint's client, beside KernelTrace for real drive hosts).
"""
from __future__ import annotations

import os
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from powerrig.sim.ssd import trace_lines
from powerrig.sim.ssd.client import request

MARKERS = 8                 # as dut/blocktrace.MARKERS
LBA_BYTES = 4096            # the virtual namespaces' logical block size
MAX_EVENTS = 2_000_000      # the instance's ring buffer: more is an overflow, said in the header as a kernel does
NSID_ALL = 0xFFFFFFFF

def common(*dw) -> str:
    """nvme_trace_common's print of command dwords 10.. (24 bytes, little-endian): trace.c's default."""
    b = b"".join(int(d).to_bytes(4, "little") for d in dw) + bytes(24 - 4 * len(dw))
    return "cdw10=" + " ".join(f"{x:02x}" for x in b)


# endpoint request -> (opcode, nsid, printed arguments) for the commands nvme-cli sends (trace.c's forms)
def _admin(op: str, req: dict, nsid: int | None):

    def log(lid, numd=127):
        return "nvme_admin_get_log_page", NSID_ALL, common(lid | (numd << 16))
    if op == "identify":
        return ("nvme_admin_identify", nsid, "cns=0, ctrlid=0") if nsid else ("nvme_admin_identify", 0, "cns=1, ctrlid=0")
    if op == "get_power_state":
        return "nvme_admin_get_features", NSID_ALL, "fid=0x2, sel=0x0, cdw11=0x0"
    if op == "set_power_state":
        v = (int(req.get("ps", 0)) & 0x1F) | ((int(req.get("workload_hint", 0)) & 7) << 5)
        return "nvme_admin_set_features", NSID_ALL, f"fid=0x2, sv=0x0, cdw11={v:#x}"
    if op == "get_apst":
        return "nvme_admin_get_features", NSID_ALL, "fid=0xc, sel=0x0, cdw11=0x0"
    if op == "set_apst":
        return "nvme_admin_set_features", NSID_ALL, f"fid=0xc, sv=0x0, cdw11={int(bool(req.get('enabled'))):#x}"
    if op in ("get_power_feature", "set_power_feature", "set_power_measurement"):
        fid = int(req.get("fid", 0x25))
        if op == "get_power_feature":
            return "nvme_admin_get_features", NSID_ALL, f"fid={fid:#x}, sel=0x0, cdw11=0x0"
        v = int(req.get("value", req.get("action", 0)))
        return "nvme_admin_set_features", NSID_ALL, f"fid={fid:#x}, sv=0x0, cdw11={v:#x}"
    if op == "smart_log":
        return log(0x02)
    if op == "power_measurement":
        return log(0x25)
    if op == "fdp_stats":
        return log(0x22)
    if op == "ocp_smart":
        return log(0xC0)
    if op == "format":
        # Format NVM dword 10: LBAF bits 3:0, SES bits 11:9 (NVMe base spec 2.0, 5.23); Linux 6.1's trace.c
        # prints it with nvme_trace_common (nvme_trace_admin_format_nvm came later)
        dw10 = (int(req.get("lbaf") or 0) & 0xF) | ((int(req.get("ses") or 0) & 7) << 9)
        return "nvme_admin_format_nvm", int(req.get("nsid") or nsid or NSID_ALL), common(dw10)
    if op == "fw_commit":
        # Firmware Commit (opcode 10h, include/linux/nvme.h nvme_admin_activate_fw) dword 10: FS bits 2:0,
        # CA bits 5:3 (NVMe base spec 2.0, 5.12)
        return "nvme_admin_activate_fw", 0, common((int(req.get("slot", 0)) & 7) | ((int(req.get("action", 0)) & 7) << 3))
    if op == "sanitize":
        return "nvme_admin_sanitize_nvm", 0, common(int(req.get("action", 2)))
    return None


def _mono_of(t_utc: float, skew: float) -> float:
    return t_utc - skew


@dataclass
class Instance:
    """One tracefs instance on the virtual drive host: its events, as (stamp, text) pairs."""
    name: str
    ctrl: int
    skew: float                                  # wall - mono when it was made (the drive host's)
    lines: list = field(default_factory=list)    # (mono stamp, task, text)
    cid: int = 0
    t_start: float = 0.0
    queues: str = "all"                          # "admin", "io" or "all" (the kernel's qid filter)

    def marks(self, wall_clock=time.time) -> None:
        for k in range(MARKERS + 1):
            w = wall_clock()
            s = time.monotonic()
            tag = "powerrig-clock-end" if k == MARKERS else "powerrig-clock"
            self.lines.append((s, "sh-1", f"tracing_mark_write: {tag} {w:.6f}"))
            time.sleep(5e-5)      # a shell's write takes ~0.1 ms: the bounds are wider than the printed microseconds

    def command(self, opcode: str, qid: int, nsid: int, args: str, t0: float, t1: float | None, status: int = 0,
                disk: str | None = None, task: str = "nvme-1") -> None:
        """Its setup line and (``t1`` not None) its completion line."""
        self.cid = (self.cid + 1) & 0xFFFF
        d = f"disk={disk}, " if disk else ""
        self.lines.append((_mono_of(t0, self.skew), task,
                           f"nvme_setup_cmd: nvme{self.ctrl}: {d}qid={qid}, cmdid={self.cid}, nsid={nsid}, flags=0x0, "
                           f"meta=0x0, cmd=({opcode} {args})"))
        if t1 is None:            # outstanding when the trace was read (an Asynchronous Event Request)
            return
        self.lines.append((_mono_of(t1, self.skew), "<idle>-0",
                           f"nvme_complete_rq: nvme{self.ctrl}: {d}qid={qid}, cmdid={self.cid}, res=0x0, retries=0, "
                           f"flags=0x{2 if qid == 0 else 0:x}, status={status:#x}"))

    def text(self, io: tuple | None = None, written: int | None = None) -> bytes:
        """The instance's ``trace`` file's bytes: its own lines and ``io`` (io_lines' stamps and byte rows) in
        stamp order, the header saying how many events were written (more than kept: an overflow)."""
        own = sorted(self.lines, key=lambda x: x[0])
        stamps, io_rows = io if io is not None else (np.zeros(0), [])
        n = len(own) + len(stamps)
        written = max(n, written or 0)
        if n > MAX_EVENTS:           # only the instance's own lines can be many here: io is laid out only when it fits
            own, n = own[-MAX_EVENTS:], MAX_EVENTS
        head = "\n".join(["# tracer: nop", "#", f"# entries-in-buffer/entries-written: {n}/{written}   #P:2", "#",
                          "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
                          "#              | |         |   |||||     |         |"]) + "\n"
        mine = [np.frombuffer(f"{task:>16} [000] .....  {t:12.6f}: {txt}\n".encode(), np.uint8)[None, :]
                for t, task, txt in own]
        order = np.argsort(np.concatenate([[t for t, _, _ in own], stamps]), kind="stable")
        return head.encode() + trace_lines.join(mine + io_rows, order)


def io_lines(inst: Instance, segments: list, latency_us: dict, bw_Bps: float, t0: float, t1: float) -> tuple:
    """The I/O a span of segments ``(t_from, t_to, [(key, rw, bs, random, nsid, read_Bps, write_Bps)])``
    moved, as setup/complete lines: per job one command per block at even spacing (the job's phase
    carried across segments), completing after the command latency plus the transfer. Returns (mono
    stamps, blocks of byte rows: sim/ssd/trace_lines.py), one row per line in the blocks' order."""
    stamps, blocks = [], []
    phase: dict = {}
    rng = np.random.default_rng(7)
    c = inst.ctrl
    for a, b, jobs in segments:
        a, b = max(a, t0), min(b, t1)
        if b <= a:
            continue
        for key, rw, bs, rnd, nsid, rb, wb in jobs:
            for kind, rate in (("read", rb), ("write", wb)):
                iops = rate / bs
                if iops <= 0:
                    continue
                ph, lba = phase.get((key, kind), (0.0, 0))
                n1 = ph + iops * (b - a)                     # I/Os owed since the job began, fractional
                ms = np.arange(np.floor(ph) + 1, np.floor(n1) + 1)
                phase[(key, kind)] = (n1, lba)
                n = len(ms)
                if n == 0:
                    continue
                ts = _mono_of(a + (ms - ph) / iops, inst.skew)
                nlb = bs // LBA_BYTES
                lat = latency_us[kind] * 1e-6 + bs / max(bw_Bps, 1.0)
                opcode = "nvme_cmd_read" if kind == "read" else "nvme_cmd_write"
                if rnd:
                    slba = rng.integers(0, 1 << 24, size=n).astype(np.int64) * nlb
                else:
                    slba = lba + nlb * np.arange(n, dtype=np.int64)
                phase[(key, kind)] = (n1, int(slba[-1]) + nlb)
                cid = (inst.cid + 1 + np.arange(n, dtype=np.int64)) & 0xFFFF
                inst.cid = int(cid[-1])
                cids = trace_lines.decimal(cid, 5)
                d = f"nvme{c}: disk=nvme{c}n{nsid}, qid=1, cmdid="
                blocks.append(trace_lines.rows([f"{'fio-1':>16} [000] .....  ", trace_lines.stamp(ts),
                                                f": nvme_setup_cmd: {d}", cids,
                                                f", nsid={nsid}, flags=0x0, meta=0x0, cmd=({opcode} slba=",
                                                trace_lines.decimal(slba),
                                                f", len={nlb - 1}, ctrl=0x0, dsmgmt=0, reftag=0)\n"]))
                blocks.append(trace_lines.rows([f"{'<idle>-0':>16} [000] .....  ", trace_lines.stamp(ts + lat),
                                                f": nvme_complete_rq: {d}", cids,
                                                ", res=0x0, retries=0, flags=0x0, status=0x0\n"]))
                stamps += [ts, ts + lat]
    return (np.concatenate(stamps) if stamps else np.zeros(0)), blocks


class DriveTrace:
    """The virtual drive host's tracefs for one virtual SSD: instances by name."""

    def __init__(self, ssd, ctrl: int = 0, wall_clock=time.time):
        self.ssd, self.ctrl, self.wall_clock = ssd, ctrl, wall_clock
        self.instances: dict[str, Instance] = {}
        self._lock = threading.Lock()

    def start(self, name: str, queues: str = "all") -> dict:
        with self._lock:
            if name in self.instances:
                raise ValueError(f"cannot make a tracefs instance {name}: it exists")
            inst = Instance(name, self.ctrl, self.wall_clock() - time.monotonic(), t_start=self.ssd.clock(),
                            queues=queues)
            inst.marks(self.wall_clock)
            self.instances[name] = inst
            if self.ssd.io_segments is None:
                self.ssd.io_segments = []
            disks = {f"nvme{self.ctrl}n{k + 1}": LBA_BYTES for k in range(self.ssd.profile.namespaces)}
            return {"lba": disks}

    def admin(self, op: str, req: dict, nsid: int | None, t0: float, t1: float, ok: bool) -> None:
        if not self.instances:
            return
        if op == "flush":          # an NVM command: on an I/O queue, with the namespace's disk
            ns = int(nsid or 1)
            with self._lock:
                for inst in self.instances.values():
                    if inst.queues != "admin":
                        inst.command("nvme_cmd_flush", 1, ns, common(0), t0, t1, 0 if ok else 0x4002,
                                     disk=f"nvme{self.ctrl}n{ns}")
            return
        a = _admin(op, req, nsid)
        if a is None:
            return
        with self._lock:
            for inst in self.instances.values():
                if inst.queues != "io":
                    inst.command(a[0], 0, a[1], a[2], t0, t1, 0 if ok else 0x4002)

    def queue_commands(self, cmds: list) -> None:
        """Admin commands the kernel sends on its own (a controller reset's teardown and rebuild):
        (opcode, nsid, printed arguments, t_submit, t_complete or None) each, on the admin queue."""
        with self._lock:
            for inst in self.instances.values():
                if inst.queues != "io":
                    for op, nsid, args, t0, t1 in cmds:
                        inst.command(op, 0, nsid, args, t0, t1, task="kworker/0:1H-1")

    def stop(self, name: str) -> bytes:
        with self._lock:
            inst = self.instances.pop(name, None)
            if inst is None:
                raise ValueError(f"the trace instance {name} is gone")
            self.ssd.advance()
            with self.ssd._lock:
                self.ssd._account(self.ssd.clock())
                segs = list(self.ssd.io_segments or [])
                if not self.instances:
                    self.ssd.io_segments = None
            p = self.ssd.profile
            bw = max(max(s.read_MiBps, s.write_MiBps) for s in p.states) * 2**20
            lat = {"read": float(p.power["read_latency_us"]), "write": float(p.power["write_latency_us"])}
            t_end = self.ssd.clock()
            # the I/O a buffer could not hold is not laid out line by line (millions of 4 KiB reads): the
            # header says how many events were written, as a kernel's does after an overflow
            if inst.queues == "admin":
                segs = []
            n_io = 2 * sum(max(0.0, min(b, t_end) - max(a, inst.t_start)) * (rb + wb) / bs
                           for a, b, jobs in segs for _, _, bs, _, _, rb, wb in jobs)
            inst.marks(self.wall_clock)
            if len(inst.lines) + n_io > MAX_EVENTS:
                return inst.text(written=len(inst.lines) + int(n_io))
            return inst.text(io_lines(inst, segs, lat, bw, inst.t_start, t_end))


class SimTrace:
    """The sweep's recorder on a virtual rig: the same ``start``/``stop``/``lba``/``reason`` as
    dut/nvmetrace.KernelTrace, through the rig's endpoint instead of a shell on a drive host."""

    def __init__(self, endpoint: str, controller: str, name: str, queues: str = "all"):
        self.endpoint, self.controller, self.queues = endpoint, controller, queues
        self.instance = "powerrig-nvme-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)
        self.lba: dict[str, int] = {}
        self.reason: str | None = None
        self.started = False
        self.text: str | None = None
        self.remote = None

    def start(self) -> "SimTrace":
        try:
            r = request(self.endpoint, {"op": "trace_start", "dev": self.controller, "instance": self.instance,
                                        "queues": self.queues})
        except Exception as e:  # noqa: BLE001 - tracing is a refinement
            r = {"ok": False, "error": str(e)}
        if not r.get("ok"):
            self.reason = f"nvme_trace: not available on the virtual drive host ({r.get('error')}); the host intervals stand"
            return self
        self.lba = dict(r.get("lba") or {})
        self.started = True
        return self

    def stop(self) -> str | None:
        if not self.started or self.text is not None:
            return self.text
        self.started = False
        fd, path = tempfile.mkstemp(prefix=self.instance + "-", suffix=".trace")
        os.close(fd)
        os.unlink(path)           # the endpoint makes it (open "x"): the text goes through a file, not the JSON
        try:
            r = request(self.endpoint, {"op": "trace_stop", "dev": self.controller, "instance": self.instance,
                                        "path": path}, timeout=120)
            if r.get("ok"):
                self.text = r["text"] if "text" in r else Path(path).read_text(encoding="utf-8")
        except Exception as e:  # noqa: BLE001
            r = {"ok": False, "error": str(e)}
        finally:
            Path(path).unlink(missing_ok=True)
        if not r.get("ok"):
            self.reason = f"nvme_trace: the trace could not be read ({r.get('error')}); the host intervals stand"
            return None
        return self.text
