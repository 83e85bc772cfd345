"""A drive host's sysfs, mount table and swaps, copied here by a POSIX shell script, for drive hosts
without python3 (a QEMU guest is busybox): the guard then runs the same sysfs.py reading on the
copy. The path being judged is resolved THERE, by that host's kernel (``readlink -f`` for the
canonical path, ``stat -L`` for a device node's major:minor), since a copy has no device nodes.

Only what sysfs.py reads is copied: the nvme, nvme-subsystem and block class links, the device
directories they point at, their namespace, path-device, generic (ngXnY) and partition children,
``nsid``, ``serial``, ``subsysnqn``, ``partition``, ``holders`` and ``multipath`` links, a subsystem's
controller links, the /sys/dev/block links (and the /sys/dev/char links of NVMe devices), and
/dev/disk and /dev/mapper links.
"""
from __future__ import annotations

import base64
import os
import shutil
import tempfile
from pathlib import Path

from powerrig.dut import sysfs
from powerrig.dut.commands import helper_argv
from powerrig.dut.sysfs import HostView

# one line (the door refuses control characters in a command's words, newlines included); $1: the path
SCRIPT = ('link() { if [ -e "$1" ]; then echo "L $1 $(readlink -f "$1")"; else return 1; fi; }; '
          'dir() { d=$1; echo "D $d"; '
          'for f in serial model nsid partition subsysnqn; do if [ -f "$d/$f" ]; then '
          'echo "F $d/$f $(base64 "$d/$f" | tr -d \'\\n\')"; fi; done; '
          'for h in "$d"/holders/* "$d"/multipath/*; do link "$h"; done; '
          'if [ -d "$d/holders" ]; then echo "D $d/holders"; fi; '
          'if [ -d "$d/multipath" ]; then echo "D $d/multipath"; fi; }; '
          'for c in /sys/class/nvme /sys/class/nvme-subsystem /sys/class/block; do for l in "$c"/*; do '
          'link "$l" || continue; d=$(readlink -f "$l"); dir "$d"; '
          'for ch in "$d"/nvme* "$d"/ng*; do if [ -L "$ch" ]; then link "$ch"; '
          'elif [ -d "$ch" ]; then dir "$ch"; fi; done; done; done; '
          'for l in /sys/dev/block/*; do link "$l"; done; '
          'for l in /sys/dev/char/*; do case $(readlink -f "$l") in */nvme*) link "$l";; esac; done; '
          'for l in /dev/disk/*/* /dev/mapper/*; do if [ -L "$l" ]; then link "$l"; fi; done; '
          'if [ -n "$1" ]; then echo "R $(readlink -f -- "$1")"; '
          'echo "T $(stat -L -c \'%F|%t|%T\' -- "$1" 2>/dev/null)"; fi; '
          'echo "M $(base64 /proc/self/mounts | tr -d \'\\n\')"; '
          'echo "S $(base64 /proc/swaps | tr -d \'\\n\')"; true')

_KINDS = {"block special file": "block", "character special file": "char", "regular file": "file",
          "regular empty file": "file", "directory": "dir"}


def _identity(dev: str, canonical: str | None, st: str) -> dict:
    """sysfs.identify's answer from the drive host's ``readlink -f`` and ``stat -L -c '%F|%t|%T'``
    (major and minor in hex): what its kernel opens, never this machine's reading of the path."""
    if not st:
        kind, devno = "missing", None
    else:
        what, _, nums = st.partition("|")
        kind = _KINDS.get(what, "other")
        major, _, minor = nums.partition("|")
        devno = f"{int(major, 16)}:{int(minor, 16)}" if kind in ("block", "char") else None
    return {"given": dev, "path": canonical or dev, "kind": kind, "devno": devno, "real": True}


def mirror(remote, root: str | os.PathLike | None = None, dev: str | None = None) -> tuple[HostView, dict | None]:
    """Run SCRIPT on ``remote`` (a RemoteHost) and rebuild what it printed under ``root`` (a new
    temporary directory by default): the HostView that reads the copy, and ``dev``'s identity there."""
    root = Path(root or tempfile.mkdtemp(prefix="powerrig-sysfs-"))
    out = remote.run(helper_argv("sh", "-c", SCRIPT, "sh", dev or ""), timeout=60).decode(errors="replace")
    local = lambda p: root / p.lstrip("/")  # noqa: E731
    links, canonical, st = [], None, None
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "D":
            local(rest).mkdir(parents=True, exist_ok=True)
        elif kind == "F":
            path, _, b64 = rest.partition(" ")
            local(path).parent.mkdir(parents=True, exist_ok=True)
            local(path).write_bytes(base64.b64decode(b64))
        elif kind == "L":
            path, _, target = rest.partition(" ")
            links.append((local(path), local(target)))
        elif kind == "R":
            canonical = rest
        elif kind == "T":
            st = rest.strip()
        elif kind == "M":
            (root / "mounts").write_bytes(base64.b64decode(rest))
        elif kind == "S":
            (root / "swaps").write_bytes(base64.b64decode(rest))
    _rebuild(root, links)
    view = HostView(sys_root=str(root / "sys"), mounts=str(root / "mounts"), swaps=str(root / "swaps"),
                    dev_root=str(root / "dev"))
    return view, (_identity(dev, canonical, st or "") if dev else None)


def _rebuild(root: Path, links: list) -> None:
    for link, target in links:
        target.mkdir(parents=True, exist_ok=True) if not target.exists() else None
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)          # a directory copied before the link to it was seen
        if not link.is_symlink():
            link.symlink_to(target)
    for name in ("mounts", "swaps"):
        (root / name).touch()
    (root / "dev").mkdir(exist_ok=True)


def probe(remote, dev: str, nsid: int | None = None) -> dict:
    """sysfs.probe for ``dev`` on a drive host without python3: resolved there, read on the copy; the
    copy's paths never appear in what it says."""
    view, ident = mirror(remote, dev=dev)
    root = str(Path(view.sys_root).parent)
    try:
        got = sysfs.probe(dev, view, nsid, ident)
        if "refused" in got:
            got["refused"] = got["refused"].replace(root, "")
        return got
    finally:
        shutil.rmtree(root, ignore_errors=True)
