"""The virtual drive's power, following the real command stream of a QEMU drive host.

Each command draws a constant power while the controller holds it (from its submit to its completion,
at least ``min_busy_s``): a base per kind plus a part per byte it moves; idle power otherwise; the sum
is capped as a drive's power limit would. QEMU's controller has one power state and no power of its
own: these figures are the model's (a typical enterprise U.2 drive's order of magnitude), what is
real is the stream of commands, their sizes and their timing.

The power at an instant depends only on commands submitted before it, so the live model (fed by
trace.TraceTail) and the offline truth (``energy`` over the whole trace file) give the same number,
provided the interposer only samples instants the trace has been read past (``known_until``).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from powerrig.sim.qemu.trace import Command, TraceTail, read_all

TRACE_MARGIN_S = 0.02     # QEMU stamps a line before it writes it; a thread switch can sit in between
LOOKBACK_S = 2.0          # completed commands older than this no longer matter to the live rails


@dataclass(frozen=True)
class PowerParams:
    idle_w: float = 5.0
    aux_3v3_w: float = 0.4
    base_w: dict = field(default_factory=lambda: {"read": 0.05, "write": 0.08, "admin": 0.5, "other": 0.05})
    per_byte_w: dict = field(default_factory=lambda: {"read": 4e-6, "write": 8e-6, "admin": 0.0, "other": 0.0})
    min_busy_s: float = 20e-6
    cap_w: float = 40.0       # active power above idle never exceeds this (the drive's power limit)

    def watts(self, c: Command) -> float:
        return self.base_w[c.kind] + self.per_byte_w[c.kind] * c.nbytes


def power_of(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, watts: np.ndarray, p: PowerParams) -> np.ndarray:
    """Drive power (W) at instants t: idle plus every command busy at t (start <= t < end), capped."""
    t = np.asarray(t, dtype=float)
    if len(starts) == 0:
        return np.full_like(t, p.idle_w)
    o = np.argsort(starts, kind="stable")
    cs = np.concatenate([[0.0], np.cumsum(watts[o])])
    oe = np.argsort(ends, kind="stable")
    ce = np.concatenate([[0.0], np.cumsum(watts[oe])])
    active = cs[np.searchsorted(starts[o], t, side="right")] - ce[np.searchsorted(ends[oe], t, side="right")]
    return p.idle_w + np.clip(active, 0.0, p.cap_w)


def arrays(commands, p: PowerParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, watts) of commands; a command not completed yet is busy until further notice."""
    s = np.array([c.t_submit for c in commands], dtype=float)
    e = np.array([max(c.t_complete, c.t_submit + p.min_busy_s) if c.t_complete is not None else np.inf
                  for c in commands], dtype=float)
    w = np.array([p.watts(c) for c in commands], dtype=float)
    return s, e, w


def energy(trace: str | Path | list, t0: float, t1: float, p: PowerParams | None = None, step_s: float = 2e-6) -> float:
    """The model's true energy (J) from t0 to t1 over a whole trace (a file or its Commands)."""
    p = p or PowerParams()
    cmds = read_all(trace) if isinstance(trace, (str, Path)) else trace
    cmds = [c for c in cmds if c.t_submit < t1 and (c.t_complete is None or
                                                      max(c.t_complete, c.t_submit + p.min_busy_s) > t0)]
    s, e, w = arrays(cmds, p)
    total, a = 0.0, t0
    while a < t1:                                # in 1 s pieces: memory stays small on long phases
        b = min(t1, a + 1.0)
        n = max(1, int(round((b - a) / step_s)))
        t = a + (np.arange(n) + 0.5) * (b - a) / n
        total += float(power_of(t, s, e, w, p).mean()) * (b - a)
        a = b
    return total + p.aux_3v3_w * (t1 - t0)


class TracePower:
    """The load a virtual interposer measures on a QEMU rig: the power model, fed live by the trace."""

    nominal_volts = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}

    def __init__(self, trace_path: str | Path, params: PowerParams | None = None):
        self.p = params or PowerParams()
        self._cmds: list[Command] = []
        self._lock = threading.Lock()
        self.tail = TraceTail(trace_path, self._add)
        self.started = time.time()

    def start(self) -> "TracePower":
        self.tail.start()
        return self

    def stop(self) -> None:
        self.tail.stop()

    def _add(self, c: Command) -> None:
        with self._lock:
            self._cmds.append(c)

    def known_until(self) -> float:
        """Host UTC up to which the trace has been read (the rails are final up to here)."""
        return max(self.tail.read_through, self.started) - TRACE_MARGIN_S

    def _recent(self, t_min: float) -> list[Command]:
        """The commands that can matter at t_min and later (called under tail.lock, as _add is)."""
        with self._lock:
            keep = [c for c in self._cmds if c.t_complete is None or c.t_complete >= t_min - LOOKBACK_S]
            self._cmds = keep
            return list(keep)

    def power_at(self, t_utc) -> np.ndarray:
        t = np.asarray(t_utc, dtype=float)
        if not len(t):
            return t
        with self.tail.lock:
            cmds = self._recent(float(t.min()))
            s, e, w = arrays(cmds, self.p)
        return power_of(t, s, e, w, self.p) + self.p.aux_3v3_w

    def rail_currents(self, t_utc) -> dict[str, np.ndarray]:
        t = np.asarray(t_utc, dtype=float)
        w = self.power_at(t) - self.p.aux_3v3_w
        return {"12V": w / self.nominal_volts["12V"], "3V3": np.full_like(t, self.p.aux_3v3_w / 3.3),
                "5V": np.zeros_like(t)}

    def activity(self, t_utc) -> np.ndarray:
        return self.power_at(t_utc) > self.p.idle_w + self.p.aux_3v3_w + 1e-9
