"""The recording: everything the connected interposer sends goes to a capture file (the one Recorder,
on its own thread) and to the live source the plot and the multimeter read; a lost link is waited
for and the same capture goes on; a sweep's steps can feed the live source instead."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

logger = logging.getLogger(__name__)


class Recording(QObject):
    data = Signal()                   # the live source has new rows (at most every tick)
    sweep_started = Signal()          # the live source follows a sweep from now on (the plot shows it)

    CLOCK_REFIT_S = 1.0               # how often the live source's clock model (event placement) is refitted
    RECONNECT_S = 600.0               # how long a lost interposer is waited for before the capture ends

    def __init__(self, core, connection, timeline, capture_dir: Path, drive=None, parent=None):
        """``drive``: its serial goes into the capture's metadata."""
        super().__init__(parent)
        self.core, self.connection, self.timeline, self.drive = core, connection, timeline, drive
        self.capture_dir = Path(capture_dir)
        self.recorder = None
        self.live = None                       # LiveSource once the first block arrived
        self.capture_path: Path | None = None
        self.live_capture: Path | None = None  # the capture file holding all of ``live`` (None: a sweep's steps)
        self.sweeping = False                  # the live source follows a sweep's recordings
        self._sweep = lambda: None             # the engine of the sweep followed (follow_sweep)
        self.interval_us: int | None = None    # None: the device's default interval
        self.reconnect_s = self.RECONNECT_S
        self._seen_rows = 0
        self._clock_at = 0.0
        self._next_index: int | None = None    # the device index the live view expects next
        self._lost_at: float | None = None     # monotonic time the link was lost (until it is back)
        connection.connected.connect(lambda _d: self.start())
        connection.closing.connect(lambda _why: self.stop())
        core.tick.connect(self._tick)
        core.on_shutdown(self.stop)

    @property
    def dev(self):
        return self.connection.dev

    def start(self) -> None:
        from powerrig.capture.recorder import Recorder
        if self.dev is None:
            self.core.error.emit("connect to an interposer first")
            return
        self.capture_dir.mkdir(parents=True, exist_ok=True)
        self.capture_path = self.capture_dir / time.strftime("live-%Y%m%d-%H%M%S.jls")
        self.live = None
        self._seen_rows = 0
        serial = getattr(self.drive, "serial", None)
        meta = {"drive": {"serial": serial}} if serial else {}
        self.recorder = Recorder(self.dev, self.capture_path, metadata=meta, interval_us=self.interval_us,
                                 timeline=self.timeline, progress_every_s=0.5, on_block=self._on_block,
                                 reconnect=self._reconnect, reconnect_s=self.reconnect_s)
        self._next_index = self._lost_at = None
        self.recorder.start()
        self.core.status.emit(f"recording to {self.capture_path}")

    def stop(self):
        """End the recording (the capture is closed and saved); its RecordResult, or None."""
        rec, self.recorder = self.recorder, None
        if rec is None:
            return None
        rec.stop()
        try:
            res = rec.wait(30.0)
        except Exception as e:  # noqa: BLE001 - the user still gets the message
            self.core.error.emit(f"the recording ended with an error: {e}")
            return None
        self.core.status.emit(f"recording saved: {res.path} ({res.covered_s:.1f} s, ended by {res.end_reason})")
        return res

    def _on_block(self, block) -> None:
        """The recording thread (ours, or a sweep step's): feed the live source (created on the first
        block)."""
        if self.live is None:
            from powerrig.gui.source import LiveSource
            self.live = LiveSource.for_block(block)
            self.live_capture = None if self.sweeping else self.capture_path
            self.live.clock = self.dev.clock.model() if self.dev is not None and not self.sweeping else None
        elif self._next_index is not None and block.first_index != self._next_index:
            self._live_gap(block)
        self.live.feed(block)
        self._next_index = block.end_index

    def _live_gap(self, block) -> None:
        """The live view's rows for a hole in the device's index, as the capture gets them: the missing
        intervals when the device kept counting, the time away (host clock) when it restarted; then the
        live rows are re-based on the restarted index so events land where they happened."""
        from powerrig.core.blocks import IntervalBlock
        step = block.interval_samples
        if block.first_index > self._next_index:
            rows = (block.first_index - self._next_index) // step
        else:
            away = time.monotonic() - (self._lost_at or time.monotonic())
            rows = max(1, int(round(away / block.interval_s))) if self._lost_at else 0
        if rows:
            self.live.feed(IntervalBlock.gap(self._next_index, rows, step, block.sample_period_s, tuple(block.rails),
                                             "link" if self._lost_at else "missing"))
        if block.first_index < self._next_index:
            self.live.first_index = block.first_index - self.live.length * step
        if self._lost_at is not None:
            self.live.clock = self.dev.clock.model()
            self._lost_at = None

    def _reconnect(self, error: str, attempt: int):
        """The recording thread, after the link was lost: open the same port again (raises while the
        interposer is away; the recorder retries until ``reconnect_s``)."""
        port = self.connection.port
        if attempt == 1:
            self._lost_at = time.monotonic()
            self.core.error.emit(f"connection to the interposer on {port} lost: {error}; waiting up to "
                                 f"{self.reconnect_s:.0f} s for it to come back (plug it in again); the capture "
                                 f"{self.capture_path} goes on, the time away marked as a gap")
        dev = self.connection.reopen(error if attempt == 1 else None)
        self.connection.reconnected.emit(f"the interposer on {port} is back after "
                                         f"{time.monotonic() - self._lost_at:.1f} s; the capture goes on")
        return dev

    def follow_sweep(self, sweep=None):
        """The live view follows a sweep: returns the callback the sweep engine hands its steps'
        recorder (``Sweep(on_block=...)``); the engine records, one capture per step, and the plot shows
        a fresh live stream of those steps (the time between them shaded as a gap). This window's own
        recording ends first (its capture is saved) and starts again after the sweep while connected.
        ``sweep()``: the running engine (or None before it exists): its source's clock is refitted as this
        window's own is and its steps' events are drawn (followed_sweep), so the sweep's commands and
        phases land on the stream where they happened."""
        if self.recorder is not None:
            self.stop()
        self.live = None
        self._seen_rows = 0
        self._next_index = self._lost_at = None
        self._sweep = sweep or (lambda: None)
        self.sweeping = True
        self.sweep_started.emit()
        self.core.status.emit("the plot follows the running sweep (each step records its own capture)")
        return self._on_block

    def sweep_ended(self) -> None:
        """Back to this window's own stream, when connected."""
        if not self.sweeping:
            return
        self.sweeping = False
        if self.dev is not None:
            self.start()
        else:
            self.core.status.emit("the sweep ended; its captures and report are in the sweep panel's output folder")

    def _clock_source(self):
        """Whose clock places events on the live stream: the sweep's source while a sweep runs, else this
        window's interposer; None when neither has one."""
        if self.sweeping:
            engine = self._sweep()
            return engine.clock_model if engine is not None else None
        return self.dev.clock.model if self.dev is not None else None

    def followed_sweep(self):
        """The engine of the sweep the live view follows (its events go on the plot), or None."""
        return self._sweep() if self.sweeping else None

    def _tick(self) -> None:
        """The only place live data is announced; the clock model refitted; a lost link that did not
        come back ends the connection."""
        live = self.live
        if live is not None:
            now = time.monotonic()
            clock = self._clock_source()
            if clock is not None and (live.clock is None or now - self._clock_at >= self.CLOCK_REFIT_S):
                # a refit costs ~3 ms of the GUI thread (bench_gui --profile): once a second, not every tick
                self._clock_at = now
                m = clock()
                if m is not None:
                    live.clock = m
            if live.length != self._seen_rows:
                self._seen_rows = live.length
                self.data.emit()
        rec = self.recorder
        if rec is not None and rec._thread is not None and not rec._thread.is_alive():
            res = rec.result
            self.recorder = None
            if res is not None and res.end_reason == "link-lost":
                self.core.error.emit(f"connection to the interposer on {self.connection.port} lost: {res.error}; "
                                     f"the capture so far is saved in {res.path}. Reconnect to go on.")
                self.connection.disconnect("link lost")
