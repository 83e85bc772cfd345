"""The report: files, table, verdicts, CLI exit codes."""
import csv
import json

import pytest

from powerrig.testing import synthetic as S
from powerrig.cli import main
from powerrig.analysis import analyse
from powerrig.capture import CaptureReader


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return S.demo(tmp_path_factory.mktemp("rep") / "demo.jls", minutes=1.0)


def test_report_writes_html_pngs_and_csv(demo, tmp_path):
    assert main(["report", str(demo), "--out", str(tmp_path / "r")]) == 0
    out = tmp_path / "r"
    for f in ("report.html", "power.png", "efficiency.png", "waf.png", "phases.csv"):
        assert (out / f).stat().st_size > 1000 or f == "phases.csv"
    html = (out / "report.html").read_text()
    for needle in ("OCP PCM-1", "OCP PWR-6", "NVMe IDLP", "NVMe ACTP", "Energy per command", "Efficiency",
                   "Write amplification", "VSIM0001"):
        assert needle in html
    rows = list(csv.DictReader(open(out / "phases.csv")))
    assert rows[0]["phase"] == "capture"
    workloads = [r for r in rows if r["kind"] == "workload"]
    assert len(workloads) == 9 and all(float(r["total_mean_w"]) > 5 for r in workloads)
    # energies in the table add up: phases tile the capture (idle + workload)
    tiles = sum(float(r["total_energy_j"]) for r in rows if r["kind"] in ("idle", "workload"))
    assert tiles == pytest.approx(float(rows[0]["total_energy_j"]), rel=1e-6)
    with CaptureReader(demo) as cap:
        assert float(rows[0]["duration_s"]) == pytest.approx(cap.duration_s)
    with CaptureReader(demo) as cap:                 # the settled idle beside the idle mean, over the IDLP windows
        ia = analyse(cap, cap.events, cap.metadata).idle_active()
    assert ia["idle_windows"] == 2
    assert f"settled idle {ia['idle_settled']:.3f} W (over 2 idle window(s)" in html


def test_report_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.jls")]) == 2
    (tmp_path / "junk.jls").write_bytes(b"\x00" * 64)
    assert main(["report", str(tmp_path / "junk.jls")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("powerrig: error:") for line in err)


def test_record_refuses_bad_arguments_before_touching_the_port(tmp_path, capsys):
    assert main(["record", "--port", "/dev/null-port", "--out", str(tmp_path / "x.csv")]) == 2
    assert main(["record", "--port", "/dev/null-port", "--out", str(tmp_path / "x.jls"), "--seconds", "0"]) == 2
    assert "must" in capsys.readouterr().err


def test_record_never_replaces_a_capture_without_overwrite(tmp_path, capsys):
    """Yesterday's command line run again: the capture already at --out is refused in one line and left as
    it was; --overwrite lets the command go on (here to a port that is not there, refused before the
    file is touched)."""
    old = tmp_path / "yesterday.jls"
    old.write_bytes(b"jls: yesterday's capture")
    before = (old.read_bytes(), old.stat().st_mtime_ns)
    assert main(["record", "--port", "/dev/null-port", "--out", str(old), "--seconds", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already exists" in err[0] and "--overwrite" in err[0], err
    assert (old.read_bytes(), old.stat().st_mtime_ns) == before
    assert main(["record", "--port", "/dev/null-port", "--out", str(old), "--seconds", "1", "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "already exists" not in err and "null-port" in err, err
    assert (old.read_bytes(), old.stat().st_mtime_ns) == before


def test_bench_analysis_creates_a_missing_tmp_folder(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_analysis.py"
    missing = tmp_path / "not" / "there"
    done = subprocess.run([sys.executable, str(bench), "--minutes-4us", "0.01", "--hours", "0.001",
                           "--tmp", str(missing)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr     # before: FileNotFoundError traceback
    assert missing.is_dir() and f"created folder {missing}" in done.stdout
    assert "host: " in done.stdout and "cores, load average" in done.stdout     # figures name their host
    # the analysis's one-time cost apart, and the cold analysis held to pandas timed cold too
    assert "first analysis in this process: " in done.stdout and "cold, once: " in done.stdout
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["pandas_cold_cpu_s"] > 0 and summary["pandas_cpu_x_cold"] > 0
    # the figures say how the capture was read (its pages, on this x86-64 host)
    assert summary["reader"] == "direct_read" and "reading: direct_read" in done.stdout
    # each warm analysis is held to a read of its own minute: the ratio is the median of those pairs
    pairs = summary["analyse_to_warm_read_pairs"]
    assert len(pairs) == len(summary["read_warm_pairs_s"]) == 5
    assert summary["analyse_to_warm_read"] == sorted(pairs)[2]
    (tmp_path / "file").write_text("x")
    done = subprocess.run([sys.executable, str(bench), "--tmp", str(tmp_path / "file")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is a file, not a folder" in done.stderr and "Traceback" not in done.stderr


def test_bench_figures_name_the_host_they_were_taken_on(tmp_path, monkeypatch):
    import os
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from hostinfo import machine
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9B45\ncpu family\t: 26\nmodel\t\t: 2\n\n"
                    "processor\t: 1\nmodel name\t: another CPU\n")
    line = machine(str(info))
    assert line.startswith("AMD EPYC 9B45 (family 26, model 2), ") and "another" not in line
    assert f"{os.cpu_count()} cores, load average " in line
    assert "cores, load average" in machine(str(tmp_path / "missing"))     # no cpuinfo: still a line


def test_bench_pandas_baselines_leave_the_first_call_out(monkeypatch):
    """A process's first pandas call pays one-time costs (~1.3 s for the first rolling mean over 20 M
    rows); scaled from a subset to the whole, that inflated the PCM baseline ~3x. The comparison takes
    the median of the calls after an untimed first one, and shows the first apart."""
    import time
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_analysis import warm_median
    calls = []

    def run():
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.3)                 # the one-time cost
    first, wall, cpu = warm_median(run, 1)              # one timed call: the first in it would show
    assert len(calls) == 2 and first >= 0.3 and wall < 0.1 and cpu < 0.1
    calls.clear()
    assert warm_median(run, 3)[1] < 0.1 and len(calls) == 4


def test_bench_threads_what_if_prints_its_floors_and_restores_the_pass(tmp_path, monkeypatch):
    import subprocess
    import sys
    from pathlib import Path
    from powerrig.analysis import pipeline, stats
    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    monkeypatch.syspath_prepend(str(benchmarks))
    import bench_analysis_threads as bt
    def the_pass():
        return pipeline.Segments, pipeline._Chunk.maxima, stats.SeriesStats._bin, stats.SeriesStats.percentiles
    shipped = the_pass()
    with pytest.raises(RuntimeError):
        with bt._removed(percentiles=True):
            assert pipeline.Segments is bt._NoSums and stats.SeriesStats.percentiles is bt._no_percentiles
            raise RuntimeError("a failing what-if run")
    assert the_pass() == shipped                                         # the shipped pass is back
    done = subprocess.run([sys.executable, str(benchmarks / "bench_analysis_threads.py"), "--hours", "0.01",
                           "--runs", "1", "--what-if", "--tmp", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    labels = ["as shipped", "signals in memory", "no summaries, maxima, binning", "and no percentiles"]
    assert all(sum(label in line and "M intervals/s" in line for line in done.stdout.splitlines()) == 1
               for label in labels), done.stdout


def test_bench_threads_writes_the_capture_with_the_chunk_length_asked(tmp_path):
    import re
    import subprocess
    import sys
    from pathlib import Path
    bench = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_analysis_threads.py"

    def chunk_intervals(*extra):
        done = subprocess.run([sys.executable, str(bench), "--hours", "0.01", "--runs", "1", "--tmp", str(tmp_path),
                               *extra], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return int(re.search(r"JLS chunks of (\d+) intervals", done.stdout).group(1))

    recorder, longer = chunk_intervals(), chunk_intervals("--chunk-seconds", "8")
    assert recorder == 1024 and 4 * recorder < longer <= 8 * recorder     # 1 s at 1 ms; pyjls rounds 8 s down
    done = subprocess.run([sys.executable, str(bench), "--chunk-seconds", "0"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "must be > 0" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["report.html", "power.png", "phases.csv"])
def test_a_link_in_the_report_folder_is_one_line_and_nothing_is_written(demo, tmp_path, capsys, name):
    """A capture's report folder is a run's too (OUT/report/...): a file there is never written through a link."""
    out = tmp_path / "r"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (out / name).symlink_to(victim)
    assert main(["report", str(demo), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"powerrig: error: {out / name} is a symbolic link: a run writes only its own files there, so "
                   "nothing was written; remove it or choose another output folder (--out)\n")
    assert victim.read_text() == "precious" and [p.name for p in out.iterdir()] == [name]


def test_bench_pandas_same_work_gives_every_figure_the_analysis_gives(tmp_path, monkeypatch):
    """The pandas baseline is the analysis's work written the pandas way: for every phase the same
    per-rail statistics, lost intervals, highest 1 s / 10 s / 100 ms means, 100 us peak and
    instantaneous maximum (it had left the last two windows' kinds out, so its ratio flattered pandas)."""
    import math
    from pathlib import Path
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_analysis import analyse_file, pandas_same_work, write_capture
    path = tmp_path / "c.jls"
    write_capture(path, hours=0.03)
    _, an, rows = analyse_file(path)
    out = pandas_same_work(path, an, rows)
    assert len(out) == len(an.phases) >= 3
    for ph, (stats, q, lost, r1, _, r10, _, r100ms, _, peak, peak_at, inst) in zip(an.phases, out):
        tot = ph.rails["total"]
        assert stats["p_total"]["mean"] == pytest.approx(tot["mean_w"], rel=1e-5)    # (a fractional edge)
        assert stats["p_total"]["max"] == pytest.approx(tot["max_w"], rel=1e-6)
        assert q.loc[0.5, "p_total"] == pytest.approx(tot["p50_w"], rel=1e-3)
        assert lost == tot["lost_intervals"]
        assert peak == pytest.approx(ph.peak_100us.value_w, rel=1e-6)
        assert (peak_at.total_seconds() + 1e-3 == pytest.approx(ph.peak_100us.end_s, abs=1e-6))
        assert inst == pytest.approx(ph.inst_max_w, rel=1e-6)
        # pandas' time windows also count the partial ones at a phase's start: never below the analysis's
        for got, fig in ((r1, ph.max_1s), (r10, ph.max_10s), (r100ms, ph.max_100ms)):
            if not math.isnan(fig.value_w):
                assert got >= fig.value_w - 1e-4
