"""Every NVMe command on the drive host's clock: the kernel's ``nvme:nvme_setup_cmd`` and
``nvme:nvme_complete_rq`` tracepoints, recorded while a step runs, and powerrig's admin commands
moved onto them.

powerrig stamps an admin command when it decides to run nvme-cli and when nvme-cli returns: on a
drive host that interval is a process start, a transport round trip and a device open wide
(~0.3 s on the QEMU tier). The kernel's ``nvme_setup_cmd`` fires just before the driver rings the
submission doorbell and ``nvme_complete_rq`` in the completion path, for the admin queue (qid 0)
and every I/O queue, with the opcode, namespace and command dwords 10..15. They are recorded the
way dut/blocktrace.py records block I/O: in a tracefs instance of powerrig's own (filtered to the
controller), through the same transport and door (ssh as root or a QEMU guest's agent), with the
same clock markers tying the trace clock to the drive host's wall clock (blocktrace.MARK,
blocktrace.offset_of_runs). A virtual rig's drive host writes the same text (sim/ssd/drive_trace.py),
so one parser places commands everywhere.

Text format: Linux 6.1 ``drivers/nvme/host/trace.h`` (TP_printk of nvme_setup_cmd:
``"nvme%d: %sqid=%d, cmdid=%u, nsid=%u, flags=0x%x, meta=0x%x, cmd=(%s %s)"``, the disk part
``"disk=%s, "`` when the request has a disk; nvme_complete_rq: ``"nvme%d: %sqid=%d, cmdid=%u,
res=%#llx, retries=%u, flags=0x%x, status=%#x"``) and ``drivers/nvme/host/trace.c`` (the command's
arguments: ``nvme_trace_admin_identify`` "cns=%u, ctrlid=%u", ``nvme_trace_admin_get_features``
"fid=0x%x, sel=0x%x, cdw11=0x%x", ``nvme_trace_admin_set_features`` "fid=0x%x, sv=0x%x,
cdw11=0x%x", ``nvme_trace_read_write`` "slba=%llu, len=%u, ctrl=0x%hx, dsmgmt=%u, reftag=%u" (len
is NLB, 0's based), everything else ``nvme_trace_common`` "cdw10=%*ph": dwords 10..15 as 24
little-endian bytes). tests/data/nvmetrace holds a trace the QEMU guest's 6.1 kernel wrote.

Fallback, as the block trace: no tracefs, not root, a local run with no drive host, a buffer that
overflowed, markers that disagree (the clock was stepped) or no traced command matching: the host
interval stands and ``meta["nvme_trace"]`` says why in one line.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

import numpy as np

from powerrig.core.timeline import NOTE, NVME, POWER_STATE, Event
from powerrig.dut import nvme_io_lines
from powerrig.dut.blocktrace import MARK, offset_of_runs, walk
from powerrig.dut.commands import helper_argv

TOTAL_BUFFER_KB = 65536       # the instance's ring buffer over all CPUs (at least 1 MiB per CPU)
SLACK_S = 0.005               # a traced submission is looked for this far outside the host interval
EVENTS = ("nvme_setup_cmd", "nvme_complete_rq")

# One line each (the door refuses newlines); both write only inside the instance they make ($1).
# $2: the controller's number (nvme0 -> 0); $3: "admin" (qid 0), "io" (the I/O queues) or "all". Prints
# "lba DISK BYTES" for the controller's disks.
START = (
    'T=/sys/kernel/tracing; [ -d $T/instances ] || mount -t tracefs nodev $T 2>/dev/null; '
    '[ -d $T/instances ] || T=/sys/kernel/debug/tracing; '
    '[ -d $T/instances ] || { echo "no tracefs on the drive host (mount -t tracefs nodev /sys/kernel/tracing as root)" >&2; exit 3; }; '
    '[ -d $T/events/nvme/nvme_setup_cmd ] || { echo "the drive host kernel has no nvme tracepoints (CONFIG_TRACING, the nvme driver built with trace.o)" >&2; exit 3; }; '
    'I=$T/instances/$1; N=$2; case "$3" in admin) Q=" && qid == 0";; io) Q=" && qid != 0";; *) Q="";; esac; '
    'mkdir "$I" 2>/dev/null || { echo "cannot make a tracefs instance in $T/instances (not root?)" >&2; exit 4; }; '
    'for b in /sys/class/block/nvme${N}n*; do [ -e "$b/queue/logical_block_size" ] && '
    'echo "lba $(basename $b) $(cat $b/queue/logical_block_size)"; done; '
    'c=$(grep -c ^processor /proc/cpuinfo); kb=$(( %TOTAL% / (c > 0 ? c : 1) )); [ $kb -ge 1024 ] || kb=1024; '
    'ok=1; { echo mono > "$I/trace_clock" && echo $kb > "$I/buffer_size_kb"; } || ok=; '
    'for e in nvme_setup_cmd nvme_complete_rq; do { echo "ctrl_id == $N$Q" > "$I/events/nvme/$e/filter" && '
    'echo 1 > "$I/events/nvme/$e/enable"; } || ok=; done; '
    '[ -n "$ok" ] || { for e in nvme_setup_cmd nvme_complete_rq; do echo 0 > "$I/events/nvme/$e/enable"; done; '
    'rmdir "$I"; echo "cannot set up the nvme tracepoints in $I" >&2; exit 6; }; '
    + MARK).replace("%TOTAL%", str(TOTAL_BUFFER_KB))
STOP = (
    'T=/sys/kernel/tracing; [ -d $T/instances/$1 ] || T=/sys/kernel/debug/tracing; I=$T/instances/$1; '
    '[ -d "$I" ] || { echo "the trace instance $1 is gone" >&2; exit 3; }; '
    + MARK + '; echo 0 > "$I/tracing_on"; '
    'cat "$I/trace"; r=$?; for e in nvme_setup_cmd nvme_complete_rq; do echo 0 > "$I/events/nvme/$e/enable"; done; '
    'rmdir "$I" 2>/dev/null; exit $r'
)

_LINE = re.compile(r"\s(\d+\.\d+): (nvme_setup_cmd|nvme_complete_rq|tracing_mark_write): (.*)$")
_SETUP = re.compile(r"nvme(\d+): (?:disk=(\S+), )?qid=(\d+), cmdid=(\d+), nsid=(\d+), flags=0x([0-9a-f]+), "
                    r"meta=0x([0-9a-f]+), cmd=\((\w+) ?(.*)\)$")
_DONE = re.compile(r"nvme(\d+): (?:disk=(\S+), )?qid=(\d+), cmdid=(\d+), res=(0x[0-9a-f]+|0), retries=(\d+), "
                   r"flags=0x([0-9a-f]+), status=(0x[0-9a-f]+|0)")

IO_KINDS = {"nvme_cmd_read": "read", "nvme_cmd_write": "write"}


@dataclass
class Command:
    """One traced command: submission and completion on the trace clock (later: this host's UTC)."""
    ctrl: int
    qid: int
    cid: int
    nsid: int
    opcode: str                     # the kernel's name: nvme_admin_set_features, nvme_cmd_read, ...
    args: dict                      # its printed arguments: fid, cdw11, cns, slba, len, ... or cdw10 (bytes)
    t_submit: float
    t_complete: float | None = None
    status: int | None = None
    disk: str | None = None

    @property
    def admin(self) -> bool:
        return self.qid == 0

    @property
    def io_kind(self) -> str | None:
        return None if self.admin else IO_KINDS.get(self.opcode)

    def nbytes(self, lba_bytes: int) -> int | None:
        """An I/O's size: NLB is 0's based (NVMe base spec, Read/Write command dword 12)."""
        n = self.args.get("len")
        return None if n is None else (int(n) + 1) * lba_bytes


@dataclass
class NvmeTrace:
    """A step's traced commands, on this host's UTC clock, with the markers' bound: the admin queue's
    (and any other non-read/write) as Command objects, the reads and writes as arrays
    (dut/nvme_io_lines.py: half a million a step on a fast drive)."""
    commands: list[Command] = field(default_factory=list)
    bound_s: float = 0.0
    lba_bytes: dict[str, int] = field(default_factory=dict)      # disk -> logical block size
    io_note: str | None = None      # why the I/O queues' commands are missing (their own buffer overflowed ...)
    rw: dict = field(default_factory=nvme_io_lines.empty)         # the reads and writes (nvme_io_lines.read)

    def merge(self, other: "NvmeTrace") -> "NvmeTrace":
        """Another instance's commands (the I/O queues' beside the admin queue's), in submission order."""
        self.commands = sorted(self.commands + other.commands, key=lambda c: c.t_submit)
        self.rw = nvme_io_lines.concat(self.rw, other.rw)
        self.bound_s = max(self.bound_s, other.bound_s)
        self.lba_bytes.update(other.lba_bytes)
        return self

    def admin(self) -> list[Command]:
        return [c for c in self.commands if c.admin]

    def n_io(self) -> int:
        """Commands traced on the I/O queues."""
        return len(self.rw["submit"]) + sum(not c.admin for c in self.commands)

    def io_arrays(self) -> dict[str, np.ndarray]:
        """The completed reads and writes as arrays: submit, complete, bytes, is_write, slba, blocks."""
        r = self.rw
        ok = (r["status"] == 0) & ~np.isnan(r["complete"])
        lba = np.array([self.lba_bytes.get(d, 512) for d in r["disks"]], float)
        blocks = r["blocks"][ok].astype(float)
        return {"submit": r["submit"][ok], "complete": r["complete"][ok], "bytes": blocks * lba[r["disk"][ok]],
                "write": r["write"][ok], "slba": r["slba"][ok], "blocks": blocks}


def _args(text: str) -> dict:
    """A command's printed arguments: ``k=v, k=v`` (numbers as printed, decimal or 0x) or
    nvme_trace_common's ``cdw10=`` followed by 24 hex bytes (dwords 10..15, little-endian)."""
    text = text.strip()
    if text.startswith("cdw10="):
        return {"cdw10": bytes(int(b, 16) for b in text[6:].split())}
    out = {}
    for part in text.split(", "):
        k, eq, v = part.partition("=")
        if eq:
            try:
                out[k.strip()] = int(v, 0)
            except ValueError:
                out[k.strip()] = v
    return out


def dword(args: dict, k: int) -> int | None:
    """Command dword 10 + k from nvme_trace_common's bytes (None when printed another way)."""
    b = args.get("cdw10")
    if not isinstance(b, (bytes, bytearray)) or len(b) < 4 * k + 4:
        return None
    return int.from_bytes(b[4 * k:4 * k + 4], "little")


def read(text: str) -> tuple[list[Command], dict, list[list[tuple[float, float]]], str | None]:
    """(commands other than reads and writes in submission order, the reads and writes as arrays
    (dut/nvme_io_lines.py), marker runs, why the trace cannot be trusted or None) of a tracefs
    instance's ``trace`` text; times on the trace clock. A completion is paired with the last
    submission of its (controller, queue, command id) still open."""
    rw, lines, others = nvme_io_lines.read(text)
    out: list[Command] = [Command(ctrl, qid, cid, 0, op, _args(args), float(t0), t1, st, disk=disk)
                          for t0, t1, st, ctrl, qid, cid, op, args, disk in others]
    open_: dict[tuple[int, int, int], Command] = {}
    events, runs, why = walk("\n".join(lines), _LINE)
    for t, kind, rest in events:
        if kind == "nvme_setup_cmd":
            s = _SETUP.match(rest)
            if not s:
                continue
            c = Command(int(s.group(1)), int(s.group(3)), int(s.group(4)), int(s.group(5)), s.group(8),
                        _args(s.group(9)), t, disk=s.group(2))
            open_[(c.ctrl, c.qid, c.cid)] = c
            out.append(c)
        else:
            d = _DONE.match(rest)
            if not d:
                continue
            c = open_.pop((int(d.group(1)), int(d.group(3)), int(d.group(4))), None)
            if c is not None:
                c.t_complete, c.status = t, int(d.group(8), 16)
    out.sort(key=lambda c: c.t_submit)
    return out, rw, runs, why


def parse(text: str) -> tuple[list[Command], list[list[tuple[float, float]]], str | None]:
    """:func:`read` with every read and write as a Command too (one object per I/O: for small traces
    and tests; the sweep reads the arrays)."""
    cmds, rw, runs, why = read(text)
    disks = rw["disks"]
    for k in range(len(rw["submit"])):
        t1, st = float(rw["complete"][k]), int(rw["status"][k])
        cmds.append(Command(-1, -1, -1, 0, "nvme_cmd_write" if rw["write"][k] else "nvme_cmd_read",
                            {"slba": int(rw["slba"][k]), "len": int(rw["blocks"][k]) - 1}, float(rw["submit"][k]),
                            None if np.isnan(t1) else t1, None if st < 0 else st, disk=disks[rw["disk"][k]] or None))
    cmds.sort(key=lambda c: c.t_submit)
    return cmds, runs, why


def load_text(text: str, lba: dict[str, int] | None = None, to_wall=None) -> tuple[NvmeTrace | None, str]:
    """The step's NvmeTrace from the trace text (``to_wall`` maps the drive host's wall clock onto
    this host's), or None and why not (one line); else a one-line summary."""
    cmds, rw, runs, why = read(text)
    if why:
        return None, f"nvme_trace: {why}; the host intervals stand"
    off = offset_of_runs(runs)
    if off is None:
        return None, ("nvme_trace: the trace's clock markers are missing or disagree (the drive host's clock was "
                      "stepped during the step?); the host intervals stand")
    offset, bound = off
    ref = runs[0][0][1]
    shift = offset + ((to_wall(ref) - ref) if to_wall else 0.0)
    for c in cmds:
        c.t_submit += shift
        if c.t_complete is not None:
            c.t_complete += shift
    rw["submit"] += shift
    rw["complete"] += shift
    tr = NvmeTrace(cmds, bound, dict(lba or {}), rw=rw)
    n_admin = sum(c.admin for c in cmds)
    return tr, (f"nvme_trace: {n_admin} admin and {tr.n_io()} I/O commands traced "
                f"(trace clock to the drive host's within {bound * 1e3:.2f} ms)")


# -- which traced command a powerrig admin command is ----------------------------------------
def _fid(meta: dict) -> int | None:
    f = meta.get("fid")
    try:
        return int(f, 0) if isinstance(f, str) else (int(f) if f is not None else None)
    except ValueError:
        return None


def matcher(name: str, meta: dict):
    """A predicate on traced admin commands for a powerrig event (its name and meta, dut/nvme.py),
    or None when the command sends nothing to the controller (``nvme version``) or is not known."""
    fid = _fid(meta)
    value = meta.get("value")
    if name == "id-ctrl":
        return lambda c: c.opcode == "nvme_admin_identify" and c.args.get("cns") == 1
    if name == "id-ns":
        return lambda c: c.opcode == "nvme_admin_identify" and c.args.get("cns") == 0
    if name in ("smart-log", "ocp smart-add-log", "fdp stats") or name.startswith("get-log"):
        lid = {"smart-log": 0x02, "ocp smart-add-log": 0xC0, "fdp stats": 0x22}.get(name, meta.get("log_id"))
        return lambda c: c.opcode == "nvme_admin_get_log_page" and (lid is None or (dword(c.args, 0) or 0) & 0xFF == int(lid))
    if name.startswith("set-feature"):
        fid = {"set-feature power": 0x02, "set-feature apst": 0x0C}.get(name, fid)
        return lambda c: (c.opcode == "nvme_admin_set_features" and (fid is None or c.args.get("fid") == fid)
                          and (value is None or fid != 0x02 or c.args.get("cdw11") == int(value)))
    if name.startswith("get-feature"):
        fid = {"get-feature power": 0x02, "get-feature apst": 0x0C}.get(name, fid)
        return lambda c: c.opcode == "nvme_admin_get_features" and (fid is None or c.args.get("fid") == fid)
    if name == "format":
        return lambda c: c.opcode == "nvme_admin_format_nvm"
    if name == "sanitize":
        return lambda c: c.opcode == "nvme_admin_sanitize_nvm"
    if name == "fw-commit":
        return lambda c: c.opcode == "nvme_admin_activate_fw"
    if name == "flush":
        return lambda c: c.opcode == "nvme_cmd_flush"
    if name == "reset":
        # a controller reset sends no command; its first traced line is the teardown's Delete I/O SQ
        # (drivers/nvme/host/pci.c: nvme_reset_work -> nvme_dev_disable -> nvme_disable_io_queues)
        return lambda c: c.opcode == "nvme_admin_delete_sq"
    return None


# the commands the kernel sends to bring a reset controller back (pci.c: nvme_init_ctrl_finish's Identify,
# nvme_set_queue_count's Set Features 07h, nvme_create_io_queues): the placed reset ends at the last one
REBUILD = ("nvme_admin_delete_sq", "nvme_admin_delete_cq", "nvme_admin_identify", "nvme_admin_create_cq",
           "nvme_admin_create_sq")
PLACED_IO = ("nvme_cmd_flush",)      # I/O queue commands powerrig issues itself and places


def _rebuilt(c: Command, admin: list[Command], taken: set, hi_t: float) -> float | None:
    """The completion of the last teardown or rebuild command of the reset that began with ``c``, within
    the reset's host interval (those commands taken), or None."""
    end = None
    for k, x in enumerate(admin):
        if x.t_submit < c.t_submit or x.t_submit > hi_t or k in taken or x.t_complete is None:
            continue
        if x.opcode in REBUILD or (x.opcode == "nvme_admin_set_features" and x.args.get("fid") == 0x07):
            taken.add(k)
            end = x.t_complete if end is None else max(end, x.t_complete)
    return end


def place(events, trace: NvmeTrace | None, why: str | None = None) -> dict:
    """Move each NVME event (and the POWER_STATE event around a set-feature power) to its traced
    submission and completion; the host interval stays in ``meta["host_t_start"/"host_t_end"]``.
    Without a trace, or for an event nothing matched, the host interval stands and
    ``meta["nvme_trace"]`` says why. Returns counts {"placed", "unplaced"}."""
    evs = sorted((e for e in events if e.kind == NVME and e.t_end is not None), key=lambda e: e.t_start)
    taken: set[int] = set()
    admin = [c for c in trace.commands if c.admin or c.opcode in PLACED_IO] if trace is not None else []
    subs = np.array([c.t_submit for c in admin], float)
    slack = SLACK_S + (trace.bound_s if trace else 0.0)
    placed = unplaced = 0
    by_event = {}
    for e in evs:
        if trace is None:
            e.meta["nvme_trace"] = why or "nvme_trace: no trace of the drive host's kernel; the host interval stands"
            unplaced += 1
            continue
        ok = matcher(e.name, e.meta)
        if ok is None:
            e.meta["nvme_trace"] = (f"nvme_trace: {e.name!r} sends nothing the trace matches; the host interval stands")
            unplaced += 1
            continue
        lo, hi = np.searchsorted(subs, [e.t_start - slack, e.t_end + slack])
        c = next((admin[k] for k in range(lo, hi) if k not in taken and ok(admin[k])), None)
        if c is None:
            e.meta["nvme_trace"] = (f"nvme_trace: no traced admin command matched {e.name!r} within its host "
                                    f"interval; the host interval stands")
            unplaced += 1
            continue
        taken.add(admin.index(c))
        e.meta.update(host_t_start=e.t_start, host_t_end=e.t_end, placed="nvme_trace",
                      opcode=c.opcode, status=c.status, cdw=_printable(c.args))
        e.t_start = c.t_submit
        e.t_end = c.t_complete if c.t_complete is not None else e.t_end
        if e.name == "reset":
            e.t_end = _rebuilt(c, admin, taken, e.meta["host_t_end"] + slack) or e.t_end
        by_event[id(e)] = c
        placed += 1
    # a power-state change starts where its set-feature reached the controller
    for p in (e for e in events if e.kind == POWER_STATE):
        sf = next((e for e in evs if e.name == "set-feature power" and id(e) in by_event
                   and e.meta.get("host_t_start", e.t_start) >= p.t_start - 1e-6
                   and (p.t_end is None or e.meta.get("host_t_end", e.t_end) <= p.t_end + 1e-6)), None)
        if sf is not None:
            p.meta.update(host_t_start=p.t_start, placed="nvme_trace", set_feature_submit=sf.t_start,
                          set_feature_complete=sf.t_end)
            p.t_start = sf.t_start
        elif trace is None:
            p.meta["nvme_trace"] = why or "nvme_trace: no trace; the host interval stands"
    return {"placed": placed, "unplaced": unplaced}


def add_placed(tl, events, trace: NvmeTrace | None, note: str, note_event: bool = True) -> list:
    """Placed copies of ``events``' admin commands and power-state changes (those ended and not
    themselves copies) added to ``tl``, and what they are placed from in a NOTE event (``note_event``).

    A capture writes each event when it ends, so the host-stamped event is already out when the
    trace is read: the copy names the start it replaces (``meta["replaces"]``) and readers keep the
    copy (capture/reader.placed_over_host). Without a trace the copies keep the host interval and
    carry ``note`` (why) on ``meta["nvme_trace"]``. The sweep's steps, the pytest plugin's blocks and
    the desktop app's drive actions all place this way. Returns the copies."""
    evs = [e for e in events if e.kind in (NVME, POWER_STATE) and e.t_end is not None
           and "replaces" not in (e.meta or {})]
    copies = [copy.deepcopy(e) for e in evs]
    for c in copies:
        c.meta["replaces"] = c.t_start
    place(copies, trace, None if trace is not None else note)
    for c in copies:
        tl.add(c)
    t = max((e.t_end for e in evs), default=None)
    if t is not None and note_event:
        tl.add(Event(NOTE, "nvme_trace", t, t, meta={"nvme_trace": note,
                                                      "placed": sum(c.meta.get("placed") == "nvme_trace" for c in copies
                                                                    if c.kind == NVME)}))
    return copies


def _printable(args: dict) -> dict:
    return {k: (v.hex(" ") if isinstance(v, (bytes, bytearray)) else v) for k, v in args.items()}


# -- recording ---------------------------------------------------------------------------------
class KernelTrace:
    """``start`` before a step's first admin command and ``stop`` after its last, on a drive host
    (``remote``, ssh as root or a QEMU guest's agent): the trace text comes back on stdout.
    ``reason`` says why not when it could not."""

    def __init__(self, remote, controller: str, name: str, queues: str = "all"):
        """``queues``: "admin" (qid 0: powerrig's commands, a few a step), "io" (every read and write:
        millions on a fast drive, so in a buffer of its own whose overflow leaves the admin queue's
        whole) or "all"."""
        m = re.fullmatch(r"/dev/nvme(\d+)", controller or "")
        self.remote, self.ctrl, self.queues = remote, (m.group(1) if m else None), queues
        self.instance = "powerrig-nvme-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)
        self.lba: dict[str, int] = {}
        self.reason: str | None = None
        self.started = False
        self.text: str | None = None

    def start(self) -> "KernelTrace":
        if self.ctrl is None:
            self.reason = "nvme_trace: the controller is not a /dev/nvmeN character device; the host intervals stand"
            return self
        try:
            out = self.remote.run(helper_argv("sh", "-c", START, "sh", self.instance, self.ctrl, self.queues),
                                  timeout=60)
        except Exception as e:  # noqa: BLE001 - tracing is a refinement: the host intervals stand without it
            self.reason = f"nvme_trace: not available on the drive host ({_last(e)}); the host intervals stand"
            return self
        for line in out.decode(errors="replace").splitlines():
            w = line.split()
            if len(w) == 3 and w[0] == "lba" and w[2].isdigit():
                self.lba[w[1]] = int(w[2])
        self.started = True
        return self

    def stop(self) -> str | None:
        """The trace text (once; None when it could not be read: ``reason`` says why)."""
        if not self.started or self.text is not None:
            return self.text
        self.started = False
        try:
            self.text = self.remote.run(helper_argv("sh", "-c", STOP, "sh", self.instance),
                                        timeout=600).decode(errors="replace")
        except Exception as e:  # noqa: BLE001
            self.reason = f"nvme_trace: the trace could not be read on the drive host ({_last(e)}); the host intervals stand"
        return self.text

    def load(self) -> tuple[NvmeTrace | None, str]:
        return load(self)


def load(recorder) -> tuple[NvmeTrace | None, str]:
    """Stop a recorder (KernelTrace, or the virtual drive host's sim/ssd/drive_trace.SimTrace: ``stop()``
    gives the text, ``lba``, ``reason``, ``remote``) and read its trace."""
    text = recorder.stop()
    if text is None:
        return None, recorder.reason or "nvme_trace: not recorded; the host intervals stand"
    return load_text(text, recorder.lba, getattr(recorder.remote, "to_host", None))


def _last(e: Exception) -> str:
    return " ".join(str(e).split())[-200:]
