"""Guard for destructive steps: every write workload and every format or sanitize goes through it.

A step runs only on a drive whose serial number the caller names (read with id-ctrl, recorded on the
timeline), when nothing on that drive's controller(s) is in use (a mounted filesystem, swap, a
device-mapper or md device stacked on a namespace or partition), and never on the host's boot
device. The only way around it is ``allow_unguarded=True``, which logs a WARNING and records the
override on the timeline.

Names are resolved through sysfs, not by pattern: with native NVMe multipath ``nvme0n1`` is a
namespace of *subsystem* 0, reached through controllers listed in its ``multipath/`` directory
(``nvme0c1n1`` is the path through controller nvme1). Everything the guard reads about the host
(sysfs, the mount table, swaps, /dev) comes from a :class:`HostView`, so tests and the virtual rig
give it a tree of their own: that is the real boundary.
"""
from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from powerrig.errors import PowerrigError
from powerrig.events import NOTE

logger = logging.getLogger(__name__)

_CTRL = re.compile(r"^nvme\d+$")
_NS = re.compile(r"^nvme\d+n\d+$")
_PATH = re.compile(r"^(nvme\d+)c\d+(n\d+)$")
_SUBSYS = re.compile(r"^nvme-subsys\d+$")
BOOT_MOUNTS = ("/", "/boot", "/boot/efi", "/efi", "/usr")


class GuardRefused(PowerrigError):
    """A destructive step was refused to protect data."""


@dataclass(frozen=True)
class HostView:
    """Where the guard reads the host: sysfs root, mount table, swaps, /dev (injectable for tests and
    the virtual rig)."""
    sys_root: str = "/sys"
    mounts: str = "/proc/self/mounts"
    swaps: str = "/proc/swaps"
    dev_root: str = "/dev"

    def sys(self, *parts: str) -> Path:
        return Path(self.sys_root, *parts)

    def read(self, path: str) -> str:
        try:
            return Path(path).read_text()
        except FileNotFoundError:
            return ""

    def dev_name(self, path: str) -> str:
        """Kernel name of a /dev path: links (/dev/disk/by-id, /dev/mapper) resolved on this host view."""
        name = os.path.basename(path.rstrip("/"))
        if path.startswith("/dev/"):
            local = Path(self.dev_root, path[len("/dev/"):])
            if local.is_symlink() or local.exists():
                name = os.path.basename(os.path.realpath(local))
            if path.startswith("/dev/mapper/") and not name.startswith("dm-"):
                name = self._dm_named(name) or name
        return name

    def _dm_named(self, dm_name: str) -> str | None:
        for d in self.sys("class", "block").glob("dm-*"):
            if (d / "dm" / "name").is_file() and (d / "dm" / "name").read_text().strip() == dm_name:
                return d.name
        return None


@dataclass(frozen=True)
class RemoteHostView(HostView):
    """A drive host reached over SSH (``url``): its sysfs, mount table and swaps cannot be read from
    here, so the guard refuses destructive steps on it rather than pass them unchecked."""
    url: str = ""


@dataclass(frozen=True)
class Target:
    """A drive as sysfs knows it: the namespace block device (None for a controller) and the
    controllers that reach it."""
    given: str
    namespace: str | None
    controllers: tuple[str, ...]
    nsid: int | None = None
    blocks: frozenset = field(default_factory=frozenset)   # everything on those controllers (+ holders)


def resolve(dev: str, host: HostView | None = None) -> Target:
    """Resolve /dev/nvme0, /dev/nvme0n1, /dev/nvme0n1p2, nvme0c1n1 or a /dev/disk/by-* link through sysfs."""
    host = host or HostView()
    name = host.dev_name(dev)
    if host.sys("class", "nvme", name).exists():
        ctrls = (name,)
        return Target(dev, None, ctrls, None, frozenset(_blocks_of(ctrls, host)))
    if re.fullmatch(r"ng\d+n\d+", name):       # NVMe generic char device: same numbering as the block head
        name = "nvme" + name[2:]
    blk = host.sys("class", "block", name)
    if not blk.exists():
        raise GuardRefused(f"{dev} is not a block device on this host (no {blk}): check the path; fio "
                           "would create a regular file there")
    real = Path(os.path.realpath(blk))
    if (real / "partition").exists():            # a partition lives inside its disk's directory
        real = real.parent
    name = real.name
    m = _PATH.match(name)
    if m:                                        # a multipath path device: its head is the namespace
        name = m.group(1) + m.group(2)
        real = Path(os.path.realpath(host.sys("class", "block", name)))
    parent = real.parent.name
    if _SUBSYS.match(parent):
        mp = real / "multipath"
        ctrls = tuple(sorted(Path(os.path.realpath(p)).parent.name for p in mp.iterdir())) if mp.is_dir() else ()
    elif _CTRL.match(parent):
        ctrls = (parent,)
    else:
        raise GuardRefused(f"{dev} ({name}) is not an NVMe namespace (sysfs puts it under {parent}); "
                           "the rig drives NVMe devices only")
    if not ctrls:
        raise GuardRefused(f"{dev}: sysfs lists no controller for namespace {name}; is the drive still there?")
    nsid_file = real / "nsid"
    nsid = int(nsid_file.read_text().strip()) if nsid_file.is_file() else int(name.rsplit("n", 1)[1])
    return Target(dev, name, ctrls, nsid, frozenset(_blocks_of(ctrls, host)))


def _blocks_of(ctrls: tuple[str, ...], host: HostView) -> set[str]:
    """Every namespace (multipath heads included), partition and stacked holder on these controllers."""
    disks = set()
    for c in ctrls:
        cdir = Path(os.path.realpath(host.sys("class", "nvme", c)))
        for child in cdir.iterdir() if cdir.is_dir() else ():
            if _NS.match(child.name):
                disks.add(child.name)
            else:
                m = _PATH.match(child.name)
                if m:
                    disks.add(m.group(1) + m.group(2))
    out = set()
    for d in disks:
        out.add(d)
        ddir = Path(os.path.realpath(host.sys("class", "block", d)))
        out |= {p.name for p in ddir.glob(f"{d}p*") if (p / "partition").exists()}
    todo = list(out)
    while todo:
        b = todo.pop()
        holders = host.sys("class", "block", b, "holders")
        for h in holders.iterdir() if holders.is_dir() else ():
            if h.name not in out:
                out.add(h.name)
                todo.append(h.name)
    return out


def in_use(target: Target, host: HostView | None = None) -> list[tuple[str, str]]:
    """(device, what uses it) for every mount or swap on the target's controllers."""
    host = host or HostView()
    hits = []
    for line in host.read(host.mounts).splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("/dev/") and host.dev_name(parts[0]) in target.blocks:
            hits.append((parts[0], parts[1].replace("\\040", " ")))
    for line in host.read(host.swaps).splitlines()[1:]:
        parts = line.split()
        if parts and parts[0].startswith("/dev/") and host.dev_name(parts[0]) in target.blocks:
            hits.append((parts[0], "swap"))
    return hits


def check_destructive(dev: str, plan_serial: str | None, device_serial: str, host: HostView | None = None,
                      action: str = "a destructive step", target: Target | None = None) -> Target:
    """Raise GuardRefused unless dev is the named drive (by serial) and nothing on it is in use."""
    target = target or resolve(dev, host)
    if not plan_serial or not str(plan_serial).strip():
        raise GuardRefused(f"refusing {action} on {dev}: no drive serial number named (pass the serial, here "
                           f"{device_serial.strip()!r}, to allow it)")
    if str(plan_serial).strip() != device_serial.strip():
        raise GuardRefused(f"refusing {action} on {dev}: its serial is {device_serial.strip()!r}, the caller "
                           f"names {str(plan_serial).strip()!r} (wrong drive in the slot?)")
    uses = in_use(target, host)
    boot = [m for _, m in uses if m in BOOT_MOUNTS]
    if boot:
        raise GuardRefused(f"refusing {action} on {dev}: it is the host's boot device ({', '.join(boot)} "
                           "is on it); use a drive the host does not run from")
    if uses:
        raise GuardRefused(f"refusing {action} on {dev}: it is in use ({', '.join(f'{d} on {m}' for d, m in uses)}); "
                           "unmount it (and swapoff) or use another drive")
    return target


class DriveGuard:
    """The guard as the runners use it: reads serials with nvme-cli, the host through ``host``."""

    def __init__(self, nvme, host: HostView | None = None):
        self.nvme = nvme
        self.host = host or HostView()

    def check(self, dev: str, serial: str | None, action: str, allow_unguarded: bool = False) -> Target | None:
        """Pass, or raise GuardRefused; a NOTE event 'guard' records the decision either way."""
        tl = self.nvme.timeline
        ev = tl.begin(NOTE, "guard", meta={"device": dev, "action": action, "serial": serial,
                                           "allow_unguarded": allow_unguarded})
        if allow_unguarded:
            logger.warning("destructive-operation guard overridden (allow_unguarded=True): %s on %s runs "
                           "without the serial, mount and boot-device checks", action, dev)
            tl.end(ev, ok=True, overridden=True)
            return None
        try:
            if isinstance(self.host, RemoteHostView):
                self._refuse_remote(dev, serial, action)
            target = resolve(dev, self.host)
            serials = {}
            for c in target.controllers:
                serials[c] = self.nvme.id_ctrl(f"/dev/{c}").sn.strip()
            for c, sn in serials.items():
                check_destructive(dev, serial, sn, self.host, action, target)
        except PowerrigError as e:
            tl.end(ev, ok=False, error=str(e))
            raise GuardRefused(str(e)) from None
        tl.end(ev, ok=True, controllers=list(target.controllers), namespace=target.namespace, nsid=target.nsid)
        return target


    def _refuse_remote(self, dev: str, serial: str | None, action: str) -> None:
        """The serial is checked (nvme-cli runs there); what cannot be checked is said, and refused."""
        m = re.match(r"^(/dev/nvme\d+)(?:n\d+(?:p\d+)?)?$", dev)
        if m:
            sn = self.nvme.id_ctrl(m.group(1)).sn.strip()
            if not serial or str(serial).strip() != sn:
                check_destructive(dev, serial, sn, HostView(mounts="", swaps=""), action,
                                  Target(dev, None, (), None, frozenset()))
        raise GuardRefused(
            f"refusing {action} on {dev} on drive host {self.host.url}: the guard cannot read that host's "
            "sysfs, mount table and swaps over ssh, so it cannot check that nothing on the drive is mounted "
            "or swapped on, nor that it is not the boot device; give the rig a host view of the drive host "
            "(rig 'host'), or check by hand and pass allow_unguarded")


def guard_destructive(nvme, dev: str, plan_serial: str | None, host: HostView | None = None,
                      action: str = "a destructive step") -> Target | None:
    """Read the serial with nvme-cli (recorded as an event) and check it, the mounts and the boot device."""
    return DriveGuard(nvme, host).check(dev, plan_serial, action)
