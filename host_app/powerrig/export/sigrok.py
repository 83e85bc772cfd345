"""Capture -> sigrok session (.sr): power, voltage and current as analog channels, the interposer's
digital inputs and the timeline as logic channels, on one time axis in PulseView.

Channels (libsigrok reads every analog channel back as volts, so each name carries its unit):
  analog  P<rail>_W, V<rail>_V, I<rail>_A for every rail, PTOTAL_W        (NaN in lost intervals)
  logic   PHASE, NVME, LABEL, GAP, PS_VALID, PS_B0..PS_B4 (timeline; see lanes.py), LED, PERST#, MARKER
          (the digital inputs, high when seen high during the interval)
Written chunk by chunk from the capture (memory flat in its length).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from powerrig.capture import CaptureReader
from powerrig.capture import layout as L
from powerrig.export import lanes as LN
from powerrig.export.span import sample_range
from powerrig.export.srzip import SigrokExportError, SrZipWriter

logger = logging.getLogger(__name__)

DIGITAL_INPUTS = ("LED", "PERST#", "MARKER")      # bits 0, 1, 2 of dig_or
# the powerrig_timeline decoder's channels, in its order
TIMELINE_CHANNELS = ["PHASE", "NVME", "LABEL", "GAP", "PS_VALID"] + [f"PS_B{k}" for k in range(LN.PS_BITS)]
CHUNK = 1 << 18


@dataclass
class SigrokExport:
    path: Path
    samples: int
    samplerate_hz: int
    start_s: float
    logic: list[str]
    analog: list[str]
    events: int                 # PHASE + NVME events shown
    adjusted: int               # events shortened a sample to stay distinct on their lane
    dropped: int                # events starting in the export's last sample (not shown)
    labels_cut: int             # names that did not fit before the end (events show unnamed)
    gap_samples: int            # lost intervals in the range (NaN, GAP high)
    unplaced: int = 0           # events not shown: the capture has no clock anchors to place them
    shortfalls: tuple = ()      # the capture was cut short or got less than asked (CaptureReader.shortfalls)

    def lines(self) -> str:
        s = (f"{self.path}: {self.samples} samples at {self.samplerate_hz} Hz, analog {', '.join(self.analog)}; "
             f"logic {', '.join(self.logic)}; {self.events} timeline events")
        notes = []
        if self.gap_samples:
            notes.append(f"{self.gap_samples} lost intervals (NaN, GAP high)")
        if self.adjusted:
            notes.append(f"{self.adjusted} touching/overlapping events shortened by a sample")
        if self.dropped:
            notes.append(f"{self.dropped} events at the last sample not shown")
        if self.unplaced:
            notes.append(f"{self.unplaced} events not shown: the capture has no clock anchors to place them")
        if self.labels_cut:
            notes.append(f"{self.labels_cut} names did not fit before the end")
        return s + ("\n  " + "; ".join(notes) if notes else "")


def analog_channels(rails) -> list[tuple[str, str]]:
    """(sigrok channel name, capture signal) of every analog channel."""
    out = []
    for r in rails:
        out += [(f"P{r}_W", L.rail_signal("p", r)), (f"V{r}_V", L.rail_signal("v", r)),
                (f"I{r}_A", L.rail_signal("i", r))]
    out.append(("PTOTAL_W", L.TOTAL_POWER))
    return out


def export_sigrok(capture: str | Path, out: str | Path, from_s: float | None = None, to_s: float | None = None,
                  chunk: int = CHUNK, compresslevel: int = 1) -> SigrokExport:
    out = Path(out)
    if out.suffix.lower() != ".sr":
        raise SigrokExportError(f"output {out} must end in .sr (a sigrok session file)")
    with CaptureReader(capture) as cap:
        start, stop = sample_range(cap, from_s, to_s)
        lanes = LN.build(cap, start, stop)
        analog = analog_channels(cap.rails)
        logic = TIMELINE_CHANNELS + list(DIGITAL_INPUTS)
        rate = cap.sample_rate_hz
        signals = [sig for _, sig in analog] + ["dig_or"]
        gaps = 0
        with SrZipWriter(out, rate, logic, [name for name, _ in analog], compresslevel) as w:
            dt = w.dtype
            for s0, cols in cap.chunks(signals, start, stop, chunk):
                n = len(cols["dig_or"])
                s = s0 - start
                gap = np.isnan(cols[L.TOTAL_POWER])
                gaps += int(gap.sum())
                lanes_now = [lanes.phase.render(s, n), lanes.nvme.render(s, n), lanes.render_label(s, n), gap,
                             lanes.ps_valid.render(s, n)] + [b.render(s, n) for b in lanes.ps_bits]
                word = np.zeros(n, dt)
                for k, lane in enumerate(lanes_now):
                    word |= lane.astype(dt) << dt(k)
                dig = cols["dig_or"].astype(dt)
                base = len(lanes_now)
                for k in range(len(DIGITAL_INPUTS)):
                    word |= ((dig >> dt(k)) & dt(1)) << dt(base + k)
                w.write(word, {name: cols[sig] for name, sig in analog})
        return SigrokExport(out, stop - start, rate, start * cap.interval_s, logic, [n for n, _ in analog],
                            len(lanes.names), lanes.adjusted, lanes.dropped, lanes.labels_cut, gaps, lanes.unplaced,
                            tuple(cap.shortfalls))


def export_burst(burst, out: str | Path) -> SigrokExport:
    """A raw burst (``Interposer.burst()``) as a session at its own rate (4 us samples: 250 kHz):
    P/V/I of every rail and the total power, and the digital inputs. Captures do not store bursts,
    so this takes the Burst object a script or the GUI holds."""
    out = Path(out)
    if out.suffix.lower() != ".sr":
        raise SigrokExportError(f"output {out} must end in .sr (a sigrok session file)")
    desc = burst.description
    rails = [r["name"] for r in desc["rails"]]
    rate = 1e6 / float(desc["sample_period_us"])
    analog, total = {}, np.zeros(len(burst.codes))
    for r in rails:
        v, i, p = burst.rail(r)
        analog.update({f"P{r}_W": p, f"V{r}_V": v, f"I{r}_A": i})
        total += p
    analog["PTOTAL_W"] = total
    with SrZipWriter(out, rate, list(DIGITAL_INPUTS), list(analog)) as w:
        dig = burst.codes[:, -1].astype(np.uint8) & 0x07           # bits 0..2 as the channels 0..2
        w.write(dig, analog)
    return SigrokExport(out, len(burst.codes), w.samplerate_hz, 0.0, list(DIGITAL_INPUTS), list(analog),
                        0, 0, 0, 0, 0)
