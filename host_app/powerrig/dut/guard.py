"""Guard for destructive steps: the checks the guarded door (destructive.py) makes before it issues
the permit every write workload, format, sanitize, namespace or firmware change needs.

A step runs only on a drive whose serial number the caller names (read with id-ctrl, recorded on the
timeline), when nothing on that drive's controller(s) is in use (a mounted filesystem, swap, a
device-mapper or md device stacked on a namespace or partition), and never on the host's boot
device. The only way around it is ``allow_unguarded=True``, which logs a WARNING and records the
override on the timeline.

Names are resolved through sysfs, not by pattern: with native NVMe multipath ``nvme0n1`` is a
namespace of *subsystem* 0, reached through controllers listed in its ``multipath/`` directory
(``nvme0c1n1`` is the path through controller nvme1). Everything the guard reads about the host
(sysfs, the mount table, swaps, /dev) comes from a :class:`HostView`, so tests and the virtual rig
give it a tree of their own: that is the real boundary. The reading itself is in sysfs.py, which
runs unchanged on a remote drive host (over ssh) when the drive sits in another machine.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from powerrig.dut import sysfs
from powerrig.dut.sysfs import BOOT_MOUNTS, HostView, Target
from powerrig.core.errors import PowerrigError
from powerrig.core.timeline import NOTE

logger = logging.getLogger(__name__)

__all__ = ["BOOT_MOUNTS", "DriveGuard", "GuardRefused", "HostView", "RemoteHostView", "Target",
           "check_destructive", "guard_destructive", "host_view", "in_use", "is_drive", "resolve"]


class GuardRefused(PowerrigError):
    """A destructive step was refused to protect data."""


@dataclass(frozen=True)
class RemoteHostView(HostView):
    """A drive host reached over SSH: the paths are that host's, and the guard reads them THERE, by
    running sysfs.py with the drive host's python3 (``ssh``: the SshHost to reach it)."""
    url: str = ""
    ssh: object = None

    def probe(self, dev: str) -> dict:
        from powerrig.dut.remote import RemoteError

        args = {"dev": dev, "host": {k: getattr(self, k) for k in ("sys_root", "mounts", "swaps", "dev_root")}}
        if getattr(self.ssh, "python", "python3") is None:
            return self._probe_copy(dev)
        try:
            from powerrig.dut.commands import helper_argv
            out = self.ssh.run(helper_argv("python3", "-", json.dumps(args)), timeout=60,
                               stdin=Path(sysfs.__file__).read_bytes())
            return json.loads(out)
        except RemoteError as e:
            raise GuardRefused(f"cannot check {dev} on drive host {self.url}: {e}; the guard reads the drive "
                               "host's sysfs, mount table and swaps with its python3 (install python3 there), "
                               "or check by hand and pass allow_unguarded") from None
        except ValueError as e:
            raise GuardRefused(f"cannot check {dev} on drive host {self.url}: its python3 answered "
                               f"something that is not the guard's JSON ({e})") from None

    def _probe_copy(self, dev: str) -> dict:
        """A drive host without python3: its sysfs, mounts and swaps copied here (sysfs_mirror), then
        the same reading as there."""
        import shutil

        from powerrig.dut.remote import RemoteError
        from powerrig.dut.sysfs_mirror import mirror

        try:
            view = mirror(self.ssh)
        except RemoteError as e:
            raise GuardRefused(f"cannot check {dev} on drive host {self.url}: {e}; check by hand and pass "
                               "allow_unguarded") from None
        root = str(Path(view.sys_root).parent)
        try:
            got = sysfs.probe(dev, view)
            if "refused" in got:                 # say the drive host's paths, not the copy's
                got["refused"] = got["refused"].replace(root, "")
            return got
        finally:
            shutil.rmtree(root, ignore_errors=True)


def host_view(paths: dict | HostView | None = None, remote=None) -> HostView:
    """Where the guard reads: ``paths`` (sys_root, mounts, swaps, dev_root; default this host's) on
    this host, or on the drive host ``remote`` (an SshHost) when the drive sits in another machine."""
    fields = ("sys_root", "mounts", "swaps", "dev_root")
    if isinstance(paths, RemoteHostView) and remote is None:
        return paths
    if isinstance(paths, HostView):
        paths = {k: getattr(paths, k) for k in fields}
    paths = {k: v for k, v in (paths or {}).items() if k in fields}
    if remote is not None:
        return RemoteHostView(url=remote.url, ssh=remote, **paths)
    return HostView(**paths)


def is_drive(path: str, host: HostView | None = None) -> bool:
    """Must a write to ``path`` pass the guard (sysfs.is_drive), asked where the write happens: on
    this host, or on the drive host for a RemoteHostView (a link there may point at a drive)."""
    if isinstance(host, RemoteHostView):
        return bool(host.probe(path).get("drive"))
    return sysfs.is_drive(path)


def resolve(dev: str, host: HostView | None = None) -> Target:
    """Resolve /dev/nvme0, /dev/nvme0n1, /dev/nvme0n1p2, nvme0c1n1 or a /dev/disk/by-* link through sysfs
    (the drive host's, for a RemoteHostView); GuardRefused when it is not an NVMe drive there."""
    host = host or HostView()
    if isinstance(host, RemoteHostView):
        got = host.probe(dev)
        if "refused" in got:
            raise GuardRefused(f"{got['refused']} (on drive host {host.url})")
        t = got["target"]
        return Target(t["given"], t["namespace"], tuple(t["controllers"]), t["nsid"], frozenset(t["blocks"]),
                      remote_uses=tuple(tuple(u) for u in got["uses"]))
    try:
        return sysfs.resolve(dev, host)
    except sysfs.NotResolvable as e:
        raise GuardRefused(str(e)) from None


def in_use(target: Target, host: HostView | None = None) -> list[tuple[str, str]]:
    """(device, what uses it) for every mount or swap on the target's controllers."""
    if isinstance(host, RemoteHostView):
        return [tuple(u) for u in (target.remote_uses if target.remote_uses is not None
                                   else resolve(target.given, host).remote_uses)]
    return sysfs.in_use(target, host)


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


def guard_destructive(nvme, dev: str, plan_serial: str | None, host: HostView | None = None,
                      action: str = "a destructive step") -> Target | None:
    """Read the serial with nvme-cli (recorded as an event) and check it, the mounts and the boot device.
    A check only (it issues no permit): operations go through powerrig.dut.destructive."""
    return DriveGuard(nvme, host).check(dev, plan_serial, action)
