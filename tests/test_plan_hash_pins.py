"""Plan.hash is a stored sweep's identity (resume, compare): copies of every fixture plan and of stored
plan shapes keep the hash they had when pinned (tests/data/pinned_plans), whatever sweep/plan.py becomes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from powerrig.sweep.plan import load

PINNED = Path(__file__).resolve().parent / "data" / "pinned_plans"
HASHES = json.loads((PINNED / "hashes.json").read_text())


def test_every_pinned_plan_has_a_hash_and_every_fixture_plan_was_pinned():
    on_disk = {p.name for p in PINNED.glob("*.toml")}
    assert on_disk == set(HASHES), "tests/data/pinned_plans: every copy needs its pinned hash and vice versa"
    fixtures = {p.name for p in (PINNED.parents[2] / "fixtures" / "plans").glob("*.toml")}
    assert {"d5-p5336-power-states.toml", "datasheet-validation.toml", "referee.toml"} <= fixtures & on_disk


@pytest.mark.parametrize("name", sorted(HASHES))
def test_plan_hash_is_unchanged(name):
    assert load(PINNED / name).hash == HASHES[name], (
        f"{name}: Plan.hash changed: stored sweeps of this plan would no longer resume")


def test_the_pin_catches_a_changed_value(tmp_path):
    text = (PINNED / "stored-minimal.toml").read_text().replace("measure_s = 2.0", "measure_s = 2.5")
    (tmp_path / "p.toml").write_text(text)
    assert load(tmp_path / "p.toml").hash != HASHES["stored-minimal.toml"]
