"""Charts for the web page: the sweep report's own throughput-per-watt curves, drawn as inline SVG."""
from __future__ import annotations

import io
import re

from powerrig.results.report import plot_curves
from powerrig.results.tables import step_summary


def efficiency_series(store, runs: list[dict], label_run: bool) -> dict:
    """MiB/s per W over power state, one series per workload (and per run when several are drawn)."""
    series: dict = {}
    for r in runs:
        for row in step_summary(store, r["id"]):
            if row["workload"] == "idle" or row["MiB/s/W"] is None or row["power_state"] is None:
                continue
            name = f"run {r['id']} {row['workload']}" if label_run else row["workload"]
            series.setdefault(name, []).append((row["power_state"], row["MiB/s/W"]))
    return series


def svg(series: dict, xlabel: str = "power state") -> str | None:
    """The curves as an <svg> element to put in a page (None: fewer than two points on every curve)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):     # labels as <text>: selectable, searchable
        if not plot_curves(series, buf, xlabel, fmt="svg"):
            return None
    text = buf.getvalue().decode()
    return text[re.search(r"<svg\b", text).start():]      # no XML prolog or DOCTYPE inside HTML
