"""`make demo` sets up only what the demo needs; `make test` (and a plain `make setup`) set up every
tier (issue 40 item 8: the demo spent 5.5 of its 7 minutes on the test tiers). The Makefile's own
targets are asked which tiers scripts/setup.sh would set up (POWERRIG_SETUP_LIST=1: listed, nothing
done; PY=true: the demo and pytest themselves do not run)."""
from __future__ import annotations

import os
import subprocess

from conftest import REPO

TEST_TIERS = {"debs", "qt", "joulescope-ui", "labgrid", "qemu-mp", "board", "rp2-emulator", "qemu-nvme"}


def tiers(target: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "POWERRIG_SETUP_FOR"}
    r = subprocess.run(["make", "-s", target, "POWERRIG_SETUP_LIST=1", "PY=true"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_make_demo_sets_up_the_virtualenv_alone():
    assert tiers("demo") == {"venv"}


def test_make_test_and_setup_set_up_every_tier():
    assert tiers("test") == TEST_TIERS | {"venv"}
    assert tiers("setup") == TEST_TIERS | {"venv"}
