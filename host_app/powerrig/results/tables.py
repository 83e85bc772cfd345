"""Tables from the store: the per-step summary, two runs side by side, and exports (CSV, JSON,
Parquet through pandas/pyarrow)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from powerrig.results.store import ResultsError, ResultStore

SUMMARY = ("power.mean", "throughput.mib_s", "efficiency.mib_s_per_w", "efficiency.iops_per_w")


def step_summary(store: ResultStore, run_id: int, steps: list[dict] | None = None) -> list[dict]:
    """One row per step: power state, workload, W, MiB/s, MiB/s/W, and the step's status. ``steps``: only
    these (one page of the run's steps, in order), read with their measurements only."""
    by_step: dict[str, dict] = {}
    lo = hi = None
    if steps is not None:
        if not steps:
            return []
        lo, hi = min(s["idx"] for s in steps), max(s["idx"] for s in steps)
    for s in store.steps(run_id) if steps is None else steps:
        by_step[s["key"]] = {"step": s["key"], "name": s["name"], "power_state": s["power_state"],
                             "workload": s["workload"] or "idle", "status": s["status"],
                             "W": None, "MiB/s": None, "MiB/s/W": None, "IOPS/W": None, "idle W": None}
    names = dict(zip(SUMMARY, ("W", "MiB/s", "MiB/s/W", "IOPS/W")))
    for m in store.measurements(run_id) if steps is None else store.measurements(run_id, lo, hi):
        if m["name"] == "power.idle" and m["step"] in by_step:
            row = by_step[m["step"]]
            if row["idle W"] is None:       # the step's idle window (before its workload, or the whole step)
                row["idle W"] = m["value"]
            if row["workload"] == "idle":
                row["W"] = m["value"]
        if m["name"] in names and m["step"] in by_step and m["phase"] is not None:
            row = by_step[m["step"]]
            if row[names[m["name"]]] is None:
                row[names[m["name"]]] = m["value"]
    return list(by_step.values())


def _pct(a, b):
    if a is None or b is None or not b:
        return None
    return 100.0 * (a - b) / b


def compare(store: ResultStore, run_a: int, run_b: int) -> list[dict]:
    """The steps both runs have, side by side: idle W, W (the workload's, or idle's for an idle step),
    MiB/s and MiB/s/W of each, with deltas in W and MiB/s/W (b - a)."""
    a = {r["step"]: r for r in step_summary(store, run_a)}
    b = {r["step"]: r for r in step_summary(store, run_b)}
    common = [k for k in a if k in b]
    if not common:
        raise ResultsError(f"runs {run_a} and {run_b} have no step in common (different plans?)")
    out = []
    for k in common:
        ra, rb = a[k], b[k]
        row = {"step": k, "W_a": ra["W"], "W_b": rb["W"],
               "dW": None if ra["W"] is None or rb["W"] is None else rb["W"] - ra["W"],
               "MiB/s/W_a": ra["MiB/s/W"], "MiB/s/W_b": rb["MiB/s/W"],
               "dMiB/s/W": None if ra["MiB/s/W"] is None or rb["MiB/s/W"] is None else rb["MiB/s/W"] - ra["MiB/s/W"],
               "dMiB/s/W_%": _pct(rb["MiB/s/W"], ra["MiB/s/W"]),
               "idle W_a": ra["idle W"], "idle W_b": rb["idle W"], "MiB/s_a": ra["MiB/s"], "MiB/s_b": rb["MiB/s"],
               "power_state": ra["power_state"], "workload": ra["workload"]}
        out.append(row)
    return out


def export(store: ResultStore, run_id: int, path: str | Path, what: str = "measurements") -> Path:
    """Write a run's measurements (or steps, phases) as CSV, JSON or Parquet, by the file's suffix."""
    path = Path(path)
    rows = {"measurements": store.measurements, "steps": store.steps, "phases": store.phases}.get(what)
    if rows is None:
        raise ResultsError(f"cannot export {what!r}: choose measurements, steps or phases")
    data = rows(run_id)
    fmt = path.suffix.lower().lstrip(".")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path.write_text(json.dumps(data, indent=1, default=str))
        return path
    try:
        import pandas as pd
    except ImportError:
        raise ResultsError("CSV and Parquet export need pandas (pip install pandas pyarrow)") from None
    df = pd.DataFrame(data)
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "parquet":
        try:
            df.to_parquet(path, index=False)
        except ImportError:
            raise ResultsError("Parquet export needs pyarrow (pip install pyarrow)") from None
    else:
        raise ResultsError(f"cannot tell the export format from {path.name!r}: use .csv, .json or .parquet")
    return path


def fmt(v, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)
