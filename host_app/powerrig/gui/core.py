"""The application core: state and Qt signals the widgets talk through, and the workers that keep the
GUI thread free.

Widgets never import each other; they call the core and listen to its signals. Everything slow runs
on a worker (``Core.run``): opening a port and the recording (its own thread, the one Recorder), nvme-cli
and fio (subprocesses), the analysis, capture file reads. The GUI thread only paints.
"""
from __future__ import annotations

import gc
import itertools

import logging
import os
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QThreadPool, QTimer, Signal

from powerrig.core.errors import PowerrigError

logger = logging.getLogger(__name__)


# ---- workers ----------------------------------------------------------------------------------------
class _Results(QObject):
    """Carries every job's outcome from the worker threads to the GUI thread, keyed by job. One for the
    core's life, connected once: a QObject with its own connections per job cost a construction every
    live frame, and under PySide6 6.11 each per-job connection to a bound method (a signal's ``emit``,
    the default failure handler) stayed behind after its sender was gone, ~60 bytes each
    (benchmarks/bench_gui_jobs.py: ~135 bytes a job)."""
    done = Signal(object, object)      # key, result
    failed = Signal(object, str)       # key, one-line message


class _Job:
    """One call on a worker thread; the pool runs ``run`` (a plain callable: a QRunnable subclass handed
    to a pool is owned by C++ and its Python side was never freed, one leaked per live frame)."""

    def __init__(self, key, fn, args, kwargs, results: _Results):
        self.key, self.fn, self.args, self.kwargs, self.results = key, fn, args, kwargs, results

    def run(self) -> None:
        try:
            out = self.fn(*self.args, **self.kwargs)
        except PowerrigError as e:
            self._send("failed", str(e))
        except Exception as e:  # noqa: BLE001 - shown in the window, logged with its traceback
            logger.error("worker %s failed:\n%s", getattr(self.fn, "__name__", self.fn), traceback.format_exc())
            self._send("failed", f"{e.__class__.__name__}: {e}")
        else:
            self._send("done", out)

    def _send(self, outcome: str, value) -> None:
        try:
            getattr(self.results, outcome).emit(self.key, value)
        except RuntimeError:        # the core was deleted while this job ran (a shutdown that timed out)
            logger.debug("worker %s finished after its window closed; outcome dropped",
                         getattr(self.fn, "__name__", self.fn))


@dataclass
class MarkerFigures:
    """What the markers read: the analysis' own figures over [t_a, t_b]."""
    t_a: float
    t_b: float
    dt_s: float
    mean_w: dict = field(default_factory=dict)      # rail / "total" -> W
    energy_j: dict = field(default_factory=dict)
    min_w: dict = field(default_factory=dict)
    max_w: dict = field(default_factory=dict)
    lost_s: float = 0.0


def range_figures(source, t_a: float, t_b: float) -> MarkerFigures:
    """Figures between two times, by the analysis' own code for any range (analysis.selection: the
    pass that computes every phase of a capture), over any AnalysisSource: the live source's full-rate
    rows or a capture."""
    from powerrig.analysis.selection import SelectionError, range_stats

    a, b = sorted((t_a, t_b))
    dt = source.interval_s
    held = getattr(source, "held", None)
    if held is not None:
        first, end = held()
        if max(0.0, a / dt) < first:
            raise MarkerError(f"marker A at {a:.3f} s is older than the {(end - first) * dt:.0f} s the live view "
                              "holds at full rate; stop the recording and open its capture to measure there")
    try:
        res = range_stats(source, a, b, name="markers")
    except SelectionError:
        raise MarkerError("the markers enclose no data; drag them apart over the plotted signal") from None
    out = MarkerFigures(a, b, b - a, lost_s=res.lost_s)
    for k, s in res.rails.items():
        out.mean_w[k], out.energy_j[k] = s["mean_w"], s["energy_j"]
        out.min_w[k], out.max_w[k] = s["min_w"], s["max_w"]
    return out


def throttle_state(before, now) -> str:
    """The drive's thermal throttling from two SMART logs: a TMT2 (heavy) or TMT1 (light) transition
    counted since the last read, else the critical-warning temperature bit, else none."""
    if before is not None:
        d1 = now.thermal_transitions[0] - before.thermal_transitions[0]
        d2 = now.thermal_transitions[1] - before.thermal_transitions[1]
        if d2 > 0:
            return "heavy throttling (TMT2)"
        if d1 > 0:
            return "light throttling (TMT1)"
    if now.critical_warning & 0x02:
        return "over its temperature threshold"
    return "none"


class MarkerError(PowerrigError):
    pass


class GuiError(PowerrigError):
    pass


# ---- presets (what the workload panel offers) --------------------------------------------------------
PRESETS = {
    "seq 128k read": {"rw": "read", "bs": "128k", "iodepth": 32, "numjobs": 1, "runtime": 10},
    "seq 128k write": {"rw": "write", "bs": "128k", "iodepth": 32, "numjobs": 1, "runtime": 10},
    "rand 4k read": {"rw": "randread", "bs": "4k", "iodepth": 32, "numjobs": 4, "runtime": 10},
    "rand 4k write": {"rw": "randwrite", "bs": "4k", "iodepth": 32, "numjobs": 4, "runtime": 10},
    "rand 4k 70/30": {"rw": "randrw", "bs": "4k", "iodepth": 32, "numjobs": 4, "runtime": 10, "rwmixread": 70},
}
WRITES = {"write", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite"}


def _children_running(prefix: list[str]) -> list[int]:
    """Pids of this process's children whose command line starts with ``prefix`` (the fio we ran)."""
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in kids:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if [a.decode(errors="replace") for a in argv[:len(prefix)]] == prefix:
                pids.append(int(pid))
    return pids


class Core(QObject):
    """Application state: the connection, the recording, the plot's source, markers, drive and workload."""
    connected = Signal(dict)          # the interposer's description (+ "port", "calibration")
    disconnected = Signal(str)        # why (one line)
    error = Signal(str)               # a one-line message for the window
    status = Signal(str)              # progress text
    data = Signal()                   # the plot's source has new data (at most every tick)
    events = Signal()                 # the timeline changed
    markers = Signal(object)          # MarkerFigures; None when cleared; a str: why there are none
    source_changed = Signal(object)   # the plot's source (LiveSource or FileSource)
    analysis_ready = Signal(object)   # an Analysis of an opened capture
    drive = Signal(dict)              # identity / power states / apst / temperature
    workload = Signal(dict)           # {"state": "running"|"done"|"failed", "name", ...}
    busy = Signal(bool)
    reconnected = Signal(str)         # the interposer came back after a loss; the capture goes on

    TICK_MS = 50
    CLOCK_REFIT_S = 1.0               # how often the live source's clock model (event placement) is refitted
    THERMAL_EVERY_MS = 5000           # temperature and throttle poll (skipped in a non-operational state)
    TIMELINE_KEEP = 2000              # events held in memory (the capture keeps all): ~3 h of temperature polls
    FIO_STATUS_S = 1.0                # fio's status interval: the workload panel's live MiB/s and IOPS
    RECONNECT_S = 600.0               # how long a lost interposer is waited for before the capture ends
    MARKER_REFRESH_S = 0.5            # markers reaching past a live stream's end are recomputed this often

    def __init__(self, capture_dir: str | Path | None = None, parent=None):
        super().__init__(parent)
        from pyqtgraph.util.garbage_collector import GarbageCollector

        from powerrig.core.timeline import Timeline

        # Python's cyclic GC may otherwise run in a worker thread and free Qt objects there (plot items
        # removed on the GUI thread): Qt's connection mutex and the GIL then deadlock the two threads.
        # Collect on the GUI thread only, on a timer (pyqtgraph's recipe for exactly this).
        self._gc = GarbageCollector(interval=1.0)

        self.pool = QThreadPool.globalInstance()
        self.pool.setMaxThreadCount(max(4, self.pool.maxThreadCount()))
        self.drive_pool = QThreadPool(self)
        self.drive_pool.setMaxThreadCount(1)
        self.capture_dir = Path(capture_dir or Path(tempfile.gettempdir()) / "powerrig-captures")
        self.timeline = Timeline(keep=self.TIMELINE_KEEP)
        self.dev = None
        self.port: str | None = None
        self.rig: dict | None = None           # the virtual rig's state when the simulator is used
        self.recorder = None
        self.sweeping = False                  # the live source follows a sweep's recordings
        self._show_next_live = False
        self.live = None                       # LiveSource once the first block arrived
        self.source = None                     # what the plot shows
        self.capture_path: Path | None = None
        self.nvme = None
        self.fio = None
        self.controller = self.namespace = self.serial = None
        self.identity = None
        self.marker_times: tuple[float, float] | None = None
        self._marker_req = 0                   # the newest marker computation; older results are dropped
        self._marker_grows = False             # the markers reach past the live data: recompute as it comes
        self._marker_at = 0.0
        self._marker_rows = 0                  # the live rows when the markers were last computed
        self.interval_us: int | None = None    # None: the device's default interval
        self._jobs: dict = {}                  # key -> a job's (done, failed) until its outcome is delivered
        self._job_ids = itertools.count()
        self._results = _Results(self)         # lives on the GUI thread: outcomes arrive there, queued
        self._results.done.connect(self._job_done)
        self._results.failed.connect(self._job_failed)
        self._seen_rows = 0
        self._seen_events = 0
        self._started_rig = False
        self._clock_at = 0.0
        self.reconnect_s = self.RECONNECT_S
        self.ps_target: int | None = None       # the power state this app last asked for (or read)
        self._last_smart = None
        self._thermal_busy = False
        self._thermal_timer = QTimer(self)
        self._thermal_timer.timeout.connect(self.poll_thermal)
        self._next_index: int | None = None     # the device index the live view expects next
        self._lost_at: float | None = None      # monotonic time the link was lost (until it is back)
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._tick)
        self._timer.start(self.TICK_MS)

    # ---- workers ------------------------------------------------------------------------------------
    def run(self, fn, *args, done=None, failed=None, pool=None, **kwargs) -> None:
        """Run fn on the worker pool (or ``pool``); ``done(result)`` / ``failed(message)`` are called on
        the GUI thread (default for failures: the ``error`` signal)."""
        key = next(self._job_ids)
        self._jobs[key] = (done, failed)
        (pool or self.pool).start(_Job(key, fn, args, kwargs, self._results).run)

    def _job_done(self, key, out) -> None:
        done, _failed = self._jobs.pop(key, (None, None))
        if done is not None:
            done(out)

    def _job_failed(self, key, msg: str) -> None:
        _done, failed = self._jobs.pop(key, (None, None))
        (failed or self.error.emit)(msg)

    def run_on_drive(self, fn, *args, **kw) -> None:
        """nvme-cli commands run one at a time, in the order asked (a read never overtakes a set)."""
        self.run(fn, *args, pool=self.drive_pool, **kw)

    @property
    def pending(self) -> int:
        return len(self._jobs)

    # ---- connection and recording ------------------------------------------------------------------
    def connect_port(self, port: str) -> None:
        port = (port or "").strip()
        if not port:
            self.error.emit("no port given; pick an interposer from the list or type its port (/dev/ttyACM0, rfc2217://host:port)")
            return
        self.status.emit(f"connecting to {port} ...")
        self.busy.emit(True)
        self.run(self._open, port, done=self._opened, failed=self._open_failed)

    def connect_sim(self, profile: str | None = None) -> None:
        """Bring up a virtual rig (interposer, SSD, nvme-cli, fio) and connect to it."""
        self.status.emit("starting the virtual rig ...")
        self.busy.emit(True)

        def start():
            from powerrig.sim import rig
            state = rig.start(profile or rig.DEFAULT_PROFILE, owned=True)
            return state, self._open(state["port"])
        self.run(start, done=self._sim_up, failed=self._open_failed)

    def _sim_up(self, got) -> None:
        state, opened = got
        self.rig = state
        self._started_rig = True
        self.use_drive(state["nvme"], state["fio"], state["controller"], state["namespaces"][0], state["serial"],
                       state.get("drive_host"))
        self._opened(opened)

    def use_drive(self, nvme_prog, fio_prog, controller: str, namespace: str, serial: str | None,
                  drive_host: str | None = None) -> None:
        """The drive's tools: on this host, or on a drive host (ssh, or a QEMU rig's guest)."""
        from powerrig.dut.fio import Fio
        from powerrig.dut.nvme import NvmeCli
        from powerrig.dut.remote import drive_host as remote_of
        remote = remote_of(drive_host)
        self.nvme = NvmeCli(list(nvme_prog), timeline=self.timeline, remote=remote)
        self.fio = Fio(list(fio_prog), timeline=self.timeline, nvme=self.nvme, remote=remote)
        self.controller, self.namespace, self.serial = controller, namespace, serial
        self._thermal_timer.start(self.THERMAL_EVERY_MS)

    @staticmethod
    def _open(port: str):
        from powerrig.interposer.client import Interposer
        if port.startswith("/dev/") and not Path(port).exists():
            raise GuiError(f"{port} does not exist; plug the interposer in, or pick a port from the list")
        dev = Interposer.open(port)
        try:
            cal = dev.calibration()
        except PowerrigError as e:
            logger.info("no calibration from %s: %s", port, e)
            cal = {}
        return dev, port, cal

    def _open_failed(self, msg: str) -> None:
        self.busy.emit(False)
        self.error.emit(msg)

    def _opened(self, got) -> None:
        dev, port, cal = got
        self.dev, self.port = dev, port
        self.busy.emit(False)
        self.connected.emit(dict(dev.description, port=port, calibration=cal))
        self.start_recording()

    def start_recording(self) -> None:
        from powerrig.capture.recorder import Recorder
        if self.dev is None:
            self.error.emit("connect to an interposer first")
            return
        self.capture_dir.mkdir(parents=True, exist_ok=True)
        self.capture_path = self.capture_dir / time.strftime("live-%Y%m%d-%H%M%S.jls")
        self.live = None
        self._seen_rows = 0
        meta = {"drive": {"serial": self.serial}} if self.serial else {}
        self.recorder = Recorder(self.dev, self.capture_path, metadata=meta, interval_us=self.interval_us,
                                 timeline=self.timeline, progress_every_s=0.5, on_block=self._on_block,
                                 reconnect=self._reconnect, reconnect_s=self.reconnect_s)
        self._next_index = self._lost_at = None
        self.recorder.start()
        self.status.emit(f"recording to {self.capture_path}")

    def _on_block(self, block) -> None:
        """The recording thread (ours, or a sweep step's): feed the live source (created on the first
        block)."""
        if self.live is None:
            from powerrig.gui.source import LiveSource
            self.live = LiveSource.for_block(block)
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
        from powerrig.interposer.client import Interposer
        if attempt == 1:
            self._lost_at = time.monotonic()
            self.error.emit(f"connection to the interposer on {self.port} lost: {error}; waiting up to "
                            f"{self.reconnect_s:.0f} s for it to come back (plug it in again); the capture "
                            f"{self.capture_path} goes on, the time away marked as a gap")
            try:
                self.dev.close()
            except Exception as e:  # noqa: BLE001 - a dead link cannot be closed cleanly
                logger.info("closing the lost %s: %s", self.port, e)
        if self.port.startswith("/dev/") and not Path(self.port).exists():
            raise OSError(f"{self.port} is not there")
        dev = Interposer.open(self.port)
        self.dev = dev
        self.reconnected.emit(f"the interposer on {self.port} is back after "
                              f"{time.monotonic() - self._lost_at:.1f} s; the capture goes on")
        return dev

    def follow_sweep(self):
        """The live view follows a sweep: returns the callback the sweep engine hands its steps'
        recorder (``Sweep(on_block=...)``); the engine records, one capture per step, and the plot shows
        a fresh live stream of those steps (the time between them shaded as a gap). This window's own
        recording ends first (its capture is saved) and starts again after the sweep while connected."""
        if self.recorder is not None:
            self.stop_recording()
        self.live = None
        self._seen_rows = 0
        self._next_index = self._lost_at = None
        self.sweeping = True
        self._show_next_live = True            # Run was pressed: the plot goes to the sweep's stream
        self.status.emit("the plot follows the running sweep (each step records its own capture)")
        return self._on_block

    def sweep_ended(self) -> None:
        """Back to this window's own stream, when connected."""
        if not self.sweeping:
            return
        self.sweeping = False
        if self.dev is not None:
            self.start_recording()
        else:
            self.status.emit("the sweep ended; its captures and report are in the sweep panel's output folder")

    def stop_recording(self):
        rec, self.recorder = self.recorder, None
        if rec is None:
            return None
        rec.stop()
        try:
            res = rec.wait(30.0)
        except Exception as e:  # noqa: BLE001 - the user still gets the message
            self.error.emit(f"the recording ended with an error: {e}")
            return None
        self.status.emit(f"recording saved: {res.path} ({res.covered_s:.1f} s, ended by {res.end_reason})")
        return res

    def disconnect(self, why: str = "disconnected") -> None:
        self.stop_recording()
        if self.dev is not None:
            try:
                self.dev.close()
            except Exception as e:  # noqa: BLE001 - a dead link cannot be closed cleanly
                logger.info("closing %s: %s", self.port, e)
            self.dev = None
            self.disconnected.emit(why)

    def shutdown(self) -> None:
        """Leave nothing running: the recording, the device, the virtual rig we started, the workers."""
        self._timer.stop()
        self._thermal_timer.stop()
        self._gc.timer.stop()
        gc.enable()                       # automatic collection again once no Qt object is left to race
        self.stop_fio()
        self.disconnect("closed")
        if self._started_rig and self.rig:
            from powerrig.sim import rig
            try:
                rig.stop(self.rig["id"])
            except PowerrigError as e:
                logger.warning("could not stop the virtual rig %s: %s", self.rig["id"], e)
            self._started_rig = False
        if self.source is not None and hasattr(self.source, "close"):
            self.source.close()
        self.drive_pool.waitForDone(30_000)
        self.pool.waitForDone(10_000)

    # ---- the tick: the only place live data is announced -------------------------------------------
    def _tick(self) -> None:
        live = self.live
        if live is not None:
            if self.source is None or self._show_next_live or (
                    self.source is not live and (self.recorder is not None or self.sweeping)
                    and not hasattr(self.source, "reader")):
                self._show_next_live = False
                self._show(live)
            now = time.monotonic()
            if self.dev is not None and not self.sweeping and (live.clock is None
                                                               or now - self._clock_at >= self.CLOCK_REFIT_S):
                # a refit costs ~3 ms of the GUI thread (bench_gui --profile): once a second, not every tick
                self._clock_at = now
                m = self.dev.clock.model()
                if m is not None:
                    live.clock = m
            if live.length != self._seen_rows:
                self._seen_rows = live.length
                if self.source is live:
                    self.data.emit()
            if (self._marker_grows and self.source is live and live.length != self._marker_rows
                    and now - self._marker_at >= self.MARKER_REFRESH_S):
                self.set_markers(*self.marker_times, quiet=True)
        if self.timeline.added != self._seen_events:
            self._seen_events = self.timeline.added
            self.events.emit()
        rec = self.recorder
        if rec is not None and rec._thread is not None and not rec._thread.is_alive():
            res = rec.result
            self.recorder = None
            if res is not None and res.end_reason == "link-lost":
                self.error.emit(f"connection to the interposer on {self.port} lost: {res.error}; "
                                f"the capture so far is saved in {res.path}. Reconnect to go on.")
                self.disconnect("link lost")

    # ---- time axis ----------------------------------------------------------------------------------
    def events_s(self, source=None, last: int | None = None) -> list[dict]:
        """Timeline events placed on the plot's time axis (s from capture start); ``last``: only the
        newest that many (the live view asks at every scroll step: the rest are not placed)."""
        src = source or self.source
        if src is None:
            return []
        if hasattr(src, "reader"):
            evs, to_sid = src.reader.events, src.reader.sample_id
        else:
            evs, to_sid = list(self.timeline), src.sample_id
        if last is not None:
            evs = evs[-last:]
        out = []
        for e in evs:
            try:
                t0 = float(to_sid(e.t_start)) * src.interval_s
                t1 = float(to_sid(e.t_end)) * src.interval_s if e.t_end is not None else None
            except (ValueError, PowerrigError):
                continue        # no clock yet
            out.append({"kind": str(e.kind), "name": e.name, "t0": t0, "t1": t1, "ok": e.ok,
                        "utc0": e.t_start, "utc1": e.t_end})
        return out

    # ---- markers ------------------------------------------------------------------------------------
    def set_markers(self, t_a: float | None, t_b: float | None = None, quiet: bool = False) -> None:
        """The markers' figures over the plot's current source, on a worker; a result that arrives after
        a newer request or after the plot changed source is dropped (it describes other data).
        ``quiet``: a failure is shown in the multimeter only, not as a window error (a source change)."""
        self._marker_req += 1
        self._marker_grows = False
        if t_a is None or t_b is None or self.source is None:
            self.marker_times = None
            self.markers.emit(None)
            return
        self.marker_times = (t_a, t_b)
        self._marker_at = time.monotonic()
        self._marker_rows = getattr(self.source, "length", 0)
        req, src = self._marker_req, self.source
        asrc = src.analysis_source() if hasattr(src, "analysis_source") else src
        live = not hasattr(src, "reader")

        def compute():
            if hasattr(src, "_lock") and hasattr(src, "reader"):
                with src._lock:
                    if src.closed:
                        raise GuiError(f"{src.path.name} was closed; open it again to measure there")
                    return range_figures(asrc, t_a, t_b), False
            end = src.duration_s                        # read first: the stream may grow meanwhile
            return range_figures(asrc, t_a, t_b), live and max(t_a, t_b) > end

        def current() -> bool:
            return req == self._marker_req and self.source is src

        def done(got):
            if current():
                fig, self._marker_grows = got
                self.markers.emit(fig)

        def failed(msg):
            if current():
                self._marker_grows = live and max(t_a, t_b) > src.duration_s
                self.markers.emit(msg)
                if not quiet:
                    self.error.emit(msg)
        self.run(compute, done=done, failed=failed)

    def _show(self, src) -> None:
        """The plot shows ``src`` from now on; the markers' figures follow it (recomputed over it)."""
        self.source = src
        self.source_changed.emit(src)
        if self.marker_times is not None:
            self.set_markers(*self.marker_times, quiet=True)

    # ---- exports ------------------------------------------------------------------------------------
    def shown_capture(self) -> Path | None:
        """The capture file behind the plot: the opened one, or the one being recorded."""
        src = self.source
        if src is not None and hasattr(src, "reader"):
            return Path(src.path)
        return self.capture_path

    def export_selection(self, out: str | Path, decimate: int = 1) -> None:
        """The markers' range (else the whole capture) to CSV or .sr, in a worker; full rate unless
        ``decimate`` > 1. While recording, the capture is read up to its last flush."""
        from powerrig.gui.capture_browser.export import export_range
        cap = self.shown_capture()
        if cap is None:
            self.error.emit("nothing to export: connect and record, or open a capture (File > Open)")
            return
        a, b = self.marker_times or (None, None)
        self.status.emit(f"exporting {'the markers’ range' if a is not None else 'the whole capture'} ...")
        self.run(export_range, cap, out, a, b, decimate, done=self.status.emit)

    def save_buffer(self, out: str | Path) -> None:
        """One click while streaming: a copy of the capture so far; the recording goes on."""
        from powerrig.gui.capture_browser.export import save_buffer
        if self.capture_path is None or not self.capture_path.exists():
            self.error.emit("nothing recorded yet: connect to an interposer first")
            return
        self.run(save_buffer, self.capture_path, out, done=self.status.emit)

    # ---- captures -----------------------------------------------------------------------------------
    def open_capture(self, path: str | Path) -> None:
        """Open a saved capture in a worker; the plot switches to it and its analysis table fills."""
        self.status.emit(f"opening {path} ...")

        def load():
            from powerrig.analysis.pipeline import analyse
            from powerrig.gui.source import FileSource
            src = FileSource(path)
            try:
                with src._lock:
                    an = analyse(src.reader, src.reader.events, src.reader.metadata)
            except PowerrigError as e:
                logger.info("analysis of %s: %s", path, e)
                an = None
            return src, an

        def opened(got):
            src, an = got
            old = self.source
            self._show(src)
            if old is not None and old is not self.live and hasattr(old, "close"):
                old.close()
            self.events.emit()
            self.analysis_ready.emit(an)
            note = src.reader.recovery_note or src.reader.recording_note
            self.status.emit(f"opened {src.path.name}: {src.duration_s:.1f} s" + (f" ({note})" if note else ""))
        self.run(load, done=opened)

    def show_live(self) -> None:
        if self.live is not None:
            self._show(self.live)

    # ---- the drive -----------------------------------------------------------------------------------
    def _need_drive(self) -> None:
        if self.nvme is None:
            raise GuiError("no drive configured: start the virtual rig (`powerrig gui --sim`) or set the nvme/fio "
                           "programs and the drive in the Drive panel")

    def refresh_drive(self) -> None:
        def read():
            self._need_drive()
            ident = self.nvme.id_ctrl(self.controller)
            ps = self.nvme.get_power_state(self.controller).power_state
            apst = self.nvme.get_apst(self.controller)
            smart = self.nvme.smart_log(self.controller)
            return {"identity": ident, "power_state": ps, "apst": apst.enabled,
                    "temperature_c": smart.temperature_c, "smart": smart}

        def done(d):
            self.identity = d["identity"]
            if self.ps_target is None:        # a set asked meanwhile knows better than this read
                self.ps_target = d["power_state"]
            self._last_smart = d["smart"]
            self.drive.emit(d)
        self.run_on_drive(read, done=done)

    def set_power_state(self, ps: int) -> None:
        self.ps_target = int(ps)          # known before the set runs: a poll queued after it holds off

        def go():
            self._need_drive()
            got = self.nvme.set_power_state(self.controller, int(ps))
            return {"power_state": got.power_state}
        self.status.emit(f"setting PS{ps} ...")
        def done(d):
            self.drive.emit(d)
            self.status.emit(f"drive in PS{d['power_state']}")
            self.poll_thermal()               # a fresh reading (or the reason for none) for the new state
        self.run_on_drive(go, done=done)

    def _non_operational(self, ps) -> bool:
        if ps is None or self.identity is None:
            return False
        return any(s.ps == ps and s.non_operational for s in self.identity.power_states)

    def poll_thermal(self) -> None:
        """Temperature and throttle state, read on the drive's worker (after any queued set). Never in a
        non-operational state this app put the drive in: a log read is an admin command, which the drive
        may serve only by leaving the state, spoiling the very power being measured (NVMe NOPS)."""
        if self.nvme is None or self._thermal_busy:
            return
        self._thermal_busy = True

        def read():
            ps = self.ps_target
            if self._non_operational(ps):
                return {"thermal": f"not read in PS{ps} (non-operational): a log read would wake the drive",
                        "thermal_skipped": True}
            smart = self.nvme.smart_log(self.controller)
            return {"temperature_c": smart.temperature_c, "smart": smart,
                    "throttle": throttle_state(self._last_smart, smart)}

        def done(d):
            self._thermal_busy = False
            if "smart" in d:
                self._last_smart = d["smart"]
            self.drive.emit(d)

        def failed(msg):
            self._thermal_busy = False
            logger.info("temperature poll failed: %s", msg)
        self.run_on_drive(read, done=done, failed=failed)

    def set_apst(self, enabled: bool) -> None:
        def go():
            self._need_drive()
            self.nvme.set_apst(self.controller, enabled, [])
            return {"apst": self.nvme.get_apst(self.controller).enabled, "apst_set": True}
        self.run_on_drive(go, done=self.drive.emit)

    # ---- the workload ---------------------------------------------------------------------------------
    def run_fio(self, name: str, options: dict) -> None:
        """Run one fio job on the drive's namespace; writes pass the drive guard (serial, mounts) first."""
        from powerrig.dut.fio import FioJob, FioPlan
        from powerrig.dut.guard import guard_destructive

        opts = dict(options)
        job_name = "".join(c if c.isalnum() or c in "_.-" else "-" for c in name).strip("-") or "job"

        def go():
            self._need_drive()
            if opts.get("rw") in WRITES:
                guard_destructive(self.nvme, self.namespace, self.serial)
            job = FioJob(job_name, rw=opts["rw"], bs=opts["bs"], iodepth=int(opts["iodepth"]),
                         numjobs=int(opts["numjobs"]), runtime=float(opts["runtime"]), time_based=True,
                         filename=self.namespace, rwmixread=opts.get("rwmixread"), ioengine="libaio", direct=True,
                         size=opts.get("size", "1g"))
            out = self.capture_dir / "fio" / time.strftime("%Y%m%d-%H%M%S")
            plan = FioPlan([job], group_reporting=int(opts["numjobs"]) > 1, status_interval=self.FIO_STATUS_S)

            def live(st):                          # fio's periodic status, while it runs (another thread)
                self.workload.emit({"state": "live", "name": name, "mib_s": st["mib_s"], "iops": st["iops"]})
            res = self.fio.run(plan, out, name=job_name, on_status=live)
            bw = sum(d.bw_bytes for j in res.jobs for d in j.directions.values())
            iops = sum(d.iops for j in res.jobs for d in j.directions.values())
            return {"state": "done", "name": name, "mib_s": bw / 2**20, "iops": iops}

        self.workload.emit({"state": "running", "name": name, "runtime": float(opts["runtime"])})

        def failed(msg):
            self.workload.emit({"state": "failed", "name": name, "error": msg})
            self.error.emit(msg)
        self.run(go, done=lambda d: self._with_power(d, job_name), failed=failed)

    def _with_power(self, d: dict, job_name: str) -> None:
        """The finished phase's MiB/s and IOPS, then its mean power and energy beside them (the markers'
        code over the phase's span, once the capture holds its end)."""
        self.workload.emit(d)
        phase = next((e for e in reversed(self.events_s(self.live)) if e["kind"] == "phase"
                      and job_name in e["name"] and e["t1"] is not None), None) if self.live is not None else None
        if phase is None:
            return
        src, t0, t1 = self.live, phase["t0"], phase["t1"]
        asrc = src.analysis_source() if hasattr(src, "analysis_source") else src

        def power():
            deadline = time.monotonic() + 10.0
            while src.duration_s < t1 and time.monotonic() < deadline:
                time.sleep(0.05)                  # the stream reaches the phase's end (USB and block latency)
            return range_figures(asrc, t0, t1)

        def done(fig):
            w = fig.mean_w.get("total")
            self.workload.emit(dict(d, mean_w=w, energy_j=fig.energy_j.get("total"), t0=t0, t1=t1,
                                    mib_s_per_w=d["mib_s"] / w if w else None))
        self.run(power, done=done, failed=lambda m: logger.info("phase power of %s: %s", job_name, m))

    def stop_fio(self) -> int:
        """End the fio this app started (by pid); its phase ends as failed ("stopped")."""
        if self.fio is None:
            return 0
        pids = _children_running(self.fio.program)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return len(pids)
