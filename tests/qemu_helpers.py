"""Shared by the QEMU tier's tests: the QEMU drive host rig, one for the whole session (booting a TCG
guest costs 5-9 CPU-s and 8-30 s), stopped after the last test that uses it (conftest.py's ``qemu_drive``)."""
from __future__ import annotations

import os

import pytest

FIXTURE = "qemu_drive"      # the session fixture (conftest.py) a test that needs the shared rig names
_stop: list = []            # how to stop the shared rig, while it runs


def qemu_rig(tmp_path_factory):
    """Start a QEMU rig (the Linux NVMe stack in a guest), yield its state, stop it; fails under CI=true
    when QEMU or its image is missing, skips otherwise. Use as a fixture's body."""
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
    _stop.append(lambda: simrig.stop(st["id"]))
    try:
        yield st
    finally:
        stop_shared()


def stop_shared() -> None:
    """Stop the shared rig now (idempotent): after the last test that needs it, so that the tests
    after it in a serial run have the machine to themselves."""
    while _stop:
        _stop.pop()()


def last_user(item) -> bool:
    """Is ``item`` the last test of the session that uses the shared rig?"""
    if FIXTURE not in getattr(item, "fixturenames", ()):
        return False
    items = item.session.items
    later = items[items.index(item) + 1:] if item in items else []
    return not any(FIXTURE in getattr(i, "fixturenames", ()) for i in later)
