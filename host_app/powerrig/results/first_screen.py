"""The sweep report's first screen: the run's verdict summary (analysis/verdicts.py: counts, then the
fails, marginals, invalid data and partials with their why, what the drive said among them), then
one card per step: its power over time (results/step_trace.py), its worst verdict, the energy of each
phase, and links to its capture report and capture that are relative to the report's folder (they
work from a file browser and from a web server alike)."""
from __future__ import annotations

import html
import math
import os
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

from powerrig.analysis import verdicts
from powerrig.results import step_trace
from powerrig.results.command_report import apst_marks

STYLE = (".chip{display:inline-block;padding:1px 8px;border-radius:10px;margin-right:4px;font-weight:bold;"
         "border:1px solid currentColor}.chip.fail{color:#b00}.chip.marginal{color:#a60}.chip.pass{color:#070}"
         ".chip.partial{color:#7a5c00}.chip.invalid{color:#8250df}.chip.n\\/a{color:#57606a}"
         ".cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(640px,1fr));gap:10px}"
         ".strip{width:100%;max-width:1300px;height:auto}"
         ".card{border:1px solid #ccc;padding:6px;margin:0}.card img{width:100%;height:auto}"
         ".card table{font-size:12px}.card figcaption{font-size:13px}td.l,th.l{text-align:left}"
         ".why{text-align:left;max-width:48em}.nw{white-space:nowrap}.missing{color:#b00}")
SHOWN_PHASES = ("idle", "workload", "dwell")
LOOK_SHOWN = 3             # rows of the summary shown before the rest fold away (more push the traces below the fold)


def _f(v, d=3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:,.{d}f}" if isinstance(v, float) else html.escape(str(v))


def href(target: str | Path, out: Path) -> str:
    """A link to ``target`` from a page in ``out``: relative (never file://), each part URL-quoted."""
    rel = os.path.relpath(os.path.abspath(target), os.path.abspath(out))
    return html.escape(quote(rel.replace(os.sep, "/")), quote=True)


def _chips(s: dict) -> str:
    return "".join(f"<span class='chip {html.escape(k)}'>{n} {html.escape(k)}</span>" for k, n in s["counts"].items())


def summary_html(ms: list[dict]) -> str:
    """The verdict summary: counts, then the rows to read first (fail, marginal, invalid, partial) with
    their why; the partials beyond the first rows fold into a details element."""
    s = verdicts.summary(ms)
    h = [f"<section id=summary><h2>Verdict summary</h2><p>{_chips(s)} {html.escape(verdicts.counts_line(s))}</p>"]
    if not s["look"]:
        h.append("<p>Every verdict passed.</p>" if s["total"] else "")
        return "".join(h) + "</section>"
    head = ("<tr><th class=l>verdict</th><th class=l>step</th><th class=l>check</th><th class=l>phase</th>"
            "<th>measured</th><th>limit</th><th class=l>why</th></tr>")

    def row(r: dict) -> str:
        lim = limit_text(r["lower"], r["upper"], r["value"])
        return (f"<tr><td class='l {html.escape(r['outcome'])}'><b>{html.escape(r['outcome'])}</b></td>"
                f"<td class=l>{html.escape(r['step'] or '')}</td><td class='l nw'>{html.escape(r['name'])}</td>"
                f"<td class=l>{html.escape(r['phase'] or '')}</td><td>{html.escape(r['value'])}</td>"
                f"<td class=nw>{lim}</td>"
                f"<td class=why>{html.escape(r['why'])}</td></tr>")
    first, rest = s["look"][:LOOK_SHOWN], s["look"][LOOK_SHOWN:]
    h.append("<table>" + head + "".join(row(r) for r in first) + "</table>")
    if rest:
        h.append(f"<details><summary>{len(rest)} more to read</summary><table>{head}"
                 + "".join(row(r) for r in rest) + "</table></details>")
    return "".join(h) + "</section>"


def limit_text(lower, upper, value: str) -> str:
    """The limit as the measured value beside it reads: 4 significant figures and its units ("10 W",
    "-5 / 5 %"), not "10.000" beside "9.995 W"."""
    units = value.partition(" ")[2]
    lim = " / ".join(f"{x:.4g}" for x in (lower, upper) if x is not None and math.isfinite(x))
    return html.escape(f"{lim} {units}".strip()) if lim else "-"


def steps_html(steps: list[dict], ms: list[dict], phases: list[dict], out: Path, cap_reports: dict) -> str:
    """One card per step: the trace (a PNG beside the report), the step's worst verdict and its
    status, per-phase energy, and the links to the step's capture report and capture."""
    worst = verdicts.by_step(ms)
    by_step = defaultdict(list)
    for p in phases:
        by_step[p["step"]].append(p)
    h = ["<section id=traces><h2>Power per step</h2>"]
    strip = [(f"{s['idx'] + 1}. {s['key']}", s["capture"], by_step.get(s["key"], []), apst_marks(ms, s["key"]))
             for s in steps if s.get("capture") and Path(s["capture"]).exists()]
    if strip and step_trace.plot_strip(strip, out / "run_strip.png"):
        h.append("<img class=strip src='run_strip.png' alt='power over time of every step'>")
    h.append("<p>Each rail and the total; workloads shaded orange, idle green, each phase labelled with its "
             "energy and mean power; commands as ticks under the trace, power-state changes dashed (APST's too; "
             "one its table does not give dotted, in orange), what the "
             "drive said in red. Beside each step's trace: its busiest 40 ms at the interposer's resolution "
             "(interval means, 100 us window peaks and the 4 us maximum of each interval).</p><div class=cards>")
    for s in steps:
        name = f"trace_{s['idx']:03d}.png"
        cap = s.get("capture") or ""
        drawn = bool(cap) and Path(cap).exists() and step_trace.plot_step(
            cap, by_step.get(s["key"], []), out / name, f"{s['idx'] + 1}. {s['key']}", apst=apst_marks(ms, s["key"]))
        w = worst.get(s["key"], {})
        chip = f"<span class='chip {html.escape(w['worst'])}'>{html.escape(w['worst'])}</span>" if w.get("worst") else ""
        status = html.escape(s["status"]) + (f": {html.escape(s['invalid_reason'])}" if s.get("invalid_reason") else "")
        links = []
        rep = cap_reports.get(s["key"])
        if rep:
            links.append(f"<a href='{href(rep, out)}'>step report</a>")
        if cap:
            links.append(f"<a href='{href(cap, out)}'>capture</a>" if Path(cap).exists()
                         else f"<span class=missing>capture {html.escape(Path(cap).name)} is not there</span>")
        img = (f"<img src='{name}' alt='power over time, step {s['idx'] + 1}'>" if drawn else
               "<p class=missing>no trace: the capture cannot be read</p>")
        rows = [p for p in by_step.get(s["key"], []) if p["kind"] in SHOWN_PHASES]
        table = ("<details><summary>energy per phase</summary><table><tr><th class=l>phase</th><th>s</th>"
                 "<th>mean W</th><th>energy J</th></tr>" + "".join(
            f"<tr><td class=l>{html.escape(p['name'])}</td><td>{_f(p['duration_s'], 1)}</td>"
            f"<td>{_f(p['mean_w'], 3)}</td><td>{_f(p['energy_j'], 2)}</td></tr>" for p in rows) + "</table></details>"
            if rows else "")
        h.append(f"<figure class=card id=step-{s['idx'] + 1}>{img}<figcaption><b>{s['idx'] + 1}. "
                 f"{html.escape(s['name'] or s['key'])}</b> {chip} {status} · {' · '.join(links)}"
                 f"{table}</figcaption></figure>")
    h.append("</div></section>")
    return "".join(h)
