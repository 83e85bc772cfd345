"""Server-side time and size of the results web page's index over a store of many runs.

    .venv/bin/python benchmarks/bench_web_index.py [--runs 10000] [--steps 9] [--requests 30] [--tmp DIR]

Fills a temporary SQLite store with RUNS finished runs of one plan, STEPS steps each, in one transaction
through the store's own schema (results/schema.py tables, the store's plan_id and _transact), opens it
read-only as `powerrig serve` does and asks the Flask app for `/` REQUESTS times (after one warm-up),
timing each request inside the server (the WSGI call and the whole body read; no network, no browser).
Then the same for the second page (`/?before=...`, the older-runs link) and a run page. Prints the median
and worst time, the page's size in bytes and the number of runs and <option>s it holds, SQLite's query
plan of every statement the index ran (an index-backed ORDER BY ... LIMIT shows no full scan of runs and
no temporary B-tree: "SCAN runs" there is the primary key walked in order, left after LIMIT rows), and
last one JSON object ("full_scans_or_sorts": every other scan or sort in those plans; none expected). Asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import event, insert

from powerrig.results import ResultStore
from powerrig.results import schema as S
from powerrig.sweep.plan import parse
from powerrig.web.app import create_app

PLAN = """name = "bench"
power_states = [0, 1, 2]
[rig]
port = "sim:d5-p5336"
[[workload]]
name = "seq-read"
rw = "read"
[[workload]]
name = "rand-read"
rw = "randread"
"""


def fill(db: Path, runs: int, steps: int) -> float:
    """RUNS finished runs of STEPS steps each, in one write transaction; returns the seconds it took."""
    t0 = time.perf_counter()
    store = ResultStore(db)
    plan = parse(PLAN)
    now = time.time() - runs * 600

    def write(c):
        pid = store.plan_id(c, plan)
        c.execute(insert(S.runs), [dict(plan_id=pid, status="done", started_utc=now + 600 * k,
                                        finished_utc=now + 600 * k + 500, station=f"rig-{k % 8}",
                                        dut_serial=f"SN{k % 20}", dut_firmware="FW1") for k in range(runs)])
        first = c.execute(S.runs.select().with_only_columns(S.runs.c.id).order_by(S.runs.c.id)).scalars().all()
        for lo in range(0, len(first), 2000):
            c.execute(insert(S.steps), [dict(run_id=r, idx=i, key=f"ps{i // 3}/w{i % 3}/r1", name=f"step {i}",
                                             power_state=i // 3, workload=None, repetition=0, status="done",
                                             attempts=1) for r in first[lo:lo + 2000] for i in range(steps)])
    store._transact(write, what="the benchmark's runs")
    store.engine.dispose()
    return time.perf_counter() - t0


def timed(app, url: str, n: int) -> tuple[list[float], bytes]:
    """n requests of url through the WSGI app (after one warm-up): seconds each, and the last body."""
    client = app.test_client()
    body = client.get(url).get_data()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.get(url)
        body = r.get_data()
        times.append(time.perf_counter() - t0)
        assert r.status_code == 200, (url, r.status_code)
    return times, body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--tmp", type=Path, default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        db = Path(tmp) / "bench.sqlite"
        fill_s = fill(db, a.runs, a.steps)
        print(f"filled {db.name}: {a.runs} runs x {a.steps} steps in {fill_s:.1f} s, {db.stat().st_size / 1e6:.1f} MB")
        store = ResultStore(db, read_only=True)
        app = create_app(store)

        out: dict = {"runs": a.runs, "steps_per_run": a.steps, "requests": a.requests, "fill_s": round(fill_s, 2)}
        newest = a.runs                         # ids are 1..runs in a new file
        pages = [("index", "/"), ("older", f"/?before={newest - 49}"), ("run", f"/run/{newest // 2}")]
        print(f"{'page':>6} {'median ms':>10} {'worst ms':>9} {'bytes':>9} {'runs':>5} {'options':>8}")
        for name, url in pages:
            times, body = timed(app, url, a.requests)
            html = body.decode()
            shown = len(re.findall(r'class="run-link"', html))
            options = html.count("<option")
            med, worst = statistics.median(times) * 1e3, max(times) * 1e3
            print(f"{name:>6} {med:10.1f} {worst:9.1f} {len(body):9d} {shown:5d} {options:8d}   {url}")
            out[name] = {"url": url, "median_ms": round(med, 2), "worst_ms": round(worst, 2), "bytes": len(body),
                         "runs_shown": shown, "options": options}
        con = sqlite3.connect(db)
        scans = []
        print("query plans of the index's statements:")
        seen = set()
        for sql, params in statements_index(app, store):
            if sql in seen or not sql.lstrip().upper().startswith("SELECT"):
                continue
            seen.add(sql)
            plan = [r[3] for r in con.execute("EXPLAIN QUERY PLAN " + sql, params or ())]
            print("  " + " ".join(sql.split())[:110])
            for p in plan:
                print("     " + p)
            # "SCAN runs" beside ORDER BY runs.id ... LIMIT with no temporary B-tree is the primary key walked in
            # order and left after LIMIT rows; a sort (TEMP B-TREE) or a scan of another table reads every row
            ordered = "ORDER BY runs.id" in sql and "LIMIT" in sql
            if re.search(r"\bFROM live\b", sql):      # one row per running sweep: read whole, by design
                continue
            scans += [p for p in plan if "TEMP B-TREE" in p or (re.match(r"SCAN \w+", p) and not
                                                               (ordered and p.startswith("SCAN runs")))]
        con.close()
        out["full_scans_or_sorts"] = scans
        print(json.dumps(out))
    return 0


def statements_index(app, store) -> list:
    """The SQL statements one request of the index runs, with their parameters."""
    got: list = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        got.append((statement, parameters))
    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        app.test_client().get("/").get_data()
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    return got


if __name__ == "__main__":
    sys.exit(main())
