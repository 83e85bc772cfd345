"""Guard for destructive steps (format, precondition writes).

They run only on a device whose serial number the plan names, and never on a device with a mounted
filesystem (any namespace or partition of the controller in /proc/mounts, also through
/dev/disk/by-* links and device-mapper holders). Refusals are GuardRefused errors that say why.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from powerrig.errors import PowerrigError

_CTRL = re.compile(r"^(nvme\d+)(?:n\d+(?:p\d+)?)?$")


class GuardRefused(PowerrigError):
    """A destructive step was refused to protect data."""


def controller_of(dev: str) -> str:
    """'nvme0' for /dev/nvme0, /dev/nvme0n1, /dev/nvme0n1p2 (links resolved)."""
    name = os.path.basename(os.path.realpath(dev)) if os.path.exists(dev) else os.path.basename(dev)
    m = _CTRL.match(name)
    if not m:
        raise GuardRefused(f"{dev} is not an NVMe device path (/dev/nvmeX, /dev/nvmeXnY)")
    return m.group(1)


def _holders(block: str, sys_block: Path) -> set[str]:
    """Block devices stacked on ``block`` (dm, md), found through sysfs holders."""
    out, todo = set(), [block]
    while todo:
        b = todo.pop()
        for base in (sys_block / b / "holders", *(p / "holders" for p in (sys_block).glob(f"*/{b}"))):
            if base.is_dir():
                for h in base.iterdir():
                    if h.name not in out:
                        out.add(h.name)
                        todo.append(h.name)
    return out


def mounted_on(dev: str, mounts_text: str | None = None, sys_block: str | Path = "/sys/block") -> list[str]:
    """Mount points of filesystems on any namespace/partition of dev's controller."""
    ctrl = controller_of(dev)
    if mounts_text is None:
        mounts_text = Path("/proc/mounts").read_text()
    sys_block = Path(sys_block)
    own = re.compile(rf"^{ctrl}n\d+(p\d+)?$")
    stacked = set()
    if sys_block.is_dir():
        for b in sys_block.iterdir():
            if own.match(b.name):
                stacked |= _holders(b.name, sys_block)
    hits = []
    for line in mounts_text.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[0].startswith("/dev/"):
            continue
        src = os.path.basename(os.path.realpath(parts[0])) if os.path.exists(parts[0]) else os.path.basename(parts[0])
        if own.match(src) or src in stacked:
            hits.append(parts[1].replace("\\040", " "))
    return hits


def check_destructive(dev: str, plan_serial: str | None, device_serial: str, mounts_text: str | None = None,
                      sys_block: str | Path = "/sys/block") -> None:
    """Raise GuardRefused unless dev is the plan's drive (by serial) and nothing on it is mounted."""
    if not plan_serial or not plan_serial.strip():
        raise GuardRefused(f"refusing a destructive step on {dev}: the plan names no drive serial number "
                           f"(add the serial, here {device_serial.strip()!r}, to the plan to allow it)")
    if plan_serial.strip() != device_serial.strip():
        raise GuardRefused(f"refusing a destructive step on {dev}: its serial is {device_serial.strip()!r}, "
                           f"the plan names {plan_serial.strip()!r} (wrong drive in the slot?)")
    mounts = mounted_on(dev, mounts_text, sys_block)
    if mounts:
        raise GuardRefused(f"refusing a destructive step on {dev}: it has mounted filesystems "
                           f"({', '.join(mounts)}); unmount them or use another drive")


def guard_destructive(nvme, dev: str, plan_serial: str | None, mounts_text: str | None = None) -> None:
    """Read the serial with nvme-cli (recorded as an event) and check it and the mounts."""
    ident = nvme.id_ctrl(dev)
    check_destructive(dev, plan_serial, ident.sn, mounts_text)
