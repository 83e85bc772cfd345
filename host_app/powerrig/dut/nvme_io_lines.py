"""The I/O queues' lines of an nvme tracepoint text read in bulk: one regex pass per chunk of text into
numpy arrays, no Python object kept per command.

A fast drive's step traces half a million reads or writes (two lines each); reading them one line at
a time into a Command each cost ~9 s of CPU a step (the demo's sweep spent more CPU on the trace than
on everything else); the lines are found by a literal search, not a scan from each line's start
(below, _TAIL). The admin queue's few commands, the markers and the header are handed back as
lines for dut/nvmetrace.py's per-line reader. Format: Linux 6.1 drivers/nvme/host/trace.h
(nvme_setup_cmd, nvme_complete_rq) and trace.c (nvme_trace_read_write: "slba=%llu, len=%u, ..."),
quoted in dut/nvmetrace.py.
"""
from __future__ import annotations

import re

import numpy as np

CHUNK_CHARS = 8 << 20         # text read per pass: bounds the transient tuples to ~50k lines

# An I/O queue's (qid != 0) setup or completion, else the whole line (group 11).
_IO = re.compile(
    r"^(?:[^\n#]*?\s(\d+\.\d+): nvme_(s|c)(?:etup_cmd|omplete_rq): nvme(\d+): (?:disk=(\S+), )?qid=([1-9]\d*), "
    r"cmdid=(\d+), (?:nsid=\d+, flags=0x[0-9a-f]+, meta=0x[0-9a-f]+, cmd=\((\w+) ?(?:slba=(\d+), len=(\d+)[^\n]*|([^\n]*))\)"
    r"|res=(?:0x[0-9a-f]+|0), retries=\d+, flags=0x[0-9a-f]+, status=(0x[0-9a-f]+|0))"
    r"|([^\n]*))$", re.M)
_T, _EV, _CTRL, _DISK, _QID, _CID, _OP, _SLBA, _LEN, _ARGS, _STATUS, _OTHER = range(12)

# The same lines found from the literal ": nvme_" on (a fast search) with the rest of _IO from there, each
# line's start (task, CPU, flags, " " timestamp) checked after; a chunk where a start is not that plain
# form goes through _IO itself, so the rows are _IO's either way. _IO's lazy scan from every line's start
# tried each position in turn: ~3 us a line, most of a step's trace CPU.
_TAIL = re.compile(_IO.pattern[_IO.pattern.index(": nvme_(s|c)"):_IO.pattern.index(r"|([^\n]*))$")] + "$", re.M)
_STAMPS = re.compile(r"[0-9]+\.[0-9]+(?: [0-9]+\.[0-9]+)*")
_COLS = 10                    # _TAIL's groups: _EV .. _STATUS

RW = {"nvme_cmd_read": False, "nvme_cmd_write": True}


def _chunks(text: str):
    a = 0
    while a < len(text):
        b = text.find("\n", min(a + CHUNK_CHARS, len(text)))
        b = len(text) if b < 0 else b + 1
        yield text[a:b]
        a = b


def _codes(col: np.ndarray, names: list) -> np.ndarray:
    """Small integer codes of an object column of a few distinct strings (disks), ``names`` extended."""
    out = np.zeros(len(col), np.int32)
    for s in set(col.tolist()):
        if s not in names:
            names.append(s)
        out[col == s] = names.index(s)
    return out


def _split(chunk: str) -> tuple[list, list] | None:
    """(the I/O lines' columns _T .. _STATUS as lists, the other lines) of a chunk by _TAIL, or None
    where a line's start is not the plain form (_IO decides those)."""
    parts = _TAIL.split(chunk)
    # each piece: the end of the line before (""), whole other lines, the next I/O line's start
    pieces = parts[::_COLS + 1]
    *starts, last = pieces
    stamps = [p.rpartition(" ")[2] for p in starts]
    if stamps and not _STAMPS.fullmatch(" ".join(stamps)):     # no space before a stamp, or not digits.digits
        return None
    other = []
    plain = "".join(starts[1:])
    if plain.count("\n") != len(starts) - 1 or "#" in plain:    # other lines between I/O lines: one by one
        whole = [i for i in range(1, len(starts)) if starts[i].rfind("\n") > 0 or "#" in starts[i]]
    else:
        whole = []
    for i in ([0] if starts else []) + whole:
        k = starts[i].rfind("\n")
        if "#" in starts[i][k + 1:]:
            return None
        other.extend(x for x in starts[i][(i > 0):max(k, 0)].split("\n") if x)
    other.extend(x for x in last[(len(pieces) > 1):].split("\n") if x)
    cols = [stamps] + [parts[1 + j::_COLS + 1] for j in range(_COLS)]
    cols[_DISK] = [x or "" for x in cols[_DISK]]      # the one column whose "" is a value (no disk)
    return cols, other


def _findall(chunk: str) -> tuple[list, list]:
    """_split's answer by _IO itself."""
    rows = _IO.findall(chunk)
    io = [r for r in rows if r[_T]]
    other = [r[_OTHER] for r in rows if not r[_T] and r[_OTHER]]
    cols = [list(c) for c in zip(*io)] if io else [[] for _ in range(_OTHER)]
    return cols[:_OTHER], other


def read(text: str) -> tuple[dict, list[str], list[tuple]]:
    """(the I/O queues' reads and writes as arrays, every other line in order, the I/O queues' other
    commands as (t_submit, t_complete, status, ctrl, qid, cid, opcode, args text, disk)).

    Arrays, in submission order: submit, complete (nan: not completed), status (-1: not completed), write, slba, blocks
    (NLB + 1: len is 0's based), disk (index into ``disks``), and ``disks``. A completion is paired with
    the last submission of its (controller, queue, command id) before it, as the kernel's cid reuse
    allows."""
    parts, other, disks = [], [], [""]
    row0 = 0
    for chunk in _chunks(text):
        cols, more = _split(chunk) or _findall(chunk)
        other.extend(more)
        n = len(cols[_T])
        if not n:
            continue
        obj = [np.array(c, dtype=object) for c in cols]
        ints = [np.fromiter(map(int, cols[c]), np.int64, n) for c in (_CTRL, _QID, _CID)]
        parts.append({"t": np.fromiter(map(float, cols[_T]), float, n), "setup": obj[_EV] == "s",
                      "key": (ints[0] << 32) | (ints[1] << 16) | ints[2],
                      "row": np.arange(row0, row0 + n), "op": obj[_OP], "slba": obj[_SLBA],
                      "len": obj[_LEN], "args": obj[_ARGS], "status": obj[_STATUS],
                      "disk": _codes(obj[_DISK], disks)})
        row0 += n
    if not parts:
        return _empty(disks), other, []
    p = {k: np.concatenate([x[k] for x in parts]) for k in parts[0]}
    order = np.lexsort((p["row"], p["key"]))
    key, setup = p["key"][order], p["setup"][order]
    # a completion right after a submission of the same key (in text order) completes it
    done = np.flatnonzero(~setup[1:] & setup[:-1] & (key[1:] == key[:-1])) + 1
    n = len(order)
    complete = np.full(n, np.nan)
    status = np.full(n, -1, np.int64)
    complete[order[done - 1]] = p["t"][order[done]]
    st = p["status"][order[done]]
    code = np.zeros(len(st), np.int64)
    odd = np.flatnonzero((st != "0x0") & (st != "0"))          # a status other than success: a few at most
    code[odd] = [int(x, 16) for x in st[odd].tolist()]
    status[order[done - 1]] = code
    s = np.flatnonzero(p["setup"])
    op = p["op"][s]
    rw = (op == "nvme_cmd_read") | (op == "nvme_cmd_write")
    r = s[rw][np.argsort(p["t"][s[rw]], kind="stable")]          # in submission order
    io = {"submit": p["t"][r], "complete": complete[r], "status": status[r], "write": op[rw] == "nvme_cmd_write",
          "slba": p["slba"][r].astype(float), "blocks": p["len"][r].astype(np.int64) + 1, "disk": p["disk"][r],
          "disks": disks}
    rest = [(p["t"][k], None if np.isnan(complete[k]) else float(complete[k]), None if status[k] < 0 else int(status[k]),
             int(p["key"][k] >> 32), int((p["key"][k] >> 16) & 0xFFFF), int(p["key"][k] & 0xFFFF), p["op"][k],
             p["args"][k] or (f"slba={p['slba'][k]}, len={p['len'][k]}" if p["slba"][k] else ""),
             disks[p["disk"][k]] or None) for k in s[~rw].tolist()]
    return io, other, rest


def _empty(disks=None) -> dict:
    return {"submit": np.zeros(0), "complete": np.zeros(0), "status": np.zeros(0, np.int64), "write": np.zeros(0, bool),
            "slba": np.zeros(0), "blocks": np.zeros(0, np.int64), "disk": np.zeros(0, np.int32), "disks": disks or [""]}


def empty() -> dict:
    """No traced I/O."""
    return _empty()


def concat(a: dict, b: dict) -> dict:
    """Two instances' I/O as one, in submission order (``b``'s disk codes moved onto ``a``'s names)."""
    disks = list(a["disks"])
    remap = np.array([disks.index(d) if d in disks else disks.append(d) or len(disks) - 1 for d in b["disks"]],
                     np.int32)
    out = {k: np.concatenate([a[k], remap[b[k]] if k == "disk" else b[k]]) for k in a if k != "disks"}
    order = np.argsort(out["submit"], kind="stable")
    out = {k: v[order] for k, v in out.items()}
    out["disks"] = disks
    return out
