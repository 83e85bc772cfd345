"""Timed power actions on the interposer (issue 29): a 12 V cycle measured with a raw burst, a PERST#
pulse, and restore-all. Each executed edge goes on the app's timeline (so it shows on the plot).

Why nothing here decides safety: the permit comes only from ``powerrig.dut.destructive.power_session``
(the serial the user typed checked against nvme-cli, nothing mounted, never the host's own drive), and
the session ends with ``power_release`` when the action ends or the app closes. The sequences, their
timing on the interposer's clock and the burst's inrush and hold-up are the sweep's own code
(``powerrig.sweep.power_loss``), so the panel and a power-loss sweep measure alike.
"""
from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from powerrig.core.errors import PowerrigError

logger = logging.getLogger(__name__)

WATCHDOG_MS = 5000        # the interposer restores power if this app goes silent this long mid-action
BURST_MARGIN_US = 20000   # a cycle's cut this much after the burst's pre-trigger window could first be whole
LEAD_US = 2000            # the first edge this far ahead: the interposer refuses an edge already past
EDGE_NAMES = {("12V", 0): "12 V off", ("12V", 1): "12 V on", ("3V3", 0): "3.3 Vaux off", ("3V3", 1): "3.3 Vaux on",
              ("PERST", 1): "PERST# asserted", ("PERST", 0): "PERST# released",
              ("PWRDIS", 1): "PWRDIS asserted", ("PWRDIS", 0): "PWRDIS released"}


class PowerError(PowerrigError):
    """A power action the desktop app cannot run, said in one line."""


def edge_name(edge: dict) -> str:
    return EDGE_NAMES.get((edge["output"], edge["level"]), f"{edge['output']} -> {edge['level']}")


def one_line(msg: str) -> str:
    """A device's reply, made the status bar's one line (firmware without power actions said so)."""
    if "unknown command 'power'" in msg or 'unknown command "power"' in msg:
        return ("this interposer's firmware has no power actions (no 'power' command); "
                "update the firmware (docs/power-loss.md)")
    return (msg.strip().splitlines() or [""])[0]


class Power(QObject):
    updated = Signal(dict)   # {"state": "running"|"done"|"failed"|"restored", "action", "edges", figures...}

    def __init__(self, core, connection, drive, timeline, parent=None):
        super().__init__(parent)
        self.core, self.connection, self.drive, self.timeline = core, connection, drive, timeline
        self.busy = False
        core.on_shutdown(self.shutdown)

    def cycle(self, serial: str, off_ms: float) -> None:
        """12 V cut and restored ``off_ms`` later; the raw burst around the restore gives the inrush and
        the hold-up after the cut."""
        from powerrig.sweep.power_loss import pulse
        if not 0 < off_ms <= 60000:
            self._refuse(f"the off time must be within 0..60000 ms, not {off_ms:g}")
            return
        from powerrig.sweep.power_loss import PERIOD_S, burst_pre
        off_us = int(round(off_ms * 1000))
        # the cut after the burst's pre-trigger window has filled since arming (else the restore's
        # inrush cannot trigger it), plus a margin for blocks the board drops meanwhile
        lead_us = max(LEAD_US, int(burst_pre(off_us) * PERIOD_S * 1e6) + BURST_MARGIN_US)
        self._act("cycle", serial, pulse("cut", lead_us, off_us), measure=True)

    def perst(self, serial: str, pulse_ms: float) -> None:
        """PERST# asserted for ``pulse_ms`` (the drive keeps power: no burst)."""
        from powerrig.sweep.power_loss import pulse
        if not 0 < pulse_ms <= 60000:
            self._refuse(f"the PERST# pulse must be within 0..60000 ms, not {pulse_ms:g}")
            return
        self._act("PERST# pulse", serial, pulse("perst", LEAD_US, int(round(pulse_ms * 1000))), measure=False)

    def restore(self) -> None:
        """Every rail on, PERST# and PWRDIS released, power actions off (``power_release``: it only ever
        restores, so it needs no serial). On the general pool, never queued behind the drive's
        commands: it is the way out of an action that went wrong (it cancels one in flight)."""
        dev = self.connection.dev

        def go():
            from powerrig.dut import destructive
            self._need_power(dev)
            return destructive.power_release(dev)
        self.core.run(go, done=lambda st: self._restored(st), failed=lambda m: self._failed("restore all", m),
                      doing="restoring power")

    def _restored(self, st: dict) -> None:
        self.core.status.emit("power restored: every rail on, PERST# and PWRDIS released")
        self.updated.emit({"state": "restored", "action": "restore all", "rails": st.get("state")})

    def _refuse(self, msg: str) -> None:
        self.core.error.emit(msg)
        self.updated.emit({"state": "failed", "action": "", "error": msg})

    def _need_power(self, dev) -> None:
        if dev is None:
            raise PowerError("no interposer connected: connect one in the Connect panel (or start the virtual rig)")
        if not hasattr(dev, "power_sequence"):
            raise PowerError(f"{self.connection.port} is a measurement instrument, not an interposer: it cannot "
                             "switch the drive's power")

    def _act(self, action: str, serial: str, actions: list[dict], measure: bool) -> None:
        """The guard and session, the sequence (and burst), its edges on the timeline, the session
        released; on the drive's worker, after every nvme-cli command asked before it."""
        serial = (serial or "").strip()
        if not serial:
            self._refuse("type the serial of the drive in the slot first (Read drive fills it in; the guard "
                         "checks it with nvme-cli)")
            return
        if self.busy:
            self._refuse(f"a power action is running; wait for it (or Restore all) before {action}")
            return
        dev, drive = self.connection.dev, self.drive
        self.busy = True
        self.updated.emit({"state": "running", "action": action})

        def go():
            from powerrig.core.timeline import NOTE, Event
            from powerrig.dut import destructive
            from powerrig.sweep.plan import PowerLoss
            from powerrig.sweep.power_loss import BURST_WAIT_S, PERIOD_S, arm_burst, burst_figures, run_sequence
            self._need_power(dev)
            drive.need()
            try:
                destructive.power_session(drive.nvme, drive.controller, serial, dev, WATCHDOG_MS)
            except PowerrigError as e:
                raise PowerError(one_line(str(e))) from None
            try:
                span_s = sum(a.get("after_us", 0) for a in actions) / 1e6
                burst = arm_burst(dev, actions[-1]["after_us"], PowerLoss.inrush_trigger_w,
                                  BURST_WAIT_S + span_s) if measure else None
                edges, utc, _rtt = run_sequence(dev, actions, 5.0 + span_s)
                edges = [dict(e, name=edge_name(e), at_ms=(e["index"] - edges[0]["index"]) * PERIOD_S * 1e3)
                         for e in edges]
                for e in edges:
                    t = utc(e["index"])
                    self.timeline.add(Event(NOTE, e["name"], t, t, meta={
                        "power_edge": True, "action": action, "output": e["output"], "level": e["level"],
                        "index": e["index"], "requested": e["requested"], "planned": True}))
                figures = burst_figures(burst, True, PowerLoss.holdup_threshold_v, edges) if measure else {}
            finally:
                try:
                    destructive.power_release(dev)      # the safe state, power actions off for the session
                except PowerrigError as e:              # the link gone: the interposer's watchdog restores power
                    logger.warning("releasing the power session failed (%s); the interposer's watchdog restores "
                                   "power within %d ms", e, WATCHDOG_MS)
            return {"state": "done", "action": action, "edges": edges, **figures}

        self.drive.run(go, done=self._done, failed=lambda m: self._failed(action, m), doing=action)

    def _done(self, d: dict) -> None:
        self.busy = False
        said = f"{d['action']}: {len(d['edges'])} edges executed"
        if d.get("inrush_peak_a") is not None:
            said += f"; inrush {d['inrush_peak_a']:.2f} A peak"
        self.core.status.emit(said)
        self.updated.emit(d)

    def _failed(self, action: str, msg: str) -> None:
        self.busy = False
        msg = one_line(msg)
        self.core.error.emit(msg)
        self.updated.emit({"state": "failed", "action": action, "error": msg})

    def shutdown(self) -> None:
        """The app closes: power restored and actions off on the interposer, whatever ran (release only
        ever restores; the watchdog would otherwise do it WATCHDOG_MS later)."""
        dev = self.connection.dev
        if dev is None or not hasattr(dev, "power_sequence"):
            return
        from powerrig.dut import destructive
        try:
            if self.busy or dev.power_status().get("enabled"):
                destructive.power_release(dev)
        except PowerrigError as e:
            logger.info("releasing the power session at exit: %s", e)
