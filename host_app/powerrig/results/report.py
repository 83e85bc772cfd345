"""The report of one sweep run (HTML + PNG): per power state and workload the figures a datasheet
quotes, throughput per watt over power state, every verdict with its limit, and the per-step
captures. Built from the results store alone, so it can be made again at any time."""
from __future__ import annotations

import html
import json
import math
import time
from collections import defaultdict
from pathlib import Path

from powerrig.results.store import ResultStore

FIGS = (("power.idle", "idle W"), ("power.mean", "W"), ("power.max_1s", "1 s max W"), ("throughput.mib_s", "MiB/s"),
        ("throughput.iops", "IOPS"), ("efficiency.mib_s_per_w", "MiB/s/W"), ("efficiency.iops_per_w", "IOPS/W"),
        ("efficiency.j_per_gib", "J/GiB"), ("waf.cumulative", "WAF"))


def _f(v, d=2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:,.{d}f}"
    return html.escape(str(v))


def _plot(rows: dict, path: Path) -> bool:
    """MiB/s per W over power state, one line per workload."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(list)
    for (ps, wl), figs in rows.items():
        v = figs.get("efficiency.mib_s_per_w")
        if wl != "idle" and v is not None:
            series[wl].append((ps, v))
    if not any(len(v) >= 2 for v in series.values()):
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for wl, pts in sorted(series.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=wl)
    ax.set_xlabel("power state")
    ax.set_ylabel("MiB/s per W")
    ax.set_xticks(sorted({p[0] for v in series.values() for p in v}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_sweep_report(store: ResultStore, run_id: int, out_dir: str | Path | None = None) -> Path:
    run = store.run(run_id)
    out = Path(out_dir) if out_dir else Path(run["out_dir"]) / "report"
    out.mkdir(parents=True, exist_ok=True)
    steps = store.steps(run_id)
    ms = store.measurements(run_id)
    rows: dict = defaultdict(dict)
    for m in ms:
        key = (m["power_state"], m["workload"] or "idle")
        if m["value"] is not None and m["name"] not in rows[key]:
            rows[key][m["name"]] = m["value"]
    has_plot = _plot(rows, out / "efficiency_vs_power_state.png")
    h = ["<!doctype html><meta charset=utf-8><title>powerrig sweep run %d</title>" % run_id,
         "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
         "padding:3px 8px;text-align:right}th{background:#eee}.fail{color:#b00}.marginal{color:#a60}"
         ".pass{color:#070}</style>",
         f"<h1>Sweep run {run_id}: {html.escape(run['plan_name'])}</h1>",
         f"<p>plan hash {run['plan_hash']}, status <b>{run['status']}</b>, started "
         f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(run['started_utc']))}; station "
         f"{html.escape(run['station'] or '')}; drive {html.escape(run['dut_model'] or '')} sn "
         f"{html.escape(run['dut_serial'] or '')} fw {html.escape(run['dut_firmware'] or '')}</p>",
         "<h2>Figures per power state and workload</h2><table><tr><th>PS</th><th>workload</th>"
         + "".join(f"<th>{t}</th>" for _, t in FIGS) + "</tr>"]
    for (ps, wl) in sorted(rows, key=lambda k: (k[0] if k[0] is not None else -1, k[1] != "idle", k[1])):
        figs = rows[(ps, wl)]
        h.append(f"<tr><td>PS{ps}</td><td style=text-align:left>{html.escape(wl)}</td>"
                 + "".join(f"<td>{_f(figs.get(n))}</td>" for n, _ in FIGS) + "</tr>")
    h.append("</table>")
    if has_plot:
        h.append("<h2>Throughput per watt over power state</h2><img src=efficiency_vs_power_state.png>")
    h.append("<h2>Verdicts</h2><table><tr><th>step</th><th>check</th><th>phase</th><th>measured</th><th>limit</th>"
             "<th>marginal from</th><th>outcome</th><th>requirement met</th><th>notes</th></tr>")
    for m in ms:
        if m["upper"] is None and m["lower"] is None and m["outcome"] == "info":
            continue
        notes = json.loads(m["notes"]) if m["notes"] and m["notes"].startswith("[") else (m["notes"] or "")
        h.append(f"<tr><td style=text-align:left>{html.escape(m['step'])}</td><td>{html.escape(m['name'])}</td>"
                 f"<td>{html.escape(m['phase'] or '')}</td><td>{_f(m['value'], 3)} {html.escape(m['units'] or '')}</td>"
                 f"<td>{_f(m['upper'], 3)}</td><td>{_f(m['marginal_upper'], 3)}</td>"
                 f"<td class={m['outcome']}>{m['outcome']}</td><td>{m['requirement_met']}</td>"
                 f"<td style=text-align:left>{html.escape('; '.join(notes) if isinstance(notes, list) else notes)}</td></tr>")
    h.append("</table><h2>Steps and captures</h2><table><tr><th>#</th><th>step</th><th>status</th><th>attempts</th>"
             "<th>lost s</th><th>capture</th></tr>")
    for s in steps:
        cap = s["capture"] or ""
        h.append(f"<tr><td>{s['idx'] + 1}</td><td style=text-align:left>{html.escape(s['key'])}</td>"
                 f"<td>{s['status']}{(': ' + html.escape(s['invalid_reason'])) if s['invalid_reason'] else ''}</td>"
                 f"<td>{s['attempts']}</td><td>{_f(s['lost_s'], 3)}</td>"
                 f"<td style=text-align:left><a href='file://{html.escape(cap)}'>{html.escape(Path(cap).name)}</a> "
                 f"(<code>powerrig report {html.escape(cap)}</code>)</td></tr>")
    h.append("</table>")
    path = out / "index.html"
    path.write_text("\n".join(h))
    return path
