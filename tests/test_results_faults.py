"""Database faults (issue 25): a corrupt file is refused at open by every command before anything runs;
a database that is full or locked past the timeout mid-sweep gives one line, leaves the run
"interrupted" and loses no finished step (the next --resume stores it instead of running it again)."""
from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import create_engine, event, text

from conftest import run_cli
from powerrig.results import DatabaseFault, ResultStore
from powerrig.results.store import database_url
from powerrig.sweep.engine import UNSTORED, Sweep
from powerrig.sweep.plan import parse

from test_results_store import PLAN, fill

TINY = """name = "tiny"
power_states = [0]
[rig]
port = "sim:d5-p5336"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.2
idle_s = 0.6
measure_s = 1.0
[[workload]]
name = "seq-read"
rw = "read"
[[workload]]
name = "rand-read"
rw = "randread"
bs = "4k"
"""


@pytest.fixture
def simdir(tmp_path, monkeypatch):
    d = tmp_path / "sim"
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(d))
    yield d
    run_cli("sim", "stop", "--all")


def _corrupt(db, table: str) -> None:
    """Overwrite the middle of one table's root page, as a bad sector or a torn copy would."""
    import sqlite3
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    con.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page_size + 8)
        f.write(bytes(range(256)) * 4)


def test_a_corrupt_database_is_refused_by_every_command_before_anything_runs(tmp_path, simdir):
    db = tmp_path / "r.sqlite"
    store = ResultStore(db)
    fill(store, parse(PLAN), [5.0, 10.0, 6.0, 9.0])
    store.engine.dispose()
    _corrupt(db, "measurements")           # runs and steps still read: only a check finds it
    plan = tmp_path / "tiny.toml"
    plan.write_text(TINY)
    for argv in (["results", "--db", str(db), "list"], ["results", "--db", str(db), "steps", "1"],
                 ["report", "1", "--db", str(db), "--out", str(tmp_path / "rep")],
                 ["sweep", str(plan), "--results", str(db), "--out", str(tmp_path / "out")]):
        r = run_cli(*argv)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "is corrupt (quick_check" in r.stderr, (argv, r.stderr)
    assert not (tmp_path / "out").exists()          # the sweep did not start a step
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 300)
    r = run_cli("results", "--db", str(tmp_path / "junk.sqlite"), "list")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a database" in r.stderr, r.stderr


def _resume_and_check(db, out, faulted_key: str) -> None:
    """A resume stores the kept step without running it again and finishes the run."""
    events = []
    run = Sweep(parse(TINY), ResultStore(db), out, resume=True, on_progress=events.append).run()
    store = ResultStore(db)
    assert store.run(run)["status"] == "done"
    assert [s["key"] for s in store.steps(run)] == [s.key for s in parse(TINY).steps()]
    ran = [e["key"] for e in events if e["kind"] == "step"]
    assert faulted_key not in ran and any("stored from" in e.get("text", "") for e in events), events
    assert not (out / UNSTORED).exists() and (out / (UNSTORED + ".stored")).exists()


def test_a_full_database_mid_sweep_interrupts_the_run_and_loses_no_step(tmp_path, simdir):
    db, out = tmp_path / "r.sqlite", tmp_path / "out"
    store = ResultStore(db)
    full = threading.Event()

    @event.listens_for(store.engine, "connect")
    def _no_room(dbapi_conn, _):           # the file may not grow: SQLite's own "database or disk is full"
        if full.is_set():
            n = dbapi_conn.execute("PRAGMA page_count").fetchone()[0]
            dbapi_conn.execute(f"PRAGMA max_page_count = {n}")

    def progress(d):
        if d["kind"] == "step-done" and d["n"] == 1:
            full.set()
            store.engine.dispose()         # the next connection is opened with the cap

    with pytest.raises(DatabaseFault) as e:
        Sweep(parse(TINY), store, out, on_progress=progress).run()
    msg = str(e.value)
    assert "\n" not in msg and "full" in msg and "--resume" in msg, msg
    s2 = ResultStore(db)
    [run] = s2.runs()
    assert (run["status"], run["steps"]) == ("interrupted", 1)
    faulted = parse(TINY).steps()[1].key
    assert faulted in (out / UNSTORED).read_text()
    _resume_and_check(db, out, faulted)


def test_a_database_locked_past_the_timeout_mid_sweep_interrupts_the_run_and_loses_no_step(tmp_path, simdir,
                                                                                          results_db):
    out = tmp_path / "out"
    store = ResultStore(results_db, timeout_s=0.5)
    eng = create_engine(database_url(results_db))
    released = threading.Event()

    def hold_lock():
        """Another client takes the steps table while step 2 runs, and lets go once the sweep gave up."""
        with eng.connect() as other:
            if store.path:
                other.execute(text("UPDATE schema_info SET value = value"))        # SQLite's write lock
            else:
                other.execute(text("LOCK TABLE steps IN ACCESS EXCLUSIVE MODE"))
            deadline = time.monotonic() + 120
            while not (out / UNSTORED).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
            other.rollback()
        released.set()

    holder = []

    def progress(d):
        if d["kind"] == "step" and d["n"] == 2:
            holder.append(threading.Thread(target=hold_lock, daemon=True))
            holder[0].start()
            time.sleep(0.3)

    with pytest.raises(DatabaseFault) as e:
        Sweep(parse(TINY), store, out, on_progress=progress).run()
    assert released.wait(30)
    eng.dispose()
    msg = str(e.value)
    assert "\n" not in msg and "0.5 s" in msg and "try again" in msg, msg
    [run] = ResultStore(results_db).runs()
    assert (run["status"], run["steps"]) == ("interrupted", 1)
    faulted = parse(TINY).steps()[1].key
    _resume_and_check(results_db, out, faulted)
