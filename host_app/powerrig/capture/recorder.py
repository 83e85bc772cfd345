"""The one recorder: an interposer's stream into a capture file, for the CLI, the demo, the sweep and
the GUI alike.

    rec = Recorder(dev, "run.jls", seconds=60, on_progress=print)
    res = rec.run()                          # blocking, in this thread (the CLI)

    with Recorder(dev, "run.jls", timeline=tl, on_block=live.feed) as rec:   # in the background (demo, sweep, GUI)
        ...                                  # drive the workload; rec.stop() or leave the block
    res = rec.result

With ``reconnect`` (a callable returning the device opened again) a lost link does not end the
recording: the recorder waits up to ``reconnect_s`` for the interposer to come back and goes on in
the same capture, the time away written as gap rows (a device that restarted also starts a new
segment of its sample index, which the writer records).

Whatever ends the recording (its duration, a stop, a lost link, Ctrl-C, a bug), the capture is
closed with its close record, and its metadata says what was asked for, what was covered, what was
lost and why it ended ("recording"), beside the stream's own summary ("stream"). A recording that
ends early must never look like a complete one.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from powerrig.capture.writer import CaptureWriter
from powerrig.core.sampling import INTERPOSER
from powerrig.core.errors import LinkError, PowerrigError
from powerrig.core.blocks import IntervalBlock

logger = logging.getLogger(__name__)

END_REASONS = ("duration", "stopped", "link-lost", "interrupted", "error")
LIVE_EVERY_S = 0.1      # a block this often to on_block (a live view)
# ... and to the writer alone: each hand-over costs the same ~25 library calls and JLS thread wake-ups
# and the same cold-cache start whatever its length (docs/scale.md, "The sixth pass": 2 s instead of 1 s
# took ~0.1 % of a core off the recorder and the JLS thread); the first one comes after LIVE_EVERY_S
WRITE_EVERY_S = 2.0


@dataclass
class Progress:
    """What a live display needs, passed to ``on_progress`` from the recording thread."""
    covered_s: float                    # device time handed out so far, gaps included
    lost_s: float                       # ... of which lost (gap rows)
    requested_s: float | None           # None: until stopped
    intervals: int                      # valid intervals received
    gaps: int
    dropped_frames: int
    crc_errors: int
    watts: dict = field(default_factory=dict)   # rail -> W and "total": mean of the last second
    elapsed_s: float = 0.0              # wall time since the recording started


@dataclass
class RecordResult:
    path: Path
    summary: dict                       # the stream summary (Stream.summary())
    requested_s: float | None
    covered_s: float
    lost_s: float
    end_reason: str                     # one of END_REASONS
    error: str | None = None

    def recording_metadata(self) -> dict:
        """The "recording" entry of the capture's metadata."""
        return {"requested_s": self.requested_s, "covered_s": self.covered_s, "lost_s": self.lost_s,
                "end_reason": self.end_reason, "error": self.error}


class _LastSecond:
    """Mean power over the most recent second of valid rows, for the live display (numpy, no loops)."""

    def __init__(self, rows: int):
        self.rows = max(1, rows)
        self._parts: deque[np.ndarray] = deque()
        self._n = 0

    def add(self, p: np.ndarray) -> None:
        self._parts.append(p)
        self._n += len(p)
        while self._parts and self._n - len(self._parts[0]) >= self.rows:
            self._n -= len(self._parts.popleft())

    def watts(self, rails: tuple[str, ...]) -> dict[str, float]:
        if not self._parts:
            return {r: float("nan") for r in rails} | {"total": float("nan")}
        p = np.concatenate(list(self._parts))[-self.rows:]
        with np.errstate(invalid="ignore"):
            m = np.nanmean(p, axis=0) if np.isfinite(p).any() else np.full(p.shape[1], np.nan)
        return {r: float(x) for r, x in zip(rails, m)} | {"total": float(np.sum(m))}


class Recorder:
    """Records one stream into one capture file. ``run()`` blocks; ``start()`` runs it in a thread."""

    def __init__(self, dev, path: str | Path, interval_us: int | None = None, rails: list[str] | None = None,
                 seconds: float | None = None, metadata: dict | None = None, timeline=None,
                 on_progress: Callable[[Progress], None] | None = None, progress_every_s: float = 1.0,
                 reconnect: Callable[[str, int], object] | None = None, reconnect_s: float = 0.0,
                 on_block: Callable[[IntervalBlock], None] | None = None):
        """reconnect(error, attempt) -> the device again (or raises LinkError/OSError while it is away).
        on_block(block): each block as received, once written, from the recording thread (a live view);
        its errors are logged, never cost the capture a block."""
        self.dev = dev
        self.on_block = on_block
        self.reconnect = reconnect
        self.reconnect_s = reconnect_s
        self.reconnects: list[dict] = []        # {"error", "away_s", "gap_rows"} per link that came back
        self.path = Path(path)
        self.interval_us = interval_us
        self.rails = rails
        self.seconds = seconds
        self.metadata = dict(metadata or {})
        self.timeline = timeline
        self.on_progress = on_progress
        self.progress_every_s = progress_every_s
        self.result: RecordResult | None = None
        self._stop = threading.Event()
        self._stop_reason = "stopped"
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.error: PowerrigError | None = None     # what ended it with end reason "error" (a full disk: CaptureError)
        self.next_index: int | None = None          # the device's sample index past the newest block written
        self._advanced = threading.Condition()
        self._ended = False

    # ---- control ----------------------------------------------------------------------------------
    @property
    def stop_event(self) -> threading.Event:
        return self._stop

    def stop(self, reason: str = "stopped") -> None:
        """Ask the recording to end at the next block (safe from a signal handler or another thread).
        ``reason`` is recorded as the end reason: "stopped", or "interrupted" for a signal."""
        if reason not in END_REASONS:
            raise ValueError(f"unknown end reason {reason!r}")
        self._stop_reason = reason
        self._stop.set()

    def start(self) -> "Recorder":
        """Record in a background thread; end it with ``stop()`` and collect it with ``wait()``."""
        self._thread = threading.Thread(target=self._run_in_thread, name="powerrig-recorder", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> RecordResult:
        """The result of a background recording. Raises what ended it if that was not a recorded end."""
        if self._thread is None:
            raise RuntimeError("the recorder was not started; call start() or run()")
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the recorder did not finish within {timeout:g} s")
        if self._failure is not None:
            raise self._failure
        assert self.result is not None
        return self.result

    def wait_for_index(self, index: float, timeout: float) -> bool:
        """Wait until the capture holds the device's samples before ``index`` (or the recording ended):
        a stream runs behind the wall clock on a loaded host, and a recording stopped as soon as the
        last command returns would cut that command's intervals. True when they are in."""
        def done():
            return self._ended or (self.next_index is not None and self.next_index >= index)
        with self._advanced:
            self._advanced.wait_for(done, timeout)
        return self.next_index is not None and self.next_index >= index

    def _reached(self, index: int | None) -> None:
        """The newest block's end (None: the recording ended), told to wait_for_index."""
        with self._advanced:
            if index is None:
                self._ended = True
            else:
                self.next_index = index
            self._advanced.notify_all()

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self.wait(30.0)

    def _run_in_thread(self) -> None:
        try:
            self.run()
        except BaseException as e:  # noqa: BLE001 - handed to the caller by wait()
            self._failure = e
        finally:
            self._reached(None)          # a waiter learns the recording ended

    # ---- the recording ----------------------------------------------------------------------------
    def run(self) -> RecordResult:
        """Record until the duration is covered, ``stop()``, a lost link or Ctrl-C; always close the
        capture. PowerrigErrors end the recording with their reason (see ``result.error``); a bug is
        raised after the capture has been closed with end reason "error"."""
        stream = self._stream = self.dev.stream(interval_us=self.interval_us, rails=self.rails)
        stream.start()                        # a refusal (bad rails, link budget) leaves no file behind
        try:
            writer = self._open_writer(stream)
        except BaseException:
            stream.stop()
            raise
        self._t0 = time.monotonic()
        self._rows = self._lost_rows = 0
        self._away = None
        self._last = _LastSecond(int(round(1e6 / stream.interval_us)))
        reason, error, failure = "duration", None, None
        try:
            reason = self._write_blocks(stream, writer)
        except LinkError as e:
            reason, error = "link-lost", str(e)
        except PowerrigError as e:
            reason, error = "error", str(e)
            self.error = e
        except KeyboardInterrupt:
            reason = "interrupted"
        except BaseException as e:  # noqa: BLE001 - closed cleanly below, then raised
            reason, error, failure = "error", f"{e.__class__.__name__}: {e}", e
        finally:
            self.result = self._finish(self._stream, writer, reason, error)
        if failure is not None:
            raise failure
        return self.result

    def _open_writer(self, stream) -> CaptureWriter:
        meta = dict(self.metadata)
        meta.setdefault("device", self.dev.description)
        meta.setdefault("source", getattr(self.dev, "sampling", INTERPOSER).to_dict())   # what checks may ask of it
        meta["recording"] = {"requested_s": self.seconds, "covered_s": None, "lost_s": None,
                             "end_reason": None, "error": None}   # filled at the end; None = cut short
        return CaptureWriter(self.path, metadata=meta, timeline=self.timeline, clock=self.dev.clock)

    def _write_blocks(self, stream, writer: CaptureWriter) -> str:
        """Write the stream's blocks; a lost link is waited for (``reconnect``) and the capture goes on."""
        while True:
            try:
                return self._write_stream(self._stream, writer)
            except LinkError as e:
                if self.reconnect is None or self._stop.is_set():
                    raise
                if not self._come_back(e, writer):
                    return self._stop_reason

    def _come_back(self, lost: LinkError, writer: CaptureWriter) -> bool:
        """Wait for the interposer (False: stopped while waiting); raises ``lost`` when it stays away."""
        t_lost = time.monotonic()
        try:
            self._stream.stop()
        except Exception as e:  # noqa: BLE001 - the link is gone already
            logger.info("stopping the lost stream: %s", e)
        attempt = 0
        while True:
            if self._stop.is_set():
                return False
            attempt += 1
            try:
                dev = self.reconnect(str(lost), attempt)
                stream = dev.stream(interval_us=self.interval_us, rails=self.rails)
                stream.start()
                break
            except (LinkError, OSError) as e:
                if time.monotonic() - t_lost >= self.reconnect_s:
                    raise lost from e
                logger.info("interposer still away (%s); trying again", e)
                self._stop.wait(0.5)
        self.dev, self._stream = dev, stream
        writer.use_clock(dev.clock)              # the new link's clock places what follows
        self._away = (t_lost, str(lost))
        return True

    def _after_away(self, first, writer: CaptureWriter) -> None:
        """Before the first block after a reconnect: gap rows for the time away when the device
        restarted (nothing in its index says how long it was away; the host clock does). A device that
        kept counting needs none here: the writer fills the hole in its index itself."""
        t_lost, error = self._away
        self._away = None
        away = time.monotonic() - t_lost
        rows = 0
        if first.first_index < writer.next_raw_index:
            rows = max(1, int(round(away / (first.interval_samples * first.sample_period_s))))
            gap = IntervalBlock.gap(writer.next_raw_index, rows, first.interval_samples, first.sample_period_s,
                                    tuple(first.rails), "link")
            writer.write(gap)
            self._count(gap)
        self.reconnects.append({"error": error, "away_s": away, "gap_rows": rows})

    def _write_stream(self, stream, writer: CaptureWriter) -> str:
        """The loop: write each block, report progress; returns why it ended."""
        next_progress = time.monotonic() + self.progress_every_s
        seconds = self.seconds
        if seconds is not None and self._rows:       # after a reconnect: what is left of the duration
            seconds = max(0.0, seconds - self._rows * stream.interval_us * 1e-6)
        # a live view wants a block ten times a second, and so does a caller that asks for progress that
        # often: it waits on the samples (a sweep step's level before its set-feature and its catch-up at
        # the end, the pytest plugin's start; at WRITE_EVERY_S a sweep step waited ~2 s more). A file
        # alone is fed WRITE_EVERY_S at a time (each hand-over costs the same ~25 library calls and JLS
        # thread wake-ups whatever its length: docs/scale.md), its first block soon (the first progress
        # report: a caller waits for it)
        live = self.on_block is not None or (self.on_progress is not None and self.progress_every_s <= LIVE_EVERY_S)
        every_s = LIVE_EVERY_S if live else WRITE_EVERY_S
        rows = max(5000, int(2 * every_s * 1e6 / stream.interval_us))   # a hand-over is cut by time, not rows
        for block in stream.blocks(seconds=seconds, stop=self._stop, every_s=every_s, max_rows=rows,
                                   first_s=LIVE_EVERY_S):
            if self._away is not None and len(block):
                self._after_away(block, writer)
            writer.write(block)
            self._count(block)
            self._reached(block.end_index)
            if self.on_block is not None:
                try:
                    self.on_block(block)
                except Exception:  # noqa: BLE001 - a display's failure must not end the recording
                    logger.exception("the live view could not take a block of %s", self.path)
            if self.on_progress is not None and time.monotonic() >= next_progress:
                next_progress = time.monotonic() + self.progress_every_s
                self.on_progress(self._progress(stream))
            if self._stop.is_set():
                break
        return self._stop_reason if self._stop.is_set() else "duration"

    def _count(self, block) -> None:
        self._rows += len(block)
        valid = int(np.count_nonzero(block.valid))
        self._lost_rows += len(block) - valid
        if valid:
            self._last.add(block.p if valid == len(block) else block.p[block.valid])

    def _progress(self, stream) -> Progress:
        s = stream.stats
        interval_s = stream.interval_us * 1e-6
        return Progress(covered_s=self._rows * interval_s, lost_s=self._lost_rows * interval_s,
                        requested_s=self.seconds, intervals=s.intervals, gaps=s.gaps,
                        dropped_frames=s.dropped_frames, crc_errors=s.crc_errors,
                        watts=self._last.watts(stream.rails), elapsed_s=time.monotonic() - self._t0)

    def _finish(self, stream, writer: CaptureWriter, reason: str, error: str | None) -> RecordResult:
        """Stop the device, then write what happened and close the capture: every exit path comes here."""
        try:
            stream.stop()
        except Exception as e:  # noqa: BLE001 - the capture must still be closed
            logger.warning("could not stop the stream on %s: %s", getattr(self.dev.link, "port", "?"), e)
        summary = stream.summary()
        interval_s = stream.interval_us * 1e-6
        res = RecordResult(self.path, summary, self.seconds, self._rows * interval_s,
                           self._lost_rows * interval_s, reason, error)
        try:
            rec_meta = res.recording_metadata()
            if self.reconnects:
                rec_meta["reconnects"] = list(self.reconnects)
            writer.update_metadata(recording=rec_meta, stream=summary)
        finally:
            writer.close(stats=summary)
        if self.on_progress is not None:
            try:
                self.on_progress(self._progress(stream))
            except Exception:  # noqa: BLE001 - a display error must not turn a recording into a failure
                logger.exception("progress callback failed at the end of %s", self.path)
        return res


__all__ = ["Recorder", "Progress", "RecordResult", "END_REASONS"]
