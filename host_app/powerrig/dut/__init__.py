"""Drive control: nvme-cli and fio runners (version-tolerant parsers), the door every command line
and job file for another program goes through (commands.py), and the guarded door every write,
erase and namespace or firmware change goes through (destructive.py). A drive is reached only
through these."""
from __future__ import annotations
from powerrig.dut import commands
from powerrig.dut.fio import Fio
from powerrig.dut.guard import HostView
from powerrig.dut.nvme import NvmeCli
from powerrig.dut.remote import drive_host


def runners(rig: dict, timeline=None):
    """(NvmeCli, Fio) for a rig description: ``nvme`` and ``fio`` program prefixes (a virtual rig's
    impersonations, or None for the host's own tools), ``host``, where the guard reads sysfs, mounts
    and swaps (a virtual rig names its own; default: this host's), and ``drive_host``: an
    ``ssh://user@host:port`` URL the tools run on (checked here, once, so a wrong host or key is one
    clear error before any step).

    The only constructor the faces (sweep engine, pytest plugin, GUI, demo) use, so writes are
    guarded alike everywhere: the Fio gets the NvmeCli the destructive door reads serials with, and
    both read the same host (this one, the virtual rig's tree, or the drive host's over ssh).
    """

    for tool in ("nvme", "fio"):
        if rig.get(tool) is not None:
            commands.check_program(f"{tool} program", rig[tool])
    remote = drive_host(rig.get("drive_host"))
    if remote is not None:
        remote.check()
    host = HostView(**rig["host"]) if rig.get("host") else None
    nvme = NvmeCli(rig.get("nvme"), timeline, host=host, remote=remote)
    return nvme, Fio(rig.get("fio"), timeline, nvme=nvme, remote=remote)
