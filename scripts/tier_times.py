"""Per-tier test times from a pytest JUnit XML (docs/testing.md, "Per-tier times"):

    .venv/bin/python -m pytest -p no:cacheprovider --junitxml=out/junit.xml
    .venv/bin/python scripts/tier_times.py out/junit.xml

Each test case counts once: in its file's tier from tests/tiers.toml, or in postgres when it ran on
PostgreSQL (a [postgresql] parameter of results_db). Prints a Markdown table for docs/testing.md,
then one JSON line {tier: {"tests": n, "seconds": s}}. A test file not in the registry is its own row.
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
    out = {name: {"tests": 0, "seconds": 0.0} for name in tiers}
    for case in ET.parse(junit).getroot().iter("testcase"):
        row = out.setdefault(case_tier(case, tier_of), {"tests": 0, "seconds": 0.0})
        row["tests"] += 1
        row["seconds"] += float(case.get("time") or 0.0)
    return out


def table(times: dict[str, dict], tiers: dict[str, dict]) -> str:
    lines = ["| tier | real-time | tests | time (min:s) |", "|---|---|---|---|"]
    for name, row in times.items():
        rt = "yes" if tiers.get(name, {}).get("realtime") else ("no" if name in tiers else "?")
        m, s = divmod(round(row["seconds"]), 60)
        lines.append(f"| {name} | {rt} | {row['tests']} | {m}:{s:02d} |")
    m, s = divmod(round(sum(r["seconds"] for r in times.values())), 60)
    lines.append(f"| all | | {sum(r['tests'] for r in times.values())} | {m}:{s:02d} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", type=Path, help="the JUnit XML pytest --junitxml wrote")
    ap.add_argument("--tiers", type=Path, default=tier_registry.TIERS_TOML)
    a = ap.parse_args(argv)
    try:
        tiers = tier_registry.load(a.tiers)
        times = tier_times(a.junit, tiers)
    except (OSError, ET.ParseError) as e:
        print(f"tier_times: cannot read {a.junit}: {e}", file=sys.stderr)
        return 2
    print(table(times, tiers))
    print(json.dumps({k: {"tests": v["tests"], "seconds": round(v["seconds"], 1)} for k, v in times.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
