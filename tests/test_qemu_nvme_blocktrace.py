"""Phase edges from the drive host's block tracepoints (dut/blocktrace.py), without a guest: the
trace text of a recorded run in the QEMU guest (fio 3.33, read 128k qd8 0.6 s, with its per-I/O
log; tests/data/fio/block-trace), how it places a job, and every way it falls back to fio's edges
with a reason. The guest itself: tests/test_qemu_nvme.py."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from powerrig.dut import blocktrace
from powerrig.dut.fio import FioJob, FioPlan, parse_fio_json, read_io_log_span, results_from_report
from powerrig.dut.transport import RemoteError

REC = Path(__file__).parent / "data" / "fio" / "block-trace"
DEV = "259,0"
FILES = {"/dev/nvme0n1": DEV}


def _plan(**kw):
    return FioPlan([FioJob("w01-read-128k", rw="read", bs="128k", iodepth=8, runtime=0.6, time_based=True,
                           filename="/dev/nvme0n1", direct=True)], io_log=True, **kw)


def test_qemu_nvme_blocktrace_parses_the_recorded_guest_trace():
    issues, done, runs, why = blocktrace.parse((REC / "blocktrace.txt").read_text())
    doc = json.loads((REC / "fio.json").read_text())
    n = doc["jobs"][0]["read"]["total_ios"]
    # every I/O fio did is one issue and one completion on the namespace's disk, and nothing else
    assert why is None and list(issues) == [DEV] and len(issues[DEV]) == n and len(done[DEV]) == n
    assert [len(r) for r in runs] == [blocktrace.MARKERS + 1] * 2         # at the start and at the stop
    off, bound = blocktrace.offset_of_runs(runs)
    # the markers tie the trace clock (mono, s since boot) to the wall clock within a fraction of a ms
    assert bound < 0.0005
    for r in runs:
        for (s, w), (_, w_next) in zip(r, r[1:]):
            assert w - bound - 1e-9 <= s + off <= w_next + bound + 1e-9


def test_qemu_nvme_blocktrace_places_the_recorded_job_on_its_first_issue_and_last_completion():
    """The recorded run is the case fio's own stamps got wrong on a loaded host: its first I/O's
    start (reap less latency) came 11 ms after the kernel issued it, so the edge is looked for
    around fio's, not only inside it."""
    final, jobs, _ = parse_fio_json((REC / "fio.json").read_text())
    report = final["timestamp_ms"] / 1000
    shift = 0.25                                            # the drive host's clock runs 0.25 s ahead
    ev, note = blocktrace.load(REC / "blocktrace.txt", FILES, to_wall=lambda t: t - shift)
    assert ev is not None and note.startswith("block_trace: 126 I/Os traced on 259,0")
    (r,) = results_from_report(_plan(block_trace=True), final, jobs, REC / "logs", report - 5, report + 1,
                               to_host=lambda t: t - shift, block=ev)
    issues, done, runs, _ = blocktrace.parse((REC / "blocktrace.txt").read_text())
    off, _ = blocktrace.offset_of_runs(runs)
    assert r.time_source == "block_trace" and r.block_trace is None
    assert r.start_utc == pytest.approx(min(issues[DEV]) + off - shift, abs=1e-6)
    assert r.end_utc == pytest.approx(max(done[DEV]) + off - shift, abs=1e-6)
    fio_start, fio_end = read_io_log_span(REC / "logs" / "w01-read-128k_lat.1.log")
    assert r.start_utc < fio_start - shift - 0.005          # fio's stamp came late: the kernel's issue stands
    assert r.end_utc <= fio_end - shift                     # the kernel completed before fio reaped


def test_qemu_nvme_blocktrace_falls_back_to_fios_edges_with_a_reason(tmp_path):
    text = (REC / "blocktrace.txt").read_text()
    final, jobs, _ = parse_fio_json((REC / "fio.json").read_text())
    report = final["timestamp_ms"] / 1000

    f = tmp_path / "overflow.txt"
    f.write_text(text.replace("entries-in-buffer/entries-written: 270/270", "entries-in-buffer/entries-written: 200/270"))
    assert "entries-written: 270/270" in text
    ev, why = blocktrace.load(f, FILES)
    assert ev is None and why == ("block_trace: the trace buffer overflowed (70 of 270 events lost); "
                                  "fio's own edges stand")
    f.write_text("\n".join(ln for ln in text.splitlines() if "powerrig-clock" not in ln))
    ev, why = blocktrace.load(f, FILES)
    assert ev is None and "clock markers are missing or disagree" in why
    # a wall clock stepped by 1 s between the start and the stop: the two runs of markers disagree
    lines = text.splitlines()
    last = [k for k, ln in enumerate(lines) if "powerrig-clock" in ln][-blocktrace.MARKERS - 1:]
    for k in last:
        head, _, w = lines[k].rpartition(" ")
        lines[k] = f"{head} {float(w) + 1:.6f}"
    f.write_text("\n".join(lines))
    assert blocktrace.load(f, FILES)[0] is None
    ev, why = blocktrace.load(tmp_path / "missing.txt", FILES)
    assert ev is None and why == "block_trace: no trace came back from the drive host (missing.txt missing)"

    # traced, but nothing on the job's device near its span: fio's edges stand, with the reason
    ev, _ = blocktrace.load(REC / "blocktrace.txt", {"/dev/nvme0n1": "259,1"})
    (r,) = results_from_report(_plan(block_trace=True), final, jobs, REC / "logs", report - 5, report + 1, block=ev)
    start, end = read_io_log_span(REC / "logs" / "w01-read-128k_lat.1.log")
    assert r.time_source == "io_log" and (r.start_utc, r.end_utc) == pytest.approx((start, end))
    assert r.block_trace == "block_trace: no I/O traced on 259,1 near the job's span; fio's edges (io_log) stand"


def test_qemu_nvme_blocktrace_windows_split_jobs_on_one_device_and_refine_within_them():
    # two stonewalled jobs on one device 10 ms apart, a third on another device, a fourth overlapping the first
    spans = [(0.0, 1.0, {DEV}), (1.010, 2.0, {DEV}), (0.5, 1.5, {"259,1"}), (0.2, 0.8, {DEV})]
    w = blocktrace.job_windows(spans)
    assert w[0] == (None, pytest.approx(1.005)) and w[1] == (pytest.approx(1.005), None)
    assert w[2] == (None, None) and w[3] == (None, pytest.approx(0.905))
    ev = blocktrace.BlockEvents(issues={DEV: np.array([-0.3, 0.004, 0.5, 1.006, 1.012])},
                                completions={DEV: np.array([0.006, 0.9, 1.003, 1.02, 2.004, 2.4])})
    # the first job: its first issue near its start, its last completion before the split
    assert blocktrace.refine(0.0, 1.0, [DEV], ev, *w[0]) == (0.004, 1.003)
    # the second: nothing of the first job's, its completion 4 ms past fio's end
    assert blocktrace.refine(1.010, 2.0, [DEV], ev, *w[1]) == (1.006, 2.004)
    assert blocktrace.refine(0.5, 1.5, ["259,1"], ev) is None


class _Refusing:
    """A drive host whose transport answers every command with the failure given (its boundary)."""
    url = "ssh://lab@drivehost"

    def __init__(self, error):
        self.error, self.calls = error, 0

    def run(self, argv, timeout=60.0, stdin=None):
        self.calls += 1
        raise self.error


def test_qemu_nvme_blocktrace_not_permitted_or_not_there_is_a_reason_not_a_failure():
    host = _Refusing(RemoteError("drive host ssh://lab@drivehost: sh -c ... failed (exit 4): cannot make a "
                                 "tracefs instance in /sys/kernel/tracing/instances (not root?)"))
    bt = blocktrace.BlockTrace(host, "/tmp/powerrig-fio.AbC123", ["/dev/nvme0n1"]).start()
    assert not bt.started and bt.reason.startswith("block_trace: not available on the drive host (")
    assert bt.reason.endswith("(not root?))") and "\n" not in bt.reason
    bt.stop()                                          # nothing started: nothing to stop
    assert host.calls == 1 and bt.instance == "powerrig-powerrig-fio-AbC123"
    bt = blocktrace.BlockTrace(host, "/tmp/powerrig-fio.x", [None]).start()
    assert bt.reason == "block_trace: the plan names no device file" and host.calls == 1


def test_qemu_nvme_blocktrace_scripts_are_one_line_and_touch_only_their_instance():
    from powerrig.dut.commands import helper_argv
    for script in (blocktrace.START, blocktrace.STOP):
        helper_argv("sh", "-c", script, "sh", "powerrig-x")     # the door takes them (no control characters)
        assert "$T/instances/$1" in script or 'I=$T/instances/$1' in script
        assert "> $T/" not in script and "> \"$T/" not in script   # nothing written outside the instance
