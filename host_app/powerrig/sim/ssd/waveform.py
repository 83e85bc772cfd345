"""The virtual SSD's power at 4 us: the structure a rig sampling every 4 us catches and a 1 ms meter
averages away, around the model's mean, which it never changes.

Why: a real drive's 12 V current is not its average. NAND program pulses (tens to hundreds of us) put
the 100 us peak of a QD128 sequential write 1.3-1.5x over its 1 s mean (OCP PCM-2/PCM-3 exist for that:
peak <= 1.5 x MAP), reads draw shorter, smaller sense pulses, garbage collection runs in episodes of
milliseconds to a fraction of a second, and a power-state change overshoots and rings before it
settles. The virtual drive shows all four, so the demo's report shows why the rig samples fast.

Every term is a *mean-1 multiplier* of one part of the model's dynamic power (``drive.py`` splits it:
NAND program of host data, GC copies, NAND reads; the host transfer stays flat), built frame by frame
so that each frame's integral is exactly its mean's:

- program pulses: in each ``program_frame_us`` frame one pulse ``program_width_us`` wide at
  ``program_height`` x the mean (starting up to ``program_jitter`` of the frame late), with a
  leading-edge spike (``edge_height``, decaying in ``edge_us``), and the rest of the frame at the
  level that makes the frame's mean 1;
- read pulses: the same with ``read_*`` (shorter frames, narrower pulses);
- GC episodes: in each ``gc_frame_ms`` frame one episode ``gc_episode_ms`` long in which the
  episodic share (``gc_episodic``) of the GC work is done, the rest spread over the frame.

A pulse's or an episode's place, width and height are drawn per frame from a hash of the frame's
number on the host-UTC grid and the seed: any instants can be evaluated in any order (the interposer's
passes, the drive's own meter, a test) and give the same numbers, with no state kept. Numpy per pass:
the frames a pass touches are drawn once, then gathered per sample.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))


def uniforms(frames: np.ndarray, salt: int, n: int) -> np.ndarray:
    """n uniform [0, 1) draws per frame number (n x len(frames)): splitmix64 of (frame, draw, salt)."""
    mix = np.uint64((int(salt) * _GOLDEN) & 0xFFFFFFFFFFFFFFFF)
    x = frames.astype(np.int64).astype(np.uint64)[None, :] * np.uint64(n) + np.arange(n, dtype=np.uint64)[:, None]
    x += mix
    x *= np.uint64(_GOLDEN)
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return (x >> _S11).astype(np.float64) * (1.0 / 2**53)


@dataclass(frozen=True)
class WaveformSpec:
    """Profile ``[power.waveform]`` (every key optional; these defaults are the D5-P5336's)."""
    program_frame_us: float = 250.0
    program_width_us: tuple[float, float] = (100.0, 110.0)
    program_height: tuple[float, float] = (1.45, 1.5)     # pulse / the program power's mean
    program_jitter: float = 0.2                           # a pulse starts this share of its frame late at most
    edge_height: float = 0.5                              # leading-edge spike / the program power's mean
    edge_us: float = 6.0
    read_frame_us: float = 100.0
    read_width_us: tuple[float, float] = (8.0, 30.0)
    read_height: tuple[float, float] = (1.6, 2.4)
    read_jitter: float = 1.0                              # reads land anywhere in their frame
    gc_frame_ms: float = 200.0
    gc_episode_ms: tuple[float, float] = (50.0, 150.0)
    gc_episodic: float = 0.2                              # share of the GC work done in episodes
    transient_us: float = 60.0                            # a power-state change's overshoot decays in this
    ring_khz: float = 25.0                                # ... ringing at this frequency
    ring_depth: float = 0.6                               # ... this deep (0: a plain decay, < 1: never below)

    @classmethod
    def from_profile(cls, power: dict) -> "WaveformSpec":
        cfg = dict(power.get("waveform") or {})
        known = {f.name for f in fields(cls)}
        bad = sorted(set(cfg) - known)
        if bad:
            raise ValueError(f"[power.waveform] has unknown keys {bad}; known: {', '.join(sorted(known))}")
        spec = cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()})
        spec.check()
        return spec

    def check(self) -> None:
        """A pulse taller or wider than its frame can hold would need a negative rest level."""
        for name, frame, width, height, edge in (
                ("program", self.program_frame_us, self.program_width_us, self.program_height,
                 self.edge_height * self.edge_us),
                ("read", self.read_frame_us, self.read_width_us, self.read_height, 0.0)):
            if not 0 < width[0] <= width[1] < frame or not 1.0 <= height[0] <= height[1]:
                raise ValueError(f"[power.waveform] {name}: widths {width} must lie in (0, frame {frame} us) "
                                 f"and heights {height} be >= 1, ascending")
            if width[1] * height[1] + edge > frame:
                raise ValueError(f"[power.waveform] {name}: a pulse of {width[1]} us at {height[1]}x holds more "
                                 f"than its {frame} us frame's mean: lower the height or the width")
        g = self.gc_episode_ms
        if not (0.0 <= self.program_jitter <= 1.0 and 0.0 <= self.read_jitter <= 1.0):
            raise ValueError(f"[power.waveform] program_jitter {self.program_jitter} and read_jitter "
                             f"{self.read_jitter} must lie in 0..1 (shares of the frame)")
        if not 0 < g[0] <= g[1] <= self.gc_frame_ms or not 0.0 <= self.gc_episodic <= 1.0:
            raise ValueError(f"[power.waveform] gc: episodes {g} ms must fit the {self.gc_frame_ms} ms frame "
                             f"and gc_episodic {self.gc_episodic} lie in 0..1")


def _frames(t: np.ndarray, frame_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(place in its frame, 0..1; the frame numbers touched; each instant's index among them, None when
    all fall in one frame). A pass's instants touch a few frames: their draws are made once and gathered;
    sparse instants (the drive's own meter) get one frame each."""
    x = t * (1.0 / frame_s)
    k = np.floor(x)
    into = x - k
    lo, hi = k.min(), k.max()
    if lo == hi:
        return into, np.array([lo], dtype=np.int64), None
    if hi - lo <= 2 * len(t) + 16:
        return into, np.arange(int(lo), int(hi) + 1, dtype=np.int64), (k - lo).astype(np.intp)
    return into, k.astype(np.int64), np.arange(len(t))


def _per_instant(params: np.ndarray, idx: np.ndarray | None):
    """Rows of per-frame values, as scalars (one frame) or gathered per instant."""
    return tuple(float(p[0]) for p in params) if idx is None else tuple(params[:, idx])


def pulses(t: np.ndarray, frame_us: float, width_us: tuple, height: tuple, salt: int,
           edge_height: float = 0.0, edge_us: float = 1.0, jitter: float = 1.0) -> np.ndarray:
    """A mean-1 pulse train at instants ``t``: one pulse per frame, starting up to ``jitter`` of the frame
    after its beginning (placed round the frame: it may wrap from the frame's end to its start), each
    frame's integral exactly one frame. Program pulses come nearly once a frame, as a controller striping
    a stream across its dies programs them in turn: a 1 ms mean moves little, a 4 us sample a lot."""
    if not len(t):
        return np.zeros(0)
    into, frames, idx = _frames(t, frame_us * 1e-6)
    r = uniforms(frames, salt, 3)
    w = (width_us[0] + (width_us[1] - width_us[0]) * r[0]) / frame_us          # in frames
    h = height[0] + (height[1] - height[0]) * r[1]
    e = edge_us / frame_us
    edge_area = edge_height * e * -np.expm1(-w / e) if edge_height else 0.0
    low = (1.0 - w * h - edge_area) / (1.0 - w)
    w, h, low, start = _per_instant(np.stack([w, h, low, r[2] * jitter]), idx)
    since = into - start                          # time since this frame's pulse began
    if jitter + width_us[1] / frame_us > 1.0:     # a pulse may wrap round its frame's end to its start
        since = np.where(since < 0, since + 1.0, since)
        inside = since < w
    else:
        inside = (since >= 0) & (since < w)
    y = np.where(inside, h, low)
    if edge_height:
        y += inside * (edge_height * np.exp(since * (-1.0 / e)))
    return y


def episodes(t: np.ndarray, frame_ms: float, episode_ms: tuple, share: float, salt: int) -> np.ndarray:
    """A mean-1 multiplier of GC power: ``share`` of each frame's GC work done in one episode (raised),
    the rest spread over the frame."""
    if not len(t):
        return np.zeros(0)
    into, frames, idx = _frames(t, frame_ms * 1e-3)
    r = uniforms(frames, salt, 2)
    d = (episode_ms[0] + (episode_ms[1] - episode_ms[0]) * r[0]) / frame_ms
    d, start, high = _per_instant(np.stack([d, r[1], 1.0 + share * (1.0 / d - 1.0)]), idx)
    since = into - start
    return np.where((since < d) & (since >= 0) | (since < d - 1.0), high, 1.0 - share)   # round the frame


def transient(dt: np.ndarray, spike_w: float, spec: WaveformSpec) -> np.ndarray:
    """A power-state change's overshoot ``dt`` seconds after the switch: a decay with ringing on it."""
    tau = spec.transient_us * 1e-6
    dt = np.maximum(dt, 0.0)
    y = spike_w * np.exp(-dt / tau)
    if spec.ring_depth:
        y = y * (1.0 + spec.ring_depth * np.sin(2 * math.pi * spec.ring_khz * 1e3 * dt))
    return y


class Waveform:
    """The fine structure of one drive (seeded): ``detail(t, program_w, read_w, gc_w)`` is the watts to add
    to the model's level at instants t (each part's mean times its multiplier, less the mean)."""

    def __init__(self, spec: WaveformSpec, seed: int = 1):
        self.spec = spec
        self.salt = (int(seed) * 0x51ED27) & 0xFFFFFFFFFFFF

    def detail(self, t: np.ndarray, program_w, read_w, gc_w, pulsed: bool = True) -> np.ndarray:
        """``program_w``, ``read_w``, ``gc_w``: scalars (one segment) or per-instant arrays. ``pulsed=False``
        leaves the sub-ms pulses out (their mean, 1): what a meter averaging over ~1 ms reads."""
        sp, out = self.spec, np.zeros(np.shape(t))
        gc_any = np.any(gc_w)
        if np.any(program_w) or gc_any:
            pw = pulses(t, sp.program_frame_us, sp.program_width_us, sp.program_height, self.salt,
                        sp.edge_height, sp.edge_us, sp.program_jitter) if pulsed else 1.0
            if np.any(program_w):
                out += program_w * (pw - 1.0)
            if gc_any:
                ep = episodes(t, sp.gc_frame_ms, sp.gc_episode_ms, sp.gc_episodic, self.salt + 1)
                out += gc_w * (ep * pw - 1.0)
        if pulsed and np.any(read_w):
            out += read_w * (pulses(t, sp.read_frame_us, sp.read_width_us, sp.read_height, self.salt + 2,
                                    jitter=sp.read_jitter) - 1.0)
        return out
