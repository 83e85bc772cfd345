"""The referee (analysis/referee.py) against virtual drives of known dishonesty (issue 38).

Runs fixtures/plans/referee.toml through the sweep engine on the simulator, once per drive profile
(sim/ssd/profiles/referee-*.toml: honest, biased +8 %, estimated-only, lagging 5 s, obeying a power limit
5 s late), and checks the
referee's verdicts against what each drive's dishonesty makes right. Meanwhile the virtual drive's own
model is read (the endpoint's ``power_model``: the true watts every 1 ms), so powerrig's own measurement
(the interposer's mean over each span the drive measured) is held to the model over the same span.

A verdict per drive and kind: ``fail`` when any window fails it, else ``pass`` when any passes, else
``n/a``. What is right (EXPECTED) follows from each drive's knob:

- honest: every verdict passes.
- biased +8 %: its average, maximum and histogram are outside its stated 5 % (fail); it measures, and its
  series follows the slot without lag (pass).
- estimated: "estimated, not measured" (fail); the estimate is the model's settled level, which in
  steady windows is the truth within the bound (average, maximum, histogram pass) and follows it at once
  (lag pass).
- lagging 5 s: IPM follows the slot 5 s late (fail); the workload window's average and histogram hold
  5 s of the idle before it (fail); its maximum is still the workload's (pass); it measures (pass). (The
  plan settles 6 s in each power state before its idle window: with less than the lag, PS2's idle window
  would report PS0's writes, its maximum would fail, and whether it does would hang on the host's load.)
- limit-late: an honest meter whose drive obeys a Power Limit (feature 23h) 5 s after it is set
  (referee.power_limit fails: more than 1 s); the others obey within 0.2 s (pass).

- every drive: its total against the sum of the slot's rails fails where its average does (rails); its
  power state descriptors (IDLP over the idle window, ACTP over the 10 s of 128 KiB writes, APW 2) are the
  model's (pass); its OCP peak capability (1.4 x MP) is above the 100 us maximum (pass); a run of ~0.3 Wh
  cannot tell a lifetime counter of whole Wh or kWh within 5 % (OLEC, OCP lifetime: n/a).

The plan runs PS0 and PS2 (a verdict per power state; a kind fails when either does).

limit_settle_error_ms_p99: per drive, the time until the slot's 100 ms means stay under the limit as
powerrig measured it, against the same figure from the model's own power over the same span.

Prints one line per verdict, then last a JSON object: verdicts_correct, verdicts_total,
avg_power_error_pct_max, limit_settle_error_ms_p99.

    .venv/bin/python benchmarks/bench_referee.py [--drives honest,biased,...] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host_app"))

from powerrig.results.sweep_report import write_sweep_report  # noqa: E402
from powerrig.results.store import ResultStore  # noqa: E402
from powerrig.sim import rig as simrig  # noqa: E402
from powerrig.sim.ssd.client import request  # noqa: E402
from powerrig.sweep.engine import Sweep  # noqa: E402
from powerrig.sweep.plan import parse  # noqa: E402

PLAN = ROOT / "fixtures" / "plans" / "referee.toml"
KINDS = {"referee.avg_power": "avg", "referee.max_power": "max", "referee.histogram": "hist",
         "referee.measured": "measured", "referee.ipm_lag": "lag", "referee.power_limit": "limit",
         "referee.rail_split": "rails", "referee.idle_power": "idlp", "referee.active_power": "actp",
         "referee.olec": "olec", "referee.ocp_lifetime": "ocp_lifetime", "referee.ocp_peak": "ocp_peak",
         "referee.ocp_max_avg": "ocp_max_avg"}
# what every drive's descriptors and counters make right: its IDLP / ACTP are the model's (pass), its peak
# capability is above the 100 us maximum and its largest 1 s average (what it reported, +8 % when biased)
# not below the slot's (pass), and a run of ~0.3 Wh cannot tell a lifetime counter of whole
# Wh (or kWh) within 5 % (n/a)
SAME = {"idlp": "pass", "actp": "pass", "olec": "n/a", "ocp_lifetime": "n/a", "ocp_peak": "pass", "ocp_max_avg": "pass"}
EXPECTED = {
    "honest": {"avg": "pass", "max": "pass", "hist": "pass", "measured": "pass", "lag": "pass", "limit": "pass",
               "rails": "pass", **SAME},
    "biased": {"avg": "fail", "max": "fail", "hist": "fail", "measured": "pass", "lag": "pass", "limit": "pass",
               "rails": "fail", **SAME},
    "estimated": {"avg": "pass", "max": "pass", "hist": "pass", "measured": "fail", "lag": "pass", "limit": "pass",
                  "rails": "pass", **SAME},
    "lagging": {"avg": "fail", "max": "pass", "hist": "fail", "measured": "pass", "lag": "fail", "limit": "pass",
                "rails": "fail", **SAME},
    "limit-late": {"avg": "pass", "max": "pass", "hist": "pass", "measured": "pass", "lag": "pass", "limit": "fail",
                   "rails": "pass", **SAME},
}


class ModelTruth:
    """The virtual drive's true power, read from its endpoint every second (the model keeps 30 s)."""

    def __init__(self, endpoint: str, dev: str):
        self.endpoint, self.dev = endpoint, dev
        self.parts: list[tuple[float, np.ndarray]] = []
        self.t_done = time.time()
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)
        self._th.start()

    def _take(self, behind_s: float = 5.0) -> None:
        # a run the drive starts is placed at the time fio asked, which the endpoint hears a moment later
        # (seconds later on a loaded host): the model is read 5 s behind, so what it holds no longer changes
        t1 = time.time() - behind_s
        if t1 - self.t_done < 0.01:
            return
        r = request(self.endpoint, {"op": "power_model", "dev": self.dev, "t0": self.t_done, "t1": t1, "step_s": 0.001})
        if r.get("ok"):
            w = np.asarray(r["watts"], dtype=float)
            self.parts.append((self.t_done, w))
            self.t_done += len(w) * 0.001

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self._take()
            except Exception as e:  # noqa: BLE001 - a missed second shows as a span without truth
                print(f"model truth: {e}", file=sys.stderr)

    def stop(self) -> None:
        self._stop.set()
        self._th.join(timeout=10)
        self._take(0.05)

    def series(self, t0: float, t1: float) -> np.ndarray | None:
        """The model's watts every 1 ms from t0 to t1 (None when it was not all read)."""
        vals = []
        for s, w in self.parts:
            t = s + (np.arange(len(w)) + 0.5) * 0.001
            vals.append(w[(t >= t0) & (t < t1)])
        v = np.concatenate(vals) if vals else np.empty(0)
        return v if len(v) >= int((t1 - t0) / 0.001 * 0.98) and len(v) else None

    def mean(self, t0: float, t1: float) -> float | None:
        vals = []
        for s, w in self.parts:
            t = s + (np.arange(len(w)) + 0.5) * 0.001
            vals.append(w[(t >= t0) & (t < t1)])
        v = np.concatenate(vals) if vals else np.empty(0)
        need = int((t1 - t0) / 0.001 * 0.98)
        return float(v.mean()) if len(v) >= need and len(v) else None


def run_drive(name: str, out: Path) -> dict:
    st = simrig.start(f"referee-{name}", owned=True)
    try:
        text = PLAN.read_text().replace('port = "sim:referee-honest"', f'port = "rig:{st["id"]}"')
        plan = parse(text, f"referee-{name}.toml")
        store = ResultStore(out / f"{name}.sqlite")
        truth = ModelTruth(st["endpoint"], st["controller"])
        t = time.time()
        try:
            run = Sweep(plan, store, out / name).run()
        finally:
            truth.stop()
        wall = time.time() - t
        write_sweep_report(store, run, out / f"{name}-report")      # the report's referee section and plots
        ms = [m for m in store.measurements(run) if m["name"] in KINDS]
        agg: dict = {}
        errs, settle = [], []
        for m in ms:
            k = KINDS[m["name"]]
            o = m["outcome"]
            agg[k] = "fail" if o == "fail" or agg.get(k) == "fail" else ("pass" if o == "pass" or agg.get(k) == "pass"
                                                                          else "n/a")
            n = json.loads(m["notes"] or "{}")
            print(f"  {name:10s} {m['name']:20s} {m['phase']:24s} claim {n.get('claim')!s:>10.10s} "
                  f"truth {n.get('truth')!s:>10.10s} error {m['value']!s:>8.8s} {m['units']:2s} bound "
                  f"{m['upper']!s:>6.6s}  {o}")
            if m["name"] == "referee.power_limit" and m["value"] is not None:
                from powerrig.analysis.referee import limit_settle_s
                w = truth.series(n["t_from"], n["t_end"])
                model = limit_settle_s(w, 0.001, n["limit_w"]) if w is not None else None
                if model is not None:
                    settle.append(1000.0 * abs(m["value"] - model))
            if m["name"] == "referee.avg_power" and n.get("truth") is not None:
                model = truth.mean(n["t0"], n["t1"])
                if model:
                    errs.append(100.0 * (n["truth"] - model) / model)
        return {"verdicts": agg, "measurement_error_pct": errs, "settle_error_ms": settle, "wall_s": wall}
    finally:
        simrig.stop(st["id"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drives", default=",".join(EXPECTED))
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    out = Path(a.out or tempfile.mkdtemp(prefix="bench-referee-"))
    out.mkdir(parents=True, exist_ok=True)
    correct = total = 0
    errs: list[float] = []
    settle: list[float] = []
    per = {}
    for name in a.drives.split(","):
        r = run_drive(name, out)
        errs += r["measurement_error_pct"]
        settle += r["settle_error_ms"]
        want = EXPECTED[name]
        got = r["verdicts"]
        for k, w in want.items():
            total += 1
            ok = got.get(k) == w
            correct += ok
            if not ok:
                print(f"WRONG: {name} {k}: the referee says {got.get(k)}, the drive's knob makes it {w}")
        per[name] = {"verdicts": got, "wall_s": round(r["wall_s"], 1),
                     "settle_error_ms": [round(e, 1) for e in r["settle_error_ms"]],
                     "measurement_error_pct": [round(e, 4) for e in r["measurement_error_pct"]]}
        print(f"{name}: {got} ({r['wall_s']:.0f} s)", flush=True)
    print(json.dumps({"drives": per}, indent=None))
    print(json.dumps({"verdicts_correct": correct, "verdicts_total": total,
                      "avg_power_error_pct_max": round(max((abs(e) for e in errs), default=float("nan")), 4),
                      "limit_settle_error_ms_p99": round(float(np.percentile(settle, 99)), 1) if settle else None,
                      "out": str(out), "host_cpus": os.cpu_count()}))
    return 0 if correct == total else 1


if __name__ == "__main__":
    sys.exit(main())
