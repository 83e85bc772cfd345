"""CaptureWriter: IntervalBlocks + a Timeline + metadata -> one JLS v2 capture file.

    with CaptureWriter(path, metadata={"device": desc}, timeline=tl, clock=stream.clock) as cap:
        for block in stream.blocks(seconds=60):
            cap.write(block)
        cap.update_metadata(stream=stream.summary())

Written as it goes, flushed about once a second, so a capture killed mid-run (kill -9) still opens
and loses at most its last seconds: events and clock anchors go to user data (which survives an
unclean stop) the moment they are known.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from powerrig.core.sums import CompensatedSums
import pyjls

from powerrig import __version__
from powerrig.capture import layout as L
from powerrig.core import names, owned
from powerrig.core.json_values import dumps
from powerrig.core.errors import CaptureError
from powerrig.core.timeline import Timeline
from powerrig.core.blocks import QUANTITY_OF_CLIP, IntervalBlock, true_runs
from powerrig.capture.clocktrack import pack_pings
from powerrig.capture.jls_tail import cut_after_last_whole_chunk
from powerrig.capture.write_faults import NATIVE, OPEN, disk_problem
from powerrig.core.clock import ClockModel


def software_versions() -> dict:
    """Versions that shaped the numbers in a capture (recorded so a result can be reproduced)."""
    return {"powerrig": __version__, "python": sys.version.split()[0], "numpy": np.__version__,
            "pyjls": getattr(pyjls, "__version__", "?"), "platform": platform.platform()}


logger = logging.getLogger(__name__)


def _json(obj) -> bytes:
    return dumps(obj, lenient=True).encode()


class CaptureWriter:
    """Writes a capture. Signals are defined from the first block (rails, interval)."""

    def __init__(self, path: str | Path, metadata: dict | None = None, timeline: Timeline | None = None,
                 clock=None, flush_every_s: float = 1.0, anchor_every_s: float = 5.0):
        """clock: a ClockModel, or an object with ``.model()`` (the stream's ClockFit), or None."""
        self.path = Path(path)
        if self.path.suffix.lower() != ".jls":
            raise CaptureError(f"capture file {self.path} must end in .jls (it is a JLS v2 file)")
        if not self.path.parent.exists():
            raise CaptureError(f"folder {self.path.parent} does not exist; create it or choose another --out")
        self.metadata = dict(metadata or {})
        self.timeline = timeline
        self.clock = clock
        self.flush_every_s = flush_every_s
        self.anchor_every_s = anchor_every_s
        self._errors_seen = NATIVE.errors
        self.failed: str | None = None     # set at the first failed write: nothing is written after it
        self.failed_at: int | None = None  # where the file's whole chunks ended at that write
        try:
            owned.check_file(self.path)         # a link or a foreign file in its place: NotOwned, untouched
            # a new file, not the old one emptied in place: whoever still reads the capture it replaces
            # (a report, the GUI, a mapped direct read) keeps reading it whole
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self._w = pyjls.Writer(str(self.path))
        except owned.NotOwned:
            raise
        except Exception as e:
            why = disk_problem(self.path.parent) or str(e)
            raise CaptureError(f"cannot create capture {self.path}: {why}") from None
        OPEN.add(self)
        self._started = False
        self._closed = False
        self._written_events: set[int] = set()   # timeline positions written, from _events_from on
        self._events_from = 0           # every event before this position is written
        self.length = 0                 # intervals written (sample ids 0..length-1)
        self.gap_intervals = 0
        self.gaps = 0
        self.clipped: dict[str, dict] = {}    # rail -> {"current", "voltage", "intervals"} at full scale
        self._clip_open: dict[tuple[int, int], dict] = {}   # (rail, clip bit) -> the record being gathered
        self._clip_seen: dict[tuple[int, int], int] = {}    # ... -> where its last written record ended
        self._last_flush = time.monotonic()
        self._next_anchor = 0
        self._anchored_model = False
        self._pings_stored = 0          # the clock fit's ping count already stored (clocktrack re-fits)

    # ---- lifecycle ----------------------------------------------------------------------------------
    def __enter__(self) -> "CaptureWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, b: IntervalBlock) -> None:
        interval_s = b.interval_samples * b.sample_period_s
        rate = 1.0 / interval_s
        if abs(rate - round(rate)) > 1e-6 * rate:
            raise CaptureError(f"interval {interval_s * 1e6:g} us gives a non-integer sample rate; choose an "
                               "interval that divides one second (100, 200, 250, 500 or 1000 us)")
        self.rate = int(round(rate))
        self.rails = tuple(b.rails)
        self.interval_samples = b.interval_samples
        self.sample_period_s = b.sample_period_s
        self.first_index = b.first_index
        self._next_raw = b.first_index
        self._seg = (0, b.first_index)   # (sample id, raw index) where the current index segment began
        self._energy = CompensatedSums(len(self.rails))
        self._valid_rows = 0
        self._define_signals(L.samples_per_chunk(self.rate))
        meta = dict(self.metadata)
        meta["format"] = {"name": L.FORMAT, "version": L.FORMAT_VERSION}
        meta["layout"] = {"rails": list(self.rails), "interval_samples": self.interval_samples,
                          "sample_period_s": self.sample_period_s, "interval_s": interval_s,
                          "sample_rate_hz": self.rate, "first_index": self.first_index,
                          "signals": {n: i for n, i in self._ids.items()},
                          "viewer_signals": dict(self._gpi_ids)}
        meta.setdefault("software", software_versions())
        meta.setdefault("created_utc", time.time())
        self._w.user_data(L.UD_METADATA, _json(meta))
        self.metadata = meta
        self._started = True

    def _define_signals(self, spd: int) -> None:
        """One source per rail (current, voltage, power, its extra columns; gpi[n] on the first), then
        a ``powerrig`` source with the totals: the layout in powerrig.capture.layout."""
        w = self._w
        dev = self.metadata.get("device") or {}
        model = str(dev.get("device", "interposer")).replace(".", "_")
        serial = str(dev.get("serial", "")).replace(".", "_")    # the Joulescope UI splits ids on '.'
        version = str(dev.get("firmware", dev.get("version", "")))
        for k, rail in enumerate(self.rails):
            w.source_def(L.rail_source_id(k), name=rail, vendor="powerrig", model=f"{model}_{rail}",
                         version=version, serial_number=serial)
        w.source_def(L.totals_source_id(self.rails), name="powerrig", vendor="powerrig", model=f"{model}_totals",
                     version=version, serial_number=serial)

        def define(sid, source, dtype, name, units):
            w.signal_def(sid, source, pyjls.SignalType.FSR, dtype, self.rate,
                         samples_per_data=spd, sample_decimate_factor=128, entries_per_summary=spd,
                         summary_decimate_factor=20, name=name, units=units)

        self._ids: dict[str, int] = {}
        self._gpi_ids: dict[str, int] = {}
        sid = 1
        for name, source, in_file, units in L.signal_plan(self.rails):
            define(sid, source, pyjls.DataType.F32, in_file, units)
            self._ids[name] = sid
            sid += 1
        for name in L.DIGITAL_FIELDS:
            define(sid, L.totals_source_id(self.rails), pyjls.DataType.U8, name, "")
            self._ids[name] = sid
            sid += 1
        for bit in range(len(names.DIGITAL_INPUTS)):
            # u8, not the u1 a Joulescope writes: pyjls's Python binding appends u1 data in whole bytes (8
            # samples) and its writer never stores a signal's last partial byte (pyjls 0.17 src/wr_fsr.c,
            # wr_data_inner keeps it in shift_buffer), so a u1 signal cannot end where a capture of 8k+r
            # intervals ends, and `pyjls csv` over all signals fails on a longer one (issue 41 item 7)
            define(sid, L.rail_source_id(0), pyjls.DataType.U8, L.gpi_signal(bit), "")
            self._gpi_ids[L.gpi_signal(bit)] = sid
            sid += 1
        self._power_ids = [self._ids[L.rail_signal("p", r)] for r in self.rails]

    # ---- data ---------------------------------------------------------------------------------------
    def use_clock(self, clock) -> None:
        """A reconnected device's clock places what follows (its pings are counted afresh)."""
        self.clock = clock
        self._pings_stored = 0

    @property
    def next_raw_index(self) -> int:
        """The device sample index the next contiguous block starts at."""
        return self._next_raw

    def write(self, block: IntervalBlock) -> None:
        """Append one block (data or gap). Non-contiguous blocks get NaN gap rows in between."""
        if self._closed:
            raise CaptureError(f"capture {self.path} is already closed")
        self._check_writes()
        if not len(block):
            return
        if not self._started:
            self._start(block)
        elif tuple(block.rails) != self.rails or block.interval_samples != self.interval_samples:
            raise CaptureError("stream changed rails or interval mid-capture; start a new capture")
        if block.first_index > self._next_raw:
            missing = (block.first_index - self._next_raw) // self.interval_samples
            if missing:
                self.write(IntervalBlock.gap(self._next_raw, missing, self.interval_samples,
                                             self.sample_period_s, self.rails, "missing"))
            self._next_raw = block.first_index
        elif block.first_index < self._next_raw:
            # the device's index restarted (reset): keep the file's axis going and record the jump
            self._w.user_data(L.UD_SEGMENT, _json({"sample_id": self.length, "raw_index": int(block.first_index)}))
            self._seg = (self.length, block.first_index)
            self._next_raw = block.first_index
        self._write_rows(block)
        if "gap" in block.flags or not block.valid.all():
            self._note_gap(block)
        self._note_clip(block)
        self._after_write(block)

    def _write_rows(self, b: IntervalBlock) -> None:
        w, sid0, ids = self._w, self.length, self._ids
        for k, rail in enumerate(self.rails):
            for field, _ in L.RAIL_FIELDS:
                col = np.ascontiguousarray(getattr(b, field)[:, k], dtype=np.float32)
                w.fsr(ids[L.rail_signal(field, rail)], sid0, col)
        w.fsr(ids[L.TOTAL_POWER], sid0, np.ascontiguousarray(b.p.sum(axis=1), dtype=np.float32))
        for name in L.DIGITAL_FIELDS:
            w.fsr(ids[name], sid0, np.ascontiguousarray(getattr(b, name), dtype=np.uint8))
        seen = np.asarray(b.dig_or, dtype=np.uint8)
        for bit, gid in enumerate(self._gpi_ids.values()):    # one 0/1 sample per interval, as long as the rest
            w.fsr(gid, sid0, np.ascontiguousarray((seen >> bit) & 1, dtype=np.uint8))
        ok = b.valid
        valid = int(np.count_nonzero(ok))
        if valid:
            self._energy.add((b.p if valid == len(ok) else np.where(ok[:, None], b.p, 0.0)).sum(axis=0))
            self._valid_rows += valid
        self.length += len(b)
        self._next_raw = b.end_index

    def _note_gap(self, b: IntervalBlock) -> None:
        bad = ~b.valid
        if not bad.any():
            return
        # runs of invalid rows: one record per run
        edges = np.flatnonzero(np.diff(np.concatenate(([0], bad.view(np.int8), [0]))))
        for s, e in zip(edges[::2], edges[1::2]):
            sid = self.length - len(b) + int(s)
            rec = {"sample_id": sid, "intervals": int(e - s), "raw_index": int(b.first_index + s * b.interval_samples),
                   "reason": b.flags.get("gap", "invalid")}
            self.gaps += 1
            self.gap_intervals += int(e - s)
            self._w.user_data(L.UD_GAP, _json(rec))
            self._annotate(sid, L.GROUP_GAP, f"gap ({rec['reason']}): {rec['intervals']} intervals lost")

    def _note_clip(self, b: IntervalBlock) -> None:
        """Range saturation (the block's clip bits): a record per rail and quantity for each second or so
        that holds clipped intervals, their exact runs inside it (a capture that clips for hours holds a
        record a second, not one per interval); an annotation where an episode starts (nothing clipped
        in the second before); counted per rail for the close record."""
        sid0 = self.length - len(b)
        if b.clip is not None:
            for rail in self.rails:
                self.clipped.setdefault(rail, {"current": 0, "voltage": 0, "intervals": 0})
        if b.clip is not None and b.clip.any():      # the common block clips nothing: no runs to find
            clip = np.where(b.valid[:, None], b.clip, 0)
            for k, rail in enumerate(self.rails):
                c = self.clipped[rail]
                c["intervals"] += int(np.count_nonzero(clip[:, k]))
                for bit, quantity in QUANTITY_OF_CLIP.items():
                    for s, e in true_runs(clip[:, k] & bit):
                        self._clip_run(k, bit, sid0 + s, e - s)
                        c[quantity] += e - s
        for key, rec in list(self._clip_open.items()):
            if self.length - rec["sample_id"] >= self.rate:   # a second old: written (a kill -9 loses <= ~1 s)
                self._write_clip(key)

    def _clip_run(self, k: int, bit: int, sid: int, n: int) -> None:
        rec = self._clip_open.get((k, bit))
        if rec is not None and sid - rec["end"] > self.rate:
            self._write_clip((k, bit))
            rec = None
        if rec is None:
            rec = self._clip_open[(k, bit)] = {"sample_id": sid, "end": sid, "runs": []}
        if rec["runs"] and sid == rec["end"]:
            rec["runs"][-1][1] += n
        else:
            rec["runs"].append([sid - rec["sample_id"], n])
        rec["end"] = sid + n

    def _write_clip(self, key: tuple[int, int]) -> None:
        rec = self._clip_open.pop(key)
        rail, quantity = self.rails[key[0]], QUANTITY_OF_CLIP[key[1]]
        doc = {"sample_id": rec["sample_id"], "span": rec["end"] - rec["sample_id"],
               "intervals": sum(r[1] for r in rec["runs"]),
               "rail": rail, "quantity": quantity, "runs": rec["runs"]}
        self._w.user_data(L.UD_CLIP, _json(doc))
        last_end = self._clip_seen.get(key)
        self._clip_seen[key] = rec["end"]
        if last_end is not None and rec["sample_id"] - last_end <= self.rate:
            return          # the same episode goes on: its start is annotated already
        text = f"{rail} {quantity} at full scale: readings clipped (lower bounds)"
        for signal in (self._ids[L.rail_signal("p", rail)], self._ids[L.TOTAL_POWER]):
            self._w.annotation(signal, rec["sample_id"], math.nan, pyjls.AnnotationType.TEXT, L.GROUP_CLIP, text)

    def _annotate(self, sid: int, group: int, text: str) -> None:
        """A text annotation on every rail's power and on the total: where viewers show them."""
        for signal in (*self._power_ids, self._ids[L.TOTAL_POWER]):
            self._w.annotation(signal, sid, math.nan, pyjls.AnnotationType.TEXT, group, text)

    def _after_write(self, b: IntervalBlock) -> None:
        self._anchor()
        self._write_finished_events()
        now = time.monotonic()
        if now - self._last_flush >= self.flush_every_s:
            self._w.flush()
            self._last_flush = now
        self._check_writes()

    def _check_writes(self) -> None:
        """Stop at the first failed write (disk full, read-only): raise CaptureError, write nothing more."""
        if self.failed is not None:
            raise CaptureError(self.failed)
        if NATIVE.errors == self._errors_seen:
            return
        self._errors_seen = NATIVE.errors
        why = disk_problem(self.path.parent)
        if why is None and len(OPEN) > 1 and self.failed_at is None:    # another capture's disk, not this one's
            logger.warning("a capture write failed (%s); %s is not affected", NATIVE.first_error, self.path)
            return
        self.failed = (f"capture {self.path}: recording stopped at the first failed write "
                       f"({why or 'the JLS library said: ' + NATIVE.first_error}); what was written before it is kept")
        raise CaptureError(self.failed)

    # ---- clock --------------------------------------------------------------------------------------
    def _model(self) -> ClockModel | None:
        c = self.clock
        if c is None or isinstance(c, ClockModel):
            return c
        return c.model()

    def _anchor(self, force: bool = False) -> None:
        """Record (sample id, UTC) from the current clock model every few seconds of samples."""
        if self.length == 0:
            return
        last = self.length - 1
        if self._anchored_model and last < self._next_anchor and not force:
            return      # no anchor due: the fit is not asked for (a refit costs ms; this runs per block)
        model = self._model()
        if model is None:
            return
        if not self._anchored_model:
            # the first model also places everything written before it existed
            self._write_anchor(0, model)
            self._anchored_model = True
            self._next_anchor = int(self.anchor_every_s * self.rate)
        if last >= self._next_anchor or force:
            self._write_anchor(last, model)
            self._next_anchor = last + int(self.anchor_every_s * self.rate)

    def _write_anchor(self, sid: int, model: ClockModel) -> None:
        raw = self._raw_of(sid)
        utc = float(model.utc(raw))
        doc = {"sample_id": sid, "raw_index": int(raw), "utc": utc, "model": model.to_dict()}
        if hasattr(self.clock, "pings_since"):       # the pings themselves, so analysis can re-fit them
            pings, self._pings_stored = self.clock.pings_since(self._pings_stored)
            if len(pings):
                doc["pings"] = pack_pings(pings)
        self._w.user_data(L.UD_CLOCK, _json(doc))
        try:
            t64 = pyjls.time64.as_time64(utc)
            for signal in (*self._ids.values(), *self._gpi_ids.values()):   # pyjls csv and viewers need every one
                self._w.utc(signal, sid, t64)
        except (RuntimeError, ValueError, OverflowError) as e:
            # the JLS UTC track is for viewers; the user-data anchors are authoritative
            logger.warning("capture %s: JLS UTC entry at sample %d not written (%s); the clock anchor in "
                           "user data holds it", self.path, sid, e)

    def _raw_of(self, sid: int) -> int:
        sid0, raw0 = self._seg
        return raw0 + (sid - sid0) * self.interval_samples

    def _sid_of(self, raw: float) -> float:
        sid0, raw0 = self._seg
        return sid0 + (raw - raw0) / self.interval_samples

    # ---- events and metadata --------------------------------------------------------------------------
    def _write_finished_events(self, final: bool = False) -> None:
        if self.timeline is None:
            return
        # from the first event not yet written: a timeline of an overnight stream holds thousands
        # (a temperature poll every few seconds) and this runs for every block
        first = self._events_from
        if hasattr(self.timeline, "since"):
            first, tail = self.timeline.since(first)
        else:
            tail = list(self.timeline)[first:]
        for n, e in enumerate(tail, start=first):
            if n in self._written_events or (e.t_end is None and not final):
                continue
            self._written_events.add(n)
            self._w.user_data(L.UD_EVENT, _json(e.to_dict()))
            model = self._model()
            if model is not None and self._started:
                sid = int(round(self._sid_of(float(model.index(e.t_start)))))
                if 0 <= sid:
                    self._annotate(sid, L.GROUP_EVENT, f"{e.kind}: {e.name}")
        self._events_from = max(self._events_from, first)
        while self._events_from in self._written_events:
            self._written_events.discard(self._events_from)
            self._events_from += 1

    def add_event(self, event) -> None:
        """Record an event that is not on the timeline (imports, notes)."""
        self._w.user_data(L.UD_EVENT, _json(event.to_dict()))

    def update_metadata(self, **items) -> None:
        """Merge keys into the metadata (e.g. the drive's id-ctrl learnt after the stream started)."""
        self.metadata.update(items)
        if self.failed is None:
            self._w.user_data(L.UD_METADATA_UPDATE, _json(items))

    # ---- close --------------------------------------------------------------------------------------
    def close(self, stats: dict | None = None) -> None:
        """Write the close record (totals, stats) and finish the file. Safe to call twice.

        Order: everything queued is flushed to the file before the close record; JLS then writes each
        signal's last partial chunk and the summary levels inside ``close()`` (no API writes them
        earlier), and last of all the file length into the header. The reader takes that header length
        as the commit mark and compares the close record with the data it finds, so a file cut anywhere
        after the close record still reads as not closed cleanly."""
        if self._closed:
            return
        self._closed = True
        OPEN.discard(self)
        if self.failed is not None:
            self._close_failed()
            return
        try:
            if self._started:
                self._anchor(force=True)
                self._write_finished_events(final=True)
                for key in list(self._clip_open):
                    self._write_clip(key)
                self._w.flush()
                e = self._energy.value * self.interval_samples * self.sample_period_s
                self._w.user_data(L.UD_CLOSE, _json({
                    "length": self.length, "gaps": self.gaps, "gap_intervals": self.gap_intervals,
                    "valid_intervals": self._valid_rows, "clipped": self.clipped,
                    "energy_j": {r: float(x) for r, x in zip(self.rails, e)}, "stats": stats or {},
                    "closed_utc": time.time()}))
        finally:
            self._w.close()

    def _close_failed(self) -> None:
        """After a failed write: release the library's writer (what it still tries to write fails
        quietly), then cut the file after its last whole chunk, so it reads as a capture cut short."""
        try:
            self._w.close()
        except Exception as e:  # noqa: BLE001 - the failure is already reported; the cut below matters
            logger.debug("closing the failed capture %s: %s", self.path, e)
        try:
            cut = cut_after_last_whole_chunk(self.path, self.failed_at)
            logger.info("capture %s: %d bytes after the last whole chunk cut off", self.path, cut)
        except OSError as e:        # read-only: nothing after the failure reached the file anyway
            logger.info("capture %s left as written (%s)", self.path, e.strerror or e)
