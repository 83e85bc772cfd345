"""The verdict summary of a run (or of any measurements): counts per verdict and the rows that need a
reader's eye first (fails, marginals, partials and invalid data, each with its why), the same for the
end of a sweep, the top of every report, the web pages and the GUI. The verdicts themselves are
decided once, by powerrig.analysis.checks.judge, and stored; this only reads them."""
from __future__ import annotations

import json
import math
from collections import Counter

# worst first: the order a summary lists them and the "worst" of a step or a run
ORDER = ("fail", "marginal", "invalid", "partial", "pass", "n/a")
RANK = {v: k for k, v in enumerate(ORDER)}
NEEDS_A_LOOK = ("fail", "marginal", "invalid", "partial")


def is_judged(m: dict) -> bool:
    """A measurement that is a verdict (a limit, or an outcome other than info), not just a figure."""
    return m.get("outcome") in RANK and (m.get("upper") is not None or m.get("lower") is not None
                                         or m.get("outcome") != "info")


def why_of(m: dict) -> str:
    """The one line that says why (the first note a check stored, or a referee's "why")."""
    notes = m.get("notes")
    if not notes:
        return ""
    try:
        j = json.loads(notes)
    except (TypeError, ValueError):
        return str(notes)
    if isinstance(j, list):
        return str(j[0]) if j else ""
    if isinstance(j, dict):
        return str(j.get("why") or "")
    return ""


def _value(m: dict) -> str:
    v = m.get("value")
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{v:.4g} {m.get('units') or ''}".strip()


def summary(measurements: list[dict]) -> dict:
    """{"counts": {verdict: n} worst first, "worst": verdict or None, "total": n, "line": the counts in
    words, "look": rows to read
    first (fail, marginal, invalid, partial, worst first, each with its why; what the drive said during
    a step is among them: drive.* rows, sweep/drive_said.py)}."""
    judged = [m for m in measurements if is_judged(m)]
    counts = Counter(m["outcome"] for m in judged)
    look = sorted((m for m in judged if m["outcome"] in NEEDS_A_LOOK),
                  key=lambda m: (RANK[m["outcome"]], m.get("step") or "", m.get("name") or ""))
    worst = min(counts, key=RANK.__getitem__) if counts else None
    out = {"counts": {k: counts[k] for k in ORDER if counts.get(k)}, "worst": worst, "total": len(judged),
           "look": [{"step": m.get("step"), "name": m["name"], "phase": m.get("phase"), "outcome": m["outcome"],
                     "value": _value(m), "upper": m.get("upper"), "lower": m.get("lower"), "why": why_of(m)}
                    for m in look]}
    out["line"] = counts_line(out)          # for a face that shows one line (the GUI's sweep panel)
    return out


def counts_line(s: dict) -> str:
    """"3 fail, 2 marginal, 10 pass (of 15 verdicts)"."""
    if not s["total"]:
        return "no verdicts (no measurement with a limit)"
    return ", ".join(f"{n} {k}" for k, n in s["counts"].items()) + f" (of {s['total']} verdicts)"


def lines(s: dict, limit: int = 12) -> list[str]:
    """The summary as text lines (the end of a sweep on a terminal): the counts, then the rows to read
    first, at most ``limit`` of them."""
    out = [f"verdicts: {counts_line(s)}"]
    for r in s["look"][:limit]:
        where = f"{r['step']} " if r.get("step") else ""
        why = f": {r['why']}" if r["why"] else ""
        out.append(f"  {r['outcome']:<8} {where}{r['name']} ({r['phase'] or '-'}) {r['value']}{why}")
    if len(s["look"]) > limit:
        out.append(f"  ... and {len(s['look']) - limit} more in the report")
    return out


def by_step(measurements: list[dict]) -> dict:
    """Per step key: {"counts": {verdict: n}, "worst": verdict}."""
    out: dict = {}
    for m in measurements:
        if not is_judged(m):
            continue
        v = out.setdefault(m["step"], {"counts": Counter(), "worst": None})
        v["counts"][m["outcome"]] += 1
        if v["worst"] is None or RANK[m["outcome"]] < RANK[v["worst"]]:
            v["worst"] = m["outcome"]
    return out
