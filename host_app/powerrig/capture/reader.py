"""CaptureReader: open a capture, read samples, summaries and events for any range.

    with CaptureReader(path) as cap:
        cap.rails, cap.interval_s, cap.length, cap.metadata, cap.events, cap.gaps
        p = cap.samples("p_12V", start, stop)          # float32, NaN in gaps
        s = cap.summaries("p_total", start, stop, 800)  # one (mean, std, min, max) per pixel
        for sid0, cols in cap.chunks(["p_12V", "p_total"]):   # flat memory over any length
            ...

Positions are sample ids (interval numbers from 0); ``sample_id(utc)`` and ``utc(sample_id)`` map
them to host UTC through the clock anchors stored in the capture.

Reading never changes the file. A capture that was not closed cleanly (its JLS header does not record
its size) is opened from a repaired temporary copy; each signal is read as far as it is intact
(``intact``), the rest up to ``length`` is NaN and one ``truncated`` gap, and ``recovery_note`` says
in one line what was recovered and what was lost. ``recording`` is what the recorder was asked and got.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import sys
import tempfile
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np
import pyjls

from powerrig.capture import layout as L
from powerrig.capture.clocktrack import ClockTrack
from powerrig.capture.jls_tail import clear_dangling_pointers
from powerrig.core.blocks import clipped_counts
from powerrig.core.errors import CaptureError
from powerrig.core.timeline import Event

logger = logging.getLogger(__name__)

# JLS v2 file header: 16 bytes identification, u64 file length, u32 version, u32 crc. The writer
# fills the length in as the very last step of a clean close; 0 means never closed.
_HEADER_LENGTH_AT = 16


def _header_length(path: Path) -> int | None:
    """The file length the JLS header records (0: never closed), or None if the header is cut."""
    with open(path, "rb") as f:
        head = f.read(_HEADER_LENGTH_AT + 8)
    if len(head) < _HEADER_LENGTH_AT + 8:
        return None
    return struct.unpack_from("<Q", head, _HEADER_LENGTH_AT)[0]


@contextmanager
def _quiet_stderr():
    """The JLS library prints repair notes (stderr and the 'pyjls' logger) while it recovers a file
    that was not closed; the reader reports that as ``closed_cleanly`` instead."""
    log = logging.getLogger("pyjls")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with _quiet_fd():
            yield
    finally:
        log.setLevel(level)


@contextmanager
def _quiet_fd():
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


class CaptureReader:
    """Reads a capture without ever changing it.

    A capture that was not closed cleanly (killed, crashed, disk full, cut short by a copy) is
    recovered from a temporary copy (the JLS library repairs files in place when it opens them), every
    signal is read as far as it is intact and the rest is a gap (NaN, a ``truncated`` gap record);
    ``recovery_note`` says in one line what was recovered and what was lost.

    One reader serves one thread at a time: pyjls's reader keeps a file position, and two threads
    reading at once get chunk CRC errors. Guard it with a lock (the GUI's FileSource does) or open
    one reader per thread."""
    DEFAULT_CHUNK = 1 << 20

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise CaptureError(f"capture {self.path} not found; check the path")
        if self.path.is_dir():
            raise CaptureError(f"{self.path} is a folder, not a capture; give the .jls file written by "
                               "`powerrig record`")
        self.file_bytes = self.path.stat().st_size
        if self.file_bytes == 0:
            raise CaptureError(f"capture {self.path} is empty (0 bytes): the recording wrote nothing; record again")
        with open(self.path, "rb") as f:
            magic = f.read(16)
        if not magic.startswith(b"jls"):
            raise CaptureError(f"{self.path} is not a JLS capture (unknown header {magic[:8]!r}); "
                               "open a .jls file written by `powerrig record`")
        self.header_bytes = _header_length(self.path)
        # the header's length is written last at a clean close: any other value means the file is
        # not as its writer left it, and the JLS library would repair it in place on open
        self.file_finalised = self.header_bytes == self.file_bytes
        self.read_from_copy = not self.file_finalised
        self._tmpdir = None
        self._direct = None            # direct_read.DirectRead, made at the first read of a float32 signal
        self.pointers_cleared = 0      # next-chunk pointers past the cut, cleared in the copy (jls_tail)
        read_path = self.path
        if self.read_from_copy:
            read_path = self._copy_for_repair()
        try:
            with _quiet_stderr():
                self._r = pyjls.Reader(str(read_path))
        except Exception as e:   # pyjls raises bare Exception subclasses of its own for a broken file
            self._drop_copy()
            raise CaptureError(f"capture {self.path} cannot be read ({e}); the file is damaged beyond repair") from None
        try:
            self._load_user_data()
            self._measure_signals()
        except BaseException:
            self.close()
            raise

    def _copy_for_repair(self) -> Path:
        try:
            self._tmpdir = tempfile.mkdtemp(prefix="powerrig-recover-")
            dst = Path(self._tmpdir) / self.path.name
            shutil.copyfile(self.path, dst)
            self.pointers_cleared = clear_dangling_pointers(dst)
        except OSError as e:
            self._drop_copy()
            raise CaptureError(f"capture {self.path} was not closed cleanly and must be recovered from a copy, "
                               f"but the copy failed ({e}); free space in {tempfile.gettempdir()} or set TMPDIR "
                               "to a folder with room") from None
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._tmpdir, True)
        return dst

    def _drop_copy(self) -> None:
        if self._tmpdir is not None:
            fin = getattr(self, "_finalizer", None)
            if fin is not None:
                fin()                  # removes the folder once (also at exit if close() is never called)
            else:
                shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def _load_user_data(self) -> None:
        self.metadata: dict = {}
        self.events: list[Event] = []
        self.gaps: list[dict] = []
        self.clips: list[dict] = []       # range saturation records (layout.UD_CLIP)
        self.segments: list[dict] = []
        self._anchors: list[dict] = []
        self.close_record: dict | None = None
        found = []

        def on(tag, data):
            found.append((tag, data))
            return False

        self.damaged = False
        try:
            with _quiet_stderr():
                self._r.user_data(on)
        except RuntimeError:
            self.damaged = True      # a torn end: keep every record before it
        for tag, data in found:
            if tag not in (L.UD_METADATA, L.UD_METADATA_UPDATE, L.UD_EVENT, L.UD_GAP, L.UD_CLOCK,
                           L.UD_SEGMENT, L.UD_CLOSE, L.UD_CLIP):
                continue
            try:
                doc = json.loads(bytes(data).decode())
            except (ValueError, UnicodeDecodeError):
                continue   # a torn record at the end of a killed capture
            if tag == L.UD_METADATA:
                self.metadata = doc
            elif tag == L.UD_METADATA_UPDATE:
                self.metadata.update(doc)
            elif tag == L.UD_EVENT:
                self.events.append(Event.from_dict(doc))
            elif tag == L.UD_GAP:
                self.gaps.append(doc)
            elif tag == L.UD_CLOCK:
                self._anchors.append(doc)
            elif tag == L.UD_SEGMENT:
                self.segments.append(doc)
            elif tag == L.UD_CLOSE:
                self.close_record = doc
            elif tag == L.UD_CLIP:
                self.clips.append(doc)
        fmt = self.metadata.get("format", {})
        if fmt.get("name") != L.FORMAT:
            if self.damaged:
                raise CaptureError(f"capture {self.path} is damaged before its metadata; nothing can be recovered")
            raise CaptureError(f"{self.path} is a JLS file but not a powerrig capture (no powerrig metadata); "
                               "it was written by another tool")
        if fmt.get("version", 0) > L.FORMAT_VERSION:
            raise CaptureError(f"{self.path} uses capture format {fmt['version']}, newer than this powerrig "
                               f"reads ({L.FORMAT_VERSION}); update powerrig")
        lay = self.metadata["layout"]
        self.rails = tuple(lay["rails"])
        self.interval_samples = int(lay["interval_samples"])
        self.sample_period_s = float(lay["sample_period_s"])
        self.interval_s = self.interval_samples * self.sample_period_s
        self.sample_rate_hz = int(lay["sample_rate_hz"])
        self.first_index = int(lay["first_index"])
        self._ids = {str(k): int(v) for k, v in lay["signals"].items()}
        self.events = placed_over_host(self.events)
        self.events.sort(key=lambda e: e.t_start)
        self.clock = ClockTrack.from_anchors(self._anchors, self.interval_samples)

    # ---- how much is there --------------------------------------------------------------------------
    def _measure_signals(self) -> None:
        """Every signal's intact length; the capture's length is the longest (or what its close record
        lists, if more): what a signal lacks up to it reads as NaN and is one ``truncated`` gap."""
        sigs = self._r.signals
        self.intact = {n: (self._intact_length(i, int(sigs[i].length)) if i in sigs else 0)
                       for n, i in self._ids.items()}
        found = max(self.intact.values(), default=0)
        self.expected_length = int(self.close_record["length"]) if self.close_record else None
        self.length = max(found, self.expected_length or 0)
        self.complete_length = min(self.intact.values(), default=0)
        if self.complete_length < self.length:
            short = sorted(n for n, k in self.intact.items() if k < self.length)
            self.gaps.append({"sample_id": self.complete_length, "intervals": self.length - self.complete_length,
                              "raw_index": self.first_index + self.complete_length * self.interval_samples,
                              "reason": "truncated", "signals": short})
        self.closed_cleanly = (self.file_finalised and not self.damaged and self.close_record is not None
                               and self.complete_length == self.length == self.expected_length)
        self.recovery_note = None if self.closed_cleanly else self._recovery_note()
        if self.recovery_note:
            logger.info("%s", self.recovery_note)

    def _intact_length(self, sid: int, length: int) -> int:
        """The longest prefix of a signal that reads back (its last sample readable), at most ``length``."""
        if length <= 0 or self.file_finalised:
            return max(0, length)
        if self._readable(sid, length):
            return length
        lo, hi = 0, length            # readable(lo) holds, readable(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self._readable(sid, mid) else (lo, mid)
        return lo

    def _readable(self, sid: int, n: int) -> bool:
        if n == 0:
            return True
        try:
            with _quiet_stderr():
                self._r.fsr(sid, n - 1, 1)
            return True
        except RuntimeError:
            return False

    def _recovery_note(self) -> str:
        """One line: why the capture is not whole, what was recovered, what was lost, and that the file
        itself was left as it is."""
        dt = self.interval_s
        if self.header_bytes == 0:
            why = "was not closed (recording killed, crashed or still running)"
        elif not self.file_finalised:
            why = (f"was cut short ({self.file_bytes:,} of the {self.header_bytes:,} bytes it had when closed)"
                   if self.header_bytes and self.header_bytes > self.file_bytes else
                   f"was changed after it was closed ({self.file_bytes:,} bytes, {self.header_bytes or 0:,} recorded)")
        elif self.damaged:
            why = "has damaged records (read up to the damage)"
        elif self.close_record is None:
            why = "has no close record"
        else:
            why = "does not match its close record"
        got = f"recovered {max(self.intact.values(), default=0) * dt:.3f} s"
        short = sorted((k, n) for n, k in self.intact.items() if k < self.length)
        if short:
            got += f" (every signal whole to {self.complete_length * dt:.3f} s; {len(short)} of {len(self.intact)} " \
                   f"signals end earlier, shortest {short[0][1]} at {short[0][0] * dt:.3f} s"
            if L.TOTAL_POWER in (n for _, n in short):
                got += f", {L.TOTAL_POWER} at {self.intact[L.TOTAL_POWER] * dt:.3f} s"
            got += ")"
        if self.expected_length is not None:
            lost = self.expected_length - self.complete_length
            lost_s = (f"its close record lists {self.expected_length * dt:.3f} s: {lost * dt:.3f} s lost, "
                      "marked as a gap" if lost > 0 else "nothing of its data lost")
        else:
            lost_s = "no close record: whatever came after is lost and its length is unknown"
        how = "read from a repaired temporary copy, the file is unchanged" if self.read_from_copy else "file unchanged"
        return f"capture {self.path.name} {why}: {got}; {lost_s}; {how}"

    # ---- basics -------------------------------------------------------------------------------------
    def __enter__(self) -> "CaptureReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        d = getattr(self, "_direct", None)
        if d:
            d.close()
        self._direct = False
        r = getattr(self, "_r", None)
        if r is not None:
            r.close()
            self._r = None
        self._drop_copy()

    @property
    def recording(self) -> dict | None:
        """What the recorder was asked and got: {requested_s, covered_s, lost_s, end_reason, error}."""
        rec = self.metadata.get("recording")
        return rec if isinstance(rec, dict) else None

    @property
    def recording_note(self) -> str | None:
        """One line when the recording fell short of what was asked or did not end as asked; else None."""
        return recording_shortfall(self.recording)

    @property
    def shortfalls(self) -> list[str]:
        """What anything made from this capture (an export, a report) must say about it: the capture was
        cut short (not closed cleanly), or the recording got less than was asked."""
        out = [] if self.closed_cleanly else [f"not closed cleanly: {self.recovery_note}"]
        return out + ([self.recording_note] if self.recording_note else [])

    @property
    def duration_s(self) -> float:
        return self.length * self.interval_s

    @property
    def signals(self) -> list[str]:
        return list(self._ids)

    def has(self, name: str) -> bool:
        return name in self._ids

    def _id(self, name: str) -> int:
        try:
            return self._ids[name]
        except KeyError:
            raise CaptureError(f"capture has no signal {name!r}; it has {', '.join(self._ids)}") from None

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except RuntimeError as e:
            raise CaptureError(f"capture {self.path} is damaged where it was read ({e}); "
                               "re-record, or analyse the part before it") from None

    def _range(self, start: int | None, stop: int | None) -> tuple[int, int]:
        start = 0 if start is None else max(0, int(start))
        stop = self.length if stop is None else min(self.length, int(stop))
        return start, max(start, stop)

    # ---- data ---------------------------------------------------------------------------------------
    def _read(self, name: str, start: int, n: int, pool=None) -> np.ndarray:
        """n values from ``start``; past the signal's intact end NaN (0 for the digital signals)."""
        sid = self._id(name)
        have = max(0, min(n, self.intact[name] - start))
        if have == n:
            return self._fsr(sid, start, n, pool)
        digital = name in L.DIGITAL_FIELDS
        out = np.zeros(n, np.uint8) if digital else np.full(n, np.nan, np.float32)
        if have > 0:
            out[:have] = self._fsr(sid, start, have)
        return out

    def _fsr(self, sid: int, start: int, n: int, pool=None) -> np.ndarray:
        """n intact samples of a signal: straight from the file's pages when it is finalised and the
        signal float32 (direct_read: ~2x less CPU than pyjls; into an array of ``pool``, an ArrayPool,
        if given), else, or where that declines, via pyjls."""
        if self._direct is None:
            self._direct = self._open_direct()
        got = None
        if self._direct and self._direct.serves(sid):
            got = self._direct.read(sid, start, n, pool.take(n, np.float32) if pool is not None else None)
        return got if got is not None else self._call(self._r.fsr, sid, start, n)

    def _open_direct(self):
        """A DirectRead of this file's float32 signals, or False where it cannot serve (a file read
        from a repaired copy, a host without the CRC instruction, POWERRIG_DIRECT_READ=0)."""
        if self.read_from_copy or os.environ.get("POWERRIG_DIRECT_READ") == "0":
            return False
        # imported at the first read of samples, not with the reader: it brings numba (~0.2 s), which
        # a CLI start that never reads a sample should not pay
        from powerrig.capture import direct_read
        if not direct_read.available():
            return False
        sigs = {int(s.signal_id): (int(s.sample_id_offset), int(s.samples_per_data))
                for s in self._r.signals.values() if s.signal_type == 0 and s.data_type == direct_read.F32}
        return direct_read.DirectRead(self.path, sigs) if sigs else False

    def samples(self, name: str, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Per-interval values of a signal for sample ids [start, stop) (NaN in gaps)."""
        start, stop = self._range(start, stop)
        self._id(name)
        if stop == start:
            return np.empty(0, np.uint8 if name in L.DIGITAL_FIELDS else np.float32)
        return self._read(name, start, stop - start)

    def chunks(self, names, start: int | None = None, stop: int | None = None,
               chunk: int = DEFAULT_CHUNK, pool=None) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """(first sample id, {name: values}) for consecutive chunks: memory flat in capture length.
        ``pool`` (capture.array_pool.ArrayPool): arrays the caller gave back, read into again."""
        start, stop = self._range(start, stop)
        for n in names:
            self._id(n)
        for s in range(start, stop, chunk):
            n = min(chunk, stop - s)
            yield s, {name: self._read(name, s, n, pool) for name in names}

    def clipped(self, start: int | None = None, stop: int | None = None) -> dict[str, dict]:
        """{rail: {"current", "voltage", "intervals"}}: intervals of [start, stop) whose readings the
        range clipped (the capture's clip records; a capture written before them has none)."""
        start, stop = self._range(start, stop)
        return clipped_counts(self.clips, self.rails, start, stop)

    def summaries(self, name: str, start: int | None = None, stop: int | None = None,
                  n: int = 1000) -> dict[str, np.ndarray]:
        """``n`` summaries (mean, std, min, max) spanning [start, stop), from the file's summary levels.

        Fast at any length (for plots and overviews); inner boundaries are approximate, per pyjls.
        A summary touching a gap has NaN mean and std (past a signal's intact end: all four NaN)."""
        start, stop = self._range(start, stop)
        total = stop - start
        if total <= 0:
            raise CaptureError(f"empty range [{start}, {stop}) of a capture with {self.length} intervals")
        n = max(1, min(n, total))
        incr = -(-total // n)            # ceil: the n summaries must cover the whole range
        n = total // incr                # (a remainder shorter than one summary is left out)
        whole = max(0, min(n, (self.intact[name] - start) // incr))   # summaries inside the intact part
        s = self._call(self._r.fsr_statistics, self._id(name), start, incr, whole) if whole else None
        if s is not None:
            s = _no_sentinels(s)
        if whole < n:                    # as pyjls returns them (float64), NaN past the intact end
            s = np.concatenate([s if s is not None else np.empty((0, 4)), np.full((n - whole, 4), np.nan)])
        return {"sample_id": start + np.arange(n) * incr, "increment": incr, "mean": s[:, 0], "std": s[:, 1],
                "min": s[:, 2], "max": s[:, 3]}

    def range_stats(self, name: str, start: int | None = None, stop: int | None = None) -> dict[str, float]:
        """Exact mean, std, min, max over one range (summary levels; NaN mean when a gap is inside)."""
        start, stop = self._range(start, stop)
        sid = self._id(name)
        have = min(stop, self.intact[name])
        if have <= start:
            return {"mean": np.nan, "std": np.nan, "min": np.nan, "max": np.nan}
        s = _no_sentinels(self._call(self._r.fsr_statistics, sid, start, have - start, 1))[0]
        cut = have < stop                # part of the range is past the signal's intact end: a gap
        return {"mean": np.nan if cut else float(s[0]), "std": np.nan if cut else float(s[1]),
                "min": float(s[2]), "max": float(s[3])}

    # ---- time and events ----------------------------------------------------------------------------
    def _need_clock(self) -> ClockTrack:
        if self.clock is None:
            raise CaptureError(f"capture {self.path} holds no clock anchors (the stream never answered a ping), "
                               "so its events cannot be placed on the samples; record again")
        return self.clock

    def utc(self, sample_id):
        """Host UTC of a sample id."""
        return self._need_clock().utc(sample_id)

    def sample_id(self, utc):
        """Fractional sample id of a host UTC time."""
        return self._need_clock().sample_id_at(utc)

    def events_in(self, start: int | None = None, stop: int | None = None, kind: str | None = None) -> list[Event]:
        """Events of a kind overlapping sample ids [start, stop)."""
        start, stop = self._range(start, stop)
        t0, t1 = self.utc(start), self.utc(stop)
        out = []
        for e in self.events:
            end = e.t_end if e.t_end is not None else e.t_start
            if (kind is None or e.kind == kind) and end >= t0 and e.t_start <= t1:
                out.append(e)
        return out

    def info(self) -> str:
        """A few lines for humans: length, rails, gaps, events, clean close, what the recording asked."""
        lines = [f"{self.path}: {self.duration_s:.3f} s, {self.length} intervals of {self.interval_s * 1e6:g} us, "
                 f"rails {', '.join(self.rails)}",
                 f"  events {len(self.events)}, gaps {len(self.gaps)} ({sum(g['intervals'] for g in self.gaps)} intervals)"]
        over = {r: c["intervals"] for r, c in self.clipped().items() if c["intervals"]}
        if over:
            lines.append("  range clipped (readings are lower bounds): "
                         + ", ".join(f"{r} in {n} intervals" for r, n in over.items()))
        if not self.closed_cleanly:
            lines.append(f"  NOT closed cleanly: {self.recovery_note}")
        if self.recording_note:
            lines.append(f"  {self.recording_note}")
        return "\n".join(lines)


def placed_over_host(events: list[Event]) -> list[Event]:
    """An event placed after it was written (sweep/command_trace.py: an admin command moved to its
    submission traced in the drive host's kernel; ``meta["replaces"]`` holds the host-stamped start it
    was written with) stands in for the one written at the time."""
    gone = {(str(e.kind), e.name, e.meta.get("replaces")) for e in events if (e.meta or {}).get("replaces") is not None}
    if not gone:
        return events
    return [e for e in events if (e.meta or {}).get("replaces") is not None or (str(e.kind), e.name, e.t_start) not in gone]


GOOD_ENDS = ("duration", "stopped")


def recording_shortfall(rec: dict | None) -> str | None:
    """One line when a recording got less than was asked or ended other than as asked, else None.

    ``rec`` is the recorder's metadata ``recording`` = {requested_s, covered_s, lost_s, end_reason, error}."""
    if not rec:
        return None
    req, cov, lost = rec.get("requested_s"), rec.get("covered_s"), rec.get("lost_s")
    reason, err = rec.get("end_reason"), rec.get("error")
    short = isinstance(req, (int, float)) and isinstance(cov, (int, float)) and cov < req - 1e-9
    if not short and reason in GOOD_ENDS and not err:
        return None
    parts = [f"recording ended by {reason or 'an unknown cause'}"]
    if isinstance(req, (int, float)):
        parts.append(f"{req:.3f} s asked")
    else:
        parts.append("asked: until stopped")
    if isinstance(cov, (int, float)):
        parts.append(f"{cov:.3f} s covered")
    if isinstance(lost, (int, float)) and lost:
        parts.append(f"{lost:.3f} s lost in gaps")
    line = ", ".join(parts)
    return line + (f": {err}" if err else "")


def _no_sentinels(s: np.ndarray) -> np.ndarray:
    """pyjls answers a summary with no finite sample (a bucket wholly inside a gap) with min = +DBL_MAX
    and max = -DBL_MAX, its accumulators' start values: make those NaN, as the rest of a gap is."""
    empty = s[:, 2] > s[:, 3]
    if empty.any():
        s = s.copy()
        s[empty, 2:4] = np.nan
    return s
