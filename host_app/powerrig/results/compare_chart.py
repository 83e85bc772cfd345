"""Two runs (or two drives) compared as a chart: `powerrig results compare A B --png` and the web page's
compare view draw the same figure.

Three panels over the steps both runs have: throughput against power per workload, one curve per run
through its power states (the curves overlaid: a drive that gives more MiB/s for the same watts sits
higher and further left); idle and active watts per power state, the two runs side by side; MiB/s per
watt per step, side by side.
"""
from __future__ import annotations

import math

from powerrig.results.tables import compare
from powerrig.results.pyplot import pyplot

COLOURS = ("tab:blue", "tab:orange")                      # run A, run B (the bars)
CURVE_COLOURS = ("tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def _ok(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def draw_compare(store, run_a: int, run_b: int, out, fmt: str | None = None) -> bool:
    """Draw the comparison into ``out`` (a path or a binary stream; ``fmt`` png or svg). False when the
    runs share no step with a figure to draw."""
    plt = pyplot()

    rows = compare(store, run_a, run_b)
    work = [r for r in rows if r["workload"] != "idle"]
    if not any(_ok(r[k]) for r in rows for k in ("W_a", "W_b", "idle W_a", "idle W_b")):
        return False
    labels = (f"run {run_a}", f"run {run_b}")
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 5.4))

    # 1. MiB/s against W per workload, through the power states: the overlaid curves
    for n, wl in enumerate(dict.fromkeys(r["workload"] for r in work)):
        pts = sorted((r for r in work if r["workload"] == wl), key=lambda r: (r["power_state"] is None, r["power_state"]))
        for k, side in enumerate("ab"):
            xy = [(r[f"W_{side}"], r[f"MiB/s_{side}"], r["power_state"]) for r in pts
                  if _ok(r[f"W_{side}"]) and _ok(r[f"MiB/s_{side}"])]
            if not xy:
                continue
            ax1.plot([p[0] for p in xy], [p[1] for p in xy], marker="o" if k == 0 else "s",
                     color=CURVE_COLOURS[n % len(CURVE_COLOURS)], ls="-" if k == 0 else "--", mfc="none" if k else None,
                     label=f"{wl}, {labels[k]}")
            for x, y, ps in xy:
                if ps is not None:
                    ax1.annotate(f"PS{ps}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax1.set_xlabel("power at the slot (W)")
    ax1.set_ylabel("throughput (MiB/s)")
    ax1.set_title(f"throughput against power ({labels[0]} solid, {labels[1]} dashed)")
    if ax1.lines:
        ax1.legend(fontsize=7, loc="lower right")
    ax1.grid(alpha=0.3)

    # 2. idle and active W per power state, side by side
    states = sorted({r["power_state"] for r in rows if r["power_state"] is not None})
    groups = [("idle", s) for s in states] + [(wl, s) for wl in dict.fromkeys(r["workload"] for r in work)
                                              for s in states]
    val = {}
    for r in rows:
        for side in "ab":
            if r["workload"] == "idle":
                val[("idle", r["power_state"], side)] = r[f"W_{side}"] if _ok(r[f"W_{side}"]) else r[f"idle W_{side}"]
            else:
                val[(r["workload"], r["power_state"], side)] = r[f"W_{side}"]
                val.setdefault(("idle", r["power_state"], side), r[f"idle W_{side}"])
    groups = [g for g in groups if any(_ok(val.get((*g, s))) for s in "ab")]
    width = 0.4
    for k, side in enumerate("ab"):
        ys = [val.get((*g, side)) for g in groups]
        ax2.bar([i + (k - 0.5) * width for i in range(len(groups))], [y if _ok(y) else 0 for y in ys], width,
                color=COLOURS[k], label=labels[k])
    ax2.set_xticks(range(len(groups)), [f"PS{s} {w}" for w, s in groups], fontsize=7, rotation=35, ha="right")
    ax2.set_ylabel("W")
    ax2.set_title("idle and active power")
    ax2.legend(fontsize=7, loc="upper left")
    ax2.grid(alpha=0.3, axis="y")

    # 3. MiB/s per W per workload step
    eff = [r for r in work if _ok(r["MiB/s/W_a"]) or _ok(r["MiB/s/W_b"])]
    for k, side in enumerate("ab"):
        ys = [r[f"MiB/s/W_{side}"] for r in eff]
        ax3.bar([i + (k - 0.5) * width for i in range(len(eff))], [y if _ok(y) else 0 for y in ys], width,
                color=COLOURS[k], label=labels[k])
    ax3.set_xticks(range(len(eff)), [f"PS{r['power_state']} {r['workload']}" for r in eff], fontsize=7, rotation=35,
                   ha="right")
    ax3.set_ylabel("MiB/s per W")
    ax3.set_title("throughput per watt")
    ax3.legend(fontsize=7, loc="upper right")
    ax3.grid(alpha=0.3, axis="y")

    fig.suptitle(f"run {run_a} against run {run_b}: the {len(rows)} steps they share")
    fig.tight_layout()
    fig.savefig(out, format=fmt, dpi=110)
    plt.close(fig)
    return True
