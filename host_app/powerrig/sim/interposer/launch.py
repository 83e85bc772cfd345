"""Start a virtual interposer as its own process, the way a user does (`powerrig sim interposer`).

Used by `--port sim` on the command line, by the demo and by the tests: the simulator then runs
beside the host code exactly as a board would, behind a real pseudo-terminal.
"""
from __future__ import annotations

import atexit
import os
import select
import subprocess
import sys

from powerrig.core.errors import LinkError
from powerrig.sim.processes import die_with_parent


def start_interposer(*args: str, timeout: float = 20.0) -> tuple[str, subprocess.Popen]:
    """(pty path, process). The process ends with this interpreter: at exit, and on Linux also when
    it is killed."""
    proc = subprocess.Popen([sys.executable, "-m", "powerrig", "sim", "interposer", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=die_with_parent(os.getpid()) if sys.platform.startswith("linux") else None)
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

