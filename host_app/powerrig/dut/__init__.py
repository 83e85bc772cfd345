"""Drive control: nvme-cli and fio runners (version-tolerant parsers) and the guard that every
destructive step goes through. A drive is reached only through these."""
from __future__ import annotations


def runners(rig: dict, timeline=None):
    """(NvmeCli, Fio) for a rig description: ``nvme`` and ``fio`` program prefixes (a virtual rig's
    impersonations, a remote shell prefix, or None for the host's own tools) and ``host``, where the
    guard reads sysfs, mounts and swaps (a virtual rig names its own; default: this host's).

    One place builds them, so the demo, the sweep engine, the GUI and the tests guard writes alike.
    """
    from powerrig.dut.fio import Fio
    from powerrig.dut.guard import HostView
    from powerrig.dut.nvme import NvmeCli

    host = HostView(**rig["host"]) if rig.get("host") else None
    nvme = NvmeCli(rig.get("nvme"), timeline, host=host)
    return nvme, Fio(rig.get("fio"), timeline, nvme=nvme)
