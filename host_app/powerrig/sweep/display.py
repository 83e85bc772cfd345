"""Progress displays for a sweep: a rich progress bar on a terminal, plain lines otherwise.

Both are callables taking the engine's progress dicts (powerrig.sweep.engine), so the CLI and the
demo share them; the engine itself only calls back.
"""
from __future__ import annotations

import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from powerrig.analysis import verdicts
from powerrig.core.shown import printable


def _shown(d: dict) -> dict:
    """The event's names and notes as a terminal may show them (a plan or drive name is foreign text)."""
    return {k: printable(v) for k, v in d.items()}


def for_stdout():
    """The display that suits stdout: rich on a terminal, plain lines in logs and pipes."""
    return RichProgress() if sys.stdout.isatty() else PlainProgress()


class PlainProgress:
    """One line per event: for logs, CI and pipes."""

    def __call__(self, d: dict) -> None:
        d = _shown(d)
        k = d["kind"]
        el = hms(d.get("elapsed_s", 0))
        if k == "start":
            print(f"sweep {d['plan']!r} (plan {d['plan_hash']}, run {d['run']}): {d['steps']} steps, "
                  f"{d['done']} already done, ETA {hms(d['eta_s'])}; output {d['out']}", flush=True)
        elif k == "step":
            print(f"[{el}] step {d['n']}/{d['m']} {d['name']} (ETA {hms(d['eta_s'])})", flush=True)
        elif k == "step-done":
            f = d["figures"]
            print(f"[{el}] step {d['n']}/{d['m']} {d['name']} {d['status']}: " + _figs(f), flush=True)
        elif k == "note":
            print(f"[{el}] {d['text']}", flush=True)
        elif k == "done":
            print(f"sweep done in {el}: record {d['record']}", flush=True)
            for line in verdict_lines(d):
                print(line, flush=True)

    def close(self) -> None:
        pass


class RichProgress:
    """A live progress bar (rich) with the current step, watts, MiB/s and lost frames."""

    def __init__(self):
        self.console = Console()
        self.p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[live]}"),
                          console=self.console, transient=False)
        self.task = None
        self.p.start()

    def __call__(self, d: dict) -> None:
        d = {k: escape(v) if isinstance(v, str) else v for k, v in _shown(d).items()}     # no [markup] either
        k = d["kind"]
        if k == "start":
            self.console.print(f"sweep [bold]{d['plan']}[/] (plan {d['plan_hash']}, run {d['run']}): {d['steps']} steps,"
                               f" {d['done']} already done; output {d['out']}")
            self.task = self.p.add_task("starting", total=d["steps"], completed=d["done"], live="")
        elif self.task is None:
            return
        elif k == "step":
            self.p.update(self.task, description=f"step {d['n']}/{d['m']} {d['name']}")
        elif k == "live":
            w, m = d.get("watts"), d.get("mib_s")
            self.p.update(self.task, live=f"{w or 0:6.2f} W  {m or 0:7.0f} MiB/s  lost {d.get('lost_frames', 0)}")
        elif k == "step-done":
            self.p.advance(self.task)
            self.console.print(f"  {d['name']}: {d['status']}, " + _figs(d["figures"]))
        elif k == "note":
            self.console.print(f"  {d['text']}")
        elif k == "done":
            self.console.print(f"sweep done: record {d['record']}")
            for line in verdict_lines(d):
                self.console.print(line, markup=False, highlight=False)

    def close(self) -> None:
        self.p.stop()


# what the two words a first run is full of mean (analysis/checks.py), said once under the counts
MEANING = {"marginal": "within 5 % or the measurement's uncertainty of its limit: the limit decides nothing",
           "partial": "inside the limit, but on less data than the check asks for, a shorter phase or gaps: "
                      "not yet a pass"}


def verdict_lines(d: dict) -> list[str]:
    """The run's verdict summary (the "done" event's, analysis/verdicts.py) as terminal lines, every
    name in them made printable (a plan's or a drive's text is foreign), with what marginal and partial
    mean when there are some."""
    s = d.get("verdicts")
    if not s:
        return []
    out = [printable(x) for x in verdicts.lines(s)]
    said = [f"  ({k}: {MEANING[k]})" for k in MEANING if s.get("counts", {}).get(k)]
    return out[:1] + said + out[1:]


def _figs(f: dict) -> str:
    parts = []
    for key, unit in (("power.idle", "W idle"), ("power.mean", "W"), ("throughput.mib_s", "MiB/s"),
                      ("efficiency.mib_s_per_w", "MiB/s/W")):
        if f.get(key) is not None:
            parts.append(f"{f[key]:.2f} {unit}" if unit.startswith("W") else f"{f[key]:.1f} {unit}")
    return ", ".join(parts) or "no figures"


def hms(s: float) -> str:
    s = int(max(0, s or 0))
    return f"{s // 3600:d}:{s // 60 % 60:02d}:{s % 60:02d}"
