"""``PowerrigDriver``: what a sweep or the pytest plugin needs from the rig a place gave us."""
from __future__ import annotations

import attr
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.step import step

from powerrig.interposer.client import Interposer


@target_factory.reg_driver
@attr.s(eq=False)
class PowerrigDriver(Driver):
    """Bound to a PowerrigSlot; opens its interposer and names the drive the way powerrig's options do."""
    bindings = {"slot": "PowerrigSlot"}

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self._dev = None

    def pytest_args(self) -> list[str]:
        """The powerrig pytest options for this slot (--powerrig-rig, -dut, -dut-serial, -dut-host)."""
        s = self.slot
        args = ["--powerrig-rig", s.port, "--powerrig-dut", s.controller]
        if s.drive_serial:
            args += ["--powerrig-dut-serial", s.drive_serial]
        if s.drive_host:
            args += ["--powerrig-dut-host", s.drive_host]
        return args

    def plan_overrides(self) -> dict:
        """The plan keys this slot fixes: [rig] port, [drive] controller, serial and host."""
        s = self.slot
        return {"rig": {"port": s.port},
                "drive": {"controller": s.controller, "serial": s.drive_serial, "host": s.drive_host}}

    @Driver.check_active
    @step()
    def interposer(self):
        """The open Interposer (opened once per activation, closed on deactivate)."""
        if self._dev is None:
            self._dev = Interposer.open(self.slot.port, timeout=10)
        return self._dev

    def on_deactivate(self):
        if self._dev is not None:
            self._dev.close()
            self._dev = None
