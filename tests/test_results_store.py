"""The results store on a real SQLite file: steps stored atomically and once, a JSON record beside
the database, comparison of two runs, exports, WAL readers, and forward migration of an old file."""
from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from conftest import run_cli
from powerrig.results import ResultsError, ResultStore
from powerrig.results import schema as S
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


def test_runs_steps_measurements_and_json_record(tmp_path):
    db = tmp_path / "r.sqlite"
    store = ResultStore(db)
    plan = parse(PLAN)
    run = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    assert store.schema_version() == S.SCHEMA_VERSION
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    [r] = store.runs()
    assert (r["id"], r["status"], r["steps"], r["dut_serial"], r["plan_hash"]) == (run, "done", 4, "SN1", plan.hash)
    assert [s["key"] for s in store.steps(run)] == [s.key for s in plan.steps()]
    rows = step_summary(store, run)
    assert [x["W"] for x in rows] == [5.0, 10.0, 6.0, 9.0]
    rec = json.loads(store.write_record(run).read_text())
    assert rec["plan_text"] == PLAN and rec["plan_resolved"]["timing"]["measure_s"] == 10.0
    pcm1 = [m for m in rec["steps"][1]["measurements"] if m["name"] == "OCP PCM-1"][0]
    assert (pcm1["upper"], pcm1["marginal_upper"], pcm1["outcome"], pcm1["published"]) == (25.0, 23.75, "pass", None)
    # a second connection (a notebook) reads while the store is open
    assert sqlite3.connect(db).execute("select count(*) from measurements").fetchone()[0] == 16


def test_a_step_is_stored_once(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    plan = parse(PLAN)
    run = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    s = plan.steps()[0]
    with pytest.raises(ResultsError, match="already stored"):
        store.store_step(run, {"idx": 0, "key": s.key, "name": s.name, "status": "done"}, [], [])
    assert len(store.steps(run)) == 4


def test_resumable_run_belongs_to_the_same_plan_only(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
    a = parse(PLAN)
    b = parse(PLAN.replace('rw = "read"', 'rw = "randread"'))
    run = store.start_run(a, "out")
    assert store.resumable_run(a)["id"] == run
    assert store.resumable_run(b) is None
    store.set_run_status(run, "done")
    assert store.resumable_run(a) is None


def test_compare_two_runs_and_export(tmp_path):
    store = ResultStore(tmp_path / "r.sqlite")
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


def test_old_database_is_migrated_forward(tmp_path):
    db = tmp_path / "old.sqlite"
    ResultStore(db)
    con = sqlite3.connect(db)             # make it a version-1 file: without the v2 columns
    con.executescript("""
        ALTER TABLE measurements DROP COLUMN published;
        ALTER TABLE steps DROP COLUMN attempts;
        ALTER TABLE runs DROP COLUMN host;
        ALTER TABLE runs DROP COLUMN pid;
        UPDATE schema_info SET value = '1' WHERE key = 'version';""")
    con.commit()
    con.close()
    store = ResultStore(db)
    assert store.schema_version() == S.SCHEMA_VERSION == 3
    cols = {r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(measurements)")}
    assert "published" in cols
    assert {"host", "pid"} <= {r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(runs)")}
    fill(store, parse(PLAN), [5.0, 10.0, 6.0, 9.0])


def test_newer_database_is_refused(tmp_path):
    db = tmp_path / "new.sqlite"
    ResultStore(db)
    con = sqlite3.connect(db)
    con.execute("UPDATE schema_info SET value = '99' WHERE key = 'version'")
    con.commit()
    con.close()
    with pytest.raises(ResultsError, match="schema version 99, newer"):
        ResultStore(db)


def test_results_cli(tmp_path):
    db = tmp_path / "r.sqlite"
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


def test_sweep_report_shows_figures_curves_and_every_verdict(tmp_path):
    from powerrig.results.report import write_sweep_report
    store = ResultStore(tmp_path / "r.sqlite")
    plan = parse(PLAN)
    run = fill(store, plan, [5.0, 10.0, 6.0, 9.0])
    path = write_sweep_report(store, run, tmp_path / "rep")
    text = path.read_text()
    assert text.count("<td>OCP PCM-1</td>") == 4                  # every verdict with its limit
    assert "<td>25.000</td>" in text and "class=pass" in text
    assert (tmp_path / "rep" / "efficiency_vs_power_state.png").stat().st_size > 1000   # MiB/s/W over PS0, PS1
    assert "ps1/seq-read/r1" in text
