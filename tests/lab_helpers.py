"""What the lab tests share: labgrid's own virtualenv (.venv-lab, built by scripts/setup.sh), the
documented ser2net and exporter YAML (taken from docs/scale.md, so the tests run what the docs say),
ser2net itself, and a missing piece that fails under CI=true instead of skipping."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAB_BIN = Path(os.environ.get("POWERRIG_LAB_VENV", REPO / ".venv-lab")) / "bin"
SER2NET = shutil.which("ser2net") or ("/usr/sbin/ser2net" if os.path.exists("/usr/sbin/ser2net") else None)
DOC = REPO / "docs" / "scale.md"


def need(ok, why: str) -> None:
    """Skip without it on a developer's machine; fail under CI=true, where setup.sh installs it."""
    if not ok:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(f"{why} (scripts/setup.sh installs it)")


def lab_bin() -> Path:
    need((LAB_BIN / "labgrid-client").exists(), f"labgrid's virtualenv {LAB_BIN.parent} is missing")
    return LAB_BIN


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def doc_yaml(marker: str) -> str:
    """The ```yaml block of docs/scale.md that contains ``marker``."""
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"docs/scale.md has {len(found)} yaml blocks with {marker!r}"
    return found[0]


def ser2net_config(device: str, host: str, port: int) -> str:
    """The documented ser2net connection, for this device, listening on host:port."""
    doc = doc_yaml("/etc/ser2net.yaml")
    text, n = re.subn(r"tcp,7001", f"tcp,{host},{port}", doc)
    text, m = re.subn(r"/dev/serial/by-id/\S+?(?=,)", device, text)
    assert n == 1 and m == 1, doc
    return text


def start_ser2net(cfg: Path, prefix: list[str] = ()) -> subprocess.Popen:
    need(SER2NET, "ser2net is not installed")
    return subprocess.Popen([*prefix, SER2NET, "-n", "-d", "-c", str(cfg), "-P", str(cfg.with_suffix(".pid"))],
                            stdout=open(cfg.with_suffix(".log"), "w"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)


def wait_listening(host: str, port: int, proc: subprocess.Popen, prefix: list[str] = (),
                   timeout: float = 30.0) -> None:
    """Until host:port accepts (probed from inside the namespace ``prefix`` enters, if any)."""
    deadline = time.monotonic() + timeout
    probe = [*prefix, "bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"]
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[len(prefix)]} exited with {proc.returncode}")
        if subprocess.run(probe, capture_output=True, timeout=10).returncode == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on {host}:{port} within {timeout} s")


def stop(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
