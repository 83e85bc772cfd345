"""The QEMU drive host's kernel and initramfs: built once, cached by a hash of what goes in.

What goes in: this host's nvme-cli, fio and busybox-static binaries, the guest's init and agent and
the build script. The Debian cloud kernel comes from `apt-get download` (its .deb is kept beside the
builds, so a rebuild downloads nothing). `python -m powerrig.sim.qemu.image` builds (setup.sh runs
it) and prints the directory.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from powerrig.core.errors import PowerrigError

GUEST = Path(__file__).with_name("guest")
INPUTS = ("/usr/sbin/nvme", "/usr/bin/fio", "/bin/busybox")
QEMU = "qemu-system-x86_64"


class ImageError(PowerrigError):
    """The drive host cannot be built or found (missing package, no build yet)."""


def cache_root() -> Path:
    return Path(os.environ.get("POWERRIG_CACHE", Path.home() / ".cache" / "powerrig")) / "qemu-nvme"


def missing_tools() -> list[str]:
    """Debian packages the drive host needs and this machine lacks."""
    need = {"/usr/sbin/nvme": "nvme-cli", "/usr/bin/fio": "fio", "/bin/busybox": "busybox-static"}
    out = [pkg for path, pkg in need.items() if not Path(path).is_file()]
    if shutil.which(QEMU) is None:
        out.append("qemu-system-x86")
    if Path("/bin/busybox").is_file() and _dynamic("/bin/busybox"):
        out.append("busybox-static")       # the guest has no libraries for a dynamic one
    return out


def _dynamic(path: str) -> bool:
    p = subprocess.run(["ldd", path], capture_output=True, text=True)
    return p.returncode == 0 and "=>" in p.stdout


def key() -> str:
    """The hash of every input (binaries by content, guest files, the build script)."""
    h = hashlib.sha256()
    for p in list(INPUTS) + sorted(str(f) for f in GUEST.iterdir()):
        h.update(p.encode())
        h.update(Path(p).read_bytes() if Path(p).is_file() else b"missing")
    return h.hexdigest()[:16]


def find() -> tuple[Path, Path]:
    """(vmlinuz, initramfs) of the current inputs; ImageError naming the fix when not built."""
    miss = missing_tools()
    if miss:
        raise ImageError(f"the QEMU drive host needs {', '.join(miss)}: run `make setup` (or apt-get install "
                         f"--no-install-recommends {' '.join(miss)})")
    d = cache_root() / key()
    k, i = d / "vmlinuz", d / "initramfs.cpio"
    if not (k.is_file() and i.is_file()):
        raise ImageError(f"the QEMU drive host is not built for these nvme-cli/fio/busybox binaries ({d}): "
                         "run `make setup` (or python -m powerrig.sim.qemu.image)")
    return k, i


def build() -> Path:
    """Build (or find) the image of the current inputs; returns its directory."""
    miss = missing_tools()
    if miss:
        raise ImageError(f"cannot build the QEMU drive host: install {', '.join(miss)}")
    d = cache_root() / key()
    if (d / "vmlinuz").is_file() and (d / "initramfs.cpio").is_file():
        return d
    tmp = d.with_name(d.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    p = subprocess.run(["bash", str(GUEST / "build_initramfs.sh"), str(tmp), str(cache_root() / "dl")],
                       capture_output=True, text=True)
    if p.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        last = (p.stderr.strip().splitlines() or ["no message"])[-1]
        raise ImageError(f"building the QEMU drive host failed: {last}")
    tmp.replace(d)
    return d


if __name__ == "__main__":
    try:
        print(build())
    except ImageError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
