"""The capture's timeline as logic lanes: which samples are high on PHASE, NVME, the power-state bits
and the LABEL line, for an export of sample ids [start, stop).

PulseView draws logic channels on the same time axis as the power, and sigrok's decoders can only
read logic channels, so everything a decoder must name travels in the logic data itself:

* each lane is high during its events; two events on one lane are always separated by at least one
  low sample (an event that touches or overlaps the previous one ends that one a sample early), and
  every lane is low in the last sample, so a decoder sees every span end;
* LABEL carries the names: for every PHASE and NVME event, in order of their start (PHASE first on
  a tie), its name and a newline as UART 8N1 bytes, one bit per sample, idle high. The k-th name on
  LABEL belongs to the k-th event; names are placed to end by their event's start where there is
  room, otherwise as soon after as the line is free. sigrok's own ``uart`` decoder reads LABEL too
  (baud rate = sample rate);
* PS_VALID is high where the drive's power state is known, PS_B0..PS_B4 hold it in binary.

The channel order (PHASE, NVME, LABEL, GAP, PS_VALID, PS_B0..PS_B4) is the decoder's, so sigrok-cli,
which maps decoder channels by position when none are named, needs no mapping.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from powerrig.analysis.phases import DWELL, IDLE, WORKLOAD, commands, phases_from_events
from powerrig.core.timeline import FIO, NVME, PHASE

logger = logging.getLogger(__name__)

LABEL_MAX_BYTES = 60
PS_BITS = 5                 # NVMe power states 0..31: always five bits, so every export has the same channels
BITS_PER_BYTE = 10          # start, 8 data (LSB first), stop


@dataclass
class Spans:
    """Sample ranges [a, b) where a lane is high (export sample numbers)."""
    a: np.ndarray
    b: np.ndarray

    @classmethod
    def of(cls, pairs) -> "Spans":
        arr = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        return cls(arr[:, 0].copy(), arr[:, 1].copy())

    def render(self, s: int, n: int) -> np.ndarray:
        """Bool per sample of [s, s+n): a difference array, so cost follows the spans, not Python loops."""
        d = np.zeros(n + 1, np.int32)
        hit = (self.b > s) & (self.a < s + n)
        np.add.at(d, np.clip(self.a[hit] - s, 0, n), 1)
        np.add.at(d, np.clip(self.b[hit] - s, 0, n), -1)
        return np.cumsum(d[:n]) > 0


@dataclass
class Lanes:
    length: int                                    # samples in the export
    phase: Spans
    nvme: Spans
    ps_valid: Spans
    ps_bits: list[Spans]
    label_at: np.ndarray                           # first sample of each label
    label_bits: list[np.ndarray]                   # its UART bits (0/1), one per sample
    names: list[tuple[str, str]] = field(default_factory=list)   # (lane, name) in label order
    adjusted: int = 0                              # events shortened or moved to stay distinct
    dropped: int = 0                               # events that start in the last sample: cannot show
    labels_cut: int = 0                            # labels that do not fit before the end
    unplaced: int = 0                              # events of a capture without clock anchors

    def render_label(self, s: int, n: int) -> np.ndarray:
        out = np.ones(n, np.uint8)
        for at, bits in zip(self.label_at, self.label_bits):
            lo, hi = max(at, s), min(at + len(bits), s + n)
            if lo < hi:
                out[lo - s:hi - s] = bits[lo - at:hi - at]
        return out


def _place(pairs: list[tuple[float, float]], length: int) -> tuple[list[tuple[int, int]], int, int, list[int]]:
    """Round fractional spans to samples, keep them distinct on one lane, low in the last sample.

    Returns (spans, adjusted, dropped, kept indices into ``pairs``)."""
    last = length - 1
    order = sorted(range(len(pairs)), key=lambda k: pairs[k][0])
    out, kept, adjusted, dropped = [], [], 0, 0
    for k in order:
        a = max(0, int(round(pairs[k][0])))
        b = min(last, int(round(pairs[k][1])))
        if pairs[k][1] < 0 or pairs[k][0] >= length:
            continue                                   # outside the export
        if out and a <= out[-1][1]:                    # touches or overlaps the previous one
            pa, pb = out[-1]
            out[-1] = (pa, max(pa + 1, a - 1))
            a = max(a, out[-1][1] + 1)
            adjusted += 1
        b = max(b, a + 1)
        if b > last:
            dropped += 1
            continue
        out.append((a, b))
        kept.append(k)
    return out, adjusted, dropped, kept


def label_bits(text: str) -> np.ndarray:
    data = text.replace("\n", " ").encode("utf-8")[:LABEL_MAX_BYTES] + b"\n"
    b = np.frombuffer(data, np.uint8)
    frame = np.zeros((len(b), BITS_PER_BYTE), np.uint8)
    frame[:, 1:9] = (b[:, None] >> np.arange(8)) & 1
    frame[:, 9] = 1
    return frame.ravel()


def build(cap, start: int, stop: int) -> Lanes:
    """Lanes for sample ids [start, stop) of a capture (a CaptureReader)."""
    length = stop - start
    events = list(cap.events)
    unplaced = 0
    if cap.clock is None and events:
        logger.warning("capture has events but no clock anchors: the timeline lanes stay low")
        unplaced, events = len(events), []
    if length < 2:
        events = []
    to_sid = (lambda utc: float(cap.sample_id(utc)) - start) if events else None
    full_len = cap.length - start
    initial = (cap.metadata.get("drive") or {}).get("power_state")
    initial = int(initial) if isinstance(initial, (int, float)) and not isinstance(initial, bool) else None

    phases = phases_from_events(events, to_sid, full_len, cap.interval_s, initial_power_state=initial) if events else []
    named = [p for p in phases if p.event is not None and p.kind in (WORKLOAD, IDLE) and p.event.kind in (PHASE, FIO)]
    ph_spans, adj1, drop1, kept1 = _place([(p.start, p.stop) for p in named], length)
    cmds = [(e, a, b) for e, a, b in (commands(events, to_sid, full_len) if events else []) if e.kind == NVME]
    # commands() keeps only those starting inside [0, full_len); the export may begin later still
    nv_spans, adj2, drop2, kept2 = _place([(a, b) for _, a, b in cmds], length)

    # power state: the dwells after each confirmed change, the drive's initial state before the first
    dwells = [p for p in phases if p.kind == DWELL]
    states: list[tuple[float, float, int]] = []
    # the initial state holds until the first change is asked for (as each dwell ends where the next
    # change begins); while a change is in progress the state is unknown
    first = max(0.0, to_sid(dwells[0].event.t_start)) if dwells else float(full_len)
    if initial is not None and first > 0:
        states.append((0.0, first, initial))
    states += [(d.start, d.stop, d.power_state) for d in dwells if d.power_state is not None]
    st_pairs = [(max(0.0, a), min(float(length), b)) for a, b, _ in states if b > 0 and a < length]
    st_vals = [v for a, b, v in states if b > 0 and a < length]
    valid = Spans.of(_merge_placed(st_pairs, length))
    bits = []
    for k in range(PS_BITS):
        bits.append(Spans.of(_merge_placed([p for p, v in zip(st_pairs, st_vals) if v >> k & 1], length)))

    # labels, in the order a decoder meets the rising edges (PHASE before NVME on a tie)
    items = sorted([(a, 0, named[k].name) for (a, _), k in zip(ph_spans, kept1)] +
                   [(a, 1, cmds[k][0].name) for (a, _), k in zip(nv_spans, kept2)])
    texts = [label_bits(name) for _, _, name in items]
    ends = [0] * len(items)
    nxt = math.inf
    for k in range(len(items) - 1, -1, -1):          # backward: end by the event's start, before the next label
        ends[k] = int(min(items[k][0], nxt))
        nxt = ends[k] - len(texts[k])
    at, cursor, cut = [], 1, 0                          # forward: never before sample 1, never overlapping
    for k, bits_k in enumerate(texts):
        begin = max(ends[k] - len(bits_k), cursor)
        at.append(begin)
        cursor = begin + len(bits_k)
        if cursor > length - 1:
            cut += 1
    if cut:
        logger.warning("%d timeline labels do not fit before the end of the export; their events show unnamed", cut)
    return Lanes(length, Spans.of(ph_spans), Spans.of(nv_spans), valid, bits, np.array(at, np.int64), texts,
                 [("phase" if lane == 0 else "nvme", name) for _, lane, name in items],
                 adj1 + adj2, drop1 + drop2, cut, unplaced)


def _merge_placed(pairs, length):
    """Power-state spans: adjacent dwells of one bit stay merged (a state is a level, not an event),
    rounded to samples and ended before the last sample."""
    out = []
    for a, b in sorted(pairs):
        a, b = int(round(a)), min(length - 1, int(round(b)))
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
