"""The drive host's clock map checked around every step: a step whose drive host's clock moved
against this host's while it ran (stepped by `date -s` or an NTP step, or slewed by more than TOL_S)
placed its phases by a clock that is not one clock, so it is stored invalid with the reason instead
of done with wrong numbers. A clock stepped between steps needs nothing here: the map follows the
samples taken after the step (dut/agent.py ``estimate``), so the next step is mapped by the clock as
it is. Only drive hosts whose clock is measured (the QEMU guest's agent) are checked; an ssh drive
host's fio stamps are taken on its own clock and moved by the block and command traces' markers,
which refuse a stepped clock themselves (dut/blocktrace.py, dut/nvmetrace.py)."""
from __future__ import annotations

from powerrig.dut.remote import drive_host

TOL_S = 0.005           # the placement the QEMU tier keeps phases within


class ClockCheck:
    def __init__(self, rig):
        remote = drive_host(rig.drive_host) if getattr(rig, "drive_host", None) else None
        self.remote = remote if remote is not None and hasattr(remote, "clock") else None
        self.c0 = None

    def before(self) -> "ClockCheck":
        if self.remote is not None:
            self.c0 = self._read()
        return self

    def _read(self):
        try:
            return self.remote.clock(fresh=True)
        except Exception:  # noqa: BLE001 - an unreachable drive host fails the step elsewhere, with its reason
            return None

    def after(self) -> str | None:
        """Why the step cannot stand (one line), or None."""
        if self.c0 is None:
            return None
        c1 = self._read()
        if c1 is None:
            return None
        d = c1.offset_s - self.c0.offset_s
        tol = TOL_S + self.c0.uncertainty_s + c1.uncertainty_s
        if abs(d) <= tol:
            return None
        return (f"the drive host's clock moved {d:+.3f} s against this host's during the step (offset "
                f"{self.c0.offset_s:+.4f} s before, {c1.offset_s:+.4f} s after; more than {tol * 1e3:.1f} ms): "
                "its phases and commands were placed by a clock that changed under them; run the step again")
