"""Child processes that end with the simulator part that started them: the virtual interposer's
process (interposer/launch.py) and a QEMU guest (qemu/machine.py) share this one preexec hook."""
from __future__ import annotations

import ctypes
import os
import signal

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
