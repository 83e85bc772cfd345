"""The sweep report's and the web step page's "Commands on the drive's clock" (issue 37): each
power-state change timed from its traced Set Features submission beside EXLAT(old) + ENLAT(new) with
its verdict (transition.latency_s, transition.rails_settle_s), and the energy of one I/O per class
with its 95 % interval and the idle baseline it stands on (io.energy_per_io), plotted against the I/O
size per power state and kind; and each reset, format, sanitize, flush and firmware commit's energy
above the level before (command.energy_above_j) (sweep/command_trace.py stores them; docs/analysis.md
says how)."""
from __future__ import annotations

import html
import json
import math

from powerrig.core import owned
from powerrig.results.pyplot import pyplot


def _f(v, d=3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:,.{d}f}"


def _why(text) -> str:
    """A why cell's text, escaped, its arrows kept whole ("1.099 -> 1.099 W" broke as "- >" in a narrow cell)."""
    return html.escape(str(text or "")).replace("-&gt;", "<span style=white-space:nowrap>-&gt;</span>")


def _notes(m: dict) -> dict:
    try:
        n = json.loads(m.get("notes") or "{}")
        return n if isinstance(n, dict) else {}
    except ValueError:
        return {}


def _uj(v):
    return None if v is None else v * 1e6


def tables(ms: list[dict], step_names: dict | None = None) -> str:
    """Both tables as HTML ('' when the run has neither)."""
    lat = {m["step"]: m for m in ms if m["name"] == "transition.latency_s"}
    settle = [m for m in ms if m["name"] == "transition.rails_settle_s"]
    io = [m for m in ms if m["name"] == "io.energy_per_io"]
    cmds = [m for m in ms if m["name"] == "command.energy_above_j"]
    apst = [m for m in ms if m["name"] in ("apst.rails_settle_s", "apst.unpredicted_s")]
    if not settle and not io and not cmds and not apst:
        return ""
    h = []
    if settle:
        h.append("<h3 id=ps-transitions>Power-state changes timed from the rails</h3><p>From the Set Features "
                 "submission the drive host's kernel traced (or nvme-cli's call when it was not traced, said so) to "
                 "the rails leaving the old level (latency) and settling at the new one, beside EXLAT(old) + "
                 "ENLAT(new).</p><table><tr><th>step</th><th>from</th><th>to</th><th>latency ms</th><th>settle ms</th>"
                 "<th>EXLAT + ENLAT ms</th><th>verdict</th><th>W before</th><th>W after</th><th>timed from</th>"
                 "<th>why</th></tr>")
        for m in settle:
            n = _notes(m)
            la = lat.get(m["step"], {}).get("value")
            fr, to = n.get("from_ps"), n.get("to_ps")
            h.append(f"<tr><td style=text-align:left>{html.escape(m['step'])}</td>"
                     f"<td>{'PS%s' % fr if fr is not None else 'unknown'}</td>"
                     f"<td>{'PS%s' % to if to is not None else '-'}</td><td>{_f(la * 1e3 if la is not None else None, 2)}</td>"
                     f"<td>{_f(m['value'] * 1e3 if m['value'] is not None else None, 2)}</td>"
                     f"<td>{_f(m['upper'] * 1e3 if m['upper'] is not None else None, 1)}</td>"
                     f"<td class={html.escape(m['outcome'])}><b>{html.escape(m['outcome'])}</b></td>"
                     f"<td>{_f(n.get('before_w'), 2)}</td><td>{_f(n.get('after_w'), 2)}</td>"
                     f"<td>{html.escape(str(n.get('from') or '-'))}</td>"
                     f"<td style=text-align:left>{_why(n.get('why'))}</td></tr>")
        h.append("</table>")
    if apst:
        h.append(_apst_table(apst, [m for m in ms if m["name"] == "apst.entry_latency_s"]))
    if io:
        h.append("<h3 id=io-energy>Energy per I/O</h3><p>Above the idle baseline, per class, from the traced I/O and "
                 "the rails (least squares over 20 ms windows of the phase and the idle before it; 95 % interval). "
                 "A phase without a trace has its phase-level figures only.</p><table><tr><th>step</th><th>phase</th>"
                 "<th>class</th><th>uJ per I/O</th><th>95 % interval uJ</th><th>idle baseline W</th><th>I/Os</th>"
                 "<th>why</th></tr>")
        for m in io:
            n = _notes(m)
            ci = f"{_f(_uj(n.get('ci_low_j')), 2)} .. {_f(_uj(n.get('ci_high_j')), 2)}" if n.get("ci_low_j") is not None else "-"
            h.append(f"<tr><td style=text-align:left>{html.escape(m['step'])}</td>"
                     f"<td style=text-align:left>{html.escape(m['phase'] or '')}</td>"
                     f"<td style=text-align:left>{html.escape(str(n.get('class') or '-'))}</td>"
                     f"<td>{_f(_uj(m['value']), 2)}</td><td>{ci}</td><td>{_f(n.get('baseline_w'), 3)}</td>"
                     f"<td>{n.get('ios', '-')}</td><td style=text-align:left>{_why(n.get('why'))}</td></tr>")
        h.append("</table>")
    if cmds:
        h.append(_command_table(cmds))
    return "\n".join(h)


def _command_table(cmds: list[dict]) -> str:
    h = ["<h3 id=command-energy>Energy of resets, formats, sanitizes, flushes and firmware commits</h3><p>Above the "
         "level before (the mean over 50 ms before the submission), from the submission the drive host's kernel "
         "traced until the rails settled back (within the band of the level before for 20 ms) or the next "
         "load-changing event (cut short, said so).</p><table><tr><th>step</th><th>command</th><th>J above</th>"
         "<th>to settle ms</th><th>command ms</th><th>baseline W</th><th>peak W</th><th>timed from</th>"
         "<th>why</th></tr>"]
    for m in cmds:
        n = _notes(m)
        why = "; ".join(str(x) for x in (n.get("cut_short"), n.get("why")) if x)
        h.append(f"<tr><td style=text-align:left>{html.escape(m['step'])}</td>"
                 f"<td style=text-align:left>{html.escape(str(n.get('command') or m['phase'] or '-'))}</td>"
                 f"<td>{_f(m['value'], 4)}</td>"
                 f"<td>{_f(n['duration_s'] * 1e3 if n.get('duration_s') is not None else None, 1)}</td>"
                 f"<td>{_f(n['command_s'] * 1e3 if n.get('command_s') is not None else None, 2)}</td>"
                 f"<td>{_f(n.get('baseline_w'), 3)}</td><td>{_f(n.get('peak_w'), 2)}</td>"
                 f"<td>{html.escape(str(n.get('from') or '-'))}</td>"
                 f"<td style=text-align:left>{_why(why)}</td></tr>")
    h.append("</table>")
    return "\n".join(h)


def io_series(ms: list[dict], power_state_of: dict) -> dict:
    """Energy per I/O (uJ) over I/O size (bytes) per power state and kind: {"PS0 read": [(bytes, uJ)]}."""
    sizes = {"KiB": 1024, "MiB": 1024 * 1024}
    out: dict = {}
    for m in ms:
        if m["name"] != "io.energy_per_io" or m["value"] is None:
            continue
        w = str(_notes(m).get("class") or "").split()
        if len(w) < 3 or w[2] not in sizes:
            continue
        ps = power_state_of.get(m["step"])
        out.setdefault(f"PS{ps} {w[0]}", []).append((int(w[1]) * sizes[w[2]], m["value"] * 1e6))
    return {k: sorted(v) for k, v in out.items()}


def section(ms: list[dict], out, power_state_of: dict) -> list[str]:
    """The sweep report's section (with the energy-per-I/O plot when there is one)."""
    body = tables(ms)
    if not body:
        return []
    h = ["<h2 id=commands>Commands on the drive's clock</h2>", body]
    series = io_series(ms, power_state_of)
    if series and plot_io(series, out / "energy_per_io.png"):
        sizes = _sizes(series)
        over = "over I/O size" if len(sizes) > 1 else f"at {_size(sizes[0])}"
        h.append(f"<figure><img src=energy_per_io.png alt='energy per I/O {over}'><figcaption>Energy per "
                 f"I/O (uJ, above idle) {over}, per power state and kind</figcaption></figure>")
    return h


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 1024} KiB"


def _sizes(series: dict) -> list[int]:
    """The I/O sizes the series hold, smallest first."""
    return sorted({p[0] for v in series.values() for p in v})


def plot_io(series: dict, path) -> bool:
    """uJ per I/O over I/O size (log-log), a line per power state and kind (at one size, a bar each);
    False without a point."""
    if not any(series.values()):
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = _sizes(series)
    if len(xs) == 1:            # one I/O size: a bar each, not dots stacked on one x where 109 hides 111
        _bars_at_one_size(ax, series, xs[0])
    else:
        _lines_over_size(ax, series, xs)
    ax.set_ylabel("uJ per I/O above idle")
    fig.tight_layout()
    with owned.open_owned(path, "wb") as f:
        fig.savefig(f, dpi=100, format="png")
    plt.close(fig)
    return True


def _lines_over_size(ax, series: dict, xs: list[int]) -> None:
    for name, pts in sorted(series.items()):
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    if min(p[1] for v in series.values() for p in v) > 0:
        ax.set_yscale("log")
    else:
        ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    ax.set_xticks(xs)
    ax.set_xticklabels([_size(x) for x in xs])
    ax.set_xlabel("I/O size")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _bars_at_one_size(ax, series: dict, size: int) -> None:
    """uJ per I/O of each power state and kind at the one I/O size, a labelled bar each (the mean of
    its steps when a plan repeats one)."""
    names = sorted(series)
    vals = [sum(v for _, v in series[n]) / len(series[n]) for n in names]
    bars = ax.bar(range(len(names)), vals, color=[f"C{k % 10}" for k in range(len(names))])
    ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_xlabel(f"{_size(size)} I/O, per power state and kind")
    ax.grid(alpha=0.3, axis="y")


def _apst_table(settle: list[dict], lat: list[dict]) -> str:
    """The APST moves (sweep/command_trace.py's apst rows, paired in order per step): no command marks
    them, so each is timed from when it was due (the last traced I/O completion + ITPT); a move the
    table does not give (apst.unpredicted_s) is a row of its own in time order, flagged, with why."""
    h = ["<h3 id=apst-transitions>APST moves timed from the rails</h3><p>The drive's own power-state changes "
         "(APST, NVMe base spec 2.0 5.27.1.5, Set Features FID 0Ch): from when each was due (the last traced I/O "
         "completion, or entering the state, + ITPT of the state's APST entry) to the rails leaving the old level "
         "(latency) and settling at the new one, beside EXLAT(old) + ENLAT(new). A rails step in idle the table "
         "does not give (before ITPT, from a state it moves nowhere, or to a level nearer another state's IDLP) is "
         "<b>not as the table predicts</b>: timed from where it began, with why.</p><table><tr><th>step</th>"
         "<th>from</th><th>to</th><th>ITPT ms</th><th>due at s</th><th>latency ms</th><th>settle ms</th>"
         "<th>EXLAT + ENLAT ms</th><th>verdict</th><th>W before</th><th>W after</th><th>why</th></tr>"]
    lats: dict = {}
    for m in lat:
        lats.setdefault(m["step"], []).append(m)
    seen: dict = {}
    rows = []
    for m in settle:
        n = _notes(m)
        predicted = m["name"] != "apst.unpredicted_s"
        if predicted:
            k = seen[m["step"]] = seen.get(m["step"], -1) + 1
            la = lats.get(m["step"], [])[k]["value"] if k < len(lats.get(m["step"], [])) else None
            settle_ms = m["value"] * 1e3 if m["value"] is not None else None
            due = _f(n.get("expected_s"), 4)
        else:
            la, settle_ms = None, None
            due = f"not due; began {_f(n.get('expected_s'), 4)}"
        fr, to = n.get("from_ps"), n.get("to_ps")
        cls = "" if predicted else " class=unpredicted"
        rows.append((m["step"], n.get("expected_s") or 0.0,
                     f"<tr{cls}><td style=text-align:left>{html.escape(m['step'])}</td>"
                     f"<td>PS{_ps(fr)}</td><td>PS{_ps(to)}</td>"
                     f"<td>{_f(n.get('itpt_ms'), 0)}</td><td>{due}</td>"
                     f"<td>{_f(la * 1e3 if la is not None else None, 2)}</td><td>{_f(settle_ms, 2)}</td>"
                     f"<td>{_f(m['upper'] * 1e3 if m['upper'] is not None else None, 1)}</td>"
                     f"<td class={html.escape(m['outcome'])}><b>{html.escape(m['outcome'])}</b></td>"
                     f"<td>{_f(n.get('before_w'), 2)}</td><td>{_f(n.get('after_w'), 2)}</td>"
                     f"<td style=text-align:left>{'' if predicted else '<b>not as the table predicts</b>: '}"
                     f"{_why(n.get('why'))}</td></tr>"))
    order = {st: k for k, st in enumerate(dict.fromkeys(r[0] for r in rows))}
    h += [r[2] for r in sorted(rows, key=lambda r: (order[r[0]], r[1]))]
    h.append("</table>")
    return "".join(h)


def apst_marks(ms: list[dict], step: str) -> list[tuple[float, str, bool]]:
    """(capture seconds, label, predicted) of each APST move stored for ``step``: where the step's trace
    draws it as it draws a commanded change (results/step_trace.py); a predicted move at the moment the
    rails left the old level (due + latency), one the table does not give where it began."""
    lat = [m for m in ms if m["step"] == step and m["name"] == "apst.entry_latency_s"]
    out = []
    k = 0
    for m in ms:
        if m["step"] != step or m["name"] not in ("apst.rails_settle_s", "apst.unpredicted_s"):
            continue
        n = _notes(m)
        t = n.get("expected_s")
        if not isinstance(t, (int, float)):
            continue
        label = f"APST PS{_ps(n.get('from_ps'))}->PS{_ps(n.get('to_ps'))}"
        if m["name"] == "apst.unpredicted_s":
            out.append((float(t), label + " not in table", False))
            continue
        la = lat[k]["value"] if k < len(lat) else None
        k += 1
        out.append((float(t) + (la if isinstance(la, (int, float)) and math.isfinite(la) else 0.0), label, True))
    return sorted(out)


def _ps(v) -> str:
    return "?" if v is None else str(v)
