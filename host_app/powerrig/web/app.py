"""The Flask application: server-side pages from Jinja2 templates over a read-only ResultStore.

Flask because it is the maintained, small, synchronous framework whose templates (Jinja2) come with it:
every page is one SQL read and one template, which is all a results page needs; waitress serves it
(`powerrig serve`), a production WSGI server in pure Python.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict

from flask import Flask, abort, render_template, request

from powerrig.results import ResultsError, ResultStore, command_report
from powerrig.analysis import verdicts as verdict_model
from powerrig.results.tables import compare, fmt, step_summary
from powerrig.web import charts, shown
from powerrig.web.charts import efficiency_series, svg

PAGE_SIZE = 50             # runs on an index page, steps on a run page
LIVE_STALE_S = 60.0        # a live row older than this is shown as stale (the sweep process may be gone)


def _verdicts(measurements: list[dict]) -> dict:
    """Per step key: counts of its verdicts and the worst one (analysis/verdicts.py, as every face counts them)."""
    return verdict_model.by_step(measurements)


def _keyset_arg(name: str) -> int | None:
    """A page's keyset bound from the query string (a run id or a step index); not a number is a 400."""
    v = request.args.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        abort(400)


def create_app(store: ResultStore, page_size: int = PAGE_SIZE) -> Flask:
    """page_size: runs on an index page, steps on a run page (each page read with LIMIT by keyset)."""
    app = Flask(__name__)
    app.jinja_env.globals.update(fmt=fmt, utc=_utc, notes_rows=shown.notes_rows, meaning=shown.meaning,
                                 meanings=shown.meanings)

    @app.errorhandler(ResultsError)
    def _results_error(e):
        return render_template("error.html", message=str(e)), 404

    @app.get("/")
    def index():
        page = store.runs_page(before=_keyset_arg("before"), after=_keyset_arg("after"), limit=page_size)
        runs = page["runs"]
        by_rig: dict = defaultdict(list)
        for r in runs:
            by_rig[r["station"] or "?"].append(r)
        now = time.time()
        live = store.live()
        for row in live:
            row["stale"] = now - row["updated_utc"] > LIVE_STALE_S
            row["left_s"] = None if row["ends_utc"] is None else max(0.0, row["ends_utc"] - now)
        return render_template("index.html", by_rig=dict(sorted(by_rig.items())), live=live, runs=runs,
                               page=page, db=str(store))

    @app.get("/run/<int:run_id>")
    def run(run_id: int):
        r = store.run(run_id)
        page = store.steps_page(run_id, start=_keyset_arg("from"), before=_keyset_arg("before"), limit=page_size)
        rows = step_summary(store, run_id, page["steps"])
        steps = {s["key"]: s for s in page["steps"]}
        lo = page["steps"][0]["idx"] if page["steps"] else None
        hi = page["steps"][-1]["idx"] if page["steps"] else None
        verdicts = _verdicts(store.measurements(run_id, lo, hi)) if page["steps"] else {}
        chart = svg(efficiency_series(store, [r], label_run=False))
        others = store.runs_of_plan(r["plan_hash"], limit=page_size, exclude=run_id)
        return render_template("run.html", run=r, rows=rows, steps=steps, verdicts=verdicts, chart=chart,
                               others=others, page=page)

    @app.get("/run/<int:run_id>/step/<int:n>")
    def step(run_id: int, n: int):
        """Step n as the run page numbers it (from 1; the store's index is n - 1)."""
        r = store.run(run_id)
        idx = n - 1
        s = next(iter(store.steps(run_id, idx, idx)), None) if n >= 1 else None
        if s is None:
            return render_template("error.html", message=f"no step {n} in run {run_id} (steps count from 1)"), 404
        ms = [m for m in store.measurements(run_id, idx, idx) if m["step"] == s["key"]]
        phases = [p for p in store.phases(run_id, idx, idx) if p["step"] == s["key"]]
        params = json.loads(s["params"]) if s.get("params") else {}
        return render_template("step.html", run=r, step=s, measurements=ms, phases=phases, params=params,
                               referee=charts.referee(ms, {s["key"]: idx}), commands=command_report.tables(ms),
                               trace=charts.step_trace(s, phases, command_report.apst_marks(ms, s["key"])))

    @app.get("/curves")
    def curves():
        plan_hash, drive = request.args.get("plan", ""), request.args.get("drive", "")
        runs = [r for r in store.runs() if r["plan_hash"] == plan_hash and (r["dut_serial"] or "") == drive]
        if not runs:
            abort(404)
        chart = svg(efficiency_series(store, runs, label_run=len(runs) > 1))
        return render_template("curves.html", runs=runs, plan=runs[0]["plan"], plan_hash=plan_hash, drive=drive,
                               chart=chart)

    @app.get("/compare")
    def compare_runs():
        a, b = request.args.get("a", type=int), request.args.get("b", type=int)
        if a is None or b is None:
            abort(400)
        ra, rb = store.run(a), store.run(b)
        from powerrig.results.compare_chart import draw_compare
        chart = charts.svg_of(lambda buf, fmt: draw_compare(store, a, b, buf, fmt))   # as `results compare --png`
        return render_template("compare.html", a=ra, b=rb, rows=compare(store, a, b), chart=chart)

    return app


def _utc(t) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))
