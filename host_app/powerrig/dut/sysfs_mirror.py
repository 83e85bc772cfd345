"""A drive host's sysfs, mount table and swaps, copied here by a POSIX shell script, for drive hosts
without python3 (a QEMU guest is busybox): the guard then runs the same sysfs.py reading on the
copy. Only what sysfs.py reads is copied: the nvme, nvme-subsystem and block class links, the
device directories they point at, their namespace and partition children, ``nsid``, ``serial``,
``partition``, ``holders`` and ``multipath`` links, and /dev/disk and /dev/mapper links.
"""
from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path

from powerrig.dut.commands import helper_argv
from powerrig.dut.sysfs import HostView

# one line (the door refuses control characters in a command's words, newlines included)
SCRIPT = ('link() { if [ -e "$1" ]; then echo "L $1 $(readlink -f "$1")"; else return 1; fi; }; '
          'dir() { d=$1; echo "D $d"; '
          'for f in serial model nsid partition; do if [ -f "$d/$f" ]; then '
          'echo "F $d/$f $(base64 "$d/$f" | tr -d \'\\n\')"; fi; done; '
          'for h in "$d"/holders/* "$d"/multipath/*; do link "$h"; done; '
          'if [ -d "$d/holders" ]; then echo "D $d/holders"; fi; '
          'if [ -d "$d/multipath" ]; then echo "D $d/multipath"; fi; }; '
          'for c in /sys/class/nvme /sys/class/nvme-subsystem /sys/class/block; do for l in "$c"/*; do '
          'link "$l" || continue; d=$(readlink -f "$l"); dir "$d"; '
          'for ch in "$d"/nvme*; do if [ -d "$ch" ]; then dir "$ch"; fi; done; done; done; '
          'for l in /dev/disk/*/* /dev/mapper/*; do if [ -L "$l" ]; then link "$l"; fi; done; '
          'echo "M $(base64 /proc/self/mounts | tr -d \'\\n\')"; '
          'echo "S $(base64 /proc/swaps | tr -d \'\\n\')"; true')


def mirror(remote, root: str | os.PathLike | None = None) -> HostView:
    """Run SCRIPT on ``remote`` (a RemoteHost) and rebuild what it printed under ``root`` (a new
    temporary directory by default); the HostView that reads the copy."""
    root = Path(root or tempfile.mkdtemp(prefix="powerrig-sysfs-"))
    out = remote.run(helper_argv("sh", "-c", SCRIPT), timeout=60).decode(errors="replace")
    local = lambda p: root / p.lstrip("/")  # noqa: E731
    links = []
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
        elif kind == "M":
            (root / "mounts").write_bytes(base64.b64decode(rest))
        elif kind == "S":
            (root / "swaps").write_bytes(base64.b64decode(rest))
    for link, target in links:
        target.mkdir(parents=True, exist_ok=True) if not target.exists() else None
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(target)
    for name in ("mounts", "swaps"):
        (root / name).touch()
    (root / "dev").mkdir(exist_ok=True)
    return HostView(sys_root=str(root / "sys"), mounts=str(root / "mounts"), swaps=str(root / "swaps"),
                    dev_root=str(root / "dev"))
