"""Start a virtual interposer as its own process, the way a user does (`powerrig sim interposer`).

Used by `--port sim` on the command line, by the demo and by the tests: the simulator then runs
beside the host code exactly as a board would, behind a real pseudo-terminal.
"""
from __future__ import annotations

import atexit
import subprocess
import sys

from powerrig.errors import LinkError

SIM_PORT = "sim"


def start_interposer(*args: str, timeout: float = 20.0) -> tuple[str, subprocess.Popen]:
    """(pty path, process). The process is terminated when this interpreter exits."""
    import select

    proc = subprocess.Popen([sys.executable, "-m", "powerrig", "sim", "interposer", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    port = proc.stdout.readline().strip() if ready else ""
    if not port.startswith("/dev/"):
        proc.kill()
        proc.wait()
        raise LinkError(f"the simulated interposer did not start within {timeout:g} s "
                        f"(run `powerrig sim interposer` to see why)")
    atexit.register(stop, proc)
    return port, proc


def stop(proc: subprocess.Popen) -> None:
    if proc.stdout:
        proc.stdout.close()
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()


def resolve_port(port: str) -> str:
    """`sim` means: start a virtual interposer and use its pty."""
    if port == SIM_PORT:
        return start_interposer()[0]
    return port
