"""Which NVMe controllers and block devices a /dev path stands for, and what on them is in use: read
from sysfs, the mount table and swaps of one host.

Standard library only, on purpose: the destructive-operation guard (guard.py) runs this very file on
a remote drive host (``python3 - ARGS`` over ssh, the source on stdin) when the drive sits in another
machine, so the checks are made where the drive is. ``python3 sysfs.py '{"dev": ..., "host": {...}}'``
prints the probe's JSON.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

_CTRL = re.compile(r"^nvme\d+$")
_NS = re.compile(r"^nvme\d+n\d+$")
_PATH = re.compile(r"^(nvme\d+)c\d+(n\d+)$")
_SUBSYS = re.compile(r"^nvme-subsys\d+$")
BOOT_MOUNTS = ("/", "/boot", "/boot/efi", "/efi", "/usr")


class NotResolvable(Exception):
    """The path is not an NVMe drive this host knows (the guard refuses the step, saying this)."""


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
class Target:
    """A drive as sysfs knows it: the namespace block device (None for a controller) and the
    controllers that reach it."""
    given: str
    namespace: str | None
    controllers: tuple[str, ...]
    nsid: int | None = None
    blocks: frozenset = field(default_factory=frozenset)   # everything on those controllers (+ holders)
    remote_uses: tuple | None = None     # mounts and swaps, when a remote drive host's probe read them


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
        raise NotResolvable(f"{dev} is not a block device on this host (no {blk}): check the path; fio "
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
        raise NotResolvable(f"{dev} ({name}) is not an NVMe namespace (sysfs puts it under {parent}); "
                           "the rig drives NVMe devices only")
    if not ctrls:
        raise NotResolvable(f"{dev}: sysfs lists no controller for namespace {name}; is the drive still there?")
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




def link(controller: str, host: HostView | None = None) -> dict | None:
    """The PCIe link a controller trained to ({"speed": "16.0 GT/s PCIe", "width": 4}), from its PCI
    function's sysfs attributes; None when this host view has none (a function gone, a drive host's)."""
    host = host or HostView()
    dev = host.sys("class", "nvme", Path(controller).name, "device")
    speed = host.read(str(dev / "current_link_speed")).strip()
    width = host.read(str(dev / "current_link_width")).strip()
    if not speed or not width.isdigit():
        return None
    return {"speed": speed, "width": int(width)}


def is_drive(path: str) -> bool:
    """Must a write to ``path`` pass the guard? Yes for a block device or an NVMe character device
    (a generic /dev/ngXnY or a controller /dev/nvmeX), reached through any link, and for a /dev path
    this host does not have (a virtual rig's drive, or a mistake the guard refuses). Regular files (fio lays them out) and other devices
    (/dev/null) are not drives. Read on the host where the write would happen."""
    import stat
    try:
        st = os.stat(path)
    except OSError:
        return path.startswith("/dev/")
    return stat.S_ISBLK(st.st_mode) or (stat.S_ISCHR(st.st_mode) and
                                        re.fullmatch(r"ng\d+n\d+|nvme\d+", os.path.basename(os.path.realpath(path))) is not None)


def probe(dev: str, host: HostView) -> dict:
    """What the guard needs to know about dev on this host, as JSON-able data."""
    drive = is_drive(dev)
    try:
        t = resolve(dev, host)
    except NotResolvable as e:
        return {"drive": drive, "refused": str(e)}
    d = asdict(t)
    d["blocks"] = sorted(t.blocks)
    d.pop("remote_uses")
    return {"drive": drive, "target": d, "uses": in_use(t, host)}


if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    print(json.dumps(probe(args["dev"], HostView(**args.get("host", {})))))
