"""The virtual SSD: power states, workload-dependent bandwidth and power, APST, temperature, SMART.

Time is host UTC (``time.time()``), the same clock the interposer's samples are mapped to, so what
the rails show lines up with the nvme/fio events the host records. The drive keeps a short history
of power "segments" (a level it approaches exponentially plus a power-state change's overshoot, and
the parts of its dynamic power that pulse: NAND program, GC copies, NAND reads) so that
``rail_currents`` can evaluate any recent instants at once with numpy; ``waveform.py`` draws the
pulses, GC episodes and the overshoot's ringing (the 4 us structure), mean-preserving.

Everything that changes the drive (commands, runs starting and stopping, APST and thermal
transitions) happens under one lock, and autonomous changes are replayed in time order by
``advance`` whenever anybody looks at the drive.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from powerrig.core.errors import PowerrigError
from powerrig.sim.ssd.admin_power import Signature, signature, spec as admin_spec
from powerrig.sim.ssd.model import (JobLoad, OperatingPoint, idle_power, operating_point,
                                    pulsing_parts)
from powerrig.sim.ssd.power_claims import PowerClaims
from powerrig.sim.ssd.profile import Profile, load
from powerrig.sim.ssd.waveform import Waveform, WaveformSpec, transient

SETTLE_S = 0.003            # how fast power follows a change of workload
SEG_COLS = 9                # t, level, target, tau, overshoot, io, program W, gc W, read W
HISTORY_S = 30.0            # how far back rail_currents can look


class SsdError(PowerrigError):
    """A command the virtual drive rejects, with the NVMe status it would return."""

    def __init__(self, message: str, status: str = "INVALID_FIELD"):
        super().__init__(message)
        self.status = status


@dataclass
class Run:
    """One fio invocation's jobs while they run on the drive."""
    run_id: int
    jobs: list[JobLoad]
    t_start: float
    deadline: float                  # the drive stops serving it here even if nobody says stop
    fail_at: float | None = None
    failed: bool = False
    read_bytes: np.ndarray = None
    write_bytes: np.ndarray = None
    history: list = field(default_factory=list)     # (t, read_Bps per job, write_Bps per job)

    def __post_init__(self):
        n = len(self.jobs)
        self.read_bytes = np.zeros(n)
        self.write_bytes = np.zeros(n)


class VirtualSSD:
    """A drive built from a profile (see ``powerrig.sim.ssd.profile``)."""

    nominal_volts = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}

    def __init__(self, profile: str | Profile = "d5-p5336", clock=time.time, sn: str | None = None, seed: int = 1):
        self.profile = profile if isinstance(profile, Profile) else load(profile)
        self.clock = clock
        try:
            self.waveform = Waveform(WaveformSpec.from_profile(self.profile.power), seed)
        except ValueError as e:
            raise SsdError(f"drive profile {self.profile.name}: {e}") from None
        admin_spec(self.profile)         # a bad [power.admin] is said when the drive is built, not at its first format
        self.sn = sn or self.profile.sn
        self._lock = threading.RLock()
        now = clock()
        th = self.profile.thermal
        self.ps = 0                  # current power state
        self.host_ps = 0             # the operational state the host asked for last
        self.workload_hint = 0
        self._pending: tuple[float, int] | None = None     # (t_switch, ps) of a transition under way
        self._limit_w: float | None = None                  # the Power Limit (feature 23h) the drive obeys now
        self._limit_pending: tuple[float, float | None] | None = None   # (when it will obey, W or None: lifted)
        self.apst_enabled = self.profile.apst
        self.apst_table = [(0, 0)] * 32                    # per state: (itps, itpt_ms)
        for e in self.profile.apst_default:
            self.apst_table[e["from_ps"]] = (e["itps"], e["itpt_ms"])
        self.fdp_enabled = self.profile.fdp
        self.temp_c = th["ambient_c"] + th["c_per_w"] * idle_power(self.profile, 0) * 0.5
        self.throttled = False
        self.thm_count = 0
        self.thm_time_s = 0.0
        self._t_thermal = now
        self.runs: dict[int, Run] = {}
        self._ended: dict[int, Run] = {}     # ended (deadline or failure) but not yet collected by stop_io
        self._next_run = 1
        self._op: OperatingPoint | None = None
        self._idle_since = now
        self._state_since = now
        self._t_rates = now
        self.fault_after_s: float | None = None
        self.erases: list[tuple[float, str, int | None]] = []    # (time, "format" | "sanitize", nsid)
        # an admin command's busy interval under way (sim/ssd/admin_power.py): (t_end, its signature),
        # and the truth of every one: kind, t_start, t_end, extra_w, energy_j (above the level before)
        self._busy: tuple[float, Signature] | None = None
        self.admin_truth: list[dict] = []
        # the truth of every APST move (the drive's own, no command marks it): t_due (idle since + ITPT),
        # t_switch (the new state in force), from_ps, to_ps, itpt_ms
        self.apst_truth: list[dict] = []
        # while a drive-host trace instance is open (sim/ssd/drive_trace.py): each span of constant rates,
        # (t_from, t_to, [(job key, rw, bs, random, nsid, read B/s, write B/s)])
        self.io_segments: list | None = None
        # lifetime counters
        self.host_read_bytes = 0.0
        self.host_write_bytes = 0.0
        self.host_read_cmds = 0.0
        self.host_write_cmds = 0.0
        self.media_write_bytes = 0.0
        self.fdp_host_bytes = 0.0
        self.fdp_media_bytes = 0.0
        self.power_on_base_h = 1200
        self._t_created = now
        # power history for the rails: segment start, level at start, target, time constant, overshoot (W),
        # I/O in flight (1/0: the activity LED), and the watts of the target that pulse (waveform.py):
        # NAND program of host data, GC copies, NAND reads
        self._seg = np.zeros((0, SEG_COLS))
        self._add_segment(now, self._target_power(), SETTLE_S, 0.0, 0.0)
        # the drive's own power measurement (sim/ssd/power_claims.py): profiles with [power.self_report]
        sr = self.profile.power.get("self_report")
        self.claims = PowerClaims(self, sr, now) if isinstance(sr, dict) and sr.get("supported", True) else None

    # -- rails (called by the virtual interposer, in real time, ~every 10 ms) -------------------
    def rail_currents(self, t_utc: np.ndarray) -> dict[str, np.ndarray]:
        """True amps on 12V, 3V3 and 5V at host UTC instants (vectorized)."""
        t = np.asarray(t_utc, dtype=float)
        watts = self.power_at(t)
        aux = float(self.profile.power.get("aux_3v3_w", 0.0))
        if self.profile.rail == "3V3":
            return {"12V": np.zeros_like(t), "3V3": watts / self.nominal_volts["3V3"], "5V": np.zeros_like(t)}
        return {"12V": (watts - aux) / self.nominal_volts["12V"],
                "3V3": np.full_like(t, aux / self.nominal_volts["3V3"]), "5V": np.zeros_like(t)}

    def power_at(self, t_utc: np.ndarray) -> np.ndarray:
        """True drive power (W) at host UTC instants."""
        t = np.asarray(t_utc, dtype=float)
        if len(t):
            self.advance(float(t.max()))
        return self._power_eval(t)

    def _power_eval(self, t: np.ndarray, pulsed: bool = True) -> np.ndarray:
        """power_at without replaying autonomous changes first. ``pulsed=False``: without the sub-ms pulses
        and the overshoot's ringing, what a meter averaging over ~1 ms reads (the drive's own)."""
        with self._lock:
            seg = self._seg
        one = self._one_segment(seg, t)
        if one is not None:
            return self._segment_power(one, t, pulsed)
        k = np.searchsorted(seg[:, 0], t, side="right") - 1
        k = np.clip(k, 0, len(seg) - 1)
        s = seg[k]
        dt = np.maximum(t - s[:, 0], 0.0)
        p = s[:, 2] + (s[:, 1] - s[:, 2]) * np.exp(-dt / s[:, 3])
        if s[:, 4].any():
            p += transient(dt, 1.0, self.waveform.spec) * s[:, 4] if pulsed else \
                s[:, 4] * np.exp(-dt / (self.waveform.spec.transient_us * 1e-6))
        return p + self.waveform.detail(t, s[:, 6], s[:, 8], s[:, 7], pulsed)

    def _power_metered(self, t: np.ndarray) -> np.ndarray:
        """What the drive's own power monitor reads (sim/ssd/power_claims.py): its conversion averages the
        sub-ms pulses away; GC episodes and the levels it sees."""
        return self._power_eval(t, pulsed=False)

    def _power_target(self, t: np.ndarray) -> np.ndarray:
        """The level the model settles at for each instant (no transient, no pulses): what a drive that
        estimates its power from its own state, rather than measuring it, would report."""
        with self._lock:
            seg = self._seg
        k = np.clip(np.searchsorted(seg[:, 0], t, side="right") - 1, 0, len(seg) - 1)
        return seg[k, 2]

    @staticmethod
    def _one_segment(seg: np.ndarray, t: np.ndarray) -> np.ndarray | None:
        """The segment row if every instant of t (ascending, as a pass's samples) falls in one: the usual
        case, a pass being milliseconds and a segment a workload's phase. None otherwise."""
        if not len(t) or not len(seg) or t[-1] < t[0]:
            return None
        starts = seg[:, 0]
        k0 = max(int(np.searchsorted(starts, t[0], side="right")) - 1, 0)
        if k0 + 1 < len(seg) and starts[k0 + 1] <= t[-1]:
            return None
        return seg[k0]

    def _segment_power(self, s: np.ndarray, t: np.ndarray, pulsed: bool = True) -> np.ndarray:
        """_power_eval's formula on one segment, the same numbers with scalars for its columns and without
        the terms that are exactly zero there: an exponential past exp's underflow (x > 746: 0.0), an
        overshoot of 0, a part that does not pulse. A few numpy calls per pass instead of a gather."""
        t_start, level, target, tau, spike, _io, prog, gc, read = (float(x) for x in s)
        dt_min = max(float(t[0]) - t_start, 0.0)
        p = np.full(t.shape, target)
        if level != target and dt_min / tau <= 746.0:
            dt = np.maximum(t - t_start, 0.0)
            p = target + (level - target) * np.exp(-dt / tau)
        tr_s = self.waveform.spec.transient_us * 1e-6
        if spike != 0.0 and dt_min / tr_s <= 746.0:
            dt = t - t_start
            p = p + (transient(dt, spike, self.waveform.spec) if pulsed else spike * np.exp(-np.maximum(dt, 0) / tr_s))
        if prog or gc or read:
            p = p + self.waveform.detail(t, prog, read, gc, pulsed)
        return p

    def activity(self, t_utc: np.ndarray) -> np.ndarray:
        """The activity LED: lit while a segment with I/O in flight is in force."""
        t = np.asarray(t_utc, dtype=float)
        with self._lock:
            seg = self._seg
        one = self._one_segment(seg, t)
        if one is not None:
            return np.full(t.shape, one[5] > 0)
        k = np.clip(np.searchsorted(seg[:, 0], t, side="right") - 1, 0, len(seg) - 1)
        return seg[k, 5] > 0

    def _add_segment(self, t: float, target: float, tau: float, spike: float, io: bool,
                     parts: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> None:
        """A new level from ``t`` on; ``parts``: the watts of ``target`` that pulse (program, GC, read)."""
        if len(self._seg):
            s = self._seg[-1]
            level = s[2] + (s[1] - s[2]) * math.exp(-max(t - s[0], 0.0) / s[3])
        else:
            level = target
        row = np.array([[t, level, target, max(tau, 1e-5), spike, 1.0 if io else 0.0, *parts]])
        keep = self._seg[:, 0] >= t - HISTORY_S
        keep[-1:] = True
        self._seg = np.vstack([self._seg[keep], row])

    def _target_power(self) -> float:
        extra = self._busy[1].extra_w if self._busy is not None else 0.0
        if self._op is not None and self.runs:
            return self._op.watts + extra
        return idle_power(self.profile, self.ps) + extra

    # -- autonomous behaviour -------------------------------------------------------------------
    def advance(self, t: float | None = None) -> None:
        """Replay everything the drive does on its own (transitions, APST, throttling, run deadlines) up to t."""
        t = self.clock() if t is None else t
        with self._lock:
            for _ in range(100000):
                when, what = self._next_event(t)
                if when is None:
                    break
                self._thermal_to(when)
                what(when)
            self._thermal_to(t)
            if self.claims is not None:
                self.claims.update(t)

    def _next_event(self, t: float):
        cands = []
        if self._pending and self._pending[0] <= t:
            cands.append((self._pending[0], self._finish_transition))
        for run in self.runs.values():
            if run.fail_at is not None and not run.failed and run.fail_at <= t:
                cands.append((run.fail_at, lambda w, r=run: self._fail_run(r, w)))
            if run.deadline <= t:
                cands.append((run.deadline, lambda w, r=run: self._end_run(r, w)))
        if self._limit_pending is not None and self._limit_pending[0] <= t:
            cands.append((self._limit_pending[0], self._apply_limit))
        if self._busy is not None and self._busy[0] <= t:
            cands.append((self._busy[0], self._end_busy))
        if self.apst_enabled and not self.runs and not self._pending and self._busy is None:
            itps, itpt = self.apst_table[self.ps]
            if itpt > 0 and itps != self.ps and itps <= self.profile.npss:
                when = max(self._idle_since, self._state_since) + itpt / 1000.0
                if when <= t:
                    cands.append((when, lambda w, s=itps, i=itpt: self._apst_transition(w, s, i)))
        if not cands:
            return None, None
        return min(cands, key=lambda c: c[0])

    def _thermal_to(self, t: float) -> None:
        th = self.profile.thermal
        while self._t_thermal < t:
            dt = min(0.5, t - self._t_thermal)
            p = self._target_power()
            t_inf = th["ambient_c"] + th["c_per_w"] * p
            self.temp_c = t_inf + (self.temp_c - t_inf) * math.exp(-dt / th["time_constant_s"])
            self._t_thermal += dt
            if self.throttled:
                self.thm_time_s += dt
            if not self.throttled and self.temp_c >= th["throttle_c"]:
                self.throttled = True
                self.thm_count += 1
                self._retune(self._t_thermal)
            elif self.throttled and self.temp_c < th["throttle_c"] - 3.0:
                self.throttled = False
                self._retune(self._t_thermal)

    # -- power states ---------------------------------------------------------------------------
    def set_power_state(self, ps: int, workload_hint: int = 0, t: float | None = None) -> float:
        """Set Features FID 0x02. Returns the time the new state takes effect (< ENLAT+EXLAT later)."""
        t = self.clock() if t is None else t
        if not 0 <= ps <= self.profile.npss:
            raise SsdError(f"power state {ps} not supported (NPSS={self.profile.npss})")
        if not 0 <= workload_hint <= 7:
            raise SsdError(f"workload hint {workload_hint} out of range")
        with self._lock:
            self.advance(t)
            self.workload_hint = workload_hint
            if not self.profile.state(ps).nops:
                self.host_ps = ps
            return self._begin_transition(t, ps)

    def _transition_delay(self, old: int, new: int) -> float:
        """Worst case is EXLAT(old) + ENLAT(new); the virtual drive switches halfway through."""
        return 0.5 * (self.profile.state(old).exlat_us + self.profile.state(new).enlat_us) * 1e-6

    def _begin_transition(self, t: float, ps: int, autonomous: bool = False) -> float:
        if ps == self.ps and not self._pending:
            return t
        t_switch = t + self._transition_delay(self.ps, ps)
        self._pending = (t_switch, ps)
        if t_switch <= t:
            self._finish_transition(t)
        return t_switch

    def _apst_transition(self, t: float, ps: int, itpt_ms: int) -> None:
        """An APST move, kept as truth for the analysis to be held to (analysis/apst.py)."""
        old = self.ps
        t_switch = self._begin_transition(t, ps, autonomous=True)
        self.apst_truth.append({"t_due": t, "t_switch": t_switch, "from_ps": old, "to_ps": ps, "itpt_ms": itpt_ms})
        del self.apst_truth[:-256]

    def _finish_transition(self, t: float) -> None:
        _, ps = self._pending
        self._pending = None
        old = self.ps
        self.ps = ps
        self._state_since = t
        self._retune(t, spike=self.profile.power.get("transient_w", 0.0) if ps != old else 0.0,
                     tau=max(2e-4, min(2e-3, 0.05 * self._transition_delay(old, ps))))

    def get_power_state(self) -> tuple[int, int]:
        """Get Features FID 0x02: the state set, also while the drive is still switching to it (a
        real controller reports the feature's value; the power follows within ENLAT+EXLAT). Answering
        the old state for those ~60 ms made a fast `set` then `get` look like a refusal."""
        self.advance()
        with self._lock:
            return (self._pending[1] if self._pending else self.ps), self.workload_hint

    def set_apst(self, enabled: bool, table: list[tuple[int, int]] | None = None) -> None:
        if enabled and not self.profile.apst:
            raise SsdError("APST not supported by this controller (APSTA=0)")
        with self._lock:
            self.advance()
            self.apst_enabled = bool(enabled)
            if table is not None:
                for itps, _ in table:
                    if itps > self.profile.npss:
                        raise SsdError(f"APST entry names power state {itps} (NPSS={self.profile.npss})")
                self.apst_table = list(table) + [(0, 0)] * (32 - len(table))

    # -- I/O ------------------------------------------------------------------------------------
    def start_io(self, jobs: list[JobLoad], runtime_s: float, t: float | None = None) -> int:
        """Jobs begin now (after a wake-up if the drive sits in a non-operational state)."""
        with self._lock:
            everything = [j for run in self.runs.values() for j in run.jobs] + list(jobs)
            ps, fdp = self.ps, self.fdp_enabled
        # The steady-state WAF of a new job mix takes the FTL a few hundred ms the first time (it is
        # cached after): do it outside the lock, so the interposer reading the rails is never held up.
        operating_point(self.profile, ps, everything, fdp=fdp)
        t = self.clock() if t is None else t
        with self._lock:
            self.advance(t)
            if self.profile.state(self.ps).nops or (self._pending and self.profile.state(self._pending[1]).nops):
                self._begin_transition(t, self.host_ps, autonomous=True)
            self._account(t)
            run = Run(self._next_run, list(jobs), t, t + runtime_s + 5.0)
            if self.fault_after_s is not None:
                run.fail_at, self.fault_after_s = t + self.fault_after_s, None
            self._next_run += 1
            self.runs[run.run_id] = run
            self._retune(t)
            return run.run_id

    def run_status(self, run_id: int) -> dict:
        self.advance()
        with self._lock:
            run = self.runs.get(run_id)
            if run is None:
                run = self._ended.get(run_id)
                if run is None:
                    raise SsdError(f"no run {run_id}")
                return {"running": False, "failed": run.failed,
                        "read_bytes": run.read_bytes.tolist(), "write_bytes": run.write_bytes.tolist()}
            self._account(self.clock())
            return {"running": True, "failed": False,
                    "read_bytes": run.read_bytes.tolist(), "write_bytes": run.write_bytes.tolist()}

    def stop_io(self, run_id: int, t: float | None = None) -> dict:
        """End a run; its bytes per job and rate history (for fio's logs and JSON)."""
        t = self.clock() if t is None else t
        with self._lock:
            self.advance(t)
            run = self.runs.get(run_id) or self._ended.get(run_id)
            if run is None:
                raise SsdError(f"no run {run_id}", status="INVALID_FIELD")
            if run.run_id in self.runs:
                self._end_run(run, t)
            self._ended.pop(run_id, None)
            return {"t_start": run.t_start, "t_end": min(t, run.deadline), "failed": run.failed,
                    "failed_at": run.fail_at if run.failed else None,
                    "read_bytes": run.read_bytes.tolist(), "write_bytes": run.write_bytes.tolist(),
                    "history": [(h[0], h[1].tolist(), h[2].tolist()) for h in run.history],
                    "waf": self._op.waf if self._op else 1.0}

    def abort_io(self, t: float, power_lost: bool) -> dict[int, tuple[list, list]]:
        """The controller went away at ``t`` (power cut, PERST#, PWRDIS): every run fails there. Returns
        per run the bytes each job had written by then and its write rate, in one step (no request
        can account more in between). ``power_lost``: the draw drops at once (a drive powered again
        starts from idle, not from settling out of the workload it had)."""
        with self._lock:
            self._account(max(t, self._t_rates))
            out = {}
            for run in list(self.runs.values()):
                rate = run.history[-1][2] if run.history else np.zeros(len(run.jobs))
                out[run.run_id] = (run.write_bytes.tolist(), np.asarray(rate, float).tolist())
                self._fail_run(run, t)
            if power_lost:
                self._retune(t, tau=1e-6)
            return out

    def _fail_run(self, run: Run, t: float) -> None:
        run.failed = True
        self._end_run(run, t)

    def _end_run(self, run: Run, t: float) -> None:
        self._account(t)
        self.runs.pop(run.run_id, None)
        self._ended[run.run_id] = run
        run.history.append((t, np.zeros(len(run.jobs)), np.zeros(len(run.jobs))))
        if not self.runs:
            self._idle_since = t
        self._retune(t)

    def _account(self, t: float) -> None:
        """Add bytes moved since the last change of rates to every run and the drive's counters."""
        dt = max(0.0, t - self._t_rates)
        self._t_rates = t
        if self._op is None or dt == 0:
            return
        if self.io_segments is not None:
            i, seg = 0, []
            for run in self.runs.values():
                for k, j in enumerate(run.jobs):
                    seg.append(((run.run_id, k), j.rw, j.bs, j.random, j.handle + 1 if self.fdp_enabled else 1,
                                float(self._op.read_Bps[i + k]), float(self._op.write_Bps[i + k])))
                i += len(run.jobs)
            self.io_segments.append((t - dt, t, seg))
        i = 0
        for run in self.runs.values():
            n = len(run.jobs)
            r, w = self._op.read_Bps[i:i + n] * dt, self._op.write_Bps[i:i + n] * dt
            run.read_bytes += r
            run.write_bytes += w
            bs = np.array([j.bs for j in run.jobs], dtype=float)
            self.host_read_cmds += float((r / bs).sum())
            self.host_write_cmds += float((w / bs).sum())
            i += n
        rb, wb = float(self._op.read_Bps.sum() * dt), float(self._op.write_Bps.sum() * dt)
        self.host_read_bytes += rb
        self.host_write_bytes += wb
        self.media_write_bytes += wb * self._op.waf
        if self.fdp_enabled:
            self.fdp_host_bytes += wb
            self.fdp_media_bytes += wb * self._op.waf

    def _retune(self, t: float, spike: float = 0.0, tau: float = SETTLE_S) -> None:
        """Recompute the operating point after any change, and start a new power segment."""
        self._account(t)
        jobs = [j for run in self.runs.values() for j in run.jobs]
        waking = self._pending is not None and self.profile.state(self.ps).nops
        cap = self.profile.thermal["throttle_w"] if self.throttled else None
        if self._limit_w is not None:           # a Power Limit it obeys: throughput and power held under it
            cap = self._limit_w if cap is None else min(cap, self._limit_w)
        if jobs and not waking:
            self._op = operating_point(self.profile, self.ps, jobs, fdp=self.fdp_enabled, cap_w=cap)
        else:
            self._op = operating_point(self.profile, self.ps, [], fdp=self.fdp_enabled) if not jobs else \
                OperatingPoint(self.ps, np.zeros(len(jobs)), np.zeros(len(jobs)), idle_power(self.profile, self.ps), 1.0)
        i = 0
        for run in self.runs.values():
            n = len(run.jobs)
            run.history.append((t, self._op.read_Bps[i:i + n].copy(), self._op.write_Bps[i:i + n].copy()))
            i += n
        target = self._target_power()
        parts = pulsing_parts(self.profile, self._op) if jobs else (0.0, 0.0, 0.0)
        self._add_segment(t, target, tau, spike, bool(jobs), parts)

    def operating_point(self) -> OperatingPoint | None:
        self.advance()
        with self._lock:
            return self._op

    # -- logs -----------------------------------------------------------------------------------
    def smart_log(self) -> dict:
        self.advance()
        with self._lock:
            self._account(self.clock())
            th = self.profile.thermal
            warn = 0
            if self.temp_c >= th["critical_c"]:
                warn |= 0x2
            up_h = (self.clock() - self._t_created) / 3600.0
            return {"critical_warning": warn, "temperature_k": int(round(self.temp_c + 273.15)),
                    "avail_spare": 100, "spare_thresh": 10, "percent_used": 1,
                    "data_units_read": math.ceil(self.host_read_bytes / 512000),
                    "data_units_written": math.ceil(self.host_write_bytes / 512000),
                    "host_read_commands": int(self.host_read_cmds), "host_write_commands": int(self.host_write_cmds),
                    "controller_busy_time": int(up_h * 60 * (1 if self.runs else 0)),
                    "power_cycles": 12, "power_on_hours": self.power_on_base_h + int(up_h), "unsafe_shutdowns": 1,
                    "media_errors": 0, "num_err_log_entries": 0,
                    "warning_temp_time": 0, "critical_comp_time": 0,
                    "temperature_sensors": [int(round(self.temp_c + 273.15)), int(round(self.temp_c + 273.15 - 3))],
                    "thm_temp1_trans_count": self.thm_count, "thm_temp2_trans_count": 0,
                    "thm_temp1_total_time": int(self.thm_time_s), "thm_temp2_total_time": 0}

    def fdp_stats(self) -> dict:
        if not self.profile.fdp:
            raise SsdError("FDP not supported by this controller", status="INVALID_LOG_PAGE")
        self.advance()
        with self._lock:
            self._account(self.clock())
            return {"hbmw": int(self.fdp_host_bytes), "mbmw": int(self.fdp_media_bytes), "mbe": int(self.fdp_media_bytes)}

    # -- what the drive says about its own power (sim/ssd/power_claims.py) --------------------------
    def _claims(self, what: str, status: str = "INVALID_FIELD") -> PowerClaims:
        if self.claims is None:
            raise SsdError(f"{what} not supported by this controller", status=status)
        return self.claims

    def power_measurement(self) -> dict:
        """Log 25h's values (NVMe Power Measurement); Invalid Log Page without [power.self_report]."""
        c = self._claims("Power Measurement log", "INVALID_LOG_PAGE")
        self.advance()
        with self._lock:
            return c.log(self.clock())

    def set_power_measurement(self, action: int, pmts: int = 0, smt_min: int = 0) -> None:
        """Set Features 25h: action 1 start, 0 stop."""
        c = self._claims("Power Measurement feature")
        self.advance()
        with self._lock:
            try:
                c.set_measurement(action, pmts, smt_min, self.clock())
            except ValueError as e:
                raise SsdError(str(e)) from None

    def get_power_feature(self, fid: int) -> int:
        """Get Features 23h (Power Limit), 24h (Power Threshold), 25h (Power Measurement): dword 0."""
        c = self._claims(f"feature {fid:#04x}")
        self.advance()
        with self._lock:
            return {0x23: c.power_limit, 0x24: c.power_threshold, 0x25: c.measurement_dword()}[fid]

    def set_power_feature(self, fid: int, value: int) -> None:
        """Set Features 23h / 24h. A Power Limit is obeyed as ``[power.self_report] limit_obey`` says: "obey"
        (after limit_delay_s, 0.2 s), "late" (after limit_delay_s, 5 s) or "ignore" (stored only); obeying
        caps the operating point as thermal throttling does (throughput falls with power). A limit below
        every operational state's lowest possible draw (idle) is refused as NVMe 3Eh Invalid Power Limit."""
        c = self._claims(f"feature {fid:#04x}")
        if fid == 0x23 and value & 0xFFFF:
            scale = {1: 1e-4, 2: 1e-2}.get((value >> 16) & 3)
            if scale is None:
                raise SsdError(f"power limit scale {(value >> 16) & 3} is not 1 or 2")
            if (value & 0xFFFF) * scale < min(idle_power(self.profile, s.ps) for s in self.profile.states
                                                if not s.nops):
                raise SsdError("the power limit forbids every operational power state", status="INVALID_POWER_LIMIT")
        with self._lock:
            t = self.clock()
            self.advance(t)
            if fid == 0x23:
                c.power_limit = value & 0x3FFFF
                watts = (value & 0xFFFF) * {1: 1e-4, 2: 1e-2}.get((value >> 16) & 3, 0.0) or None
                if c.limit_obey != "ignore":     # obeyed (and lifted) after limit_delay_s; "ignore": stored only
                    self._limit_pending = (t + c.limit_delay_s, watts)
            else:
                c.power_threshold = value

    def _apply_limit(self, t: float) -> None:
        _, self._limit_w = self._limit_pending
        self._limit_pending = None
        self._retune(t, tau=0.02)

    def power_claims_identify(self) -> dict | None:
        """Identify Controller's power measurement fields (CTRATT bits 20-21, MUP, IPMSR, MSMT), or None."""
        if self.claims is None:
            return None
        return {"pls": True, "pms": True, "vms": False, "interval_s": self.claims.interval_s,
                "msmt_min": self.claims.msmt_min, "mup_w": self.profile.state(0).mp_w}

    def power_smart_fields(self) -> dict:
        """SMART OLEC (Wh, rounded up) and IPM (W over the last second); 0 = not reported."""
        if self.claims is None:
            return {"olec_wh": 0, "ipm_w": 0.0}
        self.advance()
        with self._lock:
            t = self.clock()
            return {"olec_wh": self.claims.olec_wh(t), "ipm_w": self.claims.ipm_w(t)}

    def ocp_power(self) -> dict:
        """OCP C0h power fields; Invalid Log Page without ``ocp_c0`` in [power.self_report]."""
        c = self._claims("OCP log C0h", "INVALID_LOG_PAGE")
        if not c.ocp:
            raise SsdError("OCP log C0h not supported by this controller", status="INVALID_LOG_PAGE")
        self.advance()
        with self._lock:
            return c.ocp_fields(self.clock())

    def ocp_smart(self) -> dict:
        self.advance()
        with self._lock:
            self._account(self.clock())
            return {"physical_media_units_written": int(self.media_write_bytes),
                    "physical_media_units_read": int(self.host_read_bytes)}

    def erase(self, kind: str, nsid: int | None = None) -> Signature:
        """Format (``kind`` "format") or sanitize: refused while I/O runs, as a busy drive would; the
        user data is gone (the FTL is left as is: what it holds is the model's steady state, not data).
        Returns the busy interval it draws (admin_power.py)."""
        self.advance()
        with self._lock:
            if self.runs:
                raise SsdError("I/O in progress", status="INVALID_FIELD")
            sig = self.admin_busy(kind)
            self.erases.append((self.clock(), kind, nsid))
            return sig

    def admin_busy(self, kind: str, t: float | None = None) -> Signature:
        """The controller busy with ``kind`` (format, sanitize, flush, fw_commit, reset) from ``t``: its
        power signature (sim/ssd/admin_power.py) added to the level it had, and recorded as truth. One
        at a time: another while one is under way is refused, as a drive in a sanitize refuses."""
        t = self.clock() if t is None else t
        with self._lock:
            self.advance(t)
            if self._busy is not None:
                raise SsdError(f"the controller is busy with a {self._busy[1].kind}", status="INVALID_FIELD")
            sig = signature(self.profile, kind, self._target_power())
            self._busy = (t + sig.duration_s, sig)
            self._retune(t, tau=sig.tau_s)
            self.admin_truth.append({"kind": kind, "t_start": t, "t_end": t + sig.duration_s,
                                     "extra_w": sig.extra_w, "energy_j": sig.energy_j})
            del self.admin_truth[:-256]
            return sig

    def _end_busy(self, t: float) -> None:
        tau = self._busy[1].tau_s
        self._busy = None
        if not self.runs:
            self._idle_since = t          # APST counts idle time from the end of the command
        self._retune(t, tau=tau)

    def inject_fault(self, after_s: float) -> None:
        """The next run fails with an I/O error this many seconds after it starts (for tests)."""
        with self._lock:
            self.fault_after_s = float(after_s)
