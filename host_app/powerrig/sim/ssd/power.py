"""The virtual SSD's power side: what a cut, a restore, PERST# and PWRDIS do to the rails and the data.

Why a model of its own: a power-loss test is only proven if the rig finds what really happened, so
the simulator keeps the truth (each edge's sample, each cut's hold-up, each power-on's inrush, every
acknowledged write the drive lost) beside what it shows on the rails. docs/power-loss.md.

- Hold-up: after a 12 V cut the drive side decays as ``V0 exp(-t / tau)`` (its PLP capacitors
  discharging into the drive); hold-up is the time until it falls below ``plp_threshold_v``. The
  interposer's current reads 0 (the switch is open; the capacitors feed the drive).
- Write cache: a write is acknowledged at once and reaches the media ``cache_flush_ms`` later. At a
  cut the PLP flush writes the dirty entries, ``plp_us_per_write`` each, oldest first; an entry whose
  turn comes after the hold-up is lost. ``defect_rate`` is the chance that a cut finds a weak capacitor
  (tau times ``defect_tau_factor``), so a test has losses to find.
- Inrush on power-on: ``inrush_peak_a exp(-t / inrush_tau_us)`` on top of the drive's own current
  (charge = peak x tau); the controller is ready ``enum_delay_ms`` after power is on and PERST#/PWRDIS
  are released.

``SwitchedOutputs`` is the board side (firmware/board's ``outputs``, ``fire``, ``sample_now``): the
firmware's powerrig_fw.actions runs on it unchanged, in the virtual interposer and in the benchmark.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

OUTPUTS = ("12V", "3V3", "PERST", "PWRDIS")
MAX_EDGES = 256           # edge history kept per output (the rails are evaluated only near now)


@dataclass
class PowerSpec:
    holdup_tau_ms: float = 5.0          # drive-side 12 V decay after a cut
    plp_threshold_v: float = 9.0        # below this the drive's PLP circuit stops
    cache_flush_ms: float = 2.0         # an acknowledged write reaches the media this much later
    plp_us_per_write: float = 10.0      # the PLP flush's time per dirty write
    defect_rate: float = 0.0            # chance per cut of a weak PLP capacitor
    defect_tau_factor: float = 0.3      # ... whose tau is this fraction of the healthy one
    inrush_peak_a: float = 4.0          # above the drive's own current, at the power-on sample
    inrush_tau_us: float = 150.0
    enum_delay_ms: float = 120.0        # power on (and PERST#/PWRDIS released) to controller ready
    seed: int = 29

    @classmethod
    def for_rail(cls, main_rail: str, **overrides) -> "PowerSpec":
        """The spec of a drive whose main power comes from ``main_rail``: an M.2 client drive (3.3 V)
        has nothing on 12 V to charge when 12 V returns, so no 12 V inrush unless one is asked for."""
        if main_rail != "12V":
            overrides.setdefault("inrush_peak_a", 0.0)
        return cls(**overrides)


class SteadyLoad:
    """A drive drawing constant current (the benchmark's, so inrush and hold-up stand out alone)."""

    nominal_volts = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}

    def __init__(self, amps_12v: float = 0.5, amps_3v3: float = 0.12):
        self.amps = {"12V": amps_12v, "3V3": amps_3v3}

    def rail_currents(self, t: np.ndarray) -> dict[str, np.ndarray]:
        t = np.asarray(t, dtype=float)
        return {"12V": np.full_like(t, self.amps["12V"]), "3V3": np.full_like(t, self.amps["3V3"]),
                "5V": np.zeros_like(t)}


class WriteCache:
    """Acknowledged writes, the media, and the losses a cut causes (the truth a verify must find)."""

    def __init__(self, spec: PowerSpec):
        self.spec = spec
        self.media: dict[int, int] = {}
        self.cache: deque[tuple[float, int, int]] = deque()    # (t_ack, lba, token), in ack order
        self.lost: list[tuple[int, int]] = []             # truth: (lba, token) acknowledged and lost

    def _settle(self, t: float) -> None:
        due = self.spec.cache_flush_ms * 1e-3
        cache = self.cache
        while cache and cache[0][0] + due <= t:
            _t, lba, token = cache.popleft()
            self.media[lba] = token

    def write(self, lba: int, token: int, t: float) -> None:
        self._settle(t)
        self.cache.append((t, lba, token))

    def cut(self, t: float, holdup_s: float) -> list[tuple[int, int]]:
        """Power gone at t with this hold-up: the PLP flush, then what did not make it."""
        self._settle(t)
        lost = []
        for k, (_t, lba, token) in enumerate(self.cache):
            if (k + 1) * self.spec.plp_us_per_write * 1e-6 <= holdup_s:
                self.media[lba] = token
            else:
                lost.append((lba, token))
        self.cache.clear()
        self.lost.extend(lost)
        return lost

    def read(self, lba: int) -> int | None:
        return self.media.get(lba)


class PoweredDrive:
    """A load (SteadyLoad, ScriptedLoad, VirtualSSD) behind the interposer's switches.

    ``set_output(name, level, t)`` is called by the board when an edge is set; rails, readiness and
    the truth follow from the edge history. Times are host UTC, as every load's.
    """

    def __init__(self, inner, spec: PowerSpec | None = None):
        self.inner = inner
        self.spec = spec or PowerSpec()
        self.rng = np.random.default_rng(self.spec.seed)
        self.cache = WriteCache(self.spec)
        self.level = {"12V": 1, "3V3": 1, "PERST": 0, "PWRDIS": 0}
        self.edges: dict[str, list[tuple[float, int]]] = {n: [] for n in OUTPUTS}
        self.cut_tau: list[tuple[float, float, float]] = []     # (t_cut, tau_s, v0) of each 12 V cut
        self.changed_at = -math.inf                      # the last edge that changed a level
        self.truth: list[dict] = []                      # per edge: output, level, t, and what it did
        # what else sees the edges (the virtual SSD's I/O side, sim/ssd/power_io.py): ``before_edge(name,
        # level, t, cache)`` puts its writes still in the cache there before a cut is decided,
        # ``after_edge(rec, lost)`` learns which acknowledged writes the cut lost
        self.listeners: list = []

    @property
    def nominal_volts(self) -> dict[str, float]:
        # the load's, asked each time: a calibration bench's source sets them while it runs
        return getattr(self.inner, "nominal_volts", SteadyLoad.nominal_volts)

    def __getattr__(self, name):          # power_at, ...: the drive's own (only called for what is not here)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    # ---- truth formulas (the analysis must find these) ------------------------------------------------
    def holdup_s(self, tau_s: float, v0: float) -> float:
        return tau_s * math.log(v0 / self.spec.plp_threshold_v) if v0 > self.spec.plp_threshold_v else 0.0

    def v0(self, t: float) -> float:
        i = float(self.inner.rail_currents(np.array([t]))["12V"][0])
        return self.nominal_volts["12V"] - 0.008 * i          # FrontEndSpec.droop_ohm's default

    # ---- the board's edges ----------------------------------------------------------------------------
    def set_output(self, name: str, level: int, t: float) -> dict:
        old = self.level[name]
        for ls in self.listeners:              # before the edge: they see the level it changes
            ls.before_edge(name, level, t, self.cache)
        self.level[name] = level
        if old != level:
            self.changed_at = t        # a write of the level it had (the safe state restored) changes nothing
        hist = self.edges[name]
        hist.append((t, level))
        del hist[:-MAX_EDGES]
        rec = {"output": name, "level": level, "t": t}
        lost: list = []
        if name == "12V" and old == 1 and level == 0:
            weak = self.rng.random() < self.spec.defect_rate
            tau = self.spec.holdup_tau_ms * 1e-3 * (self.spec.defect_tau_factor if weak else 1.0)
            v0 = self.v0(t)
            self.cut_tau.append((t, tau, v0))
            del self.cut_tau[:-MAX_EDGES]
            holdup = self.holdup_s(tau, v0)
            lost = self.cache.cut(t, holdup)
            rec.update(weak_plp=weak, holdup_s=holdup, tau_s=tau, lost_writes=len(lost))
        elif name == "12V" and old == 0 and level == 1:
            i0 = float(self.inner.rail_currents(np.array([t]))["12V"][0])
            rec.update(inrush_peak_a=i0 + self.spec.inrush_peak_a,
                       inrush_charge_c=self.spec.inrush_peak_a * self.spec.inrush_tau_us * 1e-6)
        self.truth.append(rec)
        del self.truth[:-4 * MAX_EDGES]
        for ls in self.listeners:
            ls.after_edge(rec, lost)
        return rec

    def _state(self, name: str, t: np.ndarray, default: int) -> tuple[np.ndarray, np.ndarray]:
        """(level, time of the edge that set it) at each t."""
        hist = self.edges[name]
        if not hist:
            return np.full(t.shape, default), np.full(t.shape, -np.inf)
        times = np.array([e[0] for e in hist])
        levels = np.array([e[1] for e in hist])
        k = np.searchsorted(times, t, side="right") - 1
        lv = np.where(k >= 0, levels[np.maximum(k, 0)], default)
        at = np.where(k >= 0, times[np.maximum(k, 0)], -np.inf)
        return lv, at

    # ---- what the rails show -----------------------------------------------------------------------
    def rail_currents(self, t) -> dict[str, np.ndarray]:
        if not self.truth:                 # never switched: the load as it is (no cost, same numbers)
            return self.inner.rail_currents(t)
        t = np.asarray(t, dtype=float)
        amps = {k: np.asarray(v, dtype=float).copy() for k, v in self.inner.rail_currents(t).items()}
        on12, t12 = self._state("12V", t, 1)
        on3, _ = self._state("3V3", t, 1)
        dis, _ = self._state("PWRDIS", t, 0)
        dt = t - t12
        inrush = np.where((on12 == 1) & np.isfinite(t12),
                          self.spec.inrush_peak_a * np.exp(-np.maximum(dt, 0) / (self.spec.inrush_tau_us * 1e-6)), 0.0)
        amps["12V"] = np.where((on12 == 1) & (dis == 0), amps["12V"] + inrush, np.where(on12 == 1, inrush, 0.0))
        if "3V3" in amps:
            amps["3V3"] = np.where(on3 == 1, amps["3V3"], 0.0)
        return amps

    def rail_volts(self, t) -> dict[str, np.ndarray]:
        """Drive-side volts where a switch is open (None: the rail's nominal, less droop)."""
        if not self.truth:
            return {}
        t = np.asarray(t, dtype=float)
        on12, t12 = self._state("12V", t, 1)
        on3, _ = self._state("3V3", t, 1)
        v12 = np.full(t.shape, np.nan)
        off = on12 == 0
        if off.any() and self.cut_tau:
            cuts = np.array([c[0] for c in self.cut_tau])
            taus = np.array([c[1] for c in self.cut_tau])
            k = np.clip(np.searchsorted(cuts, t12[off], side="right") - 1, 0, len(cuts) - 1)
            v0 = np.array([c[2] for c in self.cut_tau])[k]
            v12[off] = v0 * np.exp(-(t[off] - t12[off]) / taus[k])
        v3 = np.where(on3 == 1, np.nan, 0.0)
        return {"12V": v12, "3V3": v3}

    def activity(self, t):
        act = getattr(self.inner, "activity", None)
        if not self.truth:
            return act(t) if act else np.zeros(np.shape(t), bool)
        on12, _ = self._state("12V", np.asarray(t, dtype=float), 1)
        return (act(t) if act else np.zeros(np.shape(t), bool)) & (on12 == 1)

    def perst_asserted(self, t) -> np.ndarray:
        """Where the interposer drives PERST# low: its PERST# input (the front end's digital lane) reads
        the line as it is, so a capture shows each reset where the board set it."""
        if not self.edges["PERST"]:        # never driven (the usual case): released everywhere
            return np.zeros(np.shape(t), bool)
        lv, _ = self._state("PERST", np.asarray(t, dtype=float), 0)
        return lv == 1

    def ready_at(self) -> float | None:
        """UTC the controller is (or will be) ready, None while held off."""
        if self.level["12V"] == 0 or self.level["PERST"] == 1 or self.level["PWRDIS"] == 1:
            return None
        return self.changed_at + self.spec.enum_delay_ms * 1e-3


class SwitchedOutputs:
    """firmware/board's power interface over a PoweredDrive: ``outputs``, ``fire(plan, n)``, ``sample_now``.

    ``clock()`` is the sample index now, ``wait(index)`` returns once the clock reached it (the board's
    machine code spins on the sample clock), ``utc_of_index`` places an edge in the drive's time and
    ``produced()`` is the first sample not yet handed to the ADC reader. The simulator plays the part
    of the board's timer: an edge lands on its requested sample whenever the samples from there on are
    not yet produced (the simulated board does not run late because the host starves the sim's
    thread); one asked for after that is set at the first sample still to come, and its row says so.
    """

    def __init__(self, drive: PoweredDrive, clock, wait, utc_of_index, produced=None):
        self.drive = drive
        self.sample_now = clock
        self.wait = wait
        self.utc_of_index = utc_of_index
        self.produced = produced or clock
        self.names = list(OUTPUTS)
        self.outputs = {n: (lambda level, k=k: (k, level)) for k, n in enumerate(self.names)}
        self.edges: list[tuple[str, int, int, int]] = []     # truth: (output, level, requested, executed)

    def fire(self, plan, n) -> None:
        for k in range(n):
            now = self.sample_now()
            ahead = (plan[4 * k] - now) & 0xFFFFFFFF
            at = now + (ahead if ahead < 0x80000000 else ahead - 0x100000000)    # unwrapped
            if at > now:
                self.wait(at)
            executed = max(at, self.produced())
            plan[4 * k + 3] = executed & 0xFFFFFFFF
            name = self.names[plan[4 * k + 1]]
            level = plan[4 * k + 2]
            self.drive.set_output(name, level, float(self.utc_of_index(executed)))
            self.edges.append((name, level, at, executed))
            del self.edges[:-MAX_EDGES]
