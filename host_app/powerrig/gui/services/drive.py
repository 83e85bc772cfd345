"""The drive under test: identity and power states (id-ctrl), one-click power state, APST where the
drive has it, and the temperature and throttle poll. nvme-cli runs on the drive's own worker (one
command at a time, in the order asked), recorded on the app's timeline.

Each action's admin commands are placed on the drive host kernel's traced submission and completion
(sweep/command_trace.admin_recorder: the virtual drive host's trace on a virtual rig, the kernel's on
an ssh or QEMU drive host) as a sweep step's are: nvme-cli's host interval is a process start and a
device open wide (~100 ms), the controller's a few ms. A rig whose tools run on this host, or a trace
that fails, keeps the host interval; the status bar says why once, and each event carries it.

The runners come from ``powerrig.dut.runners`` only (see :func:`build_runners`): the one constructor
the faces use, so the GUI's writes meet the same guard as the sweep engine's and the CLI's."""
from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, QTimer, Signal

from powerrig.core.errors import PowerrigError
from powerrig.core.timeline import NOTE, NVME, POWER_STATE, Event
from powerrig.sweep import command_trace

logger = logging.getLogger(__name__)


class DriveError(PowerrigError):
    """A drive action the desktop app refuses or that failed, said in one line."""


def build_runners(rig: dict, timeline):
    """(NvmeCli, Fio) for a rig description, through dut's one constructor (the one line to change
    if that constructor moves)."""
    from powerrig.dut import runners
    return runners(rig, timeline)


def smart_counters(smart) -> dict:
    """A SmartLog as the analysis' throttle reading ({counter: value})."""
    return {"thm_temp1_trans_count": smart.thermal_transitions[0],
            "thm_temp2_trans_count": smart.thermal_transitions[1],
            "thm_temp1_total_time": smart.thermal_time_s[0], "thm_temp2_total_time": smart.thermal_time_s[1]}


def throttle_of(before, now) -> str:
    """Throttling between two SmartLogs (None before the first), by analysis.thermal's rules."""
    from powerrig.analysis.thermal import throttle_state
    return throttle_state(smart_counters(before) if before is not None else None, smart_counters(now),
                          now.critical_warning)


class Drive(QObject):
    updated = Signal(dict)            # identity / power_state / apst (None: not supported) / temperature

    POLL_MS = 5000                    # temperature and throttle poll (skipped in a non-operational state)

    def __init__(self, core, timeline, parent=None):
        super().__init__(parent)
        self.core, self.timeline = core, timeline
        self.pool = core.serial_pool()         # nvme-cli commands run one at a time (a read never overtakes a set)
        self.nvme = self.fio = None
        self.controller = self.namespace = self.serial = None
        self.identity = None
        self.ps_target: int | None = None      # the power state this app last asked for (or read)
        self._last_smart = None
        self._polling = False
        self._rig: dict | None = None
        self.trace_note: str | None = None     # why the last action's commands kept nvme-cli's interval (None: placed)
        self._said: str | None = None          # the reason last put on the status bar and the timeline
        self._poll_timer = QTimer(self)
        self._poll_timer.timeout.connect(self.poll_thermal)
        core.on_shutdown(self._poll_timer.stop)

    def use_rig(self, rig: dict) -> None:
        """The drive of a rig description (a virtual rig's state, or a plan's rig): its runners, its
        controller, first namespace and serial; the thermal poll starts."""
        self.nvme, self.fio = build_runners(rig, self.timeline)
        self._rig = rig
        self.controller, self.namespace, self.serial = rig["controller"], rig["namespaces"][0], rig.get("serial")
        self._poll_timer.start(self.POLL_MS)

    def run(self, fn, **kw) -> None:
        """``fn`` on the drive's worker (after every command asked before it)."""
        self.core.run(fn, pool=self.pool, **kw)

    def traced(self, what: str, fn):
        """``fn()`` (on the drive's worker) with the admin commands it issues recorded in the drive
        host's kernel, and placed copies of exactly the events it added to the timeline; tracing
        that fails never fails the action (the host interval stands, and one line says why)."""
        k0 = self.timeline.added
        try:
            rec, why = command_trace.admin_recorder(self._rig or {}, f"gui-{what}-{time.time_ns()}")
        except Exception as e:  # noqa: BLE001 - a refinement: the action runs without it
            rec, why = None, f"nvme_trace: could not start the trace ({_one_line(e)}); the host interval stands"
        try:
            return fn()
        finally:
            try:
                self._place(k0, rec, why)
            except Exception as e:  # noqa: BLE001 - never fails the action, nor hides why it failed
                logger.warning("placing the drive's commands: %s", e, exc_info=True)

    def _place(self, k0: int, rec, why: str | None) -> None:
        """Placed copies of the NVME and POWER_STATE events added since the ``k0``-th; the reason any
        kept the host interval in ``trace_note``, said (status bar, a NOTE event) when it changes."""
        added = [e for e in self.timeline.since(k0)[1] if e.kind in (NVME, POWER_STATE) and e.t_end is not None]
        if not added:
            return
        command_trace.place(self.timeline, rec, why, events=added, note_event=False)
        copies = [e for e in self.timeline.since(k0)[1] if e.kind == NVME and "replaces" in (e.meta or {})]
        left = next((c.meta.get("nvme_trace") for c in copies if c.meta.get("placed") != "nvme_trace"), None)
        self.trace_note = left
        if left and left != self._said:          # once per reason: the 5 s poll would repeat it forever
            t = max(e.t_end for e in added)
            self.timeline.add(Event(NOTE, "nvme_trace", t, t, meta={"nvme_trace": left, "placed": 0}))
            self.core.status.emit(left)
        self._said = left

    def need(self) -> None:
        if self.nvme is None:
            raise DriveError("no drive configured: start the virtual rig (`powerrig gui --sim`, or Simulator in "
                             "the Connect panel)")

    def refresh(self) -> None:
        """Read drive: identity, power state, APST if the drive has it (id-ctrl APSTA: the feature is
        optional; many enterprise drives and the default virtual drive lack it, shown as not supported,
        never asked), temperature."""
        def read():
            self.need()
            return self.traced("refresh", read_all)

        def read_all():
            ident = self.nvme.id_ctrl(self.controller)
            ps = self.nvme.get_power_state(self.controller).power_state
            apst = self.nvme.get_apst(self.controller).enabled if ident.apsta else None
            smart = self.nvme.smart_log(self.controller)
            return {"identity": ident, "power_state": ps, "apst": apst,
                    "temperature_c": smart.temperature_c, "smart": smart}

        def done(d):
            self.identity = d["identity"]
            if self.ps_target is None:        # a set asked meanwhile knows better than this read
                self.ps_target = d["power_state"]
            self._last_smart = d["smart"]
            self.updated.emit(d)
        self.run(read, done=done)

    def set_power_state(self, ps: int) -> None:
        self.ps_target = int(ps)          # known before the set runs: a poll queued after it holds off

        def go():
            self.need()
            got = self.traced("set-ps", lambda: self.nvme.set_power_state(self.controller, int(ps)))
            return {"power_state": got.power_state, "nvme_trace": self.trace_note}

        def done(d):
            self.updated.emit(d)
            self.core.status.emit(f"drive in PS{d['power_state']}" + (f" ({d['nvme_trace']})" if d["nvme_trace"] else ""))
            self.poll_thermal()               # a fresh reading (or the reason for none) for the new state
        self.run(go, done=done, doing=f"setting PS{ps}")

    def _non_operational(self, ps) -> bool:
        if ps is None or self.identity is None:
            return False
        return any(s.ps == ps and s.non_operational for s in self.identity.power_states)

    def poll_thermal(self) -> None:
        """Temperature and throttle state, read on the drive's worker (after any queued set). Never in a
        non-operational state this app put the drive in: a log read is an admin command, which the drive
        may serve only by leaving the state, spoiling the very power being measured (NVMe NOPS)."""
        if self.nvme is None or self._polling:
            return
        self._polling = True

        def read():
            ps = self.ps_target
            if self._non_operational(ps):
                return {"thermal": f"not read in PS{ps} (non-operational): a log read would wake the drive",
                        "thermal_skipped": True}
            smart = self.traced("poll", lambda: self.nvme.smart_log(self.controller))
            return {"temperature_c": smart.temperature_c, "smart": smart,
                    "throttle": throttle_of(self._last_smart, smart)}

        def done(d):
            self._polling = False
            if "smart" in d:
                self._last_smart = d["smart"]
            self.updated.emit(d)

        def failed(msg):
            self._polling = False
            logger.info("temperature poll failed: %s", msg)
        self.run(read, done=done, failed=failed)

    def set_apst(self, enabled: bool) -> None:
        def go():
            self.need()
            if self.identity is not None and not self.identity.apsta:
                raise DriveError("this drive has no APST (id-ctrl APSTA = 0); nothing to switch")
            def both():
                self.nvme.set_apst(self.controller, enabled, [])
                return self.nvme.get_apst(self.controller).enabled
            return {"apst": self.traced("apst", both), "apst_set": True}
        self.run(go, done=self.updated.emit)


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split())[:200]
