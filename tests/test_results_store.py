"""The results store on a real SQLite file and a real PostgreSQL server (every test on both): steps
stored atomically and once, a JSON record beside the database, comparison of two runs, exports,
concurrent readers, and forward migration of an old database."""
from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest
from sqlalchemy import create_engine, text

from conftest import run_cli
from powerrig.results import ResultsError, ResultStore
from powerrig.results import schema as S
from powerrig.results.store import database_url
from powerrig.results.tables import compare, export, step_summary
from powerrig.sweep.plan import parse

PLAN = """name = "t"
power_states = [0, 1]
[rig]
port = "sim:d5-p5336"
[drive]
serial = "SN1"
[[workload]]
name = "seq-read"
rw = "read"
"""


def fill(store, plan, watts):
    run = store.start_run(plan, "out", station="rig-1", drive={"sn": "SN1 ", "fr": "FW1", "mn": "M"})
    for k, s in enumerate(plan.steps()):
        w = watts[k]
        store.store_step(run, {"idx": s.index, "key": s.key, "name": s.name, "power_state": s.power_state,
                               "workload": s.workload.name if s.workload else None, "repetition": 0,
                               "status": "done", "params": "{}"},
                         [{"name": "fio:x", "kind": "workload", "mean_w": w, "energy_j": w * 10,
                           "rails": {"12V": {"mean_w": w - 0.1, "energy_j": 1.0}, "total": {"mean_w": w}}}],
                         [{"name": "power.mean", "phase": "fio:x", "value": w, "units": "W", "outcome": "info"},
                          {"name": "throughput.mib_s", "phase": "fio:x", "value": 1000.0, "units": "MiB/s",
                           "outcome": "info"},
                          {"name": "efficiency.mib_s_per_w", "phase": "fio:x", "value": 1000.0 / w,
                           "units": "MiB/s/W", "outcome": "info"},
                          {"name": "OCP PCM-1", "phase": "fio:x", "value": w, "units": "W", "upper": 25.0,
                           "marginal_upper": 23.75, "outcome": "pass", "requirement_met": False,
                           "notes": json.dumps(["short"]), "published": float("nan")}])
    store.set_run_status(run, "done")
    return run


def sql(db: str, *statements: str) -> list:
    """Statements through a connection of its own (another client: a notebook, an old powerrig)."""
    eng = create_engine(database_url(db))
    try:
        with eng.begin() as c:
            results = [c.execute(text(q)) for q in statements]
            return [r.fetchall() if r.returns_rows else None for r in results]
    finally:
        eng.dispose()


def test_runs_steps_measurements_and_json_record(results_db, tmp_path):
    db = results_db
    store = ResultStore(db)
    plan = parse(PLAN)
    run = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    assert store.schema_version() == S.SCHEMA_VERSION
    if store.path:
        assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    [r] = store.runs()
    assert (r["id"], r["status"], r["steps"], r["dut_serial"], r["plan_hash"]) == (run, "done", 4, "SN1", plan.hash)
    assert [s["key"] for s in store.steps(run)] == [s.key for s in plan.steps()]
    rows = step_summary(store, run)
    assert [x["W"] for x in rows] == [5.0, 10.0, 6.0, 9.0]
    rec = json.loads(store.write_record(run, tmp_path).read_text())
    assert rec["plan_text"] == PLAN and rec["plan_resolved"]["timing"]["measure_s"] == 10.0
    pcm1 = [m for m in rec["steps"][1]["measurements"] if m["name"] == "OCP PCM-1"][0]
    assert (pcm1["upper"], pcm1["marginal_upper"], pcm1["outcome"], pcm1["published"]) == (25.0, 23.75, "pass", None)
    # a second connection (a notebook) reads while the store is open
    assert sql(db, "select count(*) from measurements")[0][0][0] == 16


def test_a_step_is_stored_once(results_db):
    store = ResultStore(results_db)
    plan = parse(PLAN)
    run = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    s = plan.steps()[0]
    with pytest.raises(ResultsError, match="already stored"):
        store.store_step(run, {"idx": 0, "key": s.key, "name": s.name, "status": "done"}, [], [])
    assert len(store.steps(run)) == 4


def test_resumable_run_belongs_to_the_same_plan_only(results_db):
    store = ResultStore(results_db)
    a = parse(PLAN)
    b = parse(PLAN.replace('rw = "read"', 'rw = "randread"'))
    run = store.start_run(a, "out")
    assert store.resumable_run(a)["id"] == run
    assert store.resumable_run(b) is None
    store.set_run_status(run, "done")
    assert store.resumable_run(a) is None


def test_compare_two_runs_and_export(results_db, tmp_path):
    store = ResultStore(results_db)
    plan = parse(PLAN)
    a = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    b = fill(store, plan, [5.5, 8.0, 6.0, 9.0])
    rows = compare(store, a, b)
    assert len(rows) == 4
    assert rows[1]["dW"] == pytest.approx(-2.0)
    assert rows[1]["dMiB/s/W"] == pytest.approx(1000 / 8 - 1000 / 10)
    assert rows[1]["dMiB/s/W_%"] == pytest.approx(25.0)
    for suffix in ("csv", "json", "parquet"):
        p = export(store, a, tmp_path / f"m.{suffix}")
        df = {"csv": pd.read_csv, "json": pd.read_json, "parquet": pd.read_parquet}[suffix](p)
        assert len(df) == 16 and set(df["name"]) >= {"power.mean", "OCP PCM-1"}
    with pytest.raises(ResultsError, match="export format"):
        export(store, a, tmp_path / "m.xlsx")


def make_version_1(db: str) -> None:
    """Turn a new database into a version-1 one: without the v2 columns."""
    ResultStore(db).engine.dispose()
    sql(db, "ALTER TABLE measurements DROP COLUMN published", "ALTER TABLE steps DROP COLUMN attempts",
        "ALTER TABLE runs DROP COLUMN host", "ALTER TABLE runs DROP COLUMN pid",
        "UPDATE schema_info SET value = '1' WHERE key = 'version'")


def test_old_database_is_migrated_forward(results_db):
    db = results_db
    make_version_1(db)
    store = ResultStore(db)
    assert store.schema_version() == S.SCHEMA_VERSION == 3
    sql(db, "select host, pid from runs")     # the v3 columns are there
    fill(store, parse(PLAN), [5.0, 10.0, 6.0, 9.0])
    assert sql(db, "select count(published) from measurements")[0][0][0] == 0   # the column is there, all NULL


def test_newer_database_is_refused(results_db):
    db = results_db
    ResultStore(db).engine.dispose()
    sql(db, "UPDATE schema_info SET value = '99' WHERE key = 'version'")
    with pytest.raises(ResultsError, match="schema version 99, newer"):
        ResultStore(db)


def test_postgresql_urls_use_psycopg_3(pg_cluster):
    url = pg_cluster.database()
    assert url.startswith("postgresql://")
    store = ResultStore(url)
    assert (store.engine.dialect.name, store.engine.dialect.driver) == ("postgresql", "psycopg")
    assert database_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert database_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"


def test_results_cli(results_db, tmp_path):
    db = results_db
    store = ResultStore(db)
    plan = parse(PLAN)
    a = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    b = fill(store, plan, [5.5, 8.0, 6.0, 9.0])
    r = run_cli("results", "--db", str(db), "list")
    assert r.returncode == 0 and " t " in r.stdout and r.stdout.count("done") == 2, r.stdout + r.stderr
    r = run_cli("results", "--db", str(db), "compare", str(a), str(b))
    assert r.returncode == 0 and "ps0/seq-read/r1" in r.stdout and "-2.00" in r.stdout, r.stdout + r.stderr
    r = run_cli("results", "--db", str(db), "export", str(a), str(tmp_path / "x.parquet"))
    assert r.returncode == 0 and (tmp_path / "x.parquet").exists()
    r = run_cli("results", "--db", str(db), "steps", "42")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no run 42" in r.stderr


def test_sweep_report_shows_figures_curves_and_every_verdict(results_db, tmp_path):
    from powerrig.results.sweep_report import write_sweep_report
    store = ResultStore(results_db)
    plan = parse(PLAN)
    run = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    path = write_sweep_report(store, run, tmp_path / "rep")
    text = path.read_text()
    assert text.count("<td>OCP PCM-1</td>") == 4                  # every verdict with its limit
    assert "<td>25.000</td>" in text and "class=pass" in text
    assert (tmp_path / "rep" / "efficiency_vs_power_state.png").stat().st_size > 1000   # MiB/s/W over PS0, PS1
    assert "ps1/seq-read/r1" in text


def test_every_text_a_valid_plan_fills_fits_its_column(results_db, tmp_path):
    """A workload name at the limit stores on both backends (PostgreSQL's varchar(128) once lost the step
    after it ran); one character more is refused by `--check`, naming the same limit."""
    longest = "w" * S.steps.c.workload.type.length
    plan = parse(PLAN.replace('name = "seq-read"', f'name = "{longest}"')
                 .replace('name = "t"', f'name = "{"p" * S.plans.c.name.type.length}"'))
    store = ResultStore(results_db)
    run = store.start_run(plan, "out")
    for s in plan.steps():
        store.store_step(run, {"idx": s.index, "key": s.key, "name": s.name, "workload": s.workload and s.workload.name,
                               "power_state": s.power_state, "status": "done"},
                         [{"name": f"self-report:measure:{longest}", "kind": "workload"}],
                         [{"name": "power.mean", "phase": f"self-report:measure:{longest}", "value": 1.0,
                           "outcome": "info"}])
    assert len(store.steps(run)) == 4
    too_long = tmp_path / "long.toml"
    too_long.write_text(PLAN.replace('name = "seq-read"', f'name = "{longest}x"'))
    r = run_cli("sweep", str(too_long), "--check")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "workload[0].name (line 8)" in r.stderr and "129 characters" in r.stderr and "128" in r.stderr, r.stderr


@pytest.mark.parametrize("what", ["foreign", "empty"])
def test_reading_commands_never_make_tables_in_a_foreign_or_empty_sqlite_file(tmp_path, what):
    """`results list|steps` and `report N` made powerrig's tables inside any SQLite file --db named."""
    db = tmp_path / "other.sqlite"
    if what == "foreign":
        with sqlite3.connect(db) as c:
            c.execute("CREATE TABLE notes (t TEXT)")
            c.execute("INSERT INTO notes VALUES ('mine')")
        c.close()
    else:
        db.write_bytes(b"")
    before = db.read_bytes()
    says = "is empty, not a powerrig results store" if what == "empty" else "is not a powerrig results store"
    for argv in (["results", "--db", str(db), "list"], ["results", "--db", str(db), "steps", "1"],
                 ["report", "1", "--db", str(db), "--out", str(tmp_path / "rep")]):
        r = run_cli(*argv)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (argv, r.stderr)
        assert r.stderr.startswith(f"powerrig: error: {db} {says}"), r.stderr
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]        # no -wal, -shm, report folder


def test_an_old_powerrig_store_is_still_migrated_by_a_reading_command(tmp_path):
    db = str(tmp_path / "r.sqlite")
    make_version_1(db)
    r = run_cli("results", "--db", db, "list")
    assert r.returncode == 0, r.stderr
    assert ResultStore(db, read_only=True).schema_version() == S.SCHEMA_VERSION


def test_stored_strings_are_printed_with_control_characters_escaped(tmp_path):
    """A plan named with ESC ] 0 ; ... BEL retitled the terminal that ran `results list`; a drive's serial
    (id-ctrl's bytes) and a station name are as foreign."""
    db = str(tmp_path / "r.sqlite")
    store = ResultStore(db)
    evil = "t\x1b]0;pwned\x07\rX\u202e"
    plan = parse(PLAN.replace('name = "t"', 'name = "t\\u001b]0;pwned\\u0007\\rX\\u202e"'))
    assert plan.name == evil
    run = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    sql(db, "UPDATE runs SET station = 'rig\x1b[2J', dut_serial = 'SN\x9b1m'")
    for argv in (["list"], ["steps", str(run)], ["compare", str(run), str(run)]):
        r = run_cli("results", "--db", db, *argv)
        assert r.returncode == 0, r.stderr
        assert not any(c in r.stdout for c in "\x1b\x07\r\x9b\u202e"), repr(r.stdout)
    r = run_cli("results", "--db", db, "list")
    assert "t\\x1b]0;pwned\\x07\\rX\\u202e" in r.stdout and "rig\\x1b[2J" in r.stdout and "SN\\x9b1m" in r.stdout


@pytest.mark.parametrize("what", ["foreign", "empty", "no tables"])
def test_writing_commands_never_make_tables_in_a_foreign_or_empty_sqlite_file(tmp_path, what):
    """`sweep --results` (any writer: ResultStore(path)) made powerrig's tables inside another program's
    SQLite file or an empty file; it is refused in one line and the file is left as it was."""
    db = tmp_path / "other.sqlite"
    if what == "foreign":
        with sqlite3.connect(db) as c:
            c.execute("CREATE TABLE notes (t TEXT)")
            c.execute("INSERT INTO notes VALUES ('mine')")
        c.close()
    elif what == "empty":
        db.write_bytes(b"")
    else:
        c = sqlite3.connect(db)
        c.execute("PRAGMA user_version = 7")         # a SQLite file with a header and no table
        c.close()
    before = db.read_bytes()
    with pytest.raises(ResultsError) as e:
        ResultStore(db)
    assert "\n" not in str(e.value) and str(e.value).startswith(f"{db} ")
    assert ("is empty" if what != "foreign" else "holds tables notes") in str(e.value), str(e.value)
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    r = run_cli("sweep", str(plan), "--results", str(db), "--out", str(tmp_path / "out"), timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "not a powerrig results store" in r.stderr and "--results" in r.stderr, r.stderr
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite", "p.toml"]   # no -wal, -shm, out


def test_a_new_path_an_own_store_and_an_old_one_stay_writable(tmp_path):
    db = tmp_path / "new" / "r.sqlite"
    ResultStore(db).engine.dispose()                          # a brand-new path: made whole
    assert sorted(p.name for p in db.parent.iterdir() if not p.name.startswith("r.sqlite")) == []
    store = ResultStore(db)                                   # an existing powerrig store
    assert store.schema_version() == S.SCHEMA_VERSION
    old = str(tmp_path / "old.sqlite")
    make_version_1(old)
    assert ResultStore(old).schema_version() == S.SCHEMA_VERSION


def test_a_postgresql_database_holding_other_tables_is_refused(pg_cluster):
    url = pg_cluster.database()
    sql(url, "CREATE TABLE notes (t TEXT)", "INSERT INTO notes VALUES ('mine')")
    with pytest.raises(ResultsError) as e:
        ResultStore(url)
    assert "\n" not in str(e.value) and "holds tables notes" in str(e.value), str(e.value)
    assert sql(url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")[0] == [("notes",)]
    ResultStore(pg_cluster.database()).engine.dispose()       # an empty database is made a store
