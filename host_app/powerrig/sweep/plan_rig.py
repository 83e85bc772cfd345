"""The rig a plan names, brought up for a sweep: an interposer port, an rfc2217:// URL, or a virtual
rig (`sim:PROFILE`, `sim:qemu` for the real NVMe stack in a QEMU guest, started here and stopped
afterwards, or `rig:ID`, one `powerrig sim start` left running), with the nvme-cli and fio commands and the
drive paths to use: on a virtual rig the plan's drive.controller and drive.namespace when it names them
(they must be the rig's), else the rig's own; a stream's own namespace must be the rig's too. `sweep
--check` judges a `rig:ID` plan against that rig when it is running (check_running)."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from powerrig.core import rig_registry
from powerrig.core.errors import LinkError, PowerrigError
from powerrig.dut import guard, remote
from powerrig.dut import runners as make_runners
from powerrig.interposer.client import Interposer
from powerrig.sim import rig as simrig
from powerrig.sweep.plan import DriveSpec, PlanError, line_of

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
        return guard.host_view(self.host, remote.drive_host(self.drive_host))

    def runners(self, timeline):
        """(NvmeCli, Fio) for this rig, with the drive guard on every write."""
        return make_runners({"nvme": self.nvme, "fio": self.fio, "host": self.host, "drive_host": self.drive_host},
                       timeline)

    def close(self) -> None:
        if self.sim_id:
            try:
                simrig.stop(self.sim_id)
            except PowerrigError as e:
                logger.warning("stopping virtual rig %s: %s", self.sim_id, e)


def bring_up(plan) -> RigHandle:
    r = plan.rig
    if r.running_rig:                     # a rig `powerrig sim start` left running: used, not stopped
        st = next((x for x in rig_registry.running() if x["id"] == r.running_rig), None)
        if st is None:
            raise PlanError(f"rig.port: no running virtual rig {r.running_rig!r} (see `powerrig sim list`)")
        drive_host = st.get("drive_host") or plan.drive.host or None
        ctrl, nss = drive_names(plan, st, drive_host)
        return RigHandle(st["port"], st["nvme"], st["fio"], ctrl, nss, f"sim:{st['profile']}:{st['id']}", None, st,
                         st.get("host"), drive_host)
    if r.sim_profile:
        st = simrig.start(r.sim_profile, owned=True)
        drive_host = st.get("drive_host") or plan.drive.host or None
        handle = RigHandle(st["port"], st["nvme"], st["fio"], st["controller"], st["namespaces"],
                           f"sim:{r.sim_profile}:{st['id']}", st["id"], st, st.get("host"), drive_host)
        try:
            handle.controller, handle.namespaces = drive_names(plan, st, drive_host)
        except PowerrigError:
            handle.close()                # started for this plan only: nothing left running
            raise
        return handle
    ns = [plan.drive.namespace]
    return RigHandle(r.port, list(r.nvme), list(r.fio), plan.drive.controller, ns, r.port,
                     drive_host=plan.drive.host or None)


def _named(plan, key: str) -> bool:
    """Does the plan name drive.<key> (a value other than DriveSpec's default, or the key written)?"""

    value = getattr(plan.drive, key)
    source = getattr(plan, "source", None)
    return value != getattr(DriveSpec, key) or bool(source and line_of(source, ("drive", key)))


def _identity(path: str, view) -> tuple | None:
    """What a path is on the rig's host, for comparing two names of one device: the subsystem (or
    controllers) and the namespace's NSID, as the drive guard resolves it; None when it resolves to
    nothing there (then only the same text is the same)."""

    try:
        t = guard.resolve(path, view)
    except guard.GuardRefused:
        return None
    return (t.subsystem or t.controllers, t.nsid if t.namespace else None)


def drive_names(plan, st: dict, drive_host: str | None = None) -> tuple[str, list]:
    """The controller and namespaces a virtual rig's sweep uses: the plan's drive.controller and
    drive.namespace when it names them and the rig has them (the same text, or the same device read
    through the rig's own host view), the rig's own otherwise. Never silently another: a plan naming
    what the rig lacks is a PlanError (one line, what the rig has), not a format of the rig's first."""

    ctrl, nss = st["controller"], list(st["namespaces"])
    want_c, want_n = _named(plan, "controller"), _named(plan, "namespace")
    streams = stream_namespaces(plan)
    if not (want_c or want_n or streams):
        return ctrl, nss
    view = guard.host_view(st.get("host"), remote.drive_host(drive_host))
    seen: dict[str, tuple] = {}          # one resolution a name: on a drive host each is a probe there

    def ident(path: str) -> tuple:
        if path not in seen:
            seen[path] = _identity(path, view) or (path,)
        return seen[path]

    def same(a: str, b: str) -> bool:
        return a == b or ident(a) == ident(b)
    has = f"the rig {st.get('id', '?')} has controller {ctrl} and namespaces {', '.join(nss)}"
    if want_c and not same(plan.drive.controller, ctrl):
        raise PlanError(f"drive.controller {plan.drive.controller} is not this rig's: {has}; name one of those "
                        "or leave drive.controller out")
    hit = None
    if want_n:
        hit = next((n for n in nss if same(plan.drive.namespace, n)), None)
        if hit is None:
            raise PlanError(f"drive.namespace {plan.drive.namespace} is not one of this rig's: {has}; name one "
                            "of those or leave drive.namespace out")
    for key, ns in streams:           # a stream's own namespace is used as written: the rig's it must be
        if not any(same(ns, n) for n in nss):
            raise PlanError(f"{key} {ns} is not one of this rig's: {has}; name one of those or leave the "
                            "stream's namespace out (it then uses the drive's)")
    if want_n:
        nss = [plan.drive.namespace] + [n for n in nss if n != hit]
    return (plan.drive.controller if want_c else ctrl), nss


def stream_namespaces(plan) -> list[tuple[str, str]]:
    """(key, namespace) of every stream that names its own namespace (workloads and the preparation's
    job), the key as --check names it: ``workload[0].streams[1].namespace``."""
    out = []
    jobs = [(f"workload[{k}]", w) for k, w in enumerate(plan.workloads)]
    if plan.preparation.job is not None:
        jobs.append(("preparation.job", plan.preparation.job))
    for where, w in jobs:
        for k, s in enumerate(w.streams):
            if s.namespace is not None:
                out.append((f"{where}.streams[{k}].namespace", s.namespace))
    return out


def check_running(plan) -> str | None:
    """``sweep --check`` of a plan on ``rig:ID``: the plan's drive.controller, drive.namespace and
    streams' namespaces judged against the running rig as bring-up judges them (PlanError, one line
    listing what the rig has), or a note that the rig is not running so they cannot be checked now."""
    rig_id = plan.rig.running_rig
    if not rig_id:
        return None
    st = next((x for x in rig_registry.running() if x["id"] == rig_id), None)
    if st is not None:
        drive_names(plan, st, st.get("drive_host") or plan.drive.host or None)
        return None
    named = [f"drive.{k}" for k in ("controller", "namespace") if _named(plan, k)] + \
        [k for k, _ in stream_namespaces(plan)]
    if not named:
        return None
    return (f"note: rig {rig_id} is not running, so --check cannot check {', '.join(named)} against its "
            "namespaces now; bring-up does (or start it and check again)")


def open_interposer(port: str, wait_s: float = 0.0, what: str = "rig.port", reply_timeout: float = 2.0):
    """Open the interposer; retry for up to ``wait_s`` (an unplugged board coming back).
    ``reply_timeout``: how long its first reply may take (plan rig.reply_timeout_s)."""

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return Interposer.open(port, timeout=reply_timeout)
        except (LinkError, OSError) as e:
            if time.monotonic() >= deadline:
                raise PlanError(f"{what}: the interposer at {port} does not answer ({e}); check the cable and "
                                "`powerrig devices`") from None
            time.sleep(0.5)
