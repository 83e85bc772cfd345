"""Which NVMe drive a path really opens, which namespaces a command touches, and what on that drive
is in use: read from sysfs, the mount table and swaps of one host.

Identity, not names: a path is resolved as the kernel will open it (``os.path.realpath`` on the host
that runs the command: links, ``//``, ``/./``, ``..``), and a block or character device is looked up
by its major:minor (``st_rdev``) in that host's ``/sys/dev/{block,char}/MAJ:MIN``. A file anywhere
that resolves to a device is that device, whatever it is named. A virtual rig's (or a test's) /dev is
a tree of its own (``HostView.dev_root``) with no device nodes: its paths are resolved inside that
tree and named through ``/sys/class``.

The drive is the NVM subsystem: a namespace shared by two controllers is one namespace (multipath
off: ``nvme0n2`` and ``nvme1n2``; on: the head ``nvme0n2`` and hidden paths ``nvme0c0n2``,
``nvme0c1n2``), and a mount through any controller's device counts.

Standard library only, on purpose: the destructive-operation guard (guard.py) runs this very file on
a remote drive host (``python3 - ARGS`` over ssh, the source on stdin) when the drive sits in another
machine, so the checks are made where the drive is. ``python3 sysfs.py '{"dev": ..., "nsid": N,
"host": {...}}'`` prints the probe's JSON.
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

_CTRL = re.compile(r"^nvme\d+$")
_NS = re.compile(r"^nvme\d+n\d+$")
_PATH = re.compile(r"^nvme(\d+)c(\d+)n(\d+)$")      # a hidden multipath path device: nvme{subsys}c{ctrl}n{ns}
_GENERIC = re.compile(r"^ng(\d+)n(\d+)$")
_SUBSYS = re.compile(r"^nvme-subsys\d+$")
BOOT_MOUNTS = ("/", "/boot", "/boot/efi", "/efi", "/usr")
BROADCAST = 0xFFFFFFFF       # NVMe NSID FFFFFFFFh: every namespace attached to the controller
MAX_LINKS = 40               # the kernel's own limit on links followed in one path walk


class NotResolvable(Exception):
    """The path is not an NVMe drive this host knows (the guard refuses the step, saying this)."""


@dataclass(frozen=True)
class HostView:
    """Where the guard reads the host: sysfs root, mount table, swaps, /dev (injectable for tests and
    the virtual rig). ``dev_root`` "/dev" is this machine's own; any other is a tree standing for a
    host's /dev (the virtual rig's, a test's, a drive host's copy)."""
    sys_root: str = "/sys"
    mounts: str = "/proc/self/mounts"
    swaps: str = "/proc/swaps"
    dev_root: str = "/dev"
    # /proc/self/mountinfo: each mount's device number (its 3rd field, MAJ:MIN), whatever path it was
    # mounted through; None: /proc/self/mountinfo beside this machine's own mount table, else none
    # (a tree without one: its mounts are matched by source name, the older way)
    mountinfo: str | None = None
    # "MAJ:MIN path" lines: the swaps' device numbers as read where they are (a copy of a drive host's
    # /proc/swaps has no device nodes to stat); None: each swap path is looked at through this view
    swapdevs: str | None = None

    @property
    def mountinfo_path(self) -> str | None:
        if self.mountinfo is not None:
            return self.mountinfo or None
        return "/proc/self/mountinfo" if self.mounts == "/proc/self/mounts" else None

    def sys(self, *parts: str) -> Path:
        return Path(self.sys_root, *parts)

    def read(self, path: str) -> str:
        try:
            return Path(path).read_text()
        except (FileNotFoundError, NotADirectoryError):
            return ""

    @property
    def own_dev(self) -> bool:
        """Is /dev this machine's own (paths resolved by the kernel here), not a tree standing for one?"""
        return os.path.normpath(self.dev_root) == "/dev"

    def canonical(self, path: str) -> str:
        """The path the kernel opens for ``path``: realpath here, or inside dev_root for a /dev tree."""
        if self.own_dev:
            return os.path.realpath(path)
        return _realpath_mapped(path, os.path.normpath(self.dev_root))

    def local(self, canonical: str) -> str:
        """Where a canonical path lives on this machine (a /dev path inside dev_root)."""
        if not self.own_dev and (canonical == "/dev" or canonical.startswith("/dev/")):
            return os.path.normpath(self.dev_root) + canonical[len("/dev"):]
        return canonical

    def dev_name(self, path: str) -> str:
        """Kernel name of a device path (a mount table's source): by major:minor when it is a node,
        else by its resolved name (/dev/disk/by-id, /dev/mapper links followed on this host view)."""
        try:
            ident = identify(path, self)
        except NotResolvable:
            return os.path.basename(path.rstrip("/"))
        d = _devno_dir(ident, self)
        if d is not None:
            return d.name
        name = os.path.basename(ident["path"])
        if ident["path"].startswith("/dev/mapper/") and not name.startswith("dm-"):
            name = self._dm_named(name) or name
        return name

    def _dm_named(self, dm_name: str) -> str | None:
        for d in self.sys("class", "block").glob("dm-*"):
            if (d / "dm" / "name").is_file() and (d / "dm" / "name").read_text().strip() == dm_name:
                return d.name
        return None


def _realpath_mapped(path: str, dev_root: str) -> str:
    """realpath where /dev is the tree ``dev_root``: each component walked, links followed (an
    absolute target into dev_root's own copy counts as /dev), '..' applied after the link it
    follows, exactly as the kernel's path walk (fs/namei.c) does."""
    if not path.startswith("/"):
        path = os.getcwd() + "/" + path
    pending = list(reversed(path.split("/")))
    parts: list[str] = []
    hops = 0
    while pending:
        c = pending.pop()
        if c in ("", "."):
            continue
        if c == "..":
            parts = parts[:-1]
            continue
        here = "/" + "/".join(parts + [c])
        real = here if not (here == "/dev" or here.startswith("/dev/")) else dev_root + here[len("/dev"):]
        if not os.path.islink(real):
            parts.append(c)
            continue
        hops += 1
        if hops > MAX_LINKS:
            raise NotResolvable(f"{path}: too many levels of symbolic links (a loop?)")
        target = os.readlink(real)
        if target == dev_root or target.startswith(dev_root + "/"):
            target = "/dev" + target[len(dev_root):]
        if target.startswith("/"):
            parts = []
        pending.extend(reversed(target.split("/")))
    return "/" + "/".join(parts)


def identify(path: str, host: HostView) -> dict:
    """What ``path`` is on the host: {"given", "path" (canonical), "kind" (block, char, file, dir,
    other, missing), "devno" ("MAJ:MIN" of a device node, else None), "real" (read from a /dev with
    device nodes, where a missing path is missing, not a name to look up)}."""
    canon = host.canonical(path)
    real = host.own_dev
    try:
        st = os.stat(host.local(canon))
    except (FileNotFoundError, NotADirectoryError):
        return {"given": path, "path": canon, "kind": "missing", "devno": None, "real": real}
    except OSError as e:
        raise NotResolvable(f"{path}: cannot look at {canon} ({e.strerror})") from None
    kind = ("block" if stat.S_ISBLK(st.st_mode) else "char" if stat.S_ISCHR(st.st_mode) else
            "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other")
    devno = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}" if kind in ("block", "char") else None
    return {"given": path, "path": canon, "kind": kind, "devno": devno, "real": real}


def _devno_dir(ident: dict, host: HostView) -> Path | None:
    """The sysfs device directory of a node by its number: /sys/dev/{block,char}/MAJ:MIN (the links
    drivers/base/core.c device_create_sys_dev_entry makes for every device with a dev_t)."""
    if ident["devno"] is None:
        return None
    link = host.sys("dev", ident["kind"], ident["devno"])
    return Path(os.path.realpath(link)) if os.path.exists(link) else None


def _say(ident: dict) -> str:
    """'/dev/loop0 (7:0)', or the canonical path, or 'x -> /dev/y' when a link led there."""
    where = ident["path"] + (f" ({ident['devno']})" if ident["devno"] else "")
    return where if ident["path"] == ident["given"] else f"{ident['given']} is {where}"


def _device_dir(ident: dict, host: HostView) -> Path:
    """The sysfs directory of the device ``ident`` opens; NotResolvable when it is no device here."""
    dev, canon = ident["given"], ident["path"]
    if ident["kind"] in ("block", "char"):
        d = _devno_dir(ident, host)
        if d is None:
            raise NotResolvable(f"{_say(ident)}: this host's sysfs lists no {ident['kind']} device "
                                f"{ident['devno']} (no {host.sys('dev', ident['kind'], ident['devno'])}); "
                                "name an NVMe namespace or controller")
        return d
    if ident["kind"] != "missing":
        raise NotResolvable(f"{_say(ident)}, a {'regular file' if ident['kind'] == 'file' else ident['kind']}, "
                            "not an NVMe device; name an NVMe namespace or controller")
    if ident.get("real") or not canon.startswith("/dev/"):
        raise NotResolvable(f"{dev} is not a block device on this host ({canon} does not exist): check the "
                            "path; fio would create a regular file there")
    return _named_dir(ident, host)


def _named_dir(ident: dict, host: HostView) -> Path:
    """A /dev tree without nodes (the virtual rig's, a test's): the device by its name in /sys/class."""
    name = os.path.basename(ident["path"])
    if ident["path"].startswith("/dev/mapper/") and not name.startswith("dm-"):
        name = host._dm_named(name) or name
    for cls in ("nvme", "block", "nvme-generic"):
        d = host.sys("class", cls, name)
        if d.exists():
            return Path(os.path.realpath(d))
    m = _GENERIC.match(name)
    if m and host.sys("class", "block", f"nvme{m.group(1)}n{m.group(2)}").exists():
        return Path(os.path.realpath(host.sys("class", "block", f"nvme{m.group(1)}n{m.group(2)}")))
    raise NotResolvable(f"{ident['given']} is not a block device on this host (no "
                        f"{host.sys('class', 'block', name)}): check the path; fio would create a regular "
                        "file there")


@dataclass(frozen=True)
class Target:
    """A drive as sysfs knows it. ``namespace``: dev's namespace block device (the head under native
    multipath; None for a controller); ``nsids``: every namespace the command touches; ``controllers``:
    every controller that reaches them (each one's serial is checked); ``blocks``: every block device
    of the subsystem (+ partitions, holders), for the mount and swap check."""
    given: str
    namespace: str | None
    controllers: tuple[str, ...]
    nsid: int | None = None
    blocks: frozenset = field(default_factory=frozenset)
    remote_uses: tuple | None = None     # mounts and swaps, when a remote drive host's probe read them
    path: str = ""                        # the canonical path the command opens
    devno: str | None = None              # its major:minor, when it is a device node
    subsystem: str | None = None          # nvme-subsysN
    nsids: tuple[int, ...] = ()


def _nsid(d: Path) -> int:
    """A namespace's NSID from its ``nsid`` attribute (drivers/nvme/host/sysfs.c), else its name."""
    f = d / "nsid"
    return int(f.read_text().strip()) if f.is_file() else int(d.name.rsplit("n", 1)[1])


def _head_name(path_dev: str) -> str:
    m = _PATH.match(path_dev)
    return f"nvme{m.group(1)}n{m.group(3)}"


def _ctrl_dir(ctrl: str, host: HostView) -> Path:
    return Path(os.path.realpath(host.sys("class", "nvme", ctrl)))


def subsystem_of(ctrl: str, host: HostView) -> str | None:
    """The subsystem a controller belongs to: the nvme-subsysN directory holding a link named after it
    (drivers/nvme/host/core.c nvme_init_subsystem: sysfs_create_link(&subsys->dev.kobj, ctrl ...)),
    else the one with the same ``subsysnqn``; None when this host's sysfs has no subsystems."""
    root = host.sys("class", "nvme-subsystem")
    subs = sorted(root.iterdir()) if root.is_dir() else []
    for s in subs:
        if (s / ctrl).exists():
            return s.name
    nqn = host.read(str(host.sys("class", "nvme", ctrl, "subsysnqn"))).strip()
    for s in subs if nqn else ():
        if host.read(str(s / "subsysnqn")).strip() == nqn:
            return s.name
    return None


def controllers_of_subsystem(subsys: str | None, host: HostView, fallback: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The controllers of a subsystem: its links nvmeN (core.c), else those with its ``subsysnqn``."""
    if subsys is None:
        return tuple(sorted(fallback))
    sd = host.sys("class", "nvme-subsystem", subsys)
    found = {c.name for c in sd.iterdir() if _CTRL.match(c.name)} if sd.is_dir() else set()
    nqn = host.read(str(sd / "subsysnqn")).strip()
    cls = host.sys("class", "nvme")
    for c in cls.iterdir() if nqn and cls.is_dir() else ():
        if host.read(str(c / "subsysnqn")).strip() == nqn:
            found.add(c.name)
    return tuple(sorted(found | set(fallback)))


def namespaces_of(ctrl: str, host: HostView) -> dict[int, str]:
    """nsid -> namespace block name for every namespace attached to a controller, read from the
    controller's directory as the kernel lays it out (drivers/nvme/host/multipath.c
    nvme_set_disk_name): ``nvme{C}n{N}`` (multipath off, or a single-controller subsystem), or the
    hidden path ``nvme{S}c{C}n{N}`` whose namespace is the head ``nvme{S}n{N}`` (native multipath)."""
    out = {}
    cdir = _ctrl_dir(ctrl, host)
    for child in cdir.iterdir() if cdir.is_dir() else ():
        if _NS.match(child.name):
            out[_nsid(child)] = child.name
        elif _PATH.match(child.name):
            out[_nsid(child)] = _head_name(child.name)
    return out


def head_controllers(head: Path, host: HostView) -> tuple[str, ...]:
    """The controllers a native multipath head is reached through. Kernels from 6.14 list its path
    devices in the head's ``multipath/`` group (drivers/nvme/host/sysfs.c nvme_ns_mpath_attr_group);
    6.1 has no such folder: the subsystem directory's controller links, and under each controller the
    hidden path device ``nvme{S}c{C}n{N}`` of this head (multipath.c nvme_set_disk_name)."""
    mp = head / "multipath"
    ctrls = set()
    for p in mp.iterdir() if mp.is_dir() else ():
        ctrls.add(Path(os.path.realpath(p)).parent.name)
    subsys, s_inst, n_inst = head.parent.name, head.name[4:].split("n")[0], head.name.rsplit("n", 1)[1]
    for c in controllers_of_subsystem(subsys, host):
        if (_ctrl_dir(c, host) / f"nvme{s_inst}c{c[4:]}n{n_inst}").exists():
            ctrls.add(c)
    return tuple(sorted(ctrls))


def _namespace_dir(d: Path, ident: dict, host: HostView) -> tuple[Path, str]:
    """(namespace directory, kind: 'ctrl' | 'ns') for a device directory: a partition is its disk, a
    generic char device ngXnY its namespace ``nvmeXnY`` beside it (core.c nvme_add_ns_cdev names it
    after the disk), a hidden path device its head."""
    if (d / "partition").exists():
        d = d.parent
    name = d.name
    if _CTRL.match(name) and os.path.realpath(host.sys("class", "nvme", name)) == str(d):
        return d, "ctrl"
    m = _GENERIC.match(name)
    if m and (d.parent / f"nvme{m.group(1)}n{m.group(2)}").exists():
        d, name = d.parent / f"nvme{m.group(1)}n{m.group(2)}", f"nvme{m.group(1)}n{m.group(2)}"
    if _PATH.match(name):
        d = Path(os.path.realpath(host.sys("class", "block", _head_name(name))))
        name = d.name
    if _NS.match(name) and (_SUBSYS.match(d.parent.name) or _CTRL.match(d.parent.name)):
        return d, "ns"
    raise NotResolvable(f"{_say(ident)}: {name} is not an NVMe namespace or controller (sysfs puts it under "
                        f"{d.parent.name}); the rig writes and formats NVMe namespaces only")


def _namespace_controllers(nsdir: Path, host: HostView) -> tuple[str, ...]:
    """Every controller a namespace is reached through: its head's paths, or (multipath off) every
    controller of the subsystem with this NSID attached (a shared namespace: nvme0n2 and nvme1n2)."""
    if _SUBSYS.match(nsdir.parent.name):
        ctrls = head_controllers(nsdir, host)
    else:
        ctrls = (nsdir.parent.name,)
    nsid = _nsid(nsdir)
    sub = subsystem_of(ctrls[0], host) if ctrls else None
    same = [c for c in controllers_of_subsystem(sub, host) if nsid in namespaces_of(c, host)]
    return tuple(sorted(set(ctrls) | set(same)))


def _touched(base: tuple[str, ...], own: int | None, nsid: int | None, ident: dict, host: HostView) -> tuple[int, ...]:
    """The namespaces a command with ``nsid`` on this device touches: its own namespace; the named
    one, if attached to the device's controller(s); every one of them for the broadcast (or for a
    controller named without an nsid: nvme-cli then sends FFFFFFFFh)."""
    attached: dict[int, str] = {}
    for c in base:
        attached.update(namespaces_of(c, host))
    if nsid is None:
        return (own,) if own is not None else tuple(sorted(attached))
    if int(nsid) == BROADCAST:
        return tuple(sorted(attached))
    if int(nsid) not in attached:
        have = ", ".join(f"{k} ({v})" for k, v in sorted(attached.items())) or "none"
        raise NotResolvable(f"namespace {int(nsid)} is not a namespace of {', '.join(base)} (reached through "
                            f"{_say(ident)}); its namespaces: {have}; name one of those")
    return (int(nsid),)


def resolve(dev: str, host: HostView | None = None, nsid: int | None = None, ident: dict | None = None,
            scope: str | None = None) -> Target:
    """Resolve what ``dev`` really opens (any path form, a link anywhere, a partition, a generic char
    device, a multipath path or head, a controller) and the namespaces a command with ``nsid`` (None:
    dev's own, FFFFFFFFh: all of the controller's) touches; ``scope="subsystem"``: a command that acts
    on the whole NVM subsystem (Sanitize, NVMe 1.4 section 8.15), every namespace of every controller
    of it. ``ident``: an identify() made elsewhere (a drive host without python3, where the mirror
    script read it)."""
    host = host or HostView()
    ident = ident or identify(dev, host)
    d, kind = _namespace_dir(_device_dir(ident, host), ident, host)
    if kind == "ctrl":
        namespace, own, base = None, None, (d.name,)
    else:
        namespace, own = d.name, _nsid(d)
        base = _namespace_controllers(d, host)
        if not base:
            raise NotResolvable(f"{_say(ident)}: sysfs lists no controller for namespace {namespace} (neither "
                                "in its subsystem's controllers nor in its multipath/ folder); is the drive "
                                "still there?")
    if scope not in (None, "subsystem"):
        raise NotResolvable(f"scope {scope!r} is not None or 'subsystem'")
    nsids = _touched(base, own, nsid, ident, host)
    subsys = subsystem_of(base[0], host)
    ctrls = set(base)
    for c in controllers_of_subsystem(subsys, host, base):
        if set(nsids) & set(namespaces_of(c, host)) or scope == "subsystem":
            ctrls.add(c)
    everything = controllers_of_subsystem(subsys, host, tuple(ctrls))
    if scope == "subsystem":
        ctrls |= set(everything)
        nsids = tuple(sorted({n for c in everything for n in namespaces_of(c, host)}))
    return Target(dev, namespace, tuple(sorted(ctrls)), own, frozenset(_blocks_of(everything, host)),
                  path=ident["path"], devno=ident["devno"], subsystem=subsys, nsids=nsids)


def _blocks_of(ctrls: tuple[str, ...], host: HostView) -> set[str]:
    """Every namespace (multipath heads and their paths included), partition and stacked holder on
    these controllers."""
    disks = set()
    for c in ctrls:
        cdir = _ctrl_dir(c, host)
        for child in cdir.iterdir() if cdir.is_dir() else ():
            if _NS.match(child.name):
                disks.add(child.name)
            elif _PATH.match(child.name):
                disks |= {child.name, _head_name(child.name)}
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


def _unescape(field: str) -> str:
    """A mount table's field as the kernel wrote it: space, tab, newline and backslash as octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _block_devnos(target: Target, host: HostView) -> dict[str, str]:
    """MAJ:MIN -> name of every block device of the target (its ``dev`` attribute, genhd.c)."""
    out = {}
    for b in target.blocks:
        n = host.read(str(host.sys("class", "block", b, "dev"))).strip()
        if n:
            out[n] = b
    return out


def _node_devno(path: str, host: HostView) -> str | None:
    """The MAJ:MIN of a block device node ``path`` on this host view (a link followed), else None."""
    try:
        ident = identify(path, host)
    except (NotResolvable, ValueError):
        return None
    return ident["devno"] if ident["kind"] == "block" else None


def in_use(target: Target, host: HostView | None = None) -> list[tuple[str, str]]:
    """(device, what uses it) for every mount or swap on the target's subsystem, through any controller
    and by any path: a mount by its device number in /proc/self/mountinfo (a node mknod'ed anywhere,
    a link /dev's copy lacks), or its source's name; a swap by the number of the node its path names."""
    host = host or HostView()
    devnos = _block_devnos(target, host)
    hits = []
    info = host.read(host.mountinfo_path) if host.mountinfo_path else ""
    if info.strip():
        for line in info.splitlines():
            left, sep, right = line.partition(" - ")
            parts, tail = left.split(), right.split()
            if not sep or len(parts) < 5:
                continue
            source = _unescape(tail[1]) if len(tail) >= 2 else parts[2]
            if parts[2] in devnos or (source.startswith("/dev/") and host.dev_name(source) in target.blocks):
                hits.append((source, _unescape(parts[4])))
    else:
        for line in host.read(host.mounts).splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("/dev/") and host.dev_name(parts[0]) in target.blocks:
                hits.append((parts[0], _unescape(parts[1])))
    known = {}
    for line in host.read(host.swapdevs).splitlines() if host.swapdevs else ():
        num, _, path = line.partition(" ")
        known[path] = num
    for line in host.read(host.swaps).splitlines()[1:]:
        parts = line.split()
        if not parts:
            continue
        path = _unescape(parts[0])
        num = known.get(parts[0]) if host.swapdevs else _node_devno(path, host)
        if num in devnos or (path.startswith("/dev/") and host.dev_name(path) in target.blocks):
            hits.append((path, "swap"))
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


def is_drive(path: str, host: HostView | None = None, ident: dict | None = None) -> bool:
    """Must a write to ``path`` pass the guard? Yes when it resolves (any link, any form) to a block
    device or an NVMe character device (a generic ngXnY or a controller nvmeX, by its sysfs entry),
    and for a /dev path that does not exist there (a virtual rig's drive, or a mistake the guard
    refuses: fio would create a regular file). Regular files (fio lays them out) and other character
    devices (/dev/null) are not drives."""
    host = host or HostView()
    try:
        ident = ident or identify(path, host)
    except NotResolvable:
        return True
    if ident["kind"] == "block":
        return True
    if ident["kind"] == "missing":
        return ident["path"] == "/dev" or ident["path"].startswith("/dev/")
    if ident["kind"] != "char":
        return False
    d = _devno_dir(ident, host)
    name = d.name if d is not None else os.path.basename(ident["path"])
    return bool(_GENERIC.match(name) or _CTRL.match(name))


def probe(dev: str, host: HostView, nsid: int | None = None, ident: dict | None = None,
          scope: str | None = None) -> dict:
    """What the guard needs to know about dev (and a command's nsid) on this host, as JSON-able data."""
    try:
        ident = ident or identify(dev, host)
    except NotResolvable as e:
        return {"drive": True, "refused": str(e)}
    drive = is_drive(dev, host, ident)
    try:
        t = resolve(dev, host, nsid, ident, scope)
    except NotResolvable as e:
        return {"drive": drive, "refused": str(e), "path": ident["path"], "devno": ident["devno"],
                "kind": ident["kind"]}
    d = asdict(t)
    d["blocks"] = sorted(t.blocks)
    d.pop("remote_uses")
    return {"drive": drive, "target": d, "uses": in_use(t, host)}


if __name__ == "__main__":
    args = json.loads(sys.argv[1])
    print(json.dumps(probe(args["dev"], HostView(**args.get("host", {})), args.get("nsid"), args.get("ident"),
                           args.get("scope"))))
