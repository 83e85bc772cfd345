"""Charts for the web page: the sweep report's own throughput-per-watt curves, drawn as inline SVG."""
from __future__ import annotations

import io
import re

from powerrig.results import referee_report
from powerrig.results.sweep_report import plot_curves
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
    return svg_of(lambda buf, fmt: plot_curves(series, buf, xlabel, fmt=fmt))


def svg_of(draw) -> str | None:
    """What one of the report's plotters draws (``draw(stream, fmt) -> bool``) as an <svg> element to put in
    a page; None when it had nothing to draw."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):     # labels as <text>: selectable, searchable
        if not draw(buf, "svg"):
            return None
    text = buf.getvalue().decode()
    return text[re.search(r"<svg\b", text).start():]      # no XML prolog or DOCTYPE inside HTML


def step_trace(step: dict, phases: list[dict], apst: list[tuple[float, str, bool]] = ()) -> str | None:
    """The step's power over time as the sweep report's first screen draws it (rails and total, phases,
    commands and APST moves, its busiest 40 ms at the interposer's resolution), as inline SVG; None when
    the step's capture is not there or cannot be read."""
    from pathlib import Path

    from powerrig.results.step_trace import plot_step
    cap = step.get("capture")
    if not cap or not Path(cap).exists():
        return None
    return svg_of(lambda buf, fmt: plot_step(cap, phases, buf, fmt=fmt, apst=apst))


def referee(measurements: list[dict], step_index: dict) -> dict | None:
    """A step's referee verdicts (issue 38) as the report shows them: the table's HTML and the claim-vs-truth
    plots (IPM against the slot's last second over time, the histograms side by side) as inline SVG."""
    rows = [m for m in measurements if m["name"] in referee_report.TITLES]
    if not rows:
        return None
    figs = [(caption, s) for _, caption, draw in referee_report.figures(rows, step_index)
            if (s := svg_of(draw)) is not None]
    return {"table": "\n".join(referee_report.table(rows, with_step=False)), "figures": figs}
