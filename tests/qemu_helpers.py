"""Shared by the QEMU tier's tests: one QEMU drive host rig for a module."""
from __future__ import annotations

import os

import pytest


def qemu_rig(tmp_path_factory):
    """Start a QEMU rig (the Linux NVMe stack in a guest), yield its state, stop it; fails under CI=true
    when QEMU or its image is missing, skips otherwise. Use as a module fixture's body."""
    from powerrig.sim import rig as simrig
    from powerrig.sim.qemu.image import ImageError, find

    try:
        find()
    except ImageError as e:
        if os.environ.get("CI"):
            pytest.fail(f"the QEMU drive host is missing under CI: {e}")
        pytest.skip(str(e))
    os.environ.setdefault("POWERRIG_SIM_DIR", str(tmp_path_factory.mktemp("rigs")))
    st = simrig.start(simrig.QEMU_DRIVE, owned=True)
    print(f"\nQEMU drive host booted in {st['boot_s']:.1f} s")
    yield st
    simrig.stop(st["id"])
