"""HTML report of a capture: power over time with phases shaded, the per-phase table, OCP and NVMe
verdicts, energy per command, efficiency curves and write amplification; PNG plots (matplotlib,
Agg) beside it and the per-phase table as CSV."""
from __future__ import annotations

import csv
import html
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from powerrig.analysis import Analysis, analyse, verdicts  # noqa: E402
from powerrig.capture import CaptureReader  # noqa: E402
from powerrig.core import owned  # noqa: E402
from powerrig.core.errors import CaptureError  # noqa: E402
from powerrig.capture.window import CaptureWindow, bound_s
from powerrig.analysis.drive_said import said

PLOT_POINTS = 2000
KIND_COLOURS = {"workload": "tab:orange", "idle": "tab:green", "dwell": "tab:purple"}
STATUS_COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "marginal": "#bc4c00", "partial": "#9a6700",
                  "invalid": "#8250df", "n/a": "#57606a", "info": "#0969da"}


def write_report(capture: str | Path, out_dir: str | Path | None = None, on_warning=None,
                 window: tuple[str | None, str | None] | None = None) -> Path:
    """Analyse a capture and write report.html, phases.csv, analysis PNGs into out_dir.

    The capture file is only read (one not closed cleanly is recovered from a temporary copy).
    ``on_warning(line)`` is called with each one-line alert about the capture itself (cut short, not
    closed, a recording that got less than was asked), which the HTML shows in a box at the top.
    ``window``: (from, to), each seconds from the capture's start or a phase's or marker's name (None:
    the capture's start or end); the report is of that stretch alone (capture/window.py)."""
    capture = Path(capture)
    out = Path(out_dir) if out_dir else capture.with_suffix("").with_name(capture.stem + "_report")
    with CaptureReader(capture) as cap:
        alerts = capture_alerts(cap)
        for line in alerts:
            if on_warning:
                on_warning(line)
        if cap.length == 0:
            raise CaptureError(f"capture {capture} holds no intervals (the recording stopped before its first "
                               "data reached the file): nothing to report; record again")
        if window and any(v is not None for v in window):
            cap = CaptureWindow(cap, *(None if v is None else bound_s(cap, v, end=k == 1) for k, v in enumerate(window)))
            w = cap.metadata["window"]
            if not out_dir:
                out = capture.with_name(f"{capture.stem}_report_{w['from_s']:.3f}-{w['to_s']:.3f}s")
        try:
            owned.owned_dir(out, top=True)
        except OSError as e:
            raise CaptureError(f"cannot create report folder {out}: {e}") from None
        owned.check_tree(out)      # a link left in the report's folder: refused before a file is written
        a = analyse(cap, cap.events, cap.metadata)
        plots = {"power": _plot_power(cap, a, out / "power.png")}
        if a.curves and any(a.curves.values()):
            plots["efficiency"] = _plot_efficiency(a, out / "efficiency.png")
        if a.waf:
            plots["waf"] = _plot_waf(a, out / "waf.png")
        write_csv(a, out / "phases.csv")
        owned.write_owned(out / "report.html", _html(cap, a, plots, alerts))
    return out / "report.html"


def capture_alerts(cap: CaptureReader) -> list[str]:
    """One line per thing that makes the capture less than it looks: not closed cleanly / cut short
    (what was recovered and lost), a recording that covered less than asked or ended by a failure."""
    out = []
    if not cap.closed_cleanly:
        out.append(cap.recovery_note or "the capture was not closed cleanly: its last seconds may be missing")
    if cap.recording_note:
        out.append(cap.recording_note)
    over = {r: c for r, c in cap.clipped().items() if c["intervals"]}
    if over:
        out.append("the range saturated: " + ", ".join(f"{r} at full scale in {c['intervals']} of {cap.length} intervals"
                                                       for r, c in over.items())
                   + "; readings there are clipped, their power and energy lower bounds")
    return out


def write_csv(a: Analysis, path: Path) -> None:
    rows = a.table()
    with owned.open_owned(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


# ---- plots ------------------------------------------------------------------------------------------
def _save(fig, path: Path, title: str | None = None) -> str:
    """Title, tight layout, PNG, and free the figure (plots are made in a loop over many phases)."""
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    with owned.open_owned(path, "wb") as f:
        fig.savefig(f, format=path.suffix[1:])
    plt.close(fig)
    return path.name


def _plot_power(cap: CaptureReader, a: Analysis, path: Path) -> str:
    n = min(PLOT_POINTS, cap.length)
    t_scale, t_unit = _time_unit(cap.duration_s)
    fig, ax = plt.subplots(figsize=(11, 4.2), dpi=110)
    s = cap.summaries("p_total", 0, cap.length, n)
    t = (s["sample_id"] + s["increment"] / 2) * cap.interval_s / t_scale
    if s["increment"] > 1:
        ax.fill_between(t, s["min"], s["max"], color="tab:blue", alpha=0.25, lw=0, label="total: min-max per point")
    ax.plot(t, s["mean"], color="tab:blue", lw=1, label="total power (mean)")
    rail_colours = ("tab:orange", "tab:green", "tab:purple", "tab:brown")   # blue is the total
    for rail, colour in zip(cap.rails, rail_colours):
        r = cap.summaries(f"p_{rail}", 0, cap.length, n)
        ax.plot(t, r["mean"], lw=0.8, color=colour, label=f"{rail} rail")
    seen = set()
    for r in a.phases:
        if r.kind in KIND_COLOURS and r.kind != "dwell":
            lab = r.kind if r.kind not in seen else None
            seen.add(r.kind)
            ax.axvspan(r.start_s / t_scale, r.stop_s / t_scale, color=KIND_COLOURS[r.kind], alpha=0.12, lw=0,
                       label=f"{lab} phase" if lab else None)
    for r in a.phases:
        if r.kind == "dwell":
            ax.axvline(r.start_s / t_scale, color=KIND_COLOURS["dwell"], lw=0.8, ls="--")
            ax.annotate(r.name.split(" dwell")[0], (r.start_s / t_scale, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(2, -10), textcoords="offset points", fontsize=8, color=KIND_COLOURS["dwell"])
    for g in cap.gaps:
        ax.axvspan(g["sample_id"] * cap.interval_s / t_scale, (g["sample_id"] + g["intervals"]) * cap.interval_s / t_scale,
                   color="red", alpha=0.4, lw=0, label="gap (data lost)" if g is cap.gaps[0] else None)
    ax.set_xlabel(f"time since capture start ({t_unit})")
    ax.set_ylabel("power (W)")
    ax.set_title("Power over time")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    with owned.open_owned(path, "wb") as f:
        fig.savefig(f, format=path.suffix[1:])
    plt.close(fig)
    return path.name


def _plot_efficiency(a: Analysis, path: Path) -> str:
    axes = [k for k, v in a.curves.items() if v]
    fig, axs = plt.subplots(1, len(axes), figsize=(4.2 * len(axes), 3.8), dpi=110, squeeze=False)
    names = {"power_state": "power state", "bs": "block size (KiB)", "iodepth": "queue depth"}
    for ax, axis in zip(axs[0], axes):
        for label, pts in a.curves[axis].items():
            x = np.array([p[0] for p in pts], dtype=float)
            if axis == "bs":
                x = x / 1024
            ax.plot(x, [p[1] for p in pts], marker="o", label=label)
        if axis in ("bs", "iodepth"):
            ax.set_xscale("log", base=2)
            ticks = sorted({float(p[0]) / (1024 if axis == "bs" else 1) for v in a.curves[axis].values() for p in v})
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        else:
            ticks = sorted({int(p[0]) for v in a.curves[axis].values() for p in v})
            ax.set_xticks(ticks, [f"PS{t}" for t in ticks])
        ax.set_xlabel(names[axis])
        ax.set_ylabel("MiB/s per W")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path, "Efficiency (throughput per watt)")


def _plot_waf(a: Analysis, path: Path) -> str:
    rows = [w for w in a.waf if "start_s" in w]
    t_scale, t_unit = _time_unit(max((w["end_s"] for w in rows), default=1.0))
    t = np.array([(w["start_s"] + w["end_s"]) / 2 for w in rows]) / t_scale
    fig, axs = plt.subplots(3, 1, figsize=(11, 6.5), dpi=110, sharex=True)
    axs[0].plot(t, [w["waf_cumulative"] for w in rows], marker=".", label="cumulative")
    axs[0].plot(t, [w["waf_instant_clamped"] for w in rows], marker=".", alpha=0.7, label="instantaneous (clamped at 5)")
    axs[0].set_ylabel("write amplification")
    axs[0].legend(fontsize=8)
    axs[1].plot(t, [w["host_mib_s"] for w in rows], marker=".", color="tab:green")
    axs[1].set_ylabel("host writes (MiB/s)")
    axs[2].plot(t, [w.get("mean_w", math.nan) for w in rows], marker=".", color="tab:red")
    axs[2].set_ylabel("mean power (W)")
    axs[2].set_xlabel(f"time since capture start ({t_unit})")
    for ax in axs:
        ax.grid(alpha=0.3)
    return _save(fig, path, "Write amplification with bandwidth and power")


def _time_unit(seconds: float) -> tuple[float, str]:
    if seconds > 3 * 3600:
        return 3600.0, "h"
    if seconds > 600:
        return 60.0, "min"
    return 1.0, "s"


# ---- html -------------------------------------------------------------------------------------------
def _f(v, nd=3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return html.escape(str(v))


def _table(headers, rows) -> str:
    h = "".join(f"<th>{html.escape(x)}</th>" for x in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def _window_facts(meta: dict) -> list[str]:
    """A window's place in its capture (`powerrig report --from/--to`): the times below count from it."""
    w = meta.get("window")
    return [f"window {w['from_s']:.3f} – {w['to_s']:.3f} s of the {w['capture_s']:.3f} s capture "
            "(times here from the window's start)"] if w else []


def _verdict_summary(a: Analysis, cap: CaptureReader) -> str:
    """The capture's verdicts at the top (analysis/verdicts.py, as a sweep report's): counts, then each
    fail, marginal, invalid and partial with its why; what the drive said is in the box below it."""
    rows = [{"step": None, "name": c.check, "phase": c.phase, "value": c.value, "units": c.unit,
             "outcome": str(c.status), "upper": c.limit, "lower": None, "notes": json.dumps([c.why] if c.why else [])}
            for c in a.checks]
    s = verdicts.summary(rows)
    look = "".join(f"<li><b style='color:{STATUS_COLOURS.get(r['outcome'], '#000')}'>{html.escape(r['outcome'])}</b> "
                   f"{html.escape(r['name'])} ({html.escape(r['phase'] or '')}) {html.escape(r['value'])}"
                   f"{': ' + html.escape(r['why']) if r['why'] else ''}</li>" for r in s["look"])
    return (f"<div class='summary' id=summary><b>Verdicts: {html.escape(s['line'])}</b>"
            + (f"<ul>{look}</ul>" if look else "") + " <a href='#verdicts'>all verdicts</a></div>")


def _drive_said(cap: CaptureReader) -> list[str]:
    """A line per thing the drive said (a critical warning, a removal, its return, a reset) with its time
    into the capture (analysis/drive_said.py)."""
    out = []
    for x in said(cap.events):
        try:
            t = f"{float(cap.sample_id(x.t_utc)) * cap.interval_s:.2f} s"
        except CaptureError:
            t = "at an unplaced time"
        out.append(f"{x.text} at {t}")
    return out


def _recording_facts(cap: CaptureReader) -> list[str]:
    """Asked / covered / why it ended, for the summary line (empty without recorder metadata)."""
    rec = cap.recording
    if not rec:
        return []
    req = rec.get("requested_s")
    facts = [f"asked {req:.3f} s" if isinstance(req, (int, float)) else "asked: until stopped"]
    if isinstance(rec.get("covered_s"), (int, float)):
        facts.append(f"covered {rec['covered_s']:.3f} s")
    facts.append(f"ended by {html.escape(str(rec.get('end_reason') or '?'))}")
    return facts


def _recording_section(cap: CaptureReader) -> str:
    """What the recorder was asked and got, and the stream's own counts (scalars of its summary)."""
    rows = [[html.escape(k), _f(v)] for k, v in (cap.recording or {}).items()]
    stream = cap.metadata.get("stream")
    if isinstance(stream, dict):
        rows += [[f"stream {html.escape(str(k))}", _f(v)] for k, v in stream.items()
                 if isinstance(v, (int, float, str, bool)) or v is None]
    if not rows:
        return ""
    return "<h2>Recording</h2>" + _table(["", "value"], rows)


def _html(cap: CaptureReader, a: Analysis, plots: dict, alerts: list[str] = ()) -> str:
    meta = cap.metadata
    drive = meta.get("drive") or {}
    idc = drive.get("id_ctrl") or {}
    ia = a.idle_active()
    parts = [f"<h1>powerrig report: {html.escape(cap.path.name)}</h1>"]
    if alerts:
        parts.append("<div class='alert'><b>This capture is not what it seems at first sight</b><ul>"
                     + "".join(f"<li>{html.escape(x)}</li>" for x in alerts) + "</ul></div>")
    parts.append(_verdict_summary(a, cap))
    parts += ["<p>" + " · ".join([f"duration {cap.duration_s:.3f} s", *_window_facts(meta), *_recording_facts(cap), f"interval {cap.interval_s * 1e6:g} us",
                                  f"rails {', '.join(cap.rails)}", f"events {len(cap.events)}",
                                  f"gaps {len(cap.gaps)} ({a.info['lost_s']:.3f} s lost)",
                                  f"drive {html.escape(str(idc.get('mn', drive.get('model', '?'))).strip())} "
                                  f"SN {html.escape(str(idc.get('sn', drive.get('serial', '?'))).strip())}"]) + "</p>",
             f"<p>idle {_f(ia['idle'])} W · active {_f(ia['workload'])} W (energy-weighted means over all idle and workload phases)"
             + (f" · settled idle {_f(ia['idle_settled'])} W (over {ia['idle_windows']} idle window(s): from 10 s into "
                "an idle phase, as NVMe's IDLP; the idle phases also hold the drive's decay after a workload)"
                if ia["idle_windows"] else "") + "</p>"]
    said = _drive_said(cap)
    if said:
        parts.append("<div class='alert' id=drive-said><b>What the drive said during this capture</b><ul>"
                     + "".join(f"<li>{html.escape(x)}</li>" for x in said) + "</ul></div>")
    if a.warnings:
        parts.append("<div class='warn'><b>Warnings</b><ul>" + "".join(f"<li>{html.escape(w)}</li>" for w in a.warnings) + "</ul></div>")
    parts.append(f"<h2>Power over time</h2><img src='{plots['power']}' alt='power over time'>")
    rows = []
    for r in a.phases:
        if r.kind in ("idle_window",):
            continue
        t = r.rails["total"]
        rows.append([html.escape(r.name), r.kind, _f(r.phase.power_state), _f(r.start_s), _f(r.duration_s),
                     _f(r.lost_s), _f(t["mean_w"]), _f(t["std_w"]), _f(t["min_w"]), _f(t["p50_w"]), _f(t["p99_w"]),
                     _f(t["max_w"]), _f(r.max_1s.value_w), _f(r.max_100ms.value_w), _f(r.peak_100us.value_w),
                     _f(t["energy_j"], 4) + (" (lower bound)" if r.lower_bound else ""),
                     html.escape(r.invalid or "")])
    parts.append("<h2>Phases (total power; per-rail figures in phases.csv)</h2>" + _table(
        ["phase", "kind", "PS", "start (s)", "duration (s)", "lost (s)", "mean (W)", "std (W)", "min (W)",
         "median (W)", "p99 (W)", "max (W)", "max 1 s (W)", "max 100 ms (W)", "peak 100 us (W)", "energy (J)",
         "invalid"], rows))
    crow = []
    for c in a.checks:
        col = STATUS_COLOURS.get(c.status, "#000")
        where = f"{c.where_s[0]:.4f} – {c.where_s[1]:.4f}" if c.where_s else "–"
        crow.append([c.check, html.escape(c.phase), _f(c.value), _f(c.limit), _f(c.marginal_from),
                     _f(c.uncertainty), f"<b style='color:{col}'>{c.status.upper()}</b>",
                     "enough" if c.requirement_met else "short", where,
                     html.escape("; ".join(([c.why] if c.why else []) + [n for n in c.notes if n not in c.why]))])
    parts.append("<h2 id=verdicts>OCP and NVMe verdicts</h2>" + (_table(
        ["check", "phase", "value (W)", "limit (W)", "marginal from (W)", "+- (W)", "verdict", "data",
         "worst window (s)", "why / notes"], crow)
        if crow else "<p>No phase to check (no workload or idle phases in the capture).</p>"))
    if a.commands:
        parts.append("<h2 id=commands>Energy per command</h2><p>Each command's window starts after the last "
                     "event that changed the load and ends before the next one (a workload starting or stopping, "
                     "another command); a window cut short says by what.</p>" + _table(
            ["command", "kind", "start (s)", "before (W)", "after (W)", "energy above before (mJ)", "settle (ms)",
             "EXLAT+ENLAT (ms)", "window", "why"],
            [[html.escape(c.name), c.kind, _f(c.start_s), _f(c.before_w), _f(c.after_w), _f(c.energy_above_j * 1e3, 2),
              _f(c.settle_s * 1e3, 1), _f(c.latency_limit_s * 1e3, 1), html.escape(c.cut_short or "full 2 s"),
              html.escape(c.note or "")] for c in a.commands]))
    if a.efficiency:
        parts.append("<h2>Efficiency</h2>" + _table(
            ["phase", "rw", "bs", "QD", "PS", "MiB/s", "IOPS", "W", "MiB/s per W", "IOPS per W", "J per GiB", "uJ per I/O"],
            [[html.escape(e["phase"]), _f(e["rw"]), _f(e["bs"], 0), _f(e["iodepth"], 0), _f(e["power_state"]),
              _f(e["mib_s"], 1), _f(e["iops"], 0), _f(e["mean_w"]), _f(e["mib_s_per_w"], 1), _f(e["iops_per_w"], 1),
              _f(e["j_per_gib"], 3), _f(e["uj_per_io"], 2)] for e in a.efficiency]))
        if "efficiency" in plots:
            parts.append(f"<img src='{plots['efficiency']}' alt='efficiency curves'>")
    if a.steady_state:
        srow = []
        for s in a.steady_state:
            for what in ("bandwidth", "power"):
                if what in s:
                    x = s[what]
                    srow.append([html.escape(s["workload"]), what, x["rounds"], "yes" if x["steady"] else "no",
                                 f"{x['first_round']}–{x['last_round']}" if x["steady"] else html.escape(x.get("reason", "")),
                                 _f(x.get("data_excursion")), _f(x.get("slope_excursion"))])
        parts.append("<h2>Steady state (SNIA PTS: 5 rounds, 20 % data, 10 % slope excursion)</h2>" + _table(
            ["workload", "on", "rounds", "steady", "window", "data excursion", "slope excursion"], srow))
    if "waf" in plots:
        parts.append(f"<h2>Write amplification</h2><img src='{plots['waf']}' alt='write amplification'>")
    parts.append(_recording_section(cap))
    sw = meta.get("software", {})
    parts.append("<h2>Provenance</h2><p>" + html.escape(", ".join(f"{k} {v}" for k, v in sw.items())) + "</p>")
    style = ("body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;"
             "font-size:13px;margin-bottom:1em}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}img{max-width:100%}"
             ".warn{background:#fff8c5;border:1px solid #d4a72c;padding:4px 12px}"
             ".summary{border:1px solid #ccc;padding:4px 12px;margin-bottom:1em}"
             ".alert{background:#ffebe9;border:2px solid #cf222e;padding:4px 12px;margin-bottom:1em}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>powerrig report</title><style>{style}</style></head><body>{''.join(parts)}</body></html>"
