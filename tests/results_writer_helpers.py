"""The writer process of tests/test_results_writers.py, in a module of its own: a spawned process
imports the module its target lives in, and the test module's imports (test_results_store: pandas,
conftest) doubled what each of the 32 writers of a run paid to start, about a CPU-second each."""
from __future__ import annotations

import traceback

from powerrig.results import ResultStore
from powerrig.sweep.plan import parse


def writer(db: str, plan_text: str, barrier, errors, k: int) -> None:
    """Open the database when every writer does, start the plan's run and store its steps; any error
    goes on ``errors``."""
    try:
        plan = parse(plan_text)
        barrier.wait(60)                       # every process opens the database at the same moment
        store = ResultStore(db)
        run = store.start_run(plan, f"out{k}", station=f"rig-{k}")
        for s in plan.steps():
            store.store_step(run, {"idx": s.index, "key": s.key, "name": s.name, "power_state": s.power_state,
                                   "workload": s.workload.name if s.workload else None, "status": "done"},
                             [{"name": "p", "kind": "workload", "mean_w": 5.0, "rails": {"total": {"mean_w": 5.0}}}],
                             [{"name": "power.mean", "phase": "p", "value": 5.0, "units": "W", "outcome": "info"}])
        store.set_run_status(run, "done")
    except BaseException:  # noqa: BLE001 - reported to the test, which shows it
        errors.put(f"writer {k}: {traceback.format_exc(limit=3)}")
