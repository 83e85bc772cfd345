"""The report of one sweep run (HTML + PNG): per power state and workload the figures a datasheet
quotes, throughput per watt over power state, every verdict with its limit, and the per-step
captures. Built from the results store alone, so it can be made again at any time."""
from __future__ import annotations

import contextlib
import html
import json
import math
import time
from collections import defaultdict
from pathlib import Path

from powerrig.analysis import verdicts
from powerrig.core import owned
from powerrig.results import command_report, first_screen, referee_report
from powerrig.results.store import ResultStore
from powerrig.results.pyplot import pyplot

FIGS = (("power.idle", "idle W"), ("power.mean", "W"), ("power.max_1s", "1 s max W"), ("power.max_100ms", "100 ms max W"),
        ("power.peak_100us", "100 us max W"), ("throughput.mib_s", "MiB/s"),
        ("throughput.iops", "IOPS"), ("efficiency.mib_s_per_w", "MiB/s/W"), ("efficiency.iops_per_w", "IOPS/W"),
        ("efficiency.j_per_gib", "J/GiB"), ("waf.cumulative", "WAF"))


def _f(v, d=2) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:,.{d}f}"
    return html.escape(str(v))


def _note_value(v) -> str:
    """A note's value as the page shows it: '-' where Python would say None, 4 significant figures."""
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def notes_text(notes: str | None) -> str:
    """A verdict's notes (JSON, a list or an object, or plain text) as one line: "key: value; ..."."""
    notes = notes or ""
    if notes.startswith(("[", "{")):
        with contextlib.suppress(ValueError):
            j = json.loads(notes)
            return "; ".join(map(_note_value, j)) if isinstance(j, list) else \
                "; ".join(f"{k}: {_note_value(v)}" for k, v in j.items() if not isinstance(v, list) or len(v) <= 8)
    return notes


def plot_curves(series: dict, path, xlabel: str, log2: bool = False, fmt: str | None = None) -> bool:
    """MiB/s per W over one parameter, one line per series, to a file or a binary stream (``fmt``: "png",
    "svg"); False (nothing written) without a curve to draw."""
    series = {k: sorted(v) for k, v in series.items() if len({x for x, _ in v}) >= 2}
    if not series:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, pts in sorted(series.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    xs = sorted({p[0] for v in series.values() for p in v})
    if log2:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([_x_label(x, xlabel) for x in xs])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("MiB/s per W")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    if isinstance(path, (str, Path)):           # a file of the report's folder: never through a link
        with owned.open_owned(path, "wb") as f:
            fig.savefig(f, dpi=100, format=fmt or Path(path).suffix[1:])
    else:
        fig.savefig(path, dpi=100, format=fmt)
    plt.close(fig)
    return True


def _x_label(x, xlabel: str) -> str:
    if xlabel.startswith("block size"):
        return f"{x / 1024:g}k" if x >= 1024 else f"{x:g}"
    return f"{x:g}"


def _plot_waf(series: list, title: str, path: Path) -> bool:
    """Write amplification over time (instantaneous and cumulative) above the power of the same
    intervals, so a change in WAF can be read against what it cost."""
    pts = [r for r in series if r[0] is not None and r[1] is not None]
    if not pts:
        return False
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(6.5, 4.2), sharex=True)
    t = [0.5 * (r[0] + r[1]) for r in pts]
    a1.step(t, [r[2] if r[2] is not None else math.nan for r in pts], where="mid", label="instantaneous")
    a1.plot(t, [r[3] if r[3] is not None else math.nan for r in pts], marker=".", label="cumulative")
    a1.set_ylabel("WAF")
    a1.legend(fontsize=8)
    a1.grid(alpha=0.3)
    a1.set_title(title, fontsize=9)
    a2.step(t, [r[4] if r[4] is not None else math.nan for r in pts], where="mid", color="tab:red")
    a2.set_ylabel("W")
    a2.set_xlabel("time in the step's capture (s)")
    a2.grid(alpha=0.3)
    fig.tight_layout()
    with owned.open_owned(path, "wb") as f:
        fig.savefig(f, dpi=100, format=Path(path).suffix[1:] or "png")
    plt.close(fig)
    return True


def _workload_params(step: dict) -> dict:
    try:
        w = (json.loads(step["params"] or "{}") or {}).get("workload") or {}
    except ValueError:
        return {}
    streams = w.get("streams") or []
    bss = {s.get("bs") for s in streams} or {w.get("bs")}
    return {"rw": w.get("rw"), "bs": bss.pop() if len(bss) == 1 else None, "iodepth": w.get("iodepth"),
            "jobs": (w.get("numjobs") or 1) * max(1, len(streams))}


POWER_LOSS = (("power_loss.cycles", "cycles", "{:.0f}"), ("power_loss.acknowledged_writes", "acknowledged", "{:.0f}"),
              ("power_loss.lost_writes", "lost (acknowledged)", "{:.0f}"),
              # a plan's fsync_every: the writes a completed flush covered, and how many of them were lost
              ("power_loss.lost_after_flush_writes", "flushed", "flushed"),
              ("power_loss.lost_after_flush_writes", "lost after a completed flush", "{:.0f}"),
              ("power_loss.cycles_with_loss", "cycles with loss", "{:.0f}"),
              ("power_loss.in_flight_writes", "in flight (not promised)", "{:.0f}"),
              ("power_loss.cuts_after_writes_ended", "cuts after the writes", "{:.0f}"),
              ("power_loss.holdup_s", "hold-up min ms", "ms"), ("power_loss.inrush_peak_a", "inrush peak A", "{:.2f}"),
              ("power_loss.inrush_charge_c", "inrush charge mC", "mC"), ("power_loss.ready_s", "on to ready max ms", "ms"),
              ("power_loss.first_io_s", "on to first I/O max ms", "ms"),
              ("power_loss.link_width_min", "link width min", "{:.0f}"))


def _notes(m: dict) -> dict:
    try:
        d = json.loads(m.get("notes") or "{}")
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def _power_loss_section(ms: list[dict]) -> list[str]:
    """Per power-loss step: the integrity verdict counts beside hold-up, inrush and the times to ready
    and to first I/O. Planned power cycles are counted as cycles; only lost acknowledged writes fail."""
    by: dict = defaultdict(dict)
    for m in ms:
        if m["name"].startswith("power_loss."):
            by[m["step"]][m["name"]] = m
    if not by:
        return []
    h = ["<h2 id=power-loss>Power loss</h2><table><tr><th>step</th>" + "".join(f"<th>{t}</th>" for _, t, _ in POWER_LOSS)
         + "<th>verdict</th></tr>"]
    for step, got in by.items():
        cells = []
        for name, _t, fmt in POWER_LOSS:
            v = got.get(name, {}).get("value")
            if fmt == "flushed":             # in the measurement's notes (0: the writes carried no flush)
                v = _notes(got.get(name, {})).get("flushed_writes")
                fmt = "{:.0f}"
            if v is None:
                cells.append("-")
            elif fmt in ("ms", "mC"):
                cells.append(f"{v * 1e3:,.2f}")
            else:
                cells.append(fmt.format(v))
        verdict = got.get("power_loss.lost_writes", {}).get("outcome", "info")
        h.append(f"<tr><td style=text-align:left>{html.escape(step)}</td>" + "".join(f"<td>{c}</td>" for c in cells)
                 + f"<td class={verdict}>{verdict}</td></tr>")
    h.append("</table>")
    return h


def _margin_section(ms: list[dict]) -> list[str]:
    """Per margin point (one step each): the voltage set and the interposer's reading beside throughput
    and power per rail, so a drive's behaviour at 10.8 V and 13.2 V reads beside 12 V."""
    by: dict = defaultdict(dict)
    for m in ms:
        if m["step"].startswith("margin/"):
            by[m["step"]][m["name"]] = m["value"]
    if not by:
        return []
    rails = sorted({n[len("power.mean."):] for got in by.values() for n in got if n.startswith("power.mean.")})
    h = ["<h2 id=margining>Margining</h2><table><tr><th>margin</th><th>rail</th><th>set V</th><th>measured V</th>"
         "<th>MiB/s</th><th>IOPS</th><th>W</th>" + "".join(f"<th>{html.escape(r)} W</th>" for r in rails)
         + "<th>MiB/s/W</th></tr>"]
    for step, got in sorted(by.items(), key=lambda kv: (kv[0].split("/")[1], kv[1].get("margin.volts_set") or 0)):
        rail = step.split("/")[2].split("-")[0]
        h.append(f"<tr><td style=text-align:left>{html.escape(step.split('/')[1])}</td><td>{html.escape(rail)}</td>"
                 f"<td>{_f(got.get('margin.volts_set'), 3)}</td><td>{_f(got.get('margin.volts_measured'), 3)}</td>"
                 f"<td>{_f(got.get('throughput.mib_s'))}</td><td>{_f(got.get('throughput.iops'), 0)}</td>"
                 f"<td>{_f(got.get('power.mean'), 3)}</td>"
                 + "".join(f"<td>{_f(got.get(f'power.mean.{r}'), 3)}</td>" for r in rails)
                 + f"<td>{_f(got.get('efficiency.mib_s_per_w'))}</td></tr>")
    h.append("</table>")
    return h


def write_sweep_report(store: ResultStore, run_id: int, out_dir: str | Path | None = None,
                       capture_report=None) -> Path:
    """Write index.html (and its PNGs) for a run. ``capture_report(capture, out_dir) -> Path``, when
    given, makes each step's capture report (the face passes powerrig.capture_report.write_report) so the
    sweep report links to them; without it the link is the command that makes one."""
    run = store.run(run_id)
    out = owned.owned_dir(Path(out_dir) if out_dir else Path(run["out_dir"]) / "report", top=True)
    owned.check_tree(out)          # a link left in the report's folder: refused before a file is written
    steps = store.steps(run_id)
    by_key = {s["key"]: s for s in steps}
    ms = store.measurements(run_id)
    rows: dict = defaultdict(dict)
    params: dict = {}
    for m in ms:
        if m["step"].startswith("margin/"):       # off-nominal volts: their own table (_margin_section)
            continue
        key = (m["power_state"], m["workload"] or "idle")
        if m["value"] is not None and m["name"] not in rows[key]:
            rows[key][m["name"]] = m["value"]
        if key not in params and m["step"] in by_key:
            params[key] = _workload_params(by_key[m["step"]])
    # throughput per watt over power state, block size and queue depth
    over_ps, over_bs, over_qd = defaultdict(list), defaultdict(list), defaultdict(list)
    for (ps, wl), figs in rows.items():
        v, p = figs.get("efficiency.mib_s_per_w"), params.get((ps, wl), {})
        if wl == "idle" or v is None:
            continue
        over_ps[wl].append((ps, v))
        if p.get("bs"):
            over_bs[f"PS{ps} {p.get('rw')} QD{p.get('iodepth')}"].append((p["bs"], v))
        if p.get("iodepth"):
            bs = p.get("bs")
            over_qd[f"PS{ps} {p.get('rw')} {bs // 1024 if bs else '?'}k"].append((p["iodepth"], v))
    plots = [(f, t) for f, t, ok in (
        ("efficiency_vs_power_state.png", "over power state",
         plot_curves(over_ps, out / "efficiency_vs_power_state.png", "power state")),
        ("efficiency_vs_block_size.png", "over block size",
         plot_curves(over_bs, out / "efficiency_vs_block_size.png", "block size (bytes)", log2=True)),
        ("efficiency_vs_queue_depth.png", "over queue depth",
         plot_curves(over_qd, out / "efficiency_vs_queue_depth.png", "queue depth", log2=True))) if ok]
    waf_plots = []
    for m in ms:
        if m["name"] == "waf.cumulative" and m["notes"] and m["notes"].startswith("{"):
            series = json.loads(m["notes"]).get("waf_series") or []
            name = f"waf_{by_key[m['step']]['idx']:03d}.png" if m["step"] in by_key else None
            if name and _plot_waf(series, m["step"], out / name):
                waf_plots.append((m["step"], name, m["value"]))
    cap_reports = {}
    if capture_report is not None:
        for s in steps:
            if s["capture"] and Path(s["capture"]).exists():
                cap_reports[s["key"]] = capture_report(s["capture"], out / "captures" / Path(s["capture"]).stem)
    h = ["<!doctype html><meta charset=utf-8><title>powerrig sweep run %d</title>" % run_id,
         "<style>body{font-family:sans-serif;margin:1.2em 2em}table{border-collapse:collapse}td,th{border:1px solid "
         "#ccc;padding:3px 8px;text-align:right}th{background:#eee}tr.unpredicted td{background:#fff1e5}"
         ".fail{color:#b00}.marginal{color:#a60}"
         ".pass{color:#070}.partial{color:#7a5c00}.invalid{color:#8250df}" + first_screen.STYLE + "</style>",
         f"<h1>Sweep run {run_id}: {html.escape(run['plan_name'])}</h1>",
         f"<p>plan hash {run['plan_hash']}, status <b>{run['status']}</b>, started "
         f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(run['started_utc']))}; station "
         f"{html.escape(run['station'] or '')}; drive {html.escape(run['dut_model'] or '')} sn "
         f"{html.escape(run['dut_serial'] or '')} fw {html.escape(run['dut_firmware'] or '')}</p>",
         first_screen.summary_html(ms),
         first_screen.steps_html(steps, ms, store.phases(run_id), out, cap_reports),
         "<h2 id=figures>Figures per power state and workload</h2><table><tr><th>PS</th><th>workload</th>"
         "<th>rw</th><th>bs</th><th>QD</th><th>jobs</th>"
         + "".join(f"<th>{t}</th>" for _, t in FIGS) + "</tr>"]
    for (ps, wl) in sorted(rows, key=lambda k: (k[0] if k[0] is not None else -1, k[1] != "idle", k[1])):
        figs, p = rows[(ps, wl)], params.get((ps, wl), {})
        bs = p.get("bs")
        h.append(f"<tr><td>PS{ps}</td><td style=text-align:left>{html.escape(wl)}</td>"
                 f"<td>{html.escape(str(p.get('rw') or '-')) if wl != 'idle' else '-'}</td>"
                 f"<td>{f'{bs // 1024}k' if bs and wl != 'idle' else '-'}</td>"
                 f"<td>{p.get('iodepth') if wl != 'idle' and p.get('iodepth') else '-'}</td>"
                 f"<td>{p.get('jobs') if wl != 'idle' and p.get('jobs') else '-'}</td>"
                 + "".join(f"<td>{_f(figs.get(n))}</td>" for n, _ in FIGS) + "</tr>")
    h.append("</table>")
    if plots:
        h.append("<h2 id=efficiency>Throughput per watt</h2>")
        h += [f"<figure><img src={f} alt='MiB/s per W {t}'><figcaption>MiB/s per W {t}</figcaption></figure>"
              for f, t in plots]
    if waf_plots:
        h.append("<h2 id=waf>Write amplification over time beside power</h2>")
        h += [f"<figure><img src={f} alt='WAF and W, {html.escape(k)}'><figcaption>{html.escape(k)}: cumulative WAF "
              f"{_f(v, 3)}</figcaption></figure>" for k, f, v in waf_plots]
    h += _margin_section(ms)
    h += _power_loss_section(ms)
    h += referee_report.section(ms, out, {k: s["idx"] for k, s in by_key.items()})    # issue 38
    h += command_report.section(ms, out, {k: s["power_state"] for k, s in by_key.items()})    # issue 37
    h.append("<h2 id=verdicts>Verdicts</h2><p>Each check once per requirement and phase; the verdict is decided "
             "from the limit, the measured value, its uncertainty and whether the data met the check's "
             "requirement (data: enough / short), and says why when it is not a plain pass or fail.</p><table><tr>"
             "<th>step</th><th>check</th><th>phase</th><th>measured</th><th>lower limit</th><th>upper limit</th>"
             "<th>marginal from</th><th>verdict</th><th>data</th><th>why and notes</th></tr>")
    for m in ms:
        if not verdicts.is_judged(m):
            continue
        notes = notes_text(m["notes"])
        h.append(f"<tr><td style=text-align:left>{html.escape(m['step'])}</td><td>{html.escape(m['name'])}</td>"
                 f"<td>{html.escape(m['phase'] or '')}</td><td>{_f(m['value'], 3)} {html.escape(m['units'] or '')}</td>"
                 f"<td>{_f(m['lower'], 3)}</td><td>{_f(m['upper'], 3)}</td>"
                 f"<td>{_f(m['marginal_upper'] if m['marginal_upper'] is not None else m['marginal_lower'], 3)}</td>"
                 f"<td class={html.escape(m['outcome'])}><b>{html.escape(m['outcome'])}</b></td>"
                 f"<td>{'-' if m['requirement_met'] is None else 'enough' if m['requirement_met'] else 'short'}</td>"
                 f"<td style=text-align:left>{html.escape(str(notes))}</td></tr>")
    h.append("</table><h2 id=steps>Steps and captures</h2><table><tr><th>#</th><th>step</th><th>status</th>"
             "<th>attempts</th><th>lost s</th><th>capture</th><th>capture report</th></tr>")
    for s in steps:
        cap = s["capture"] or ""
        rep = cap_reports.get(s["key"])
        link = (f"<a href='{first_screen.href(rep, out)}'>report</a>" if rep else
                f"<code>powerrig report {html.escape(cap)}</code>")
        h.append(f"<tr><td>{s['idx'] + 1}</td><td style=text-align:left>{html.escape(s['key'])}</td>"
                 f"<td>{s['status']}{(': ' + html.escape(s['invalid_reason'])) if s['invalid_reason'] else ''}</td>"
                 f"<td>{s['attempts']}</td><td>{_f(s['lost_s'], 3)}</td>"
                 f"<td style=text-align:left><a href='{first_screen.href(cap, out)}'>{html.escape(Path(cap).name)}</a>"
                 "</td>"
                 f"<td style=text-align:left>{link}</td></tr>")
    h.append("</table>")
    return owned.write_owned(out / "index.html", "\n".join(h))
