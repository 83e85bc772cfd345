"""Drive control: nvme-cli and fio runners (version-tolerant parsers) and the guard that every
destructive step goes through. A drive is reached only through these."""
from __future__ import annotations


def runners(rig: dict, timeline=None):
    """(NvmeCli, Fio) for a rig description: ``nvme`` and ``fio`` program prefixes (a virtual rig's
    impersonations, or None for the host's own tools), ``host``, where the guard reads sysfs, mounts
    and swaps (a virtual rig names its own; default: this host's), and ``drive_host``: an
    ``ssh://user@host:port`` URL the tools run on (checked here, once, so a wrong host or key is one
    clear error before any step).

    One place builds them, so the demo, the sweep engine, the GUI and the tests guard writes alike.
    """
    from powerrig.dut.fio import Fio
    from powerrig.dut.guard import HostView
    from powerrig.dut.nvme import NvmeCli

    from powerrig.dut.remote import drive_host

    remote = drive_host(rig.get("drive_host"))
    if remote is not None:
        remote.check()
    host = HostView(**rig["host"]) if rig.get("host") else None
    nvme = NvmeCli(rig.get("nvme"), timeline, host=host, remote=remote)
    return nvme, Fio(rig.get("fio"), timeline, nvme=nvme, remote=remote)
