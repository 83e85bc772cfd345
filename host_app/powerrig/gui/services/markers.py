"""The two markers: their figures (the analysis' own code over [A, B], on a worker) over whatever the
plot shows; cleared when the plot changes source (a file opened, a sweep started: times on one source
mean nothing on another), recomputed while they reach past a live stream's end. A live range older
than the stream's full-rate memory is read from the capture file being recorded."""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from powerrig.core.errors import PowerrigError


class Markers(QObject):
    updated = Signal(object)          # RangeFigures; None when cleared; a str: why there are none

    REFRESH_S = 0.5                   # markers reaching past a live stream's end are recomputed this often

    def __init__(self, core, captures, parent=None):
        super().__init__(parent)
        self.core, self.captures = core, captures
        self.times: tuple[float, float] | None = None
        self._req = 0                          # the newest computation; older results are dropped
        self._grows = False                    # the markers reach past the live data: recompute as it comes
        self._at = 0.0
        self._rows = 0                         # the source's rows when the markers were last computed
        captures.source_changed.connect(self._source_changed)
        core.tick.connect(self._tick)

    def _file_behind(self, src):
        """The capture file that holds all of the live ``src`` (the window's own recording), or None (a
        sweep's stream spans several step captures; a file source is its own file)."""
        rec = self.captures.recording
        path = getattr(rec, "live_capture", None)
        if src is not None and src is rec.live and path is not None and Path(path).exists():
            return Path(path)
        return None

    def measurable(self, src=None) -> tuple[float, float] | None:
        """The time range (s) the markers can measure on ``src`` (the plot's source): all of a capture,
        all of a live stream recorded to a file, else the part the live view holds at full rate."""
        src = src if src is not None else self.captures.source
        if src is None:
            return None
        end = src.duration_s
        if hasattr(src, "reader") or not hasattr(src, "held") or self._file_behind(src) is not None:
            return 0.0, end
        first, _end = src.held()
        return first * src.interval_s, end

    def set(self, t_a: float | None, t_b: float | None = None, quiet: bool = False) -> None:
        """The markers' figures over the plot's current source, on a worker; a result that arrives after
        a newer request or after the plot changed source is dropped (it describes other data).
        ``quiet``: a failure is shown in the multimeter only, not as a window error (a source change)."""
        from powerrig.analysis.selection import range_figures
        self._req += 1
        self._grows = False
        src = self.captures.source
        if t_a is None or t_b is None or src is None:
            self.times = None
            self.updated.emit(None)
            return
        self.times = (t_a, t_b)
        self._at = time.monotonic()
        self._rows = getattr(src, "length", 0)
        req = self._req
        asrc = src.analysis_source() if hasattr(src, "analysis_source") else src
        live = not hasattr(src, "reader")
        behind = self._file_behind(src) if live else None

        def compute():
            if hasattr(src, "_lock") and hasattr(src, "reader"):
                with src._lock:
                    if src.closed:
                        raise PowerrigError(f"{src.path.name} was closed; open it again to measure there")
                    return range_figures(asrc, t_a, t_b), False
            end = src.duration_s                        # read first: the stream may grow meanwhile
            if behind is not None and min(t_a, t_b) < src.held()[0] * src.interval_s:
                # older than the live view's full-rate rows: the recording's file, up to its last flush
                from powerrig.capture.reader import CaptureReader
                with CaptureReader(behind) as r:
                    return range_figures(r, t_a, t_b), max(t_a, t_b) > r.length * r.interval_s
            return range_figures(asrc, t_a, t_b), live and max(t_a, t_b) > end

        def current() -> bool:
            return req == self._req and self.captures.source is src

        def done(got):
            if current():
                fig, self._grows = got
                self.updated.emit(fig)

        def failed(msg):
            if current():
                self._grows = live and max(t_a, t_b) > src.duration_s
                self.updated.emit(msg)
                if not quiet:
                    self.core.error.emit(msg)
        self.core.run(compute, done=done, failed=failed)

    def _source_changed(self, _src) -> None:
        """A new source: the markers' times belonged to the old one; they are cleared (the plot drops its
        marker lines too), never left measuring unrelated data."""
        if self.times is not None:
            self.set(None)

    def _tick(self) -> None:
        src = self.captures.source
        if (self._grows and src is not None and not hasattr(src, "reader") and src.length != self._rows
                and time.monotonic() - self._at >= self.REFRESH_S):
            self.set(*self.times, quiet=True)
