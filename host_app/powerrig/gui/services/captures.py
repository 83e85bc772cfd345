"""What the plot shows: the live stream or a saved capture opened with its analysis; the timeline's
events placed on that source's time axis; exports of what is shown (CSV, sigrok) and "save the
buffer" while recording."""
from __future__ import annotations

import logging
import math
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from powerrig.analysis.phases import is_idle_phase
from powerrig.capture.reader import placed_over_host
from powerrig.core.errors import PowerrigError
from powerrig.core.timeline import NVME, PHASE
from powerrig.dut.commands import NVME_READ, NVME_VOLATILE

logger = logging.getLogger(__name__)


def is_background(e) -> bool:
    """A routine drive read or volatile setting (the 5 s temperature poll's smart-log, get-feature,
    set-feature of a power state or APST): drawn as a tick on the plot's quiet track, not as a label.
    A destructive command, a saved feature (``--save``) or anything else nvme-cli ran keeps its label."""
    if e.kind != NVME:
        return False
    words = e.name.split()
    if "--save" in (e.argv or []) or any(a.startswith("--sav") for a in (e.argv or [])):
        return False
    return e.name in NVME_READ | NVME_VOLATILE or " ".join(words[:2]) in NVME_READ or (
        bool(words) and words[0] in NVME_READ | NVME_VOLATILE)


def whole_capture_figures(reader, analysis=None) -> dict:
    """The multimeter's row per rail and "total" over a whole capture: (mean W, min W, max W, peak 100 us
    W or None, energy J): the analysis' own capture phase when the capture was analysed (no second pass
    over the samples), else the same range pass over it; the peak from the device's 100 us windows when
    the capture holds them (a rail's from the file's summary levels; the total's, the analysis' PCM-2
    figure, the highest sum of the rails' peaks in one interval)."""
    from powerrig.analysis.phases import CAPTURE
    from powerrig.analysis.selection import SelectionError, range_stats
    from powerrig.core.names import RailField, rail_signal
    whole = next((r for r in analysis.phases if r.kind == CAPTURE), None) if analysis is not None else None
    if whole is None:
        try:
            whole = range_stats(reader, 0.0, reader.length * reader.interval_s, name="capture")
        except SelectionError:
            return {}
    out = {}
    for k, st in whole.rails.items():
        peak = None
        name = rail_signal(RailField.P_PEAK, k) if k != "total" else None
        if name is not None and reader.has(name):
            peak = reader.range_stats(name)["max"]
        elif k == "total" and math.isfinite(whole.peak_100us.value_w):  # the rails' peaks of one interval summed
            peak = whole.peak_100us.value_w
        out[k] = (st["mean_w"], st["min_w"], st["max_w"], peak, st["energy_j"])
    return out


class Captures(QObject):
    source_changed = Signal(object)   # the plot's source (LiveSource or FileSource)
    events = Signal()                 # the timeline changed
    analysis_ready = Signal(object)   # an Analysis of an opened capture (None: it could not be analysed)
    file_figures = Signal(object, object)   # (FileSource, {rail/"total": (mean, min, max, peak, energy)})

    def __init__(self, core, recording, timeline, parent=None):
        super().__init__(parent)
        self.core, self.recording, self.timeline = core, recording, timeline
        self.source = None                     # what the plot shows
        self.analysis = None                   # the opened capture's Analysis (None: live, or none)
        self._placed: tuple = (None, [])       # (source and analysis, its events placed): a capture's, once
        self._show_next_live = False           # a sweep's stream goes on the plot when it starts
        self._seen_events = 0
        recording.sweep_started.connect(self._follow_sweep)
        core.tick.connect(self._tick)
        core.on_shutdown(self._close)

    def show(self, src) -> None:
        """The plot shows ``src`` from now on (the markers follow: they listen to source_changed)."""
        if src is not self.source:
            self.analysis = None               # set again by open() once the plot shows its capture
        self.source = src
        self.source_changed.emit(src)

    def _follow_sweep(self) -> None:
        self._show_next_live = True

    def show_live(self) -> None:
        if self.recording.live is not None:
            self.show(self.recording.live)

    def _tick(self) -> None:
        rec, live = self.recording, self.recording.live
        # the live stream goes on the plot when nothing is shown, when a sweep starts (Run was pressed,
        # even over an opened capture), or when it replaced an older live stream while recording
        if live is not None and (self.source is None or self._show_next_live or (
                self.source is not live and (rec.recorder is not None or rec.sweeping)
                and not hasattr(self.source, "reader"))):
            self._show_next_live = False
            self.show(live)
        engine = rec.followed_sweep()
        added = self.timeline.added + (engine.events_added() if engine is not None else 0)
        if added != self._seen_events:
            self._seen_events = added
            self.events.emit()

    def _close(self) -> None:
        if self.source is not None and hasattr(self.source, "close"):
            self.source.close()

    # ---- the time axis ----------------------------------------------------------------------------------
    def events_s(self, source=None, last: int | None = None) -> list[dict]:
        """Timeline events placed on the plot's time axis (s from capture start); ``last``: of a live
        stream only the newest that many (the live view asks at every scroll step: the rest are not
        placed). An opened capture's events never change: all of them, placed once (its "Whole
        capture" shows the first phase of a long recording too, not only the last 300 events)."""
        src = source or self.source
        if src is None:
            return []
        if hasattr(src, "reader"):
            key = (id(src), id(self.analysis) if src is self.source else None)
            if self._placed[0] != key:
                self._placed = (key, self._place(src, src.reader.events, src.reader.sample_id))
            return self._placed[1]
        evs = list(self.timeline)
        engine = self.recording.followed_sweep()
        if engine is not None:                  # a running sweep's steps: their commands and phases too
            evs = sorted(evs + engine.events(last), key=lambda e: e.t_start)
        if last is not None:
            evs = evs[-last:]
        return self._place(src, placed_over_host(evs), src.sample_id)    # a placed command, not also its host-stamped one

    def _place(self, src, evs, to_sid) -> list[dict]:
        out = self._inferred_idle(src)
        for e in evs:
            try:
                t0 = float(to_sid(e.t_start)) * src.interval_s
                t1 = float(to_sid(e.t_end)) * src.interval_s if e.t_end is not None else None
            except (ValueError, PowerrigError):
                continue        # no clock yet
            out.append({"kind": str(e.kind), "name": e.name, "t0": t0, "t1": t1, "ok": e.ok,
                        "utc0": e.t_start, "utc1": e.t_end, "idle": e.kind == PHASE and is_idle_phase(e),
                        "background": is_background(e)})
        return out

    def _inferred_idle(self, src) -> list[dict]:
        """An opened capture's idle phases that no event names (the time between workloads, as its
        analysis finds it): shaded green like the named ones, as the report shades every idle phase."""
        an = self.analysis if src is not None and src is self.source and hasattr(src, "reader") else None
        if an is None:
            return []
        from powerrig.analysis.phases import IDLE
        return [{"kind": "phase", "name": r.name, "t0": r.start_s, "t1": r.stop_s, "ok": True,
                 "utc0": ("idle", r.phase.start), "utc1": r.phase.stop, "idle": True, "background": False}
                for r in an.phases if r.kind == IDLE and r.phase.event is None]

    # ---- saved captures -----------------------------------------------------------------------------------
    def open(self, path: str | Path) -> None:
        """Open a saved capture in a worker; the plot switches to it and its analysis table fills."""

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
            with src._lock:
                figures = whole_capture_figures(src.reader, an)
            return src, an, figures

        def opened(got):
            src, an, figures = got
            old = self.source
            self.show(src)
            self.analysis = an
            if old is not None and old is not self.recording.live and hasattr(old, "close"):
                old.close()
            self.events.emit()
            self.analysis_ready.emit(an)
            self.file_figures.emit(src, figures)
            note = src.reader.recovery_note or src.reader.recording_note
            self.core.status.emit(f"opened {src.path.name}: {src.duration_s:.1f} s" + (f" ({note})" if note else ""))
        self.core.run(load, done=opened, doing=f"opening {path}")

    def shown_capture(self) -> Path | None:
        """The capture file behind the plot: the opened one, or the one being recorded."""
        src = self.source
        if src is not None and hasattr(src, "reader"):
            return Path(src.path)
        return self.recording.capture_path

    def export_selection(self, out: str | Path, span: tuple[float, float] | None, decimate: int = 1) -> None:
        """``span`` (the markers' range; None: the whole capture) to CSV or .sr, in a worker; full rate
        unless ``decimate`` > 1. While recording, the capture is read up to its last flush."""
        from powerrig.export.by_suffix import export_range
        cap = self.shown_capture()
        if cap is None:
            self.core.error.emit("nothing to export: connect and record, or open a capture (File > Open)")
            return
        a, b = span or (None, None)
        self.core.run(export_range, cap, out, a, b, decimate, done=self.core.status.emit,
                      doing=f"exporting {'the markers’ range' if a is not None else 'the whole capture'}")

    def save_buffer(self, out: str | Path) -> None:
        """One click while streaming: a copy of the capture so far; the recording goes on."""
        from powerrig.capture.snapshot import save_buffer
        path = self.recording.capture_path
        if path is None or not path.exists():
            self.core.error.emit("nothing recorded yet: connect to an interposer first")
            return
        self.core.run(save_buffer, path, out, done=self.core.status.emit, doing="saving the buffer")
