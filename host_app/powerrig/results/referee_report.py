"""The sweep report's section "What the drive says vs what the slot measured" (issue 38): the referee's
verdicts (analysis/referee.py, stored as referee.* measurements) in one table, and per step two plots:
the drive's IPM polled every second beside the slot's last second over time, and the drive's 250 mW
histogram beside the interposer's of the same windows."""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

from powerrig.core import owned
from powerrig.results.pyplot import pyplot

TITLES = {"referee.avg_power": "average interval power (AIPWR)", "referee.max_power": "maximum interval power (MIPWR)",
          "referee.histogram": "250 mW histogram", "referee.measured": "measured, not estimated",
          "referee.ipm_lag": "IPM lag behind the slot", "referee.power_limit": "Power Limit (23h) compliance",
          "referee.rail_split": "drive total vs the sum of the slot's rails", "referee.idle_power": "idle power (IDLP)",
          "referee.active_power": "active power (ACTP)", "referee.olec": "lifetime energy (SMART OLEC)",
          "referee.ocp_lifetime": "lifetime power consumed (OCP C0h)",
          "referee.ocp_peak": "peak power capability (OCP C0h) vs 100 us max",
          "referee.ocp_max_avg": "current maximum average power (OCP C0h) vs 1 s max"}


def _f(v, d=3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:,.{d}f}" if isinstance(v, float) else html.escape(str(v))


def _notes(m: dict) -> dict:
    try:
        n = json.loads(m["notes"] or "{}")
        return n if isinstance(n, dict) else {}
    except ValueError:
        return {}


def _save(fig, dest, fmt: str = "png") -> None:
    """To a file of the report's folder (never through a link) or to a binary stream (the web page's SVG)."""
    if isinstance(dest, (str, Path)):
        with owned.open_owned(dest, "wb") as f:
            fig.savefig(f, dpi=100, format=fmt)
    else:
        fig.savefig(dest, dpi=100, format=fmt)


def plot_claim_vs_truth(series: list, title: str, path, fmt: str = "png") -> bool:
    """IPM (what the drive says about its last second) and the slot's mean over the same second, over time."""
    pts = [p for p in series if p and p[0] is not None and p[1] is not None]
    if len(pts) < 2:
        return False
    plt = pyplot()
    t0 = pts[0][0]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    ax.plot([p[0] - t0 for p in pts], [p[2] if p[2] is not None else math.nan for p in pts], "s-", ms=3,
            label="slot: mean over the second before each poll", color="tab:blue")
    ax.plot([p[0] - t0 for p in pts], [p[1] for p in pts], "o--", ms=3, label="drive: SMART IPM", color="tab:red")
    ax.set_xlabel("seconds from the first poll")
    ax.set_ylabel("W")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path, fmt)
    plt.close(fig)
    return True


def plot_histograms(drive: list, truth: list, bin_w: float, title: str, path, fmt: str = "png") -> bool:
    """The drive's histogram and the interposer's of the same windows, side by side per 250 mW bin."""
    if not drive or not truth or not sum(drive) or not sum(truth):
        return False
    plt = pyplot()
    used = [k for k in range(max(len(drive), len(truth))) if (k < len(drive) and drive[k]) or (k < len(truth) and truth[k])]
    lo, hi = max(0, min(used) - 2), max(used) + 3
    xs = [k * bin_w for k in range(lo, hi)]
    d = [drive[k] / sum(drive) if k < len(drive) else 0 for k in range(lo, hi)]
    t = [truth[k] / sum(truth) if k < len(truth) else 0 for k in range(lo, hi)]
    fig, ax = plt.subplots(figsize=(6.5, 3.0))
    ax.bar([x + 0.3 * bin_w for x in xs], t, width=0.4 * bin_w, label="slot", color="tab:blue")
    ax.bar([x + 0.7 * bin_w for x in xs], d, width=0.4 * bin_w, label="drive (log 25h)", color="tab:red")
    ax.set_xlabel("W (bins of 250 mW)")
    ax.set_ylabel("share of intervals")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path, fmt)
    plt.close(fig)
    return True


def table(rows: list[dict], with_step: bool = True) -> list[str]:
    """The verdicts as one HTML table: what the drive says, what the slot measured, error, bound, verdict, why."""
    h = ["<table class=referee><tr>" + ("<th>step</th>" if with_step else "") + "<th>window</th><th>claim</th>"
         "<th>drive says</th><th>slot measured</th><th>error</th><th>bound</th><th>verdict</th>"
         "<th>how it was judged</th></tr>"]
    for m in rows:
        n = _notes(m)
        u = html.escape(n.get("units") or "")
        eu = html.escape(m["units"] or "")
        says, measured = f"{_f(n.get('claim'))} {u}", f"{_f(n.get('truth'))} {u}"
        if m["name"] == "referee.measured":          # a flag, not a number
            says, measured = ("estimated" if n.get("claim") else "measured"), "-"
        elif m["name"] == "referee.power_limit":
            says = f"limit {says}"
            if m["value"] is None:
                measured = f"max 1 s {measured}"
            else:
                measured = f"max 100 ms {measured} after" + (
                    f" (100 us {_f(n['max_100us_w'])}{'' if n.get('max_100us_exact') else ' or less'})"
                    if n.get("max_100us_w") is not None else "")
        bound = m["upper"] if m["upper"] is not None else m["lower"]     # one-sided checks carry a lower limit
        h.append("<tr>" + (f"<td style=text-align:left>{html.escape(m['step'])}</td>" if with_step else "") +
                 f"<td style=text-align:left>{html.escape(m['phase'] or '')}</td><td style=text-align:left>"
                 f"{TITLES[m['name']]}</td><td>{says}</td><td>{measured}</td>"
                 f"<td>{_f(m['value'])} {eu}</td><td>{_f(bound)} {eu if bound is not None else ''}</td>"
                 f"<td class={html.escape(m['outcome'])}>{html.escape(m['outcome'])}</td>"
                 f"<td style=text-align:left>{html.escape(n.get('why') or '')}</td></tr>")
    h.append("</table>")
    return h


def figures(rows: list[dict], step_index: dict) -> list[tuple[str, str, object]]:
    """The claim-vs-truth plots of these verdicts: (file name, caption, draw(dest, fmt) -> bool), the same
    for the report's PNGs and the web page's inline SVG."""
    out = []
    for m in rows:
        n = _notes(m)
        idx = step_index.get(m["step"], 0)
        safe = "".join(c if c.isalnum() else "_" for c in (m["phase"] or ""))
        if m["name"] == "referee.ipm_lag" and n.get("series"):
            out.append((f"referee_ipm_{idx:03d}.png",
                        f"{m['step']}: the drive's IPM polled every second against the slot's last second "
                        f"(lag found {_f(m['value'], 1)} s: {m['outcome']})",
                        lambda dest, fmt, m=m, n=n: plot_claim_vs_truth(
                            n["series"], f"{m['step']}: SMART IPM against the slot's last second", dest, fmt)))
        if m["name"] == "referee.histogram" and n.get("drive_counts"):
            out.append((f"referee_hist_{idx:03d}_{safe}.png",
                        f"{m['step']} {m['phase']}: the drive's histogram beside the slot's ({m['outcome']})",
                        lambda dest, fmt, m=m, n=n: plot_histograms(
                            n["drive_counts"], n.get("truth_counts") or [], 0.25,
                            f"{m['step']} {m['phase']}: histogram of interval power", dest, fmt)))
    return sorted(out, key=lambda f: not f[0].startswith("referee_ipm"))      # claim vs truth over time first


def section(ms: list[dict], out: Path, step_index: dict) -> list[str]:
    """The section's HTML (nothing when the run has no referee verdicts); its PNGs written into ``out``."""
    rows = [m for m in ms if m["name"] in TITLES]
    if not rows:
        return []
    h = ["<h2 id=referee>What the drive says vs what the slot measured</h2>",
         "<p>The drive's own power reports (NVMe Power Measurement log 25h, SMART IPM) beside the interposer over "
         "the same span; each judged by the drive's stated error bound (IPWRPE; 5 % when it states none). "
         "docs/drive-claims.md.</p>"]
    h += table(rows)
    figs = [(name, caption) for name, caption, draw in figures(rows, step_index) if draw(out / name, "png")]
    h += [f"<figure><img src={f} alt='{html.escape(c)}'><figcaption>{html.escape(c)}</figcaption></figure>"
          for f, c in figs]
    return h
