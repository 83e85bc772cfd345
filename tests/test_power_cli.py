"""`powerrig power off|on|cycle|sequence` on a virtual rig (issue 29): through the guarded door only."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from powerrig.interposer.client import Interposer


@pytest.fixture
def rig(simdir):
    r = run_cli("sim", "start", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _status(port):
    with Interposer.open(port) as dev:
        return dev.power_status()


def test_cycle_and_sequence_run_for_the_named_drive(rig):
    r = run_cli("power", "cycle", "--json", "--port", rig["port"], "--serial", rig["serial"], "--off-ms", "30",
                "--watchdog-ms", "5000")
    assert r.returncode == 0, r.stderr
    edges = json.loads(r.stdout)["edges"]
    assert [(e["output"], e["level"]) for e in edges] == [("12V", 0), ("12V", 1)]
    assert edges[1]["requested"] - edges[0]["requested"] == 30000 // 4
    r = run_cli("power", "sequence", "--json", "--port", rig["port"], "--serial", rig["serial"], "--watchdog-ms", "5000",
                "--actions", '[{"output": "PERST", "level": 1, "after_us": 2000}, '
                             '{"output": "PERST", "level": 0, "after_us": 10000}]')
    assert r.returncode == 0, r.stderr
    assert [e["output"] for e in json.loads(r.stdout)["edges"]] == ["PERST", "PERST"]
    st = _status(rig["port"])
    assert st["enabled"] is False and st["state"] == {"12V": 1, "3V3": 1, "PERST": 0, "PWRDIS": 0}


@pytest.mark.parametrize("args, says", [
    (["cycle", "--serial", "WRONG"], "serial is"),
    (["sequence", "--actions", "[{\"output\": \"5V\", \"level\": 0}]"], "is not {output"),
    (["sequence", "--actions", "nope"], "--actions is not a readable JSON list"),
    (["sequence"], "sequence needs --actions"),
    (["cycle", "--off-ms", "0"], "--off-ms must be"),
    (["cycle", "--watchdog-ms", "5"], "--watchdog-ms must be"),
])
def test_refusals_are_one_line_and_switch_nothing(rig, args, says):
    base = ["power", args[0], "--port", rig["port"]]
    if "--serial" not in args:
        base += ["--serial", rig["serial"]]
    r = run_cli(*base, *args[1:])
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == ""
    st = _status(rig["port"])
    assert st["enabled"] is False and st["state"]["12V"] == 1


def test_never_on_the_hosts_own_boot_drive(rig):
    with open(rig["host"]["mounts"], "a") as f:          # the virtual host now runs from the drive
        f.write(f"{rig['namespaces'][0]} / ext4 rw 0 0\n")
    r = run_cli("power", "off", "--port", rig["port"], "--serial", rig["serial"], "--seconds", "0.1")
    assert r.returncode == 2 and "boot device" in r.stderr, r.stderr
    assert _status(rig["port"])["enabled"] is False
