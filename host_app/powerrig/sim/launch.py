"""Start a virtual interposer as its own process, the way a user does (`powerrig sim interposer`).

Used by `--port sim` on the command line, by the demo and by the tests: the simulator then runs
beside the host code exactly as a board would, behind a real pseudo-terminal.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import signal
import subprocess
import sys

from powerrig.core.errors import LinkError

PR_SET_PDEATHSIG = 1        # <linux/prctl.h>


def _die_with_parent(parent_pid: int):
    """preexec_fn: the kernel sends the child SIGTERM when its parent dies, however it dies (SIGKILL
    and SIGTERM run no atexit handler). Linux only; elsewhere atexit is all there is. The parent
    is the thread that started the child: start it from a thread that lives as long as it should."""
    def arm() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
                return
        except (OSError, AttributeError):
            return
        if os.getppid() != parent_pid:      # the parent died before prctl took effect
            os._exit(0)
    return arm


def start_interposer(*args: str, timeout: float = 20.0) -> tuple[str, subprocess.Popen]:
    """(pty path, process). The process ends with this interpreter: at exit, and on Linux also when
    it is killed."""
    import select

    proc = subprocess.Popen([sys.executable, "-m", "powerrig", "sim", "interposer", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=_die_with_parent(os.getpid()) if sys.platform.startswith("linux") else None)
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

