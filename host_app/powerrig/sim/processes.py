"""Child processes that end with the simulator part that started them: the virtual interposer's
process (interposer/launch.py) and a QEMU guest (qemu/machine.py) share this one preexec hook.

Stopping running virtual rigs is here too, not in sim/rig.py (which re-exports it): it needs only the
registry, and `powerrig sim stop` and the tests' teardown should not import numpy and the whole
virtual rig (~0.4 s of CPU a start) to send a few signals."""
from __future__ import annotations

import ctypes
import os
import signal
import time
from subprocess import Popen, TimeoutExpired      # (reaps what sim/rig.py started; starts nothing)

from powerrig.core import rig_registry
from powerrig.core.errors import PowerrigError

PR_SET_PDEATHSIG = 1        # <linux/prctl.h>


def die_with_parent(parent_pid: int):
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


class RigError(PowerrigError):
    """A virtual rig that cannot be started, found or stopped."""


children: dict[int, Popen] = {}   # rigs this process started (sim/rig.py start; reaped on stop)
running = rig_registry.running              # rigs whose process is alive


def _alive(pid: int, rig_id: str) -> bool:
    """Is pid still *this* rig? A child of ours that has exited is not (whatever /proc says)."""
    child = children.get(pid)
    if child is not None and child.poll() is not None:
        return False
    return rig_registry.is_alive(pid, rig_id)


def stop(rig_id: str | None = None, all_: bool = False, timeout: float = 10.0) -> list[str]:
    rigs = running()
    if not all_:
        if rig_id is None:
            if len(rigs) != 1:
                raise RigError(f"{len(rigs)} virtual rigs are running; name one (`powerrig sim list`) or use --all")
            rig_id = rigs[0]["id"]
        rigs = [r for r in rigs if r["id"] == rig_id]
        if not rigs:
            raise RigError(f"no running virtual rig with id {rig_id}; see `powerrig sim list`")
    for r in rigs:
        try:
            os.kill(r["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass                            # it ended on its own: nothing to stop
    deadline = time.monotonic() + timeout
    for r in rigs:
        while time.monotonic() < deadline and _alive(r["pid"], r["id"]):
            time.sleep(0.05)
        child = children.pop(r["pid"], None)
        if child is not None:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except TimeoutExpired:
                child.kill()
                child.wait()
    return [r["id"] for r in rigs]
