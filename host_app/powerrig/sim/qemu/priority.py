"""QEMU's place on this host's CPUs: it stands in for the drive host, a machine of its own.

A real drive host's controller takes a command at the doorbell and interrupts at completion whatever
else the rig's host is doing. Here QEMU's main loop (which takes each command from its submission
queue on a timer) and its vCPUs (which take the completion's interrupt) share two cores with the
virtual interposer, the recorder and whatever else runs: when they wait for the CPU, the guest
kernel's stamps of an admin command move milliseconds away from QEMU's (docs/qemu-nvme.md, "Admin
commands placed from the guest's kernel"). So QEMU runs with ``SLICE_US`` slices (Linux >= 6.12
EEVDF ``sched_attr.sched_runtime`` of a normal task: a short slice gets an earlier deadline, so a
wake-up preempts sooner, without a larger CPU share), inherited by every thread it starts; a kernel
without it leaves the slice as it was. ``POWERRIG_QEMU_SLICE_US=0`` turns it off.
``POWERRIG_QEMU_NICE=-10`` also runs it that far ahead of its parent (root): measured, no clear
gain at load 10-19, and during fio it takes the CPU from the virtual interposer in the rig process
(which stands in for hardware too), so it is off by default.
"""
from __future__ import annotations

import ctypes
import os
import struct

NICE = 0
SLICE_US = 100              # the shortest slice the kernel takes (0.1 ms; sched/syscalls.c clamps to it)
_SYS_SCHED_SETATTR = 314    # x86_64 (arch/x86/entry/syscalls/syscall_64.tbl)
_SCHED_OTHER = 0
# struct sched_attr, SCHED_ATTR_SIZE_VER0 (include/uapi/linux/sched/types.h): size, policy (u32),
# flags (u64), nice (s32), priority (u32), runtime, deadline, period (u64)
_ATTR = struct.Struct("=IIQiIQQQ")


def _env(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def settings() -> tuple[int, int]:
    """(nice relative to the parent, slice in us; 0: leave it)."""
    return _env("POWERRIG_QEMU_NICE", NICE), _env("POWERRIG_QEMU_SLICE_US", SLICE_US)


def ahead(arm, nice: int, slice_us: int):
    """preexec_fn: ``arm`` (die_with_parent's), then this process's priority and slice."""
    def run() -> None:
        arm()
        try:
            target = os.getpriority(os.PRIO_PROCESS, 0) + nice
        except OSError:
            return
        if slice_us and _setattr(target if nice else None, slice_us * 1000):
            return
        if nice:
            try:
                os.nice(nice)
            except OSError:     # not root: QEMU runs as it was (test_qemu_nvme_model holds it)
                return
    return run


def _setattr(nice: int | None, runtime_ns: int) -> bool:
    """sched_setattr(2) on this thread: a normal task with this nice (None: as it is) and slice."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        cur = os.getpriority(os.PRIO_PROCESS, 0)
        buf = ctypes.create_string_buffer(_ATTR.pack(_ATTR.size, _SCHED_OTHER, 0, cur if nice is None else nice,
                                                      0, runtime_ns, 0, 0))
        return libc.syscall(_SYS_SCHED_SETATTR, 0, buf, 0) == 0
    except (OSError, AttributeError):
        return False
