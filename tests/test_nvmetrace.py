"""Admin commands placed from the drive host's kernel (dut/nvmetrace.py), without a guest: the text
the QEMU guest's 6.1 kernel wrote for powerrig's admin commands and two short fio runs, recorded
through KernelTrace (tests/data/nvmetrace, with QEMU's own trace of the same span as the truth), how
each command is placed, and every way the host interval stands with a reason."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from powerrig.core.timeline import NVME, POWER_STATE, Event
from powerrig.dut import nvme_io_lines, nvmetrace
from powerrig.dut.transport import RemoteError
from powerrig.sim.qemu.trace import TraceParser

REC = Path(__file__).parent / "data" / "nvmetrace"


def _recorded():
    off = json.loads((REC / "to_host.json").read_text())["offset_s"]
    text = (REC / "trace.txt").read_text()
    return text, json.loads((REC / "lba.json").read_text()), (lambda t: t + off)


def _events():
    return [Event.from_dict(d) for d in json.loads((REC / "events.json").read_text())]


def _qemu():
    p = TraceParser()
    return [c for c in (p.feed(line) for line in (REC / "qemu-trace.log").read_text().splitlines()) if c]


def test_nvmetrace_parses_the_guest_kernels_text():
    cmds, runs, why = nvmetrace.parse((REC / "trace.txt").read_text())
    assert why is None and len(runs) == 2
    admin = [c for c in cmds if c.admin]
    names = [c.opcode for c in admin]
    assert names == ["nvme_admin_identify", "nvme_admin_set_features", "nvme_admin_get_features",
                     "nvme_admin_get_log_page", "nvme_admin_identify", "nvme_admin_get_log_page"]
    sf = admin[1]
    # Set Features FID 02h, cdw11 = PS 0; QEMU's controller refuses it: Feature Not Changeable (410Eh with DNR)
    assert sf.args["fid"] == 0x2 and sf.args["cdw11"] == 0 and sf.status == 0x410E and sf.nsid == 0xFFFFFFFF
    assert nvmetrace.dword(admin[3].args, 0) & 0xFF == 0x02          # get log page: LID 02h (SMART)
    assert admin[0].args == {"cns": 1, "ctrlid": 0} and admin[4].args["cns"] == 0 and admin[4].nsid == 1
    assert all(c.t_complete is not None and c.t_complete >= c.t_submit for c in cmds)
    # every read and write QEMU saw is one traced I/O of the same size
    q = [c for c in _qemu() if c.kind in ("read", "write")]
    text, lba, to_wall = _recorded()
    tr, note = nvmetrace.load_text(text, lba, to_wall)
    io = tr.io_arrays()
    assert note.startswith("nvme_trace: 6 admin and 72 I/O commands traced")
    assert len(io["submit"]) == len(q) == 72
    assert sorted(io["bytes"].tolist()) == sorted(float(c.nbytes) for c in q)
    assert int(io["write"].sum()) == sum(c.kind == "write" for c in q)


def test_nvmetrace_places_each_admin_command_on_its_submission_and_keeps_the_host_interval():
    text, lba, to_wall = _recorded()
    tr, _ = nvmetrace.load_text(text, lba, to_wall)
    evs = _events()
    host = {id(e): (e.t_start, e.t_end) for e in evs}
    got = nvmetrace.place(evs, tr)
    nv = [e for e in evs if e.kind == NVME]
    assert got == {"placed": len(nv), "unplaced": 0}
    truth = sorted(c.t_submit for c in _qemu() if c.kind == "admin")
    for e in nv:
        assert e.meta["placed"] == "nvme_trace"
        assert (e.meta["host_t_start"], e.meta["host_t_end"]) == host[id(e)]
        assert e.meta["host_t_start"] <= e.t_start <= e.t_end <= e.meta["host_t_end"]
        # the kernel stamps just before the doorbell: QEMU's submission follows within a millisecond
        k = int(np.argmin([abs(t - e.t_start) for t in truth]))
        assert 0 <= truth[k] - e.t_start < 0.001
        assert e.t_end - e.t_start < 0.002                       # host intervals were ~100-200 ms wide
        assert e.meta["host_t_end"] - e.meta["host_t_start"] > 0.02
    ps = next(e for e in evs if e.kind == POWER_STATE)
    sf = next(e for e in nv if e.name == "set-feature power")
    assert ps.t_start == sf.t_start and ps.meta["host_t_start"] < ps.t_start
    assert sf.meta["opcode"] == "nvme_admin_set_features" and sf.meta["cdw"]["fid"] == 2


def test_nvmetrace_set_feature_power_matches_only_its_power_state():
    text, lba, to_wall = _recorded()
    tr, _ = nvmetrace.load_text(text, lba, to_wall)
    evs = _events()
    sf = next(e for e in evs if e.name == "set-feature power")
    sf.meta["value"] = 3                                      # the trace holds cdw11=0: PS0, not PS3
    nvmetrace.place(evs, tr)
    assert "placed" not in sf.meta and "no traced admin command matched 'set-feature power'" in sf.meta["nvme_trace"]


@pytest.mark.parametrize("case", ["overflow", "stepped", "none", "unknown"])
def test_nvmetrace_falls_back_to_the_host_interval_with_one_line(case):
    text, lba, to_wall = _recorded()
    evs = _events()
    before = [(e.t_start, e.t_end) for e in evs]
    if case == "overflow":
        n = next(line for line in text.splitlines() if "entries-written" in line)
        a, b = n.split(": ")[1].split()[0].split("/")
        text = text.replace(n, n.replace(f"{a}/{b}", f"{int(a) - 5}/{b}"))
        tr, why = nvmetrace.load_text(text, lba, to_wall)
        assert tr is None and "overflowed (5 of" in why
    elif case == "stepped":
        # the stop's markers carry a wall clock an hour later: the clock was stepped while the step ran
        lines = text.splitlines()
        last = [k for k, line in enumerate(lines) if "powerrig-clock" in line][-nvmetrace_markers():]
        for k in last:
            head, val = lines[k].rsplit(" ", 1)
            lines[k] = f"{head} {float(val) + 3600:.6f}"
        tr, why = nvmetrace.load_text("\n".join(lines), lba, to_wall)
        assert tr is None and "stepped" in why
    elif case == "none":
        tr, why = None, "nvme_trace: only on a drive host (ssh:// or agent://); the host intervals stand"
    if case == "unknown":
        tr, _ = nvmetrace.load_text(text, lba, to_wall)
        evs.append(Event(NVME, "version", evs[0].t_start, evs[0].t_end))
        got = nvmetrace.place(evs, tr)
        assert got["unplaced"] == 1 and "'version' sends nothing" in evs[-1].meta["nvme_trace"]
        return
    got = nvmetrace.place(evs, tr, why)
    assert got["placed"] == 0
    assert [(e.t_start, e.t_end) for e in evs] == before
    assert all(e.meta["nvme_trace"] == why and len(why.splitlines()) == 1 for e in evs if e.kind == NVME)


def nvmetrace_markers():
    from powerrig.dut.blocktrace import MARKERS
    return MARKERS + 1


class _Refusing:
    def __init__(self, error):
        self.error = error

    def run(self, argv, timeout=60.0, stdin=None):
        raise self.error


def test_nvmetrace_not_permitted_is_a_reason_not_a_failure():
    kt = nvmetrace.KernelTrace(_Refusing(RemoteError("drive host ssh://lab@h: sh -c ... failed (exit 4): cannot make "
                                                     "a tracefs instance in /sys/kernel/tracing/instances (not root?)")),
                               "/dev/nvme0", "s1").start()
    assert not kt.started and "not root?" in kt.reason and kt.reason.startswith("nvme_trace: not available")
    tr, why = kt.load()
    assert tr is None and why == kt.reason
    bad = nvmetrace.KernelTrace(None, "/dev/nvme0n1", "s1").start()
    assert "not a /dev/nvmeN" in bad.reason


def test_nvmetrace_scripts_are_one_line_and_touch_only_their_instance():
    for s in (nvmetrace.START, nvmetrace.STOP):
        assert "\n" not in s
        assert "$T/events/nvme/nvme_setup_cmd/enable" not in s       # the host's own tracing is left alone
    assert 'ctrl_id == $N' in nvmetrace.START


def _per_line(text):
    """The reference: each I/O-queue line in turn, a completion closing the last open submission of its key."""
    import re
    open_, out = {}, []
    for line in text.splitlines():
        m = re.search(r"\s(\d+\.\d+): nvme_(setup_cmd|complete_rq): nvme(\d+): (?:disk=\S+, )?qid=(\d+), cmdid=(\d+), "
                      r"(?:nsid=\d+, .*cmd=\((\w+) ?(?:slba=(\d+), len=(\d+))?|.*status=(0x[0-9a-f]+))", line)
        if not m or m.group(4) == "0":
            continue
        key = (m.group(3), m.group(4), m.group(5))
        if m.group(2) == "setup_cmd":
            open_[key] = c = [float(m.group(1)), None, None, m.group(6), m.group(7), m.group(8)]
            out.append(c)
        elif key in open_:
            c = open_.pop(key)
            c[1], c[2] = float(m.group(1)), int(m.group(9), 16)
    return out


def test_nvmetrace_reads_the_io_queues_in_bulk_as_a_line_by_line_reader_would():
    """The bulk reader (dut/nvme_io_lines.py) on the kernel's text with what a busy queue adds: a command
    id reused, a completion of nothing, a submission never completed, a failed read, a flush."""
    text = (REC / "trace.txt").read_text()
    io = [line for line in text.splitlines() if "qid=2" in line]
    setup, done = io[0], io[1]
    extra = [setup.replace("143.979853", "150.000001"), done.replace("143.981024", "150.000101").replace("status=0x0", "status=0x2"),
             done.replace("143.981024", "150.000201"),                                 # completes nothing
             setup.replace("143.979853", "150.000301").replace("slba=24", "slba=99"),  # cid reused, never completed
             setup.replace("143.979853", "150.000302").replace("cmdid=16896", "cmdid=7")
             .replace("cmd=(nvme_cmd_read slba=24, len=7, ctrl=0x0, dsmgmt=0, reftag=0)", "cmd=(nvme_cmd_flush cdw10=00 00)"),
             done.replace("143.981024", "150.000400").replace("cmdid=16896", "cmdid=7")]
    lines = text.splitlines()
    end = max(k for k, line in enumerate(lines) if "qid=2" in line) + 1
    text = "\n".join(lines[:end] + extra + lines[end:]) + "\n"
    cmds, rw, runs, why = nvmetrace.read(text)
    ref = _per_line(text)
    ref_rw = sorted((c for c in ref if c[3] in ("nvme_cmd_read", "nvme_cmd_write")), key=lambda c: c[0])
    assert len(rw["submit"]) == len(ref_rw) == 72 + 2
    assert rw["submit"].tolist() == [c[0] for c in ref_rw]
    assert [None if np.isnan(t) else t for t in rw["complete"].tolist()] == [c[1] for c in ref_rw]
    assert [None if s < 0 else s for s in rw["status"].tolist()] == [c[2] for c in ref_rw]
    assert rw["slba"].tolist() == [float(c[4]) for c in ref_rw]
    assert rw["blocks"].tolist() == [int(c[5]) + 1 for c in ref_rw]           # NLB is 0's based
    flush = [c for c in cmds if c.opcode == "nvme_cmd_flush"]
    assert len(flush) == 1 and flush[0].t_complete == 150.0004 and flush[0].status == 0 and not flush[0].admin
    assert [c.opcode for c in cmds if c.admin][:2] == ["nvme_admin_identify", "nvme_admin_set_features"]
    tr, note = nvmetrace.load_text(text, {"nvme0n1": 512})
    assert len(tr.io_arrays()["submit"]) == 72 and " and 75 I/O commands traced" in note   # the failed and the open one left out


def _same_read(a, b) -> None:
    assert a[1] == b[1] and a[2] == b[2]
    for k, v in a[0].items():
        w = b[0][k]
        same = v == w if k == "disks" else v.dtype == w.dtype and np.array_equal(v, w, equal_nan=v.dtype.kind == "f")
        assert same, k


@pytest.mark.parametrize("odd", ["none", "tab before the stamp", "# in the task", "stamp at the line start",
                                 "a second ': nvme_'", "stamp not digits.digits", "lines between", "no disk"])
def test_bulk_reader_shortcut_reads_what_the_full_pattern_reads(odd, monkeypatch):
    """nvme_io_lines finds the I/O lines from the literal ': nvme_' and checks each line's start after;
    on a line start it does not take as plain (whitespace other than a space before the stamp, '#',
    nothing before the stamp, ...) the chunk goes through the full pattern: either way the result is
    the full pattern's alone, in one chunk and cut into many."""
    lines = (REC / "trace.txt").read_text().splitlines(keepends=True)
    io = [k for k, line in enumerate(lines) if "qid=2" in line]
    k = io[len(io) // 2]
    edit = {"tab before the stamp": lambda s: s.replace(" 14", "\t14", 1),
            "# in the task": lambda s: s.replace("-", "#", 1),
            "stamp at the line start": lambda s: s[s.index(" 14") + 1:],
            "a second ': nvme_'": lambda s: "x: nvme_setup_cmd: 1.5 " + s.lstrip(),
            "stamp not digits.digits": lambda s: s.replace(" 14", " 1.4", 1),
            "lines between": lambda s: "\n# a note\nsomething else\n\n" + s,
            "no disk": lambda s: s.replace("disk=nvme0n1, ", "")}.get(odd, lambda s: s)
    text = "".join(lines[:k] + [edit(lines[k])] + lines[k + 1:])
    plain = odd in ("none", "a second ': nvme_'", "lines between", "no disk")
    assert (nvme_io_lines._split(text) is not None) == plain       # the shortcut taken where the starts are plain
    for chunk in (8 << 20, 900):
        monkeypatch.setattr(nvme_io_lines, "CHUNK_CHARS", chunk)
        fast = nvme_io_lines.read(text)
        with monkeypatch.context() as m:
            m.setattr(nvme_io_lines, "_split", lambda _: None)
            full = nvme_io_lines.read(text)
        assert len(full[0]["submit"]) >= 70
        _same_read(fast, full)
