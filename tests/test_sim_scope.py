"""`powerrig sim list` and `sim stop --all` are about your own virtual rigs (issue 40 item 12): a rig of
another user registered in a shared folder ($POWERRIG_SIM_DIR) is neither listed, stopped nor unregistered,
and `--port sim` does not pick it. The other user's rig is a process run as `nobody` whose command line is a
rig's (what the registry checks), so only root can make one: CI runs as root."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import run_cli


@pytest.fixture
def foreign_rig(tmp_path, monkeypatch):
    if os.getuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("another user's process needs root to start")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(shared))
    nobody = 65534

    def become():
        os.setgid(nobody)
        os.setuid(nobody)
    proc = subprocess.Popen(["/bin/sh", "-c", "sleep 120; :", "powerrig.sim.rig", "feed0001"], cwd="/",
                            preexec_fn=become)
    (shared / "feed0001.json").write_text(json.dumps({"id": "feed0001", "pid": proc.pid, "port": "/dev/pts/999",
                                                      "profile": "d5-p5336", "started": time.time()}))
    yield proc, shared
    proc.kill()
    proc.wait()


def test_another_users_rig_is_not_yours(foreign_rig):
    proc, shared = foreign_rig
    assert run_cli("sim", "list", "--json").stdout.strip() == ""
    assert "no virtual rigs of yours" in run_cli("sim", "list").stdout
    r = run_cli("sim", "stop", "--all")
    assert r.returncode == 0, r.stderr
    assert proc.poll() is None and (shared / "feed0001.json").exists()     # not stopped, not unregistered
    mine = run_cli("sim", "start", "--json")
    assert mine.returncode == 0, mine.stderr
    state = json.loads(mine.stdout)
    listed = [json.loads(x)["id"] for x in run_cli("sim", "list", "--json").stdout.splitlines()]
    assert listed == [state["id"]]
    s = run_cli("stream", "--port", "sim", "--seconds", "0.5", "--json", "--quiet")
    assert s.returncode == 0 and json.loads(s.stdout)["port"] == state["port"], s.stderr
    assert run_cli("sim", "stop", "--all").returncode == 0
    assert proc.poll() is None and run_cli("sim", "list", "--json").stdout.strip() == ""
