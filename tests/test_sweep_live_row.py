"""A sweep's `live` row (the web page's "Running now") is removed when the sweep ends, however it ends:
done (a real `powerrig sweep` process, whose live writer thread used to die with it and leave the row
behind), and interrupted (Ctrl-C in the middle of the sweep, where no "done" event ever came)."""
from __future__ import annotations

import time

import pytest
from sqlalchemy import select

from conftest import run_cli
from powerrig.results import ResultStore
from powerrig.results import schema as S
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import parse

TINY = """name = "tiny"
power_states = [0, 1]
[rig]
port = "sim:d5-p5336"
[timing]
settle_s = 0.1
idle_s = 0.3
"""


def _live_rows(store) -> list:
    with store.engine.connect() as c:
        return [tuple(r) for r in c.execute(select(S.live.c.run_id))]


def test_a_finished_sweep_process_leaves_no_live_row(tmp_path, simdir):
    plan = tmp_path / "tiny.toml"
    plan.write_text(TINY)
    db = tmp_path / "r.sqlite"
    r = run_cli("sweep", str(plan), "--results", str(db), "--out", str(tmp_path / "out"), timeout=120)
    assert r.returncode == 0, r.stderr
    store = ResultStore(db)
    [run] = store.runs()
    assert run["status"] == "done"
    assert _live_rows(store) == []


def test_an_interrupted_sweep_leaves_no_live_row(tmp_path, simdir):
    store = ResultStore(tmp_path / "r.sqlite")
    seen = []

    def stop(d):
        if d["kind"] == "step-done":
            deadline = time.monotonic() + 5       # the live row of the running sweep is there ...
            while not (rows := _live_rows(store)) and time.monotonic() < deadline:
                time.sleep(0.05)
            seen.extend(rows)
            raise KeyboardInterrupt                # ... when Ctrl-C ends the sweep
    with pytest.raises(KeyboardInterrupt):
        Sweep(parse(TINY), store, tmp_path / "out", on_progress=stop).run()
    [run] = store.runs()
    assert seen == [(run["id"],)] and run["status"] == "interrupted"
    assert _live_rows(store) == []
