"""The rig a plan names, brought up for a sweep: an interposer port, an rfc2217:// URL, or a virtual
rig (`sim:PROFILE`, `sim:qemu` for the real NVMe stack in a QEMU guest, started here and stopped
afterwards, or `rig:ID`, one `powerrig sim start` left running), with the nvme-cli and fio commands and the
drive paths to use."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from powerrig.core.errors import LinkError, PowerrigError

logger = logging.getLogger(__name__)


@dataclass
class RigHandle:
    port: str
    nvme: list
    fio: list
    controller: str
    namespaces: list
    station: str
    sim_id: str | None = None
    info: dict = field(default_factory=dict)
    host: dict | None = None          # where the guard reads sysfs and mounts (a virtual rig names its own)
    drive_host: str | None = None     # ssh://user@host:port the drive's tools run on (None: this host)

    def host_view(self):
        """Where the drive guard looks: the virtual rig's own sysfs and mounts, or this host's, read on
        the drive host when the drive sits in another machine (the checks run there, over ssh)."""
        from powerrig.dut.guard import host_view
        from powerrig.dut.remote import drive_host
        return host_view(self.host, drive_host(self.drive_host))

    def runners(self, timeline):
        """(NvmeCli, Fio) for this rig, with the drive guard on every write."""
        from powerrig.dut import runners
        return runners({"nvme": self.nvme, "fio": self.fio, "host": self.host, "drive_host": self.drive_host},
                       timeline)

    def close(self) -> None:
        if self.sim_id:
            from powerrig.sim import rig as simrig
            try:
                simrig.stop(self.sim_id)
            except PowerrigError as e:
                logger.warning("stopping virtual rig %s: %s", self.sim_id, e)


def bring_up(plan) -> RigHandle:
    r = plan.rig
    if r.running_rig:                     # a rig `powerrig sim start` left running: used, not stopped
        from powerrig.core import rig_registry
        st = next((x for x in rig_registry.running() if x["id"] == r.running_rig), None)
        if st is None:
            from powerrig.sweep.plan import PlanError
            raise PlanError(f"rig.port: no running virtual rig {r.running_rig!r} (see `powerrig sim list`)")
        return RigHandle(st["port"], st["nvme"], st["fio"], st["controller"], st["namespaces"],
                         f"sim:{st['profile']}:{st['id']}", None, st, st.get("host"),
                         st.get("drive_host") or plan.drive.host or None)
    if r.sim_profile:
        from powerrig.sim import rig as simrig
        st = simrig.start(r.sim_profile, owned=True)
        return RigHandle(st["port"], st["nvme"], st["fio"], st["controller"], st["namespaces"],
                         f"sim:{r.sim_profile}:{st['id']}", st["id"], st, st.get("host"),
                         st.get("drive_host") or plan.drive.host or None)
    ns = [plan.drive.namespace]
    return RigHandle(r.port, list(r.nvme), list(r.fio), plan.drive.controller, ns, r.port,
                     drive_host=plan.drive.host or None)


def open_interposer(port: str, wait_s: float = 0.0, what: str = "rig.port", reply_timeout: float = 2.0):
    """Open the interposer; retry for up to ``wait_s`` (an unplugged board coming back).
    ``reply_timeout``: how long its first reply may take (plan rig.reply_timeout_s)."""
    from powerrig.interposer.client import Interposer
    from powerrig.sweep.plan import PlanError

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return Interposer.open(port, timeout=reply_timeout)
        except (LinkError, OSError) as e:
            if time.monotonic() >= deadline:
                raise PlanError(f"{what}: the interposer at {port} does not answer ({e}); check the cable and "
                                "`powerrig devices`") from None
            time.sleep(0.5)
