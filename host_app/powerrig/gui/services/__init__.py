"""The app's services: what the window can do, one concern each, over the domain-free core.

    connection  the interposer (a port, or a virtual rig the window starts)
    recording   the capture file and the live source the plot reads
    captures    what the plot shows (live or an opened capture), events on its time axis, exports
    markers     the figures between the two markers
    drive       nvme-cli: identity, power states, APST, temperature (runners from powerrig.dut.runners)
    workload    fio presets on the drive, their live figures and their phase's power
    power       timed power actions on the interposer (cycle, PERST#, restore) through the drive guard
    sweeps      plans run by the sweep engine on a thread, their results and report

Widgets hold a :class:`Services` and talk only to it and to the core's signals (an import-linter
contract says so); a service never imports a widget.
"""
from __future__ import annotations

from pathlib import Path

from powerrig.gui.core import Core
from powerrig.gui.services.captures import Captures
from powerrig.gui.services.connection import Connection
from powerrig.gui.services.drive import Drive
from powerrig.gui.services.markers import Markers
from powerrig.gui.services.power import Power
from powerrig.gui.services.recording import Recording
from powerrig.gui.services.sweeps import Sweeps
from powerrig.gui.services.workload import Workload

TIMELINE_KEEP = 2000       # events held in memory (the capture keeps all): ~3 h of temperature polls


class Services:
    """Every service of one window, built on one Core, wired to each other once here."""

    def __init__(self, capture_dir: str | Path | None = None, core: Core | None = None):
        from powerrig.core.timeline import Timeline
        self.core = core or Core()
        from powerrig.core import paths     # the user's data folder: not shared, not cleared at reboot
        self.capture_dir = Path(capture_dir or paths.captures_dir())
        self.timeline = Timeline(keep=TIMELINE_KEEP)
        c = self.core
        self.connection = Connection(c)
        self.drive = Drive(c, self.timeline)
        self.recording = Recording(c, self.connection, self.timeline, self.capture_dir, drive=self.drive)
        self.captures = Captures(c, self.recording, self.timeline)
        self.markers = Markers(c, self.captures)
        self.workload = Workload(c, self.drive, self.recording, self.captures, self.capture_dir)
        self.sweeps = Sweeps(c, self.connection, self.recording)
        self.power = Power(c, self.connection, self.drive, self.timeline)
        self.connection.rig_up.connect(self.drive.use_rig)
        # the drive is read once connected (the rig's drive, or one configured before)
        self.connection.connected.connect(lambda _d: self.drive.refresh() if self.drive.nvme is not None else None)

    def shutdown(self) -> None:
        """Leave nothing running: fio, the recording, the device, the virtual rig, the workers."""
        self.core.shutdown()
