"""fio runner against the distribution's real fio: job shapes, json and json+, group_reporting,
status-interval output, times from logs, and the failure paths."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from powerrig.dut.fio import Fio, FioJob, FioPlan, job_times, parse_fio_json, split_json_documents
from powerrig.core.errors import ToolError
from powerrig.core.timeline import FIO, PHASE, Timeline

REAL_FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(REAL_FIO is None, reason="fio not installed")


def _program(script):
    """A fake tool as the one program a prefix may be (commands.check_program: no option words,
    no interpreter before it): the script made executable, run by this Python."""
    script.write_text(f"#!{sys.executable}\n" + script.read_text())
    script.chmod(0o755)
    return [str(script)]


def file_jobs(tmp_path, **over):
    f = str(tmp_path / "data.bin")
    base = dict(filename=f, size="4m", runtime=1, time_based=True, ioengine="psync")
    base.update(over)
    return f, base


@needs_fio
def test_real_fio_every_job_and_direction_parsed_with_log_times(tmp_path):
    f, base = file_jobs(tmp_path)
    plan = FioPlan([FioJob("seqw", rw="write", bs="128k", numjobs=2, **base),
                    FioJob("mixed", rw="randrw", bs="4k", rwmixread=70, offset="4m", **base)],
                   log_avg_msec=200)
    tl = Timeline()
    res = Fio(["fio"], tl).run(plan, tmp_path / "run")
    assert res.fio_version.startswith("fio-")
    assert [j.name for j in res.jobs] == ["seqw", "seqw", "mixed"]          # every job, not only jobs[0]
    assert [j.index for j in res.jobs] == [1, 2, 3]
    for j in res.jobs[:2]:
        assert j.directions["write"].io_bytes > 0 and j.directions["read"].io_bytes == 0
        assert j.directions["write"].clat_percentiles_ns[99.0] > 0
    mixed = res.jobs[2].directions
    assert mixed["read"].io_bytes > 0 and mixed["write"].io_bytes > 0
    assert 0.55 < mixed["read"].total_ios / (mixed["read"].total_ios + mixed["write"].total_ios) < 0.85
    for j in res.jobs:                      # fio 3.33 has no job_start: times come from the epoch logs
        assert j.time_source == ("job_start" if j.time_source == "job_start" else "log")
        assert res.t_call <= j.start_utc < j.end_utc <= res.t_return
        assert 0.6 < j.end_utc - j.start_utc < 1.6
    (fio_ev,) = tl.events(FIO)
    assert fio_ev.ok and fio_ev.argv[0] == "fio" and len(tl.events(PHASE)) == 3
    assert (tmp_path / "run" / "fio.fio").read_text().count("write_bw_log=") == 2


@needs_fio
def test_real_fio_json_plus_group_reporting_and_status_interval(tmp_path):
    f, base = file_jobs(tmp_path, runtime=2)
    plan = FioPlan([FioJob("a", rw="read", bs="64k", numjobs=2, **base)], group_reporting=True,
                   output_format="json+", status_interval=1)     # fio's smallest interval is 1 s
    res = Fio(["fio"], Timeline()).run(plan, tmp_path / "run")
    (j,) = res.jobs
    assert j.directions["read"].io_bytes > 0 and j.index is None
    assert res.status_reports >= 1                       # concatenated interim documents tolerated
    raw = (tmp_path / "run" / "fio.json").read_text()
    assert "bins" in raw                                 # it really was json+


def test_runner_clock_is_the_last_resort():
    start, end, src = job_times({"job_runtime": 1000}, [], 500, 100.0, 102.5)
    assert src == "runner_clock" and (start, end) == (101.5, 102.5)
    start, end, src = job_times({"job_runtime": 1000, "job_start": 100500}, [], 500, 100.0, 102.5)
    assert src == "job_start" and (start, end) == (100.5, 101.5)


def test_concatenated_and_noisy_json_documents():
    doc = json.dumps({"jobs": [{"jobname": "x"}]})
    docs = split_json_documents("note: a notice {with braces}\n" + doc + "\n" + doc + "\n")
    assert len(docs) == 2
    with pytest.raises(ToolError, match="truncated"):
        parse_fio_json(doc + "\n" + doc[: len(doc) // 2])


def test_fio_missing_is_clear_error():
    tl = Timeline()
    with pytest.raises(ToolError, match="fio not found"):
        Fio(["/nonexistent/fio"], tl).run(FioPlan([FioJob("x", runtime=1, time_based=True)]), "/tmp/powerrig-x")
    assert not tl.events(FIO)[0].ok


@needs_fio
def test_real_fio_io_error_fails_run_and_event(tmp_path):
    tl = Timeline()
    plan = FioPlan([FioJob("full", rw="write", bs="4k", size="1m", filename="/dev/full")])
    with pytest.raises(ToolError, match="fio failed .*No space left on device"):
        Fio(["fio"], tl).run(plan, tmp_path / "run")
    (ev,) = tl.events(FIO)
    assert not ev.ok and ev.t_end is not None and not tl.events(PHASE)


def test_malformed_fio_output_is_rejected_not_half_used(tmp_path):
    fake = tmp_path / "fakefio.py"
    fake.write_text(
        "import sys\n"
        "out = [a.split('=', 1)[1] for a in sys.argv if a.startswith('--output=')][0]\n"
        "open(out, 'w').write('{\"fio version\": \"fio-3.33\", \"jobs\": [{\"jobname\": \"x\", \"read\": {')\n")
    tl = Timeline()
    with pytest.raises(ToolError, match="malformed or truncated JSON"):
        Fio(_program(fake), tl).run(FioPlan([FioJob("x", runtime=1, time_based=True)]), tmp_path / "r")
    assert not tl.events(FIO)[0].ok and not tl.events(PHASE)


def test_fewer_jobs_than_planned_is_incomplete(tmp_path):
    fake = tmp_path / "fakefio.py"
    job = {"jobname": "a", "error": 0, "job_runtime": 10,
           "read": {"io_bytes": 1, "bw_bytes": 1, "iops": 1, "runtime": 10}}
    fake.write_text(
        "import sys, json\n"
        "out = [a.split('=', 1)[1] for a in sys.argv if a.startswith('--output=')][0]\n"
        f"json.dump({{'fio version': 'fio-3.33', 'jobs': [{job!r}]}}, open(out, 'w'))\n")
    plan = FioPlan([FioJob("a", numjobs=2, runtime=1, time_based=True)])
    with pytest.raises(ToolError, match="incomplete"):
        Fio(_program(fake), Timeline()).run(plan, tmp_path / "r")


def test_plan_rejects_bad_rw_and_duplicate_names():
    with pytest.raises(ToolError, match="rw="):
        FioPlan([FioJob("a", rw="sideways")]).job_file(None)
    with pytest.raises(ToolError, match="unique"):
        FioPlan([FioJob("a"), FioJob("a")]).job_file(None)


# -- group reporting, from real fio 3.33 outputs (tests/data/fio, made with ioengine=null) ------------
from powerrig.dut.fio import results_from_report  # noqa: E402

FIO_DATA = Path(__file__).parent / "data" / "fio"
NULL = dict(ioengine="null", size="64m", runtime=1, time_based=True)


def three_group_plan(group_reporting: bool) -> FioPlan:
    """What made the fixtures: a (2 clones) | stonewall b | new_group c (2 clones, beside b)."""
    return FioPlan([FioJob("a", rw="write", bs="4k", numjobs=2, **NULL),
                    FioJob("b", rw="read", bs="4k", extra={"stonewall": 1}, **NULL),
                    FioJob("c", rw="randwrite", bs="4k", numjobs=2, iodepth=8, extra={"new_group": 1}, **NULL)],
                   group_reporting=group_reporting, log_avg_msec=100)


def fixture(name: str):
    final, jobs, _ = parse_fio_json((FIO_DATA / name / "fio.json").read_text())
    return final, jobs, FIO_DATA / name / "logs"


def log_span(logs: Path, *names: str) -> tuple[float, float]:
    ts = [int(line.split(",")[0]) / 1000 for n in names for line in (logs / n).read_text().splitlines()]
    return min(ts), max(ts)


def test_plan_numbers_groups_and_stages_as_fio_does():
    assert three_group_plan(True).groups() == [(0, 0), (1, 1), (2, 1)]
    final, jobs, _ = fixture("group-reporting")
    assert [j["groupid"] for j in jobs] == [0, 1, 2]            # real fio agrees
    glob = FioPlan([FioJob("x"), FioJob("y")], global_options={"stonewall": 1})
    assert glob.groups() == [(0, 0), (1, 1)]


def test_group_reporting_with_several_groups_is_one_entry_per_group():
    final, jobs, logs = fixture("group-reporting")
    report = final["timestamp_ms"] / 1000
    res = results_from_report(three_group_plan(True), final, jobs, logs, report - 10, report + 5)
    assert [(r.name, r.groupid, r.members) for r in res] == [("a", 0, ("a",)), ("b", 1, ("b",)), ("c", 2, ("c",))]


def test_each_group_takes_its_span_from_its_own_logs_not_the_summed_runtime():
    final, jobs, logs = fixture("group-reporting")
    report = final["timestamp_ms"] / 1000
    a, b, c = results_from_report(three_group_plan(True), final, jobs, logs, report - 10, report + 5)
    assert jobs[0]["job_runtime"] > 1900                        # fio sums the two clones' runtime
    first_a, last_a = log_span(logs, "a_bw.1.log", "a_bw.2.log")
    first_b, last_b = log_span(logs, "b_bw.3.log")
    assert a.start_utc == pytest.approx(first_a - 0.1) and last_a <= a.end_utc <= last_a + 0.25
    assert 0.9 < a.end_utc - a.start_utc < 1.2                   # one second, not two
    assert a.end_utc <= b.start_utc + 0.05                       # the stonewalled group comes after a
    assert b.start_utc == pytest.approx(first_b - 0.1) and 0.9 < b.end_utc - b.start_utc < 1.2
    assert abs(c.start_utc - b.start_utc) < 0.1                  # new_group without stonewall: beside b


def test_log_derived_end_is_bounded_by_fios_report_time():
    final, jobs, logs = fixture("per-job")
    report = final["timestamp_ms"] / 1000
    jd = dict(jobs[4], job_runtime=60000)                        # a runtime running past the report
    start, end, src = job_times(jd, [logs / "c_bw.5.log"], 100, report - 10, report + 30, report)
    assert src == "log" and end == report


def test_without_logs_stonewalled_stages_are_placed_in_order():
    final, jobs, _ = fixture("per-job")
    t_ret = 1000.0
    res = results_from_report(three_group_plan(False), final, jobs, Path("/nonexistent"), t_ret - 10, t_ret)
    assert all(r.time_source == "runner_clock" for r in res)
    a1, a2, b, c1, c2 = res
    assert max(c1.end_utc, c2.end_utc, b.end_utc) == t_ret
    assert a1.end_utc <= b.start_utc + 1e-9 and a2.end_utc <= c1.start_utc + 1e-9
    assert a1.end_utc == pytest.approx(t_ret - max(j["job_runtime"] for j in jobs[2:]) / 1000)


def test_group_reporting_fewer_groups_than_planned_is_incomplete():
    final, jobs, logs = fixture("group-reporting")
    with pytest.raises(ToolError, match="reported 2 groups, the plan has 3"):
        results_from_report(three_group_plan(True), final, jobs[:2], logs, 0, 1e12)


@needs_fio
def test_real_fio_stonewall_groups_under_group_reporting(tmp_path):
    plan = FioPlan([FioJob("w", rw="write", bs="4k", numjobs=2, **NULL),
                    FioJob("r", rw="read", bs="4k", extra={"stonewall": 1}, **NULL)],
                   group_reporting=True, log_avg_msec=100)
    res = Fio(["fio"], Timeline()).run(plan, tmp_path / "run")
    w, r = res.jobs
    assert (w.name, r.name) == ("w", "r") and w.end_utc <= r.start_utc + 0.05
    assert 0.8 < w.end_utc - w.start_utc < 1.3
