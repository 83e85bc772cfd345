"""The interposer through a real RFC 2217 server: ser2net (Debian's, as a labgrid exporter runs it) in
front of the simulated interposer's pty, streamed at the 100 us interval with no loss."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import POWERRIG, run_cli
from powerrig.core.errors import LinkError
from powerrig.interposer.client import Interposer

SER2NET = shutil.which("ser2net") or ("/usr/sbin/ser2net" if os.path.exists("/usr/sbin/ser2net") else None)
SECONDS = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"ser2net exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"ser2net did not listen on {port} within {timeout} s")


@pytest.fixture
def ser2net(sim, tmp_path):
    """(sim, rfc2217 URL): ser2net serving the simulated interposer's pty as RFC 2217."""
    if SER2NET is None:
        pytest.skip("ser2net is not installed (apt-get install ser2net; scripts/setup.sh does)")
    s = sim()
    port = _free_port()
    cfg = tmp_path / "ser2net.yaml"
    # the same connection a labgrid exporter's ser2net gets for a USB serial port
    cfg.write_text("connection: &interposer\n"
                   f"  accepter: telnet(rfc2217),tcp,127.0.0.1,{port}\n"
                   f"  connector: serialdev,{s.port},115200n81,local\n"
                   "  options:\n    kickolduser: true\n")
    log = open(tmp_path / "ser2net.log", "w")
    proc = subprocess.Popen([SER2NET, "-n", "-d", "-c", str(cfg), "-P", str(tmp_path / "ser2net.pid")],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        _wait_listening(port, proc)
        # ser2net gives no answer to the RFC 2217 'set control' pyserial sends: do not wait for one
        yield s, f"rfc2217://127.0.0.1:{port}?ign_set_control"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_stream_at_100us_through_ser2net_without_loss(ser2net):
    s, url = ser2net
    r = subprocess.run([*POWERRIG, "stream", "--port", url, "--seconds", str(SECONDS), "--interval-us", "100",
                        "--json", "--quiet"], capture_output=True, text=True, timeout=300)
    truth = s.stop()
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["port"] == url
    assert summary["samples"] == SECONDS * 10_000, summary
    assert summary["end_index"] - summary["first_index"] == SECONDS * 10_000 * 100 // 4
    assert {k: summary[k] for k in ("dropped_frames", "gaps", "gap_intervals", "overruns", "crc_errors",
                                    "bad_headers", "bad_bytes", "malformed_frames")} == \
        dict.fromkeys(("dropped_frames", "gaps", "gap_intervals", "overruns", "crc_errors", "bad_headers",
                       "bad_bytes", "malformed_frames"), 0), summary
    assert summary["frames"] > 0 and truth["injected"]["lost_frames"] == 0


def test_interposer_open_and_commands_through_ser2net(ser2net):
    _s, url = ser2net
    with Interposer.open(url, timeout=10) as dev:
        assert dev.describe()["device"] == dev.description["device"]
        assert dev.status()["state"] != "streaming"


def test_a_plan_names_the_interposer_by_rfc2217_url():
    from powerrig.sweep.plan import parse

    plan = parse('name = "t"\npower_states = [0]\n[rig]\nport = "rfc2217://rack3:7001"\n'
                 '[[workload]]\nname = "r"\nrw = "read"\nbs = "128k"\n')
    assert plan.rig.port == "rfc2217://rack3:7001" and not plan.rig.sim_profile


def test_nothing_listening_is_one_line():
    with pytest.raises(LinkError) as e:
        Interposer.open(f"rfc2217://127.0.0.1:{_free_port()}")
    assert "\n" not in str(e.value) and "rfc2217://127.0.0.1" in str(e.value)
    r = run_cli("stream", "--port", f"rfc2217://127.0.0.1:{_free_port()}", "--seconds", "1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
