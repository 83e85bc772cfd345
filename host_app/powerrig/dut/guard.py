"""Guard for destructive steps: the checks the guarded door (destructive.py) makes before it issues
the permit every write workload, format, sanitize, namespace or firmware change needs.

A step runs only on a drive whose serial number the caller names (read with id-ctrl, recorded on the
timeline), when nothing on that drive is in use (a mounted filesystem, swap, a device-mapper or md
device stacked on a namespace or partition, through any controller of its subsystem), and never on
the host's boot device. The only way around it is ``allow_unguarded=True``, which logs a WARNING and
records the override on the timeline.

What is judged is what the command really opens and touches, resolved on the host that runs it
(sysfs.py): the canonical path (links, ``//``, ``/./``, ``..``), the device by its major:minor, every
namespace the command's nsid reaches (the broadcast FFFFFFFFh: all of the controller's), and every
controller of the subsystem that reaches them, native multipath heads included (kernel 6.1 lays a
head's paths out under its controllers; newer kernels also list them in ``multipath/``). Everything
the guard reads about the host comes from a :class:`HostView`, so tests and the virtual rig give it a
tree of their own: that is the real boundary. sysfs.py runs unchanged on a remote drive host (over
ssh); a drive host without python3 has its sysfs mirrored here (sysfs_mirror.py).
"""
from __future__ import annotations

import json
import logging
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from powerrig.dut import sysfs
from powerrig.dut.sysfs import BOOT_MOUNTS, BROADCAST, HostView, Target
from powerrig.core.errors import PowerrigError
from powerrig.core.timeline import NOTE
from powerrig.dut.remote import RemoteError
from powerrig.dut.commands import helper_argv
from powerrig.dut.sysfs_mirror import probe

logger = logging.getLogger(__name__)

__all__ = ["BOOT_MOUNTS", "BROADCAST", "DriveGuard", "decision", "GuardRefused", "HostView", "RemoteHostView", "Target",
           "check_destructive", "guard_destructive", "host_view", "in_use", "is_drive", "judge", "opens", "resolve"]


HOST_FIELDS = ("sys_root", "mounts", "swaps", "dev_root", "mountinfo", "swapdevs")


class GuardRefused(PowerrigError):
    """A destructive step was refused to protect data."""


@dataclass(frozen=True)
class RemoteHostView(HostView):
    """A drive host reached over SSH: the paths are that host's, and the guard reads them THERE, by
    running sysfs.py with the drive host's python3 (``ssh``: the SshHost to reach it)."""
    url: str = ""
    ssh: object = None
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    @contextmanager
    def decision(self):
        """One guard decision: within it a probe of the same (dev, nsid, scope) is read once (the
        is_drive question and the judgement of a fio write), the drive host asked once."""
        outer = bool(self._memo.get("on"))
        self._memo["on"] = True
        try:
            yield self
        finally:
            if not outer:
                self._memo.clear()

    def probe(self, dev: str, nsid: int | None = None, scope: str | None = None) -> dict:
        """sysfs.probe run THERE: the path resolved by that host's kernel, its sysfs, mounts, swaps."""
        key = ("probe", dev, nsid, scope)
        if self._memo.get("on") and key in self._memo:
            return json.loads(self._memo[key])
        got = self._probe(dev, nsid, scope)
        if self._memo.get("on"):
            self._memo[key] = json.dumps(got)
        return got

    def _probe(self, dev: str, nsid: int | None, scope: str | None) -> dict:

        args = {"dev": dev, "nsid": nsid, "scope": scope,
                "host": {k: getattr(self, k) for k in HOST_FIELDS}}
        if getattr(self.ssh, "python", "python3") is None:
            return self._probe_copy(dev, nsid, scope)
        try:
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

    def _probe_copy(self, dev: str, nsid: int | None, scope: str | None = None) -> dict:
        """A drive host without python3: the path resolved there by its shell (readlink -f, stat),
        its sysfs, mounts and swaps copied here (sysfs_mirror), then the same reading as there."""

        try:
            return probe(self.ssh, dev, nsid, scope)
        except RemoteError as e:
            raise GuardRefused(f"cannot check {dev} on drive host {self.url}: {e}; check by hand and pass "
                               "allow_unguarded") from None


def host_view(paths: dict | HostView | None = None, remote=None) -> HostView:
    """Where the guard reads: ``paths`` (sys_root, mounts, swaps, dev_root; default this host's) on
    this host, or on the drive host ``remote`` (an SshHost) when the drive sits in another machine."""
    fields = HOST_FIELDS
    if isinstance(paths, RemoteHostView) and remote is None:
        return paths
    if isinstance(paths, HostView):
        paths = {k: getattr(paths, k) for k in fields}
    paths = {k: v for k, v in (paths or {}).items() if k in fields}
    if remote is not None:
        return RemoteHostView(url=remote.url, ssh=remote, **paths)
    return HostView(**paths)


def decision(host: HostView | None):
    """A context for one guard decision on ``host`` (RemoteHostView.decision; nothing to share here)."""
    return host.decision() if isinstance(host, RemoteHostView) else nullcontext(host)


def is_drive(path: str, host: HostView | None = None) -> bool:
    """Must a write to ``path`` pass the guard (sysfs.is_drive: a link anywhere to a block device is
    one), asked where the write happens: this host, the virtual rig's tree, or the drive host."""
    if isinstance(host, RemoteHostView):
        return bool(host.probe(path).get("drive"))
    return sysfs.is_drive(path, host)


def opens(path: str, host: HostView | None = None) -> tuple[str, str] | None:
    """(kind, canonical path) of what ``path`` opens on the host that runs the command (kind: block,
    char, file, dir, other, missing; sysfs.identify), or None when that cannot be told there."""
    host = host or HostView()
    if isinstance(host, RemoteHostView):
        got = host.probe(path)
        if "target" in got:
            return "device", got["target"]["path"]
        return (got["kind"], got["path"]) if got.get("kind") and got.get("path") else None
    try:
        ident = sysfs.identify(path, host)
    except sysfs.NotResolvable:
        return None
    return ident["kind"], ident["path"]


def resolve(dev: str, host: HostView | None = None, nsid: int | None = None, scope: str | None = None) -> Target:
    """What ``dev`` really opens and the namespaces a command with ``nsid`` touches (sysfs.resolve),
    read on the host that runs it (the drive host's, for a RemoteHostView); GuardRefused (one line)
    when it is not an NVMe drive there, or nsid is not a namespace of its controller. ``scope``
    "subsystem": every namespace of the subsystem (a Sanitize's reach)."""
    host = host or HostView()
    if isinstance(host, RemoteHostView):
        got = host.probe(dev, nsid, scope)
        if "refused" in got:
            raise GuardRefused(f"{got['refused']} (on drive host {host.url})")
        t = got["target"]
        return Target(t["given"], t["namespace"], tuple(t["controllers"]), t["nsid"], frozenset(t["blocks"]),
                      remote_uses=tuple(tuple(u) for u in got["uses"]), path=t["path"], devno=t["devno"],
                      subsystem=t["subsystem"], nsids=tuple(t["nsids"]))
    try:
        return sysfs.resolve(dev, host, nsid, scope=scope)
    except sysfs.NotResolvable as e:
        raise GuardRefused(str(e)) from None


def judge(dev: str, host: HostView | None = None, nsid: int | None = None, scope: str | None = None) -> Target:
    """Which device and namespaces the guard judges for ``dev`` and a command's ``nsid`` on ``host``:
    ``path`` (canonical there), ``devno``, ``namespace``, ``nsids`` (every one touched),
    ``controllers`` (each one's serial is checked), ``subsystem``, ``blocks`` (the mount check).
    For tests that compare the guard's judgement with what fio and nvme-cli really touched."""
    return resolve(dev, host, nsid, scope)


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

    def check(self, dev: str, serial: str | None, action: str, allow_unguarded: bool = False,
              nsid: int | None = None, scope: str | None = None) -> Target | None:
        """Pass, or raise GuardRefused; a NOTE event 'guard' records the decision either way, and on a
        pass what was judged (the same values as :func:`judge`)."""
        tl = self.nvme.timeline
        ev = tl.begin(NOTE, "guard", meta={"device": dev, "action": action, "serial": serial,
                                           "allow_unguarded": allow_unguarded, "nsid": nsid,
                                           **({"scope": scope} if scope else {})})
        if allow_unguarded:
            logger.warning("destructive-operation guard overridden (allow_unguarded=True): %s on %s runs "
                           "without the serial, mount and boot-device checks", action, dev)
            tl.end(ev, ok=True, overridden=True)
            return None
        try:
            target = resolve(dev, self.host, nsid, scope)
            serials = {}
            for c in target.controllers:
                serials[c] = self.nvme.id_ctrl(f"/dev/{c}").sn.strip()
            for c, sn in serials.items():
                check_destructive(dev, serial, sn, self.host, action, target)
        except PowerrigError as e:
            tl.end(ev, ok=False, error=str(e))
            raise GuardRefused(str(e)) from None
        tl.end(ev, ok=True, controllers=list(target.controllers), namespace=target.namespace, nsid=target.nsid,
               nsids=list(target.nsids), path=target.path, devno=target.devno, subsystem=target.subsystem)
        return target


def guard_destructive(nvme, dev: str, plan_serial: str | None, host: HostView | None = None,
                      action: str = "a destructive step") -> Target | None:
    """Read the serial with nvme-cli (recorded as an event) and check it, the mounts and the boot device.
    A check only (it issues no permit): operations go through powerrig.dut.destructive."""
    return DriveGuard(nvme, host).check(dev, plan_serial, action)
