"""The connection to the interposer: a port (USB, rfc2217://) or a virtual rig started for the window,
the interposers that answer a scan, and closing it all."""
from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from powerrig.core.errors import PowerrigError

logger = logging.getLogger(__name__)


class GuiError(PowerrigError):
    """A connection the desktop app cannot make, said in one line in the status bar."""


class Connection(QObject):
    """One interposer at a time. ``dev`` is the open Interposer (None when not connected)."""
    connected = Signal(dict)          # the interposer's description (+ "port", "calibration")
    disconnected = Signal(str)        # why (one line)
    reconnected = Signal(str)         # the interposer came back after a loss; the capture goes on
    rig_up = Signal(dict)             # a virtual rig this window started: its state (nvme, fio, drive)
    closing = Signal(str)             # about to close the device: what records from it stops first

    def __init__(self, core, parent=None):
        super().__init__(parent)
        self.core = core
        self.dev = None
        self.port: str | None = None
        self.rig: dict | None = None           # the virtual rig's state when the simulator is used
        self._started_rig = False
        core.on_shutdown(self.shutdown)

    def connect_port(self, port: str) -> None:
        port = (port or "").strip()
        if not port:
            self.core.error.emit("no port given; pick an interposer from the list or type its port "
                                 "(/dev/ttyACM0, rfc2217://host:port)")
            return
        self.core.busy.emit(True)
        self.core.run(open_interposer, port, done=self._opened, failed=self._open_failed,
                      doing=f"connecting to {port}")

    def connect_sim(self, profile: str | None = None) -> None:
        """Bring up a virtual rig (interposer, SSD, nvme-cli, fio) and connect to it."""
        self.core.busy.emit(True)

        def start():
            from powerrig.sim import rig
            state = rig.start(profile or rig.DEFAULT_PROFILE, owned=True)
            return state, open_interposer(state["port"])
        self.core.run(start, done=self._sim_up, failed=self._open_failed, doing="starting the virtual rig")

    def scan(self, done, failed) -> None:
        """The interposers that answer (USB boards and running virtual rigs), on a worker."""
        from powerrig.interposer.discovery import find_interposers
        self.core.run(find_interposers, done=done, failed=failed)

    def _sim_up(self, got) -> None:
        state, opened = got
        self.rig = state
        self._started_rig = True
        self.rig_up.emit(state)
        self._opened(opened)

    def _open_failed(self, msg: str) -> None:
        self.core.busy.emit(False)
        self.core.error.emit(msg)

    def _opened(self, got) -> None:
        dev, port, cal = got
        self.dev, self.port = dev, port
        self.core.busy.emit(False)
        self.connected.emit(dict(dev.description, port=port, calibration=cal))

    def reopen(self, lost_at_error: str | None = None):
        """The same port again, after the link was lost (the recording thread; raises while the
        interposer is away). The lost device is closed first."""
        if lost_at_error is not None and self.dev is not None:
            try:
                self.dev.close()
            except Exception as e:  # noqa: BLE001 - a dead link cannot be closed cleanly
                logger.info("closing the lost %s: %s", self.port, e)
        if self.port.startswith("/dev/") and not Path(self.port).exists():
            raise OSError(f"{self.port} is not there")
        self.dev = open_device(self.port)
        return self.dev

    def disconnect(self, why: str = "disconnected") -> None:
        self.closing.emit(why)
        if self.dev is not None:
            try:
                self.dev.close()
            except Exception as e:  # noqa: BLE001 - a dead link cannot be closed cleanly
                logger.info("closing %s: %s", self.port, e)
            self.dev = None
            self.disconnected.emit(why)

    def shutdown(self) -> None:
        """The device closed, the virtual rig this window started stopped."""
        self.disconnect("closed")
        if self._started_rig and self.rig:
            from powerrig.sim import rig
            try:
                rig.stop(self.rig["id"])
            except PowerrigError as e:
                logger.warning("could not stop the virtual rig %s: %s", self.rig["id"], e)
            self._started_rig = False


def _is_instrument(port: str) -> bool:
    """A measurement source spec typed where a port goes (n6705c:RESOURCE, joulescope:12V=SERIAL,...)."""
    return port.split(":", 1)[0] in ("n6705c", "joulescope")


def open_device(port: str):
    """The interposer on ``port``, or the lab instrument a source spec names: both are measurement
    sources (powerrig.sources) the window records and shows alike."""
    if _is_instrument(port):
        from powerrig.sources import open_source
        return open_source(port)
    from powerrig.interposer.client import Interposer
    return Interposer.open(port)


def open_interposer(port: str):
    """(device, port, calibration) for a port or an instrument source spec; a missing /dev path is one line."""
    if port.startswith("/dev/") and not Path(port).exists():
        raise GuiError(f"{port} does not exist; plug the interposer in, or pick a port from the list")
    dev = open_device(port)
    try:
        cal = dev.calibration()
    except PowerrigError as e:
        logger.info("no calibration from %s: %s", port, e)
        cal = {}
    return dev, port, cal
