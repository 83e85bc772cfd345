"""Synthetic rig data with exactly known truth, for tests and benchmarks.

``raw_trace`` builds instantaneous 4 us power per rail from a list of segments (levels, noise,
100 us spikes); ``reduce`` turns it into IntervalBlocks the way the firmware does (mean of V*I,
4 us min/max, highest 100 us window ending in each interval), so the truth (energy, peak windows,
phase edges) is computed from the raw samples and the pipeline's error can be measured.
``interval_blocks`` makes long interval-level streams directly (hours) for speed and memory tests.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from powerrig.core.timeline import NVME, PHASE, POWER_STATE, Event, Timeline
from powerrig.core.blocks import IntervalBlock
from powerrig.core.names import DEVICE_NAME
from powerrig.core.clock import ClockModel
from powerrig.capture import CaptureWriter

PERIOD_S = 4e-6
NOMINAL_V = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}


@dataclass
class Segment:
    name: str
    seconds: float
    watts: dict                              # rail -> mean W
    kind: str = "idle"                       # "idle" | "workload" | "power_state"
    noise_w: float = 0.05                    # std of white noise on 4 us samples (12 V rail)
    spikes: list = field(default_factory=list)   # (offset s, extra W, width us) on the first rail
    meta: dict = field(default_factory=dict)


@dataclass
class RawTrace:
    rails: tuple
    p: np.ndarray              # (n, rails) instantaneous power, W
    v: np.ndarray              # (n, rails) instantaneous voltage, V
    bounds: list               # (segment, first raw index, end raw index)
    first_index: int


def raw_trace(segments: list[Segment], rails=("12V", "3V3"), first_index: int = 1_000_000, seed: int = 1) -> RawTrace:
    rng = np.random.default_rng(seed)
    parts_p, parts_v, bounds = [], [], []
    at = first_index
    for seg in segments:
        n = int(round(seg.seconds / PERIOD_S))
        p = np.empty((n, len(rails)))
        for k, r in enumerate(rails):
            scale = 1.0 if k == 0 else 0.1
            p[:, k] = seg.watts.get(r, 0.0) + rng.normal(0.0, seg.noise_w * scale, n)
        for off, extra, width_us in seg.spikes:
            a = int(round(off / PERIOD_S))
            p[a:a + int(round(width_us * 1e-6 / PERIOD_S)), 0] += extra
        v = np.array([NOMINAL_V.get(r, 12.0) for r in rails]) + rng.normal(0.0, 0.002, (n, len(rails)))
        parts_p.append(p)
        parts_v.append(v)
        bounds.append((seg, at, at + n))
        at += n
    return RawTrace(tuple(rails), np.concatenate(parts_p), np.concatenate(parts_v), bounds, first_index)


def window_means(p: np.ndarray, window: int) -> np.ndarray:
    """Mean of every full window of ``window`` samples (axis 0), ending at samples window-1 .. n-1."""
    c = np.concatenate([np.zeros((1,) + p.shape[1:]), np.cumsum(p, axis=0)])
    return (c[window:] - c[:-window]) / window


def reduce(raw: RawTrace, interval_samples: int = 250, window: int = 25, rows_per_block: int = 1000):
    """IntervalBlocks from a raw trace, with the firmware's definitions (see samples.py)."""
    n = len(raw.p) // interval_samples * interval_samples
    p, v = raw.p[:n], raw.v[:n]
    rows = n // interval_samples
    shp = (rows, interval_samples, len(raw.rails))
    pm = p.reshape(shp)
    wm = np.full_like(p, np.nan)
    wm[window - 1:] = window_means(p, window)
    peak = np.nanmax(wm.reshape(shp), axis=1)
    i = p / v
    dig = np.zeros(rows, np.uint8)
    cols = dict(v=v.reshape(shp).mean(axis=1), i=i.reshape(shp).mean(axis=1), p=pm.mean(axis=1),
                p_min=pm.min(axis=1), p_max=pm.max(axis=1), p_peak=peak)
    for s in range(0, rows, rows_per_block):
        e = min(rows, s + rows_per_block)
        yield IntervalBlock(raw.first_index + s * interval_samples, interval_samples, PERIOD_S, raw.rails,
                            **{k: c[s:e] for k, c in cols.items()}, dig_or=dig[s:e], dig_and=dig[s:e],
                            valid=np.ones(e - s, bool))


def drop_rows(blocks, first_row: int, rows: int, reason: str = "link"):
    """Replace rows [first_row, first_row+rows) of a block stream by a gap block (lost frames)."""
    at = 0
    for b in blocks:
        n = len(b)
        lo, hi = max(first_row, at), min(first_row + rows, at + n)
        if lo >= hi:
            yield b
        else:
            if lo > at:
                yield _slice(b, 0, lo - at)
            yield IntervalBlock.gap(b.first_index + (lo - at) * b.interval_samples, hi - lo, b.interval_samples,
                                    b.sample_period_s, b.rails, reason)
            if hi < at + n:
                yield _slice(b, hi - at, n)
        at += n


def _slice(b: IntervalBlock, s: int, e: int) -> IntervalBlock:
    return IntervalBlock(b.first_index + s * b.interval_samples, b.interval_samples, b.sample_period_s, b.rails,
                         b.v[s:e], b.i[s:e], b.p[s:e], b.p_min[s:e], b.p_max[s:e], b.p_peak[s:e],
                         b.dig_or[s:e], b.dig_and[s:e], b.valid[s:e], dict(b.flags),
                         None if b.clip is None else b.clip[s:e])


def clock(first_index: int = 1_000_000, utc0: float = 1.7e9, drift_ppm: float = 35.0) -> ClockModel:
    """A clock model with a visible drift: events placed without it land in the wrong interval."""
    return ClockModel(index_ref=first_index, utc_ref=utc0, period_s=PERIOD_S, drift_ppm=drift_ppm)


def timeline(raw: RawTrace, model: ClockModel) -> Timeline:
    """Events at the exact raw edges of each segment: PHASE for workloads, POWER_STATE, NVME."""
    tl = Timeline()
    for seg, a, b in raw.bounds:
        t0, t1 = float(model.utc(a)), float(model.utc(b))
        if seg.kind == "workload":
            tl.add(Event(PHASE, seg.name, t0, t1, meta=dict(seg.meta)))
        elif seg.kind == "power_state":
            ps = seg.meta.get("power_state", 0)
            tl.add(Event(POWER_STATE, f"ps{ps}", t0, t0 + 0.002, meta={"power_state": ps},
                         argv=["nvme", "set-feature", "/dev/nvme0", "-f", "2", f"--value={ps}"]))
        elif seg.kind == "command":
            tl.add(Event(NVME, seg.name, t0, t1, argv=["nvme", seg.name, "/dev/nvme0"], meta=dict(seg.meta)))
    return tl


def interval_blocks(seconds: float, interval_us: int = 1000, rails=("12V", "3V3"), rows_per_block: int = 10_000,
                    first_index: int = 0, seed: int = 7, period_s: float = 60.0):
    """A long stream alternating idle (5 W) and active (12 W) halves of ``period_s``, at interval level."""
    rng = np.random.default_rng(seed)
    spi = int(round(interval_us * 1e-6 / PERIOD_S))
    rows = int(round(seconds / (interval_us * 1e-6)))
    dt = interval_us * 1e-6
    nv = np.array([NOMINAL_V.get(r, 12.0) for r in rails])
    dig = np.zeros(rows_per_block, np.uint8)
    for s in range(0, rows, rows_per_block):
        n = min(rows_per_block, rows - s)
        t = (s + np.arange(n)) * dt
        active = (t % period_s) >= period_s / 2
        base = np.where(active, 12.0, 5.0)
        p = np.empty((n, len(rails)))
        p[:, 0] = base + rng.normal(0, 0.1, n)
        p[:, 1:] = 0.3 + rng.normal(0, 0.01, (n, len(rails) - 1))
        v = nv + np.zeros((n, 1))
        yield IntervalBlock(first_index + s * spi, spi, PERIOD_S, tuple(rails), v, p / v, p, p - 0.5, p + 0.8,
                            p + 0.4, dig[:n], dig[:n], np.ones(n, bool))


def alternating_timeline(seconds: float, model: ClockModel, first_index: int = 0, period_s: float = 60.0) -> Timeline:
    """PHASE events for every active half of ``interval_blocks``."""
    tl = Timeline()
    t = period_s / 2
    while t < seconds:
        a = first_index + t / PERIOD_S
        b = first_index + min(t + period_s / 2, seconds) / PERIOD_S
        tl.add(Event(PHASE, f"write {int(t // period_s)}", float(model.utc(a)), float(model.utc(b)),
                     meta={"rw": "write", "bs": 131072, "iodepth": 128, "bw_bytes": 3.0e9, "iops": 3.0e9 / 131072,
                           "power_state": 0}))
        t += period_s
    return tl


@dataclass
class IntervalTrace:
    blocks: list
    bounds: list               # (segment, first raw index, end raw index)
    first_index: int


def interval_trace(segments: list[Segment], interval_us: int = 1000, rails=("12V", "3V3"),
                   first_index: int = 1_000_000, seed: int = 3, rows_per_block: int = 5000) -> IntervalTrace:
    """Segments made directly at interval level (minutes to hours); spikes raise p_peak / p_max."""
    rng = np.random.default_rng(seed)
    spi = int(round(interval_us * 1e-6 / PERIOD_S))
    dt = interval_us * 1e-6
    nv = np.array([NOMINAL_V.get(r, 12.0) for r in rails])
    ps, bounds, at = [], [], first_index
    for seg in segments:
        n = int(round(seg.seconds / dt))
        p = np.empty((n, len(rails)))
        for k, r in enumerate(rails):
            p[:, k] = seg.watts.get(r, 0.0) + rng.normal(0.0, seg.noise_w * (1.0 if k == 0 else 0.1) / 5, n)
        peak = p + np.abs(rng.normal(0.0, seg.noise_w, p.shape))
        for off, extra, width_us in seg.spikes:
            k = int(off / dt)
            peak[k, 0] += extra * min(1.0, width_us / 100.0)
            p[k, 0] += extra * width_us * 1e-6 / dt
        ps.append((p, peak))
        bounds.append((seg, at, at + n * spi))
        at += n * spi
    p = np.concatenate([x[0] for x in ps])
    peak = np.concatenate([x[1] for x in ps])
    v = nv + rng.normal(0.0, 0.001, p.shape)
    dig = np.zeros(len(p), np.uint8)
    blocks = [IntervalBlock(first_index + s * spi, spi, PERIOD_S, tuple(rails), v[s:s + rows_per_block],
                            p[s:s + rows_per_block] / v[s:s + rows_per_block], p[s:s + rows_per_block],
                            p[s:s + rows_per_block] - 0.3, peak[s:s + rows_per_block] + 0.2, peak[s:s + rows_per_block],
                            dig[s:s + rows_per_block], dig[s:s + rows_per_block], np.ones(len(p[s:s + rows_per_block]), bool))
              for s in range(0, len(p), rows_per_block)]
    return IntervalTrace(blocks, bounds, first_index)


def id_ctrl(mp=(25.0, 15.0, 10.0, 0.05), idlp=(5.0, 5.0, 5.0, 0.05), actp=(20.0, 13.0, 9.0, None)) -> dict:
    """An nvme-cli 2.x id-ctrl document with power state descriptors (MXPS=0, IPS/APS=2)."""
    psds = []
    for k, w in enumerate(mp):
        psds.append({"max_power": int(round(w * 100)), "max_power_scale": 0,
                     "non-operational_state": int(k == len(mp) - 1), "entry_lat": 5 if k < 3 else 5000,
                     "exit_lat": 5 if k < 3 else 20000, "idle_power": int(round(idlp[k] * 100)), "idle_scale": 2,
                     "active_power": int(round((actp[k] or 0) * 100)), "active_scale": 2 if actp[k] else 0,
                     "active_power_work": 2})
    return {"mn": "VIRTUAL SSD 7.68TB", "sn": "VSIM0001", "fr": "1.0", "npss": len(mp) - 1, "psds": psds}


def demo(path, minutes: float = 3.0):
    """A small but complete capture: power states, workloads over block size and QD, idle windows,
    smart-log and FDP counters; for the report demo and its tests."""
    segs = [Segment("idle", 45, {"12V": 4.6, "3V3": 0.25})]
    host = media = 0.0
    counters = []
    t = 45.0
    for ps, scale in ((0, 1.0), (1, 0.7), (2, 0.45)):
        segs.append(Segment(f"set ps{ps}", 0.5, {"12V": 4.8, "3V3": 0.25}, kind="power_state", meta={"power_state": ps}))
        t += 0.5
        for bs, qd in ((4096, 32), (131072, 32), (131072, 128)):
            bw = (1.2e9 if bs == 4096 else 3.2e9 * (1 + (qd == 128) * 0.2)) * scale
            w = 6.0 + 8.0 * scale * (bw / 4e9) + (bs == 4096) * 1.5
            name = f"write bs={bs // 1024}k qd={qd} ps{ps}"
            dur = minutes * 60 / 12
            segs.append(Segment(name, dur, {"12V": w, "3V3": 0.3}, kind="workload", noise_w=0.4,
                                spikes=[(dur / 3, 8.0, 100)],
                                meta={"rw": "write", "bs": bs, "iodepth": qd, "bw_bytes": bw, "iops": bw / bs,
                                      "power_state": ps}))
            host += bw * dur
            media += bw * dur * (2.4 if bs == 4096 else 1.3)
            t += dur
            counters.append((t, host, media))
            segs.append(Segment("idle", 4, {"12V": 4.6, "3V3": 0.25}))
            t += 4
    segs.append(Segment("idle", 45, {"12V": 4.7, "3V3": 0.25}))
    tr = interval_trace(segs)
    model = clock(tr.first_index)
    tl = timeline(tr, model)
    utc0 = float(model.utc(tr.first_index))
    for k, (tc, h, m) in enumerate([(44.0, 0.0, 0.0)] + counters):
        tl.add(Event(NVME, "fdp stats", utc0 + tc, utc0 + tc + 0.01, argv=["nvme", "fdp", "stats", "/dev/nvme0", "-e", "1"],
                     result={"hbmw": int(h), "mbmw": int(m), "mbe": 0}))
        tl.add(Event(NVME, "smart-log", utc0 + tc + 0.02, utc0 + tc + 0.03, argv=["nvme", "smart-log", "/dev/nvme0"],
                     result={"temperature": 318, "thm_temp1_trans_count": 0, "thm_temp2_trans_count": 0}))
    with CaptureWriter(path, metadata={"device": {"device": DEVICE_NAME, "firmware": "sim"},
                                       "drive": {"id_ctrl": id_ctrl(), "power_state": 0}},
                       timeline=tl, clock=model) as w:
        for b in tr.blocks:
            w.write(b)
    return path


def interval_capture(path, seconds: float, device: str = "synthetic", timeline: Timeline | None = None,
                     rows_per_block: int = 5000):
    """A capture of ``interval_blocks(seconds)`` at 1 ms, two rails, on ``clock(0)``: a small real file
    for the tests of reading, cutting and repairing one."""
    with CaptureWriter(path, metadata={"device": {"device": device}}, timeline=timeline, clock=clock(0)) as w:
        for b in interval_blocks(seconds, rows_per_block=rows_per_block):
            w.write(b)
    return path
