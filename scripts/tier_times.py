"""Per-tier test times from a pytest JUnit XML (docs/testing.md, "Per-tier times"):

    .venv/bin/python -m pytest -p no:cacheprovider --junitxml=out/junit.xml
    .venv/bin/python scripts/tier_times.py out/junit.xml

Each test case counts once: in its file's tier from tests/tiers.toml, or in postgres when it ran on
PostgreSQL (a [postgresql] parameter of results_db). Prints a Markdown table for docs/testing.md,
then one JSON line {tier: {"tests": n, "seconds": s, "cpu_seconds": c}}. A test file not in the
registry is its own row. Several JUnit files (make test's parallel and serial runs) are summed as one
run; --merge writes them as one JUnit file. The CPU column is the tests' cpu_s properties
(tests/conftest.py): pytest's and its waited-for children's CPU time, so wall-clock waits show.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import tier_registry  # noqa: E402

UNLISTED = "(not in tests/tiers.toml)"


def case_tier(case: ET.Element, tier_of: dict[str, str]) -> str:
    """The tier one <testcase> is counted in (pytest writes classname "tests.test_x[.TestClass]")."""
    parts = case.get("classname", "").split(".")
    module = next((p for p in parts if p.startswith("test_")), None)
    params = re.search(r"\[(.*)\]$", case.get("name", ""))
    if params and "postgresql" in re.split(r"[-_,]", params.group(1)):
        return tier_registry.POSTGRES
    return tier_of.get(f"{module}.py", UNLISTED) if module else UNLISTED


def tier_times(junit: Path, tiers: dict[str, dict]) -> dict[str, dict]:
    """{tier: {"tests": count, "seconds": summed time}} in the registry's order, over every test case."""
    tier_of = tier_registry.tier_of_file(tiers)
    out = {name: {"tests": 0, "seconds": 0.0, "cpu_seconds": 0.0} for name in tiers}
    for case in ET.parse(junit).getroot().iter("testcase"):
        row = out.setdefault(case_tier(case, tier_of), {"tests": 0, "seconds": 0.0, "cpu_seconds": 0.0})
        row["tests"] += 1
        row["seconds"] += float(case.get("time") or 0.0)
        row["cpu_seconds"] += sum(float(p.get("value") or 0.0) for p in case.iter("property")
                                  if p.get("name") == "cpu_s")
    return out


def summed(runs: list[dict[str, dict]]) -> dict[str, dict]:
    """Several runs' tier rows added up (make test's parallel run, then its serial one)."""
    out: dict[str, dict] = {}
    for times in runs:
        for name, row in times.items():
            acc = out.setdefault(name, {"tests": 0, "seconds": 0.0, "cpu_seconds": 0.0})
            for k in acc:
                acc[k] += row[k]
    return out


def wall_seconds(junit: Path) -> float:
    """The run's own wall time, as pytest wrote it on its <testsuite> (collection included)."""
    return sum(float(s.get("time") or 0.0) for s in ET.parse(junit).getroot().iter("testsuite"))


def per_file_seconds(junits: list[Path]) -> dict[str, float]:
    """{test file name: its test cases' summed time} over every run, to a tenth of a second."""
    out: dict[str, float] = {}
    for j in junits:
        for case in ET.parse(j).getroot().iter("testcase"):
            module = next((p for p in case.get("classname", "").split(".") if p.startswith("test_")), None)
            if module:
                out[f"{module}.py"] = out.get(f"{module}.py", 0.0) + float(case.get("time") or 0.0)
    return {k: round(v, 1) for k, v in out.items()}


def merge(junits: list[Path], out: Path) -> None:
    """One JUnit file holding every run's <testsuite>, for whatever reads out/junit.xml."""
    root = ET.Element("testsuites")
    for j in junits:
        got = ET.parse(j).getroot()
        root.extend(got.iter("testsuite") if got.tag == "testsuites" else [got])
    out.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)


def mmss(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}:{s:02d}"


def table(times: dict[str, dict], tiers: dict[str, dict]) -> str:
    lines = ["| tier | real-time | run | tests | time (min:s) | CPU (min:s) |", "|---|---|---|---|---|---|"]
    for name, row in times.items():
        rt = "yes" if tiers.get(name, {}).get("realtime") else ("no" if name in tiers else "?")
        run = "parallel" if tiers.get(name, {}).get("parallel") else ("alone" if name in tiers else "?")
        lines.append(f"| {name} | {rt} | {run} | {row['tests']} | {mmss(row['seconds'])} | {mmss(row['cpu_seconds'])} |")
    total = {k: sum(r[k] for r in times.values()) for k in ("tests", "seconds", "cpu_seconds")}
    lines.append(f"| all | | | {total['tests']} | {mmss(total['seconds'])} | {mmss(total['cpu_seconds'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", type=Path, nargs="+", help="the JUnit XML(s) pytest --junitxml wrote")
    ap.add_argument("--tiers", type=Path, default=tier_registry.TIERS_TOML)
    ap.add_argument("--merge", type=Path, metavar="OUT", help="also write the runs as one JUnit XML here")
    ap.add_argument("--file-seconds", type=Path, metavar="OUT",
                    help="also write each test file's summed time as JSON (tests/file_seconds.json orders the "
                         "next run's files slowest first)")
    a = ap.parse_args(argv)
    try:
        tiers = tier_registry.load(a.tiers)
        times = summed([tier_times(j, tiers) for j in a.junit])
        walls = [wall_seconds(j) for j in a.junit]
        if a.merge:
            merge(a.junit, a.merge)
        if a.file_seconds:
            a.file_seconds.write_text(json.dumps(per_file_seconds(a.junit), indent=0, sort_keys=True) + "\n")
    except (OSError, ET.ParseError) as e:
        print(f"tier_times: cannot read {' '.join(map(str, a.junit))}: {e}", file=sys.stderr)
        return 2
    print(table(times, tiers))
    if len(walls) > 1:
        print("wall: " + " + ".join(f"{j.name} {mmss(w)}" for j, w in zip(a.junit, walls)) + f" = {mmss(sum(walls))}")
    else:
        print(f"wall: {mmss(walls[0])}")
    print(json.dumps({k: {"tests": v["tests"], "seconds": round(v["seconds"], 1),
                          "cpu_seconds": round(v["cpu_seconds"], 1)} for k, v in times.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
