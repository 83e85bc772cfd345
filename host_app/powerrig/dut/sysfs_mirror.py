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

import os
import shutil
import tempfile
from pathlib import Path

from powerrig.dut import sysfs
from powerrig.dut.commands import helper_argv
from powerrig.dut.transport import RemoteError
from powerrig.dut.sysfs import HostView

# one line (the door refuses control characters in a command's words, newlines included); $1: the path.
# A fork costs ~16 ms on a loaded TCG guest: shell builtins walk the tree, and one realpath resolves
# each batch of links, one grep -H reads every attribute, one stat the identity and one the swaps
# (~6 processes in all, where a readlink and a base64|tr per entry made ~150).
SCRIPT = ('P=$1; links() { n=""; for l in "$@"; do if [ -e "$l" ]; then n="$n $l"; fi; done; C=""; '
          'if [ -z "$n" ]; then return 0; fi; set -f; C=$(realpath $n); set -- $C; '
          'for l in $n; do echo "L $l $1"; shift; done; set +f; }; '
          'F=""; R=""; SEEN=""; '
          'dir() { d=$1; case "$SEEN " in *" $d "*) return 0;; esac; SEEN="$SEEN $d"; echo "D $d"; '
          'for f in serial model nsid partition subsysnqn dev; do if [ -f "$d/$f" ]; then '
          'echo "F $d/$f"; F="$F $d/$f"; fi; done; '
          'for h in "$d"/holders/* "$d"/multipath/*; do R="$R $h"; done; '
          'if [ -d "$d/holders" ]; then echo "D $d/holders"; fi; '
          'if [ -d "$d/multipath" ]; then echo "D $d/multipath"; fi; }; '
          'links /sys/class/nvme/* /sys/class/nvme-subsystem/* /sys/class/block/*; '
          'set -f; set -- $C; set +f; '
          'for d in "$@"; do dir "$d"; for ch in "$d"/nvme* "$d"/ng*; do if [ -L "$ch" ]; then R="$R $ch"; '
          'elif [ -d "$ch" ]; then dir "$ch"; fi; done; done; '
          'for l in /dev/disk/*/* /dev/mapper/*; do if [ -L "$l" ]; then R="$R $l"; fi; done; '
          'links $R /sys/dev/block/* /sys/dev/char/*; '
          'S=""; while read -r p rest; do if [ "$p" != Filename ]; then S="$S $p"; fi; done < /proc/swaps; '
          'if [ -n "$S" ]; then set -f; stat -L -c "W %t|%T|%F|%n" -- $S 2>/dev/null; set +f; fi; '
          'if [ -n "$P" ]; then echo "R $(readlink -f -- "$P")"; '
          'echo "T $(stat -L -c \'%F|%t|%T\' -- "$P" 2>/dev/null)"; fi; '
          'set -f; grep -H "" -- $F /proc/self/mounts /proc/self/mountinfo /proc/swaps; true')

_PROC = {"/proc/self/mounts": "mounts", "/proc/self/mountinfo": "mountinfo", "/proc/swaps": "swaps"}

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
    return rebuild(out, root, dev)


def rebuild(out: str, root: Path, dev: str | None = None) -> tuple[HostView, dict | None]:
    """The copy SCRIPT's output describes, under ``root``; (its HostView, ``dev``'s identity there)."""
    local = lambda p: root / p.lstrip("/")  # noqa: E731
    links, canonical, st, files, swapdevs = [], None, None, {}, []
    for name in _PROC:
        files[name] = []
    for line in out.splitlines():
        if line.startswith("/"):                 # grep -H: "path:line" of an attribute or /proc file
            for path in _owner(line, files):
                files[path].append(line[len(path) + 1:])
            continue
        kind, _, rest = line.partition(" ")
        if kind == "D":
            local(rest).mkdir(parents=True, exist_ok=True)
        elif kind == "F":
            if rest in files:
                raise RemoteError(f"the drive host's copy names {rest} twice (the mirror script is wrong)")
            files[rest] = []
        elif kind == "L":
            path, _, target = rest.partition(" ")
            if not target:
                raise RemoteError(f"the drive host's sysfs changed while it was read ({path} resolves to nothing "
                                  "now); try again")
            if path.startswith("/sys/dev/char/") and "/nvme" not in target:
                continue                         # only NVMe character devices (a controller, ngXnY)
            links.append((local(path), local(target)))
        elif kind == "R":
            canonical = rest
        elif kind == "T":
            st = rest.strip()
        elif kind == "W":
            major, minor, what, path = (rest.split("|", 3) + ["", "", "", ""])[:4]
            if what == "block special file":
                swapdevs.append(f"{int(major, 16)}:{int(minor, 16)} {path}")
    for path, lines in files.items():
        where = root / _PROC[path] if path in _PROC else local(path)
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text("".join(f"{x}\n" for x in lines))
    (root / "swapdevs").write_text("".join(f"{x}\n" for x in swapdevs))
    _rebuild(root, links)
    view = HostView(sys_root=str(root / "sys"), mounts=str(root / "mounts"), swaps=str(root / "swaps"),
                    dev_root=str(root / "dev"), mountinfo=str(root / "mountinfo"), swapdevs=str(root / "swapdevs"))
    return view, (_identity(dev, canonical, st or "") if dev else None)


def _owner(line: str, files: dict) -> list[str]:
    """The file a grep -H line is of: the longest announced path followed by ':' (sysfs paths hold
    ':' themselves, 0000:00:04.0)."""
    best = None
    for k in range(len(line)):
        if line[k] == ":" and line[:k] in files:
            best = line[:k]
    return [best] if best is not None else []


def _rebuild(root: Path, links: list) -> None:
    for link, target in links:
        target.mkdir(parents=True, exist_ok=True) if not target.exists() else None
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_dir() and not link.is_symlink():
            shutil.rmtree(link)          # a directory copied before the link to it was seen
        if not link.is_symlink():
            link.symlink_to(target)
    for name in ("mounts", "mountinfo", "swaps"):
        (root / name).touch()
    (root / "dev").mkdir(exist_ok=True)


def probe(remote, dev: str, nsid: int | None = None, scope: str | None = None) -> dict:
    """sysfs.probe for ``dev`` on a drive host without python3: resolved there, read on the copy; the
    copy's paths never appear in what it says."""
    view, ident = mirror(remote, dev=dev)
    root = str(Path(view.sys_root).parent)
    try:
        got = sysfs.probe(dev, view, nsid, ident, scope)
        if "refused" in got:
            got["refused"] = got["refused"].replace(root, "")
        return got
    finally:
        shutil.rmtree(root, ignore_errors=True)
