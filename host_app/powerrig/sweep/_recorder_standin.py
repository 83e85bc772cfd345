"""TEMPORARY stand-in for powerrig.capture.recorder (helper `stream` builds the real one).

Same interface as the contract in BRIEF.md, reduced to what the sweep uses: the integrator deletes
this module once capture/recorder.py is merged (powerrig.sweep.recorder imports the real one first).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from powerrig.errors import LinkError

logger = logging.getLogger(__name__)


@dataclass
class Progress:
    covered_s: float
    lost_s: float
    requested_s: float | None
    intervals: int
    gaps: int
    dropped_frames: int
    crc_errors: int
    watts: dict = field(default_factory=dict)
    elapsed_s: float = 0.0


@dataclass
class RecordResult:
    path: str
    summary: dict
    requested_s: float | None
    covered_s: float
    lost_s: float
    end_reason: str
    error: str | None = None


class Recorder:
    def __init__(self, dev, path, interval_us=None, rails=None, seconds=None, metadata=None, timeline=None,
                 on_progress=None, progress_every_s=1.0):
        self.dev, self.path, self.interval_us, self.rails = dev, path, interval_us, rails
        self.seconds, self.metadata, self.timeline = seconds, dict(metadata or {}), timeline
        self.on_progress, self.every = on_progress, progress_every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._result: RecordResult | None = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        self.wait(30)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._safe_run, name="sweep-recorder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def wait(self, timeout: float | None = None) -> RecordResult:
        if self._thread is not None:
            self._thread.join(timeout)
        return self._result

    def run(self) -> RecordResult:
        self._safe_run()
        return self._result

    def _safe_run(self) -> None:
        from powerrig.capture import CaptureWriter

        t0 = time.monotonic()
        writer = CaptureWriter(self.path, metadata=self.metadata, timeline=self.timeline, clock=self.dev.clock)
        stream = self.dev.stream(interval_us=self.interval_us, rails=self.rails)
        reason, error, summary = "stopped", None, {}
        covered = lost = 0.0
        try:
            stream.start()
            last = time.monotonic()
            for block in stream.blocks(self.seconds):
                writer.write(block)
                now = time.monotonic()
                if self.on_progress and now - last >= self.every:
                    last = now
                    s = stream.stats
                    dt = stream.interval_us * 1e-6
                    p = block.total_power()
                    n = max(1, int(1.0 / dt))
                    watts = {"total": float(p[-n:].mean())} if len(p) else {}
                    self.on_progress(Progress(s.intervals * dt, s.gap_intervals * dt, self.seconds, s.intervals,
                                              s.gaps, s.dropped_frames, s.crc_errors, watts, now - t0))
                if self._stop.is_set():
                    break
            else:
                reason = "duration"
        except LinkError as e:
            reason, error = "link-lost", str(e)
        except Exception as e:  # noqa: BLE001 - reported in the result
            logger.exception("recording failed")
            reason, error = "error", str(e)
        finally:
            try:
                stream.stop()
            except Exception as e:  # noqa: BLE001 - the link may be gone
                logger.warning("stopping the stream failed: %s", e)
            try:
                summary = stream.summary() if stream.config else {}
                dt = stream.interval_us * 1e-6
                covered = summary.get("samples", 0) * dt
                lost = summary.get("gap_intervals", 0) * dt
            except Exception as e:  # noqa: BLE001
                logger.warning("stream summary unavailable: %s", e)
            rec = {"requested_s": self.seconds, "covered_s": covered, "lost_s": lost, "end_reason": reason,
                   "error": error}
            try:
                writer.update_metadata(recording=rec, stream=summary)
                writer.close(stats=summary)
            except Exception as e:  # noqa: BLE001
                logger.warning("closing capture %s failed: %s", self.path, e)
            self._result = RecordResult(str(self.path), summary, self.seconds, covered, lost, reason, error)
