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
    assert f"run 1 interrupted (stopped by SIGTERM); `powerrig sweep {plan_file} --resume` continues it" in err
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
