"""Many writers on one results database, on SQLite and on PostgreSQL: real processes released at the
same moment create the schema, migrate it, start the same new plan and store their steps, and none
of them fails (issue 28: 19 of 40 same-plan starts and 3 of 40 schema creations failed before)."""
from __future__ import annotations

import multiprocessing as mp

import pytest

from powerrig.results import ResultStore
from powerrig.results import schema as S

from results_writer_helpers import writer
from test_results_store import PLAN, make_version_1, sql

WRITERS = 8


def run_writers(db: str, n: int = WRITERS) -> list[str]:
    ctx = mp.get_context("spawn")
    barrier, errors = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=writer, args=(db, PLAN, barrier, errors, k)) for k in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
    out = []
    while not errors.empty():
        out.append(errors.get())
    out += [f"writer {k} exited {p.exitcode}" for k, p in enumerate(procs) if p.exitcode != 0]
    return out


def test_many_processes_create_the_schema_and_start_the_same_plan_at_once(results_db):
    errors = run_writers(results_db)
    assert not errors, "\n".join(errors)
    assert sql(results_db, "select count(*) from plans")[0][0][0] == 1
    assert sql(results_db, "select count(*) from schema_info")[0][0][0] == 1
    store = ResultStore(results_db)
    runs = store.runs()
    assert len(runs) == WRITERS and {r["status"] for r in runs} == {"done"}
    assert sum(r["steps"] for r in runs) == WRITERS * 4


def test_many_processes_migrate_an_old_database_once(results_db):
    make_version_1(results_db)
    errors = run_writers(results_db)
    assert not errors, "\n".join(errors)
    assert ResultStore(results_db).schema_version() == S.SCHEMA_VERSION
    assert sql(results_db, "select value from schema_info where key = 'version'")[0] == [(str(S.SCHEMA_VERSION),)]


def test_a_writer_that_waits_for_a_lock_past_the_timeout_gets_one_line(results_db):
    """Another client holds the write lock; a store with a 0.5 s timeout says so in one line."""
    from sqlalchemy import create_engine, text

    from powerrig.results import ResultsError
    from powerrig.results.store import database_url
    from powerrig.sweep.plan import parse

    store = ResultStore(results_db, timeout_s=0.5)
    plan = parse(PLAN)
    run = store.start_run(plan, "out")
    eng = create_engine(database_url(results_db))
    with eng.connect() as other:
        if store.path:
            other.execute(text("UPDATE runs SET station = 'x'"))     # holds SQLite's write lock until rollback
        else:
            other.execute(text("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE"))
        with pytest.raises(ResultsError) as e:
            store.set_run_status(run, "done")
        other.rollback()
    eng.dispose()
    msg = str(e.value)
    assert "\n" not in msg and "0.5 s" in msg and "try again" in msg, msg
    store.set_run_status(run, "done")               # the lock gone, the same call goes through
    assert store.run(run)["status"] == "done"
