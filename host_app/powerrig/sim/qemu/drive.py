"""A rig's drive in a QEMU guest: the guest (machine.py), its agent behind the relay socket the dut
layer reaches it through (relay.py), and the power model that follows its trace (power.py). `powerrig
sim start --drive qemu` (a plan's ``port = "sim:qemu"``) builds one beside the virtual interposer."""
from __future__ import annotations

from pathlib import Path

from powerrig.sim.qemu.machine import Guest
from powerrig.sim.qemu.power import TracePower
from powerrig.sim.qemu.relay import Relay

PROFILE = "qemu"          # the name a plan or `powerrig sim start --drive` gives it


class QemuDrive:
    def __init__(self, rig_dir: str | Path, serial: str, extra_trace: tuple[str, ...] = ()):
        self.dir = Path(rig_dir) / "qemu"
        self.guest = Guest(self.dir, serial, extra_trace=extra_trace)
        self.relay: Relay | None = None
        self.power: TracePower | None = None

    def start(self) -> "QemuDrive":
        self.guest.start()
        try:
            self.power = TracePower(self.guest.trace_log).start()
            self.relay = Relay(self.guest.agent, self.dir / "agent-relay.sock").start()
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict:
        """What the rig registers: how the dut layer reaches the drive, and the world's handles."""
        return {"drive": PROFILE, "drive_host": f"agent://{self.relay.path}", "nvme": ["nvme"], "fio": ["fio"],
                "controller": "/dev/nvme0", "namespaces": ["/dev/nvme0n1"], "serial": self.guest.serial,
                "host": None, "boot_s": self.guest.boot_s, "world_qmp": str(self.guest.world_qmp),
                "nvme_device": self.guest.nvme_device(), "trace": str(self.guest.trace_log)}

    def stop(self) -> None:
        if self.relay is not None:
            self.relay.stop()
        if self.power is not None:
            self.power.stop()
        self.guest.stop()
