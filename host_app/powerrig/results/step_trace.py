"""One step's power over time for the sweep report's first screen (PNG, matplotlib Agg): each rail and the
total, the step's phases shaded, its commands on a quiet track under the trace (a power-state change
drawn and named), what the drive said (a removal, its return, a critical warning) in red, and an
inset of the busiest 40 ms: the interval means beside the 100 us window peak and the 4 us maximum the
interposer measured in each interval, which a 1 ms meter never sees.

Read from the step's capture (the file the sweep wrote), so the report can be made again at any time."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from powerrig.analysis.drive_said import said
from powerrig.capture import CaptureReader
from powerrig.core import owned
from powerrig.core.timeline import NVME, POWER_STATE
from powerrig.results.pyplot import pyplot

POINTS = 1200
LABEL_MIN_FRAC = 0.18             # a phase shorter than this share of the step gets no label
INSET_S = 0.040                    # the inset's span around the highest 100 us peak
SHADE = {"workload": ("tab:orange", 0.16), "idle": ("tab:green", 0.10)}
RAIL_COLOURS = ("tab:orange", "tab:green", "tab:purple", "tab:brown")
APST_UNPREDICTED = "#bc4c00"       # an APST move the drive's table does not give



def _place(cap: CaptureReader, utc: float) -> float | None:
    try:
        return float(cap.sample_id(utc)) * cap.interval_s
    except Exception:  # noqa: BLE001 - a capture without a clock has no events to place: the trace stays
        return None


def drive_said(cap: CaptureReader) -> list[tuple[float, str]]:
    """(seconds into the capture, what) for each thing the drive said during the step: a removal and its
    return, a critical warning, a controller reset (analysis/drive_said.py)."""
    out = []
    for x in said(cap.events):
        t = _place(cap, x.t_utc)
        if t is not None:
            out.append((t, x.kind))
    return out


def _peak_at(cap: CaptureReader, rails: list[str]) -> tuple[int, str] | None:
    """(sample id, signal kind) of the highest 100 us peak (or 4 us maximum) of the summed rails."""
    for kind in ("p_peak", "p_max"):
        names = [f"{kind}_{r}" for r in rails]
        if not names or not all(cap.has(n) for n in names):
            continue
        s = [cap.summaries(n, 0, cap.length, POINTS) for n in names]
        tot = np.nansum([x["max"] for x in s], axis=0)
        if not len(tot) or np.isnan(tot).all():
            continue
        k = int(np.nanargmax(tot))
        lo = int(s[0]["sample_id"][k])
        hi = min(cap.length, lo + int(s[0]["increment"]))
        raw = np.nansum([cap.samples(n, lo, hi) for n in names], axis=0)
        return lo + int(np.nanargmax(raw)), kind
    return None


def _detail(ax, cap: CaptureReader, rails: list[str]) -> bool:
    """The busiest INSET_S around the highest peak: interval means, 100 us peaks, 4 us maxima."""
    at = _peak_at(cap, rails)
    if at is None:
        return False
    mid, _ = at
    half = max(3, int(round(INSET_S / 2 / cap.interval_s)))
    lo, hi = max(0, mid - half), min(cap.length, mid + half)
    if hi - lo < 3:
        return False
    t = (np.arange(lo, hi) - mid) * cap.interval_s * 1e3
    for kind, label, colour in (("p_max", "4 us max", "tab:red"), ("p_peak", "100 us peak", "tab:purple")):
        if all(cap.has(f"{kind}_{r}") for r in rails):
            y = np.sum([cap.samples(f"{kind}_{r}", lo, hi) for r in rails], axis=0)
            ax.step(t, y, where="mid", lw=0.8, color=colour, label=label)
    ax.step(t, cap.samples("p_total", lo, hi), where="mid", lw=1.0, color="tab:blue",
            label=f"{cap.interval_s * 1e3:g} ms mean")
    ax.set_title(f"busiest {INSET_S * 1e3:.0f} ms at {mid * cap.interval_s:.2f} s", fontsize=7, pad=2)
    ax.tick_params(labelsize=6, pad=1)
    ax.set_xlabel("ms from the peak", fontsize=6, labelpad=0)
    # three stacked lines span the inset: the least covered corner, readable over a trace
    ax.legend(fontsize=5.5, loc="best", framealpha=0.85, edgecolor="none", handlelength=1.2)
    ax.grid(alpha=0.3)
    return True


def _draw(ax, cap: CaptureReader, phases: list[dict], top: float | None = None, labels: bool = True,
          legend: bool = True, apst: list[tuple[float, str, bool]] = ()) -> float:
    """One capture's trace on ``ax`` (x: seconds into the step); returns the highest total drawn.
    ``apst``: (seconds, label, predicted) of the drive's own moves, drawn as a commanded change is (one
    the APST table does not give in APST_UNPREDICTED's colour, dotted)."""
    n = min(POINTS, cap.length)
    s = cap.summaries("p_total", 0, cap.length, n)
    t = (s["sample_id"] + s["increment"] / 2) * cap.interval_s
    if s["increment"] > 1:
        ax.fill_between(t, s["min"], s["max"], color="tab:blue", alpha=0.2, lw=0)
    rails = list(cap.rails)
    for rail, colour in zip(rails, RAIL_COLOURS):       # under the total: a rail that carries it all hides behind it
        r = cap.summaries(f"p_{rail}", 0, cap.length, n)
        ax.plot(t, r["mean"], lw=1.6, color=colour, label=rail, zorder=2)
    ax.plot(t, s["mean"], color="tab:blue", lw=0.9, label="total", zorder=3)
    high = float(np.nanmax(s["max"])) if not np.isnan(s["max"]).all() else 1.0
    top = top or high
    ax.set_ylim(-0.12 * top, top * (1.45 if labels else 1.1))
    for p in shaded(phases):             # each phase shaded and labelled with its energy and mean
        a, b = p["start_s"], p["start_s"] + p["duration_s"]
        colour, alpha = SHADE[p["kind"]]
        ax.axvspan(a, b, color=colour, alpha=alpha, lw=0)
        if labels and (b - a) >= LABEL_MIN_FRAC * cap.duration_s:     # a short gap between phases: unlabelled
            ax.annotate(f"{short_name(p['name'])}\n{_j(p.get('energy_j'))}\n{_w(p.get('mean_w'))}",
                        ((a + b) / 2, top * 1.13), ha="center", va="bottom", fontsize=6, color="0.15")
    for e in cap.events:                 # commands: a quiet track under zero; power-state changes drawn
        if e.kind not in (NVME, POWER_STATE):
            continue
        x = _place(cap, e.t_start)
        if x is None:
            continue
        if e.kind == POWER_STATE:
            ax.axvline(x, color="tab:purple", lw=0.8, ls="--")
            ax.annotate(e.name, (x, 0.0), xycoords=("data", "axes fraction"), xytext=(2, 2),
                        textcoords="offset points", fontsize=6, color="tab:purple")
        else:
            ax.plot([x, x], [-0.10 * top, -0.03 * top], color="0.45", lw=0.5)
    for x, label, predicted in apst:     # no event marks an APST move: the stored measurement places it
        colour = "tab:purple" if predicted else APST_UNPREDICTED
        ax.axvline(x, color=colour, lw=0.8 if predicted else 1.1, ls="--" if predicted else ":")
        ax.annotate(label, (x, 0.0 if predicted else 0.12), xycoords=("data", "axes fraction"), xytext=(2, 2),
                    textcoords="offset points", fontsize=6, color=colour)
    for x, what in drive_said(cap):
        ax.axvline(x, color="#cf222e", lw=1.2)
        ax.annotate(f"{what} {x:.2f} s", (x, 0.45), xycoords=("data", "axes fraction"), xytext=(3, 0),
                    textcoords="offset points", fontsize=6.5, color="#cf222e", rotation=90)
    ax.set_xlim(0, cap.duration_s)
    ax.tick_params(labelsize=6.5)
    ax.grid(alpha=0.25)
    if legend:
        ax.legend(fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 0.06), frameon=False, ncol=len(rails) + 1)
    return high


def _open(capture) -> CaptureReader | None:
    try:
        cap = CaptureReader(capture)
    except Exception:  # noqa: BLE001 - a capture moved or unreadable: the report says so instead of a plot
        return None
    if cap.length < 2:
        cap.close()
        return None
    return cap


def _save(fig, out, fmt: str = "png") -> None:
    """To a file of ours (a path: no-follow, never through a link) or to a stream (the web page's SVG)."""
    try:
        if hasattr(out, "write"):
            fig.savefig(out, format=fmt, bbox_inches="tight", pad_inches=0.05)
        else:
            with owned.open_owned(out, "wb") as f:
                fig.savefig(f, format=fmt, bbox_inches="tight", pad_inches=0.05)
    finally:
        pyplot().close(fig)


def plot_step(capture: str | Path, phases: list[dict], path, title: str = "", fmt: str = "png",
              apst: list[tuple[float, str, bool]] = ()) -> bool:
    """The step's trace beside its busiest 40 ms to ``path`` (a file, or a stream: the web page draws it
    as SVG); False (nothing written) when the capture cannot be read or is empty. ``phases``: the step's
    stored phases (name, kind, start_s, duration_s, energy_j, mean_w); ``apst``: its APST moves
    (results/command_report.apst_marks)."""
    cap = _open(capture)
    if cap is None:
        return False
    with cap:
        plt = pyplot()
        fig, (ax, det) = plt.subplots(1, 2, figsize=(8.0, 2.6), dpi=100, gridspec_kw={"width_ratios": [3, 1]})
        _draw(ax, cap, phases, apst=apst)
        ax.set_xlabel("s into the step", fontsize=7, labelpad=1)
        ax.set_ylabel("W", fontsize=7)
        if title:
            ax.set_title(title, fontsize=8, loc="left")
        if not _detail(det, cap, list(cap.rails)):
            det.set_axis_off()
        fig.tight_layout(pad=0.4)
        _save(fig, path, fmt)
    return True


def plot_strip(steps: list[tuple], path: Path, per_row: int = 8) -> bool:
    """Every step's trace side by side, one panel per step, widths by duration, one power scale: the run
    at a glance. ``steps``: (label, capture, phases[, APST moves as plot_step takes them]). False when no
    capture can be read."""
    caps = [(x[0], _open(x[1]), x[2], x[3] if len(x) > 3 else ()) for x in steps]
    caps = [x for x in caps if x[1] is not None]
    if not caps:
        return False
    try:
        plt = pyplot()
        rows = strip_rows(caps, per_row)
        top = 0.0
        for _, cap, _, _ in caps:
            s = cap.summaries("p_total", 0, cap.length, min(POINTS, cap.length))
            if not np.isnan(s["max"]).all():
                top = max(top, float(np.nanmax(s["max"])))
        fig = plt.figure(figsize=(13.0, 2.7 * len(rows)), dpi=100)
        sub = fig.subfigures(len(rows), 1, squeeze=False)
        titles = []
        for r, row in enumerate(rows):
            axs = sub[r, 0].subplots(1, len(row), sharey=True, squeeze=False,
                                     gridspec_kw={"width_ratios": [max(c.duration_s, 1e-3) for _, c, _, _ in row],
                                                  "wspace": 0.12})[0]    # room for "16" beside the next "0.0"
            widest = max(range(len(row)), key=lambda k: row[k][1].duration_s)   # the legend where it fits
            for k, (ax, (label, cap, ph, apst)) in enumerate(zip(axs, row)):
                _draw(ax, cap, ph, top or None, legend=(r == 0 and k == widest), apst=apst)
                titles.append((ax, ax.set_title(label, fontsize=7, loc="left", pad=2)))
            axs[0].set_ylabel("W", fontsize=7)
        fit_titles(fig, titles)
        _save(fig, path)
    finally:
        for _, cap, _, _ in caps:
            cap.close()
    return True


def strip_rows(items: list, per_row: int) -> list[list]:
    """At most ``per_row`` panels a row, the rows as even as can be: 9 steps are 5 and 4, not 8 and one
    stretched over the whole width."""
    n = math.ceil(len(items) / max(1, math.ceil(len(items) / per_row))) if items else 1
    return [items[k:k + n] for k in range(0, len(items), n)]


def fit_titles(fig, titles: list) -> None:
    """A short step's title (ax, the Text set_title gave) cut to its panel's width ("4. ps1/id…"): else it
    runs over the next one's."""
    renderer = fig.canvas.get_renderer()
    for ax, title in titles:
        room, text = ax.get_window_extent(renderer).width, title.get_text()
        while len(text) > 3 and title.get_window_extent(renderer).width > room:
            text = text[:-1]
            title.set_text(text.rstrip() + "\u2026")


def shaded(phases: list[dict]) -> list[dict]:
    """The phases a trace shades: idle and workload spans, a fio job's own phase left out where the
    sweep's phase over the same run stands for it."""
    named = [p for p in phases if p.get("kind") in SHADE and p.get("start_s") is not None and p.get("duration_s")]
    sweep_work = any(p["kind"] == "workload" and not p["name"].startswith("fio:") for p in named)
    return [p for p in named if not (sweep_work and p["name"].startswith("fio:"))]


def short_name(name: str) -> str:
    return name.split(":", 1)[1] if name.startswith(("measure:", "fio:")) else name


def _j(v) -> str:
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "- J"
    return f"{v / 1000:.2f} kJ" if abs(v) >= 1000 else f"{v:.1f} J" if abs(v) >= 10 else f"{v:.3f} J"


def _w(v) -> str:
    return f"{v:.2f} W" if isinstance(v, (int, float)) and math.isfinite(v) else "- W"
