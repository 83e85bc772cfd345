"""A run owns its output, tried with real processes on the virtual rig: `--resume` from a second shell
while the sweep runs is refused in one line naming the run, its host and its pid (and the running
sweep goes on unharmed); SIGTERM marks the run "interrupted" as Ctrl-C does; after kill -9 the dead
process's lock is taken over, two resumes started together end with one refused and one finishing
the run, and the killed step's partial capture is kept beside its rerun."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import jsonl, run_cli
from powerrig.capture import CaptureReader
from powerrig.results import ResultStore
from powerrig.sweep.ownership import LOCK_NAME, RunBusy, RunLock
from powerrig.sweep.plan import parse

PLAN = """name = "owned"
power_states = [0, 2]
[rig]
port = "sim:d5-p5336"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.3
idle_s = 1.0
measure_s = 3.0
[[workload]]
name = "seq-read-128k"
rw = "read"
"""
HOST = socket.gethostname()


def _start(plan_file, db, out=None, resume=False):
    args = [sys.executable, "-m", "powerrig", "sweep", str(plan_file), "--results", str(db)]
    args += ["--resume"] if resume else ["--out", str(out)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_steps(proc, log, n, timeout=120):
    deadline = time.monotonic() + timeout
    while len(jsonl(log)) < n and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert len(jsonl(log)) >= n, proc.communicate()[1] if proc.poll() is not None else "timeout"


def test_the_lock_is_exclusive_and_freed_by_the_kernel_when_its_process_dies(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from powerrig.sweep.ownership import RunLock
RunLock({str(tmp_path)!r}).acquire(7)
print("held", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunBusy, match=rf"^run 7 is still running \(host {HOST}, pid {holder.pid}, since .* UTC\) "
                                          rf"and owns {tmp_path}; wait for it to end or stop it \(kill {holder.pid} on "):
            RunLock(tmp_path).acquire(7)
    finally:
        holder.kill()                       # kill -9: no cleanup of its own runs
        holder.wait()
    lock = RunLock(tmp_path).acquire(7)     # the stale file is taken over, and says whose it was
    assert lock.previous["pid"] == holder.pid and lock.previous["run"] == 7
    lock.release()
    assert (tmp_path / LOCK_NAME).exists()


def test_resume_of_a_live_run_is_refused_and_sigterm_marks_it_interrupted(tmp_path, simdir):
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(PLAN)
    db, out = tmp_path / "r.sqlite", tmp_path / "out"
    a = _start(plan_file, db, out)
    try:
        _wait_steps(a, out / "sweep.jsonl", 1)
        store = ResultStore(db)
        [run] = store.runs()
        row = store.run(run["id"])
        assert (row["host"], row["pid"], row["status"]) == (HOST, a.pid, "running")
        captures = sorted(p.name for p in (out / "captures").iterdir())

        r = run_cli("sweep", str(plan_file), "--results", str(db), "--resume")
        assert r.returncode == 2
        assert r.stderr.startswith(f"powerrig: error: run 1 is still running (host {HOST}, pid {a.pid}, since ")
        assert r.stderr.count("\n") == 1 and f"kill {a.pid} on {HOST}" in r.stderr, r.stderr
        assert a.poll() is None                                   # the overnight sweep is unharmed
        assert store.run(1)["status"] == "running" and store.run(1)["pid"] == a.pid
        assert set(captures) <= {p.name for p in (out / "captures").iterdir()}

        _wait_steps(a, out / "sweep.jsonl", 2)
        time.sleep(1.0)
        a.send_signal(signal.SIGTERM)
        _, err = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert a.returncode == 143, err
    assert (f"run 1 interrupted: stopped by SIGTERM; `powerrig sweep {plan_file} --resume --results {db} --out {out}` "
            "continues it") in err
    assert "Traceback" not in err
    row = ResultStore(db).run(1)
    assert row["status"] == "interrupted" and row["error"] == "stopped by SIGTERM"
    assert json.loads((out / "run-1.json").read_text())["status"] == "interrupted"


def test_after_kill_9_two_resumes_together_one_refused_one_finishes_and_the_cut_capture_is_kept(tmp_path, simdir):
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(PLAN)
    db, out = tmp_path / "r.sqlite", tmp_path / "out"
    a = _start(plan_file, db, out)
    _wait_steps(a, out / "sweep.jsonl", 1)
    time.sleep(2.5)                              # inside step 2 (settle 0.3 + idle 1 + 3 s of reads)
    a.send_signal(signal.SIGKILL)
    a.wait()
    store = ResultStore(db)
    row = store.run(1)
    assert (row["status"], row["pid"]) == ("running", a.pid)
    cut = out / "captures" / "001-ps0_seq-read-128k_r1-a1.jls"
    assert cut.exists()
    cut_bytes = cut.read_bytes()

    b, c = _start(plan_file, db, resume=True), _start(plan_file, db, resume=True)
    (ob, eb), (oc, ec) = b.communicate(timeout=240), c.communicate(timeout=240)
    results = sorted([(b.returncode, ob, eb, b.pid, c.pid), (c.returncode, oc, ec, c.pid, b.pid)])
    (rc_win, out_win, err_win, pid_win, _), (rc_lost, _, err_lost, _, _) = results
    assert rc_win == 0, err_win
    assert rc_lost == 2 and err_lost.count("\n") == 1, err_lost
    assert err_lost.startswith(f"powerrig: error: run 1 is still running (host {HOST}, pid {pid_win}, since "), err_lost
    assert f"its last owner (host {HOST}, pid {a.pid}" in out_win and "takes the run over" in out_win

    row = store.run(1)
    assert (row["status"], row["pid"]) == ("done", pid_win)
    plan = parse(PLAN)
    assert [s["key"] for s in store.steps(1)] == [s.key for s in plan.steps()]     # none twice, none missing
    kept = cut.with_name(cut.stem + ".cut1.jls")
    assert kept.read_bytes() == cut_bytes                      # the partial capture, untouched, beside the rerun
    assert cut.exists() and cut.read_bytes() != cut_bytes
    with CaptureReader(kept) as cap:
        assert cap.length > 0 and not cap.closed_cleanly
    step = next(s for s in store.steps(1) if s["key"] == "ps0/seq-read-128k/r1")
    assert json.loads(step["params"])["cut_captures"] == [str(kept)]


# -- the output folder's files are the run's own: a link (or another name) in their place is refused --
TINY = """name = "tiny"
power_states = [0]
[rig]
port = "sim:d5-p5336"
[timing]
settle_s = 0.1
idle_s = 0.2
"""
VICTIM = b"precious\n" * (2 * 2**20 // 9)


def _victim(tmp_path):
    v = tmp_path / "victim"
    v.write_bytes(VICTIM)
    return v


@pytest.mark.parametrize("kind", ["symlink", "dangling", "hardlink", "fifo"])
def test_the_lock_file_is_never_a_link_or_another_file(tmp_path, kind):
    import os
    from powerrig.core.owned import NotOwned

    out = tmp_path / "out"
    out.mkdir()
    v = _victim(tmp_path)
    lock = out / LOCK_NAME
    if kind == "symlink":
        lock.symlink_to(v)
    elif kind == "dangling":
        lock.symlink_to(tmp_path / "made-by-the-run")
    elif kind == "hardlink":
        os.link(v, lock)
    else:
        os.mkfifo(lock)
    with pytest.raises(NotOwned, match=rf"^{lock} (is a symbolic link|has 1 other name\(s\) \(a hard link\)|is not a "
                                       r"regular file): a run writes only its own files there, so nothing was written; "
                                       r"remove it or choose another output folder \(--out\)$"):
        RunLock(out).acquire(None)
    assert v.read_bytes() == VICTIM                  # not cut to the lock's JSON
    assert not (tmp_path / "made-by-the-run").exists()


@pytest.mark.parametrize("name", [LOCK_NAME, "sweep.jsonl", "unstored-steps.jsonl", "plan.toml", "plan.resolved.json",
                                  "run-1.json", "run-1.json.tmp", "captures/000-ps0_idle_r1-a1.jls",
                                  "fio/000-ps0_idle_r1-a1/cycles.jsonl", "captures", "fio"])
def test_a_link_anywhere_in_the_output_folder_refuses_the_sweep_before_anything_runs(tmp_path, simdir, name):
    """`ln -s victim OUT/NAME; powerrig sweep P --out OUT`: one line, the victim untouched, no run made."""
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(TINY)
    out, db = tmp_path / "out", tmp_path / "r.sqlite"
    v = _victim(tmp_path) if "." in name else tmp_path / "victim-dir"
    if "." not in name:
        v.mkdir()
    link = out / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(v)
    r = run_cli("sweep", str(plan_file), "--out", str(out), "--results", str(db))
    assert r.returncode == 2, r.stderr
    assert r.stderr == (f"powerrig: error: {link} is a symbolic link: a run writes only its own files there, so "
                        "nothing was written; remove it or choose another output folder (--out)\n")
    if v.is_file():
        assert v.read_bytes() == VICTIM
    else:
        assert list(v.iterdir()) == []
    assert not db.exists() or ResultStore(db).runs() == []


def _writer_unstored(out, tmp_path, monkeypatch):
    from powerrig.results import DatabaseFault
    from powerrig.sweep.engine import UNSTORED, Sweep

    class Full:
        def store_step(self, *a):
            raise DatabaseFault("database or disk is full")
    sweep = Sweep(parse(TINY), Full(), out)
    sweep.run_id = 1
    (out / UNSTORED).symlink_to(tmp_path / "victim")
    sweep._store({"step": {"key": "k"}, "phases": [], "measurements": []})


def _writer_record(out, tmp_path, monkeypatch):
    store = ResultStore(tmp_path / "r.sqlite")
    monkeypatch.setattr(store, "run_record", lambda run_id: {"id": run_id})
    (out / "run-1.json").symlink_to(tmp_path / "victim")
    store.write_record(1, out)


def _writer_capture(out, tmp_path, monkeypatch):
    from powerrig.capture.writer import CaptureWriter
    (out / "c.jls").symlink_to(tmp_path / "victim")
    CaptureWriter(out / "c.jls")


def _writer_cycles(out, tmp_path, monkeypatch):
    from powerrig.dut import destructive
    from powerrig.sweep.power_loss import PowerLossStep
    from powerrig.sweep.plan import PowerLoss

    monkeypatch.setattr(destructive, "power_session", lambda *a: None)
    monkeypatch.setattr(destructive, "power_release", lambda *a: None)
    (out / "cycles.jsonl").symlink_to(tmp_path / "victim")
    PowerLossStep(PowerLoss("pl", cycles=1), None, None, None, None, "/dev/nvme0", "/dev/nvme0n1", "SN", out,
                  None).run()


def _writer_fio_job(out, tmp_path, monkeypatch):
    from powerrig.dut.fio import Fio, FioJob, FioPlan
    (out / "r.fio").symlink_to(tmp_path / "victim")
    Fio(["fio"]).run(FioPlan([FioJob("r", rw="read", filename=str(tmp_path / "data"), size="4k")]), out, name="r")


@pytest.mark.parametrize("write", [_writer_unstored, _writer_record, _writer_capture, _writer_cycles, _writer_fio_job],
                         ids=["unstored-steps.jsonl", "run-N.json", "capture", "cycles.jsonl", "fio job file"])
def test_each_writer_refuses_a_link_made_while_the_run_goes(tmp_path, monkeypatch, write):
    """The check at the start does not stand alone: every file is opened without following a link."""
    from powerrig.core.errors import PowerrigError

    out = tmp_path / "out"
    out.mkdir()
    v = _victim(tmp_path)
    with pytest.raises(PowerrigError, match=r"is a symbolic link: a run writes only its own files there"):
        write(out, tmp_path, monkeypatch)
    assert v.read_bytes() == VICTIM


def test_ctrl_c_says_so_and_the_resume_hint_is_the_exact_command_that_resumes(tmp_path, simdir):
    """`run 1 interrupted ()` said nothing, and the hint without --results made a new store ("nothing to
    resume"): the hint now names every option given, quoted for the shell, and following it finishes the run."""
    import shlex

    from conftest import POWERRIG
    plan_file = tmp_path / "my plan.toml"
    # the second step measures long enough that Ctrl-C lands inside it even when this test's poll is
    # starved on a loaded machine (3 s let the whole sweep end first once: exit 0, nothing to resume); it
    # is the last (one power state: idle, reads), so the resume reruns it alone
    plan_file.write_text(PLAN.replace("measure_s = 3.0", "measure_s = 10.0").replace("power_states = [0, 2]",
                                                                                    "power_states = [0]"))
    db, out = tmp_path / "r $x.sqlite", tmp_path / "out dir"
    a = _start(plan_file, db, out)
    try:
        _wait_steps(a, out / "sweep.jsonl", 1)
        a.send_signal(signal.SIGINT)
        _, err = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert a.returncode == 130, err
    hint = (f"powerrig sweep {shlex.quote(str(plan_file))} --resume --results {shlex.quote(str(db))} "
            f"--out {shlex.quote(str(out))}")
    assert err.endswith(f"powerrig: run 1 interrupted by Ctrl-C; `{hint}` continues it\n"), err
    assert "Traceback" not in err and "()" not in err
    assert ResultStore(db).run(1)["error"] == "interrupted by Ctrl-C"
    r = subprocess.run([*POWERRIG, *shlex.split(hint)[1:]], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert ResultStore(db).run(1)["status"] == "done"


@pytest.mark.parametrize("name", ["new\nline", "dollar$HOME", "hash#x", "semi;colon", "bell\x07"])
def test_an_out_folder_fio_would_read_otherwise_is_refused_at_start_and_nothing_is_made(tmp_path, simdir, name):
    """`--out` with a newline or `$` was refused only at the first step: a failed run and a folder were left."""
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(TINY)
    out, db = tmp_path / name, tmp_path / "r.sqlite"
    r = run_cli("sweep", str(plan_file), "--out", str(out), "--results", str(db))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"powerrig: error: --out {str(out)!r} cannot be a run's output folder: "), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml", "sim"] or \
        sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]         # no folder, no database


@pytest.mark.parametrize("name", ["index.html", "efficiency_vs_power_state.png"])
def test_the_sweep_report_never_writes_through_a_link_in_its_folder(tmp_path, name):
    """`powerrig report N` writes into OUT/report: a link left there is one line, and nothing is written."""
    from powerrig.core.errors import PowerrigError
    from powerrig.results.sweep_report import write_sweep_report
    from test_results_store import PLAN as RESULTS_PLAN, fill

    store = ResultStore(tmp_path / "r.sqlite")
    run = fill(store, parse(RESULTS_PLAN), [5.0, 10.0, 6.0, 9.0])
    out = tmp_path / "report"
    out.mkdir()
    v = _victim(tmp_path)
    (out / name).symlink_to(v)
    with pytest.raises(PowerrigError, match=rf"^{out / name} is a symbolic link: a run writes only its own files"):
        write_sweep_report(store, run, out)
    assert v.read_bytes() == VICTIM
    assert [p.name for p in out.iterdir()] == [name]


def test_ctrl_c_interrupts_a_sweep_started_with_sigint_ignored():
    """A shell script's `powerrig sweep plan.toml &` starts it with SIGINT ignored, so Python installs no
    KeyboardInterrupt of its own: a later Ctrl-C or `kill -INT` was ignored and the run went on to the end
    (seen in a background CI-like run: exit 0, nothing said). The sweep's handler is installed whatever
    was inherited."""
    code = ("import os, signal, time\n"
            "from powerrig.cli._options import sigterm_interrupts\n"
            "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
            "try:\n"
            "    with sigterm_interrupts():\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "        time.sleep(5)\n"
            "    print('went on')\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n"
            "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN   # restored after\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert r.returncode == 0 and r.stdout.strip() == "interrupted", (r.stdout, r.stderr)
