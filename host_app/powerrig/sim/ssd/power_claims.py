"""What the virtual drive says about its own power: NVMe Power Measurement (Set Features 25h, log 25h),
the SMART log's interval power (IPM) and lifetime energy (OLEC), Power Limit / Power Threshold
(features 23h / 24h), and OCP C0h's power fields, computed from the drive's own power model.

The drive measures the way a firmware would, with a configurable honesty (profile ``[power.self_report]``,
docs/virtual-ssd.md): every ``interval_ms`` it makes one *interval power measurement*, the mean of
``samples_per_interval`` instants spread over the interval (1 = coarse: one point sample, which aliases),
of the true power ``lag_s`` seconds ago (less the 3.3 V rail's ``aux_3v3_w`` with ``rails = "12V"``: a
wrong rail split), times ``1 + bias_pct / 100`` plus ``offset_w``; with
``estimated = true`` it reports its model's settled level instead (no transients, no ripple) and sets
the log's "estimated, not measured" flag. ``error_pct`` is the error bound it states (IPWRPE).

Intervals sit on a grid of whole multiples of ``interval_ms`` of host UTC (the drive's Timestamp, which
the Linux driver sets from the host clock). A measurement started at t counts the intervals that begin
at or after t; a stop (or SMT running out) counts those that end by then, and SMTS is the end of the last
one. IPMSR in Identify Controller is ``interval_ms`` (each interval is one measurement). SMART IPM is the
mean of the intervals that ended in the last second; OLEC the energy of every interval since the drive
was made (``lifetime_wh`` before the virtual drive was created), in Wh rounded up.

This module writes the numbers; the byte layouts are written by the impersonated nvme-cli (sim/tools/nvme_cli.py).
"""
from __future__ import annotations

import math

import numpy as np

BIN_W = 0.25            # the log's histogram bin size (PHBS shall be 250 mW)
MAX_CATCH_UP = 200000   # intervals evaluated at most in one update (a fake clock jumping hours ahead)


class PowerClaims:
    """The drive's own power measurement state. ``ssd`` gives ``_power_eval(t)`` (true watts) and
    ``_power_target(t)`` (the settled level the model aims at), both vectorized, without side effects;
    ``_power_metered(t)`` if it has one: what its on-board monitor reads (the monitor's conversion
    averages the sub-ms pulses the rig sees, sim/ssd/waveform.py), else ``_power_eval``."""

    def __init__(self, ssd, cfg: dict, t0: float):
        self.ssd = ssd
        self._metered = getattr(ssd, "_power_metered", None) or ssd._power_eval
        self.interval_s = float(cfg.get("interval_ms", 100)) / 1000.0
        if not 1e-4 <= self.interval_s <= 2.55:
            raise ValueError(f"[power.self_report] interval_ms {cfg.get('interval_ms')} is outside 0.1..2550 ms")
        self.samples = max(1, int(cfg.get("samples_per_interval", 20)))
        self.gain = 1.0 + float(cfg.get("bias_pct", 0.0)) / 100.0
        self.offset_w = float(cfg.get("offset_w", 0.0))
        self.lag_s = float(cfg.get("lag_s", 0.0))
        self.estimated = bool(cfg.get("estimated", False))
        # which rails the meter counts: "all" (the NVM subsystem total) or "12V" (a wrong rail split: the
        # 3.3 V rail's aux_3v3_w left out, as a drive metering only its 12 V input would)
        self.rails = str(cfg.get("rails", "all"))
        if self.rails not in ("all", "12V"):
            raise ValueError(f"[power.self_report] rails {self.rails!r} is not 'all' or '12V'")
        power = getattr(ssd.profile, "power", None) or {}
        self.left_out_w = float(power.get("aux_3v3_w", 0.0)) if self.rails == "12V" else 0.0
        self.error_pct = int(cfg.get("error_pct", 5))              # IPWRPE; 255 = not reported
        self.bins = int(cfg.get("histogram_bins", 0)) or int(math.ceil(ssd.profile.state(0).mp_w * 1.2 / BIN_W))
        self.msmt_min = int(cfg.get("max_stop_minutes", 1440))    # MSMT: the largest SMT accepted
        self.lifetime_j = float(cfg.get("lifetime_wh", 0.0)) * 3600.0
        self.power_limit = 0          # feature 23h dword (PLV | PLS << 16); 0: no limit
        self.limit_obey = str(cfg.get("limit_obey", "obey"))      # obey | late | ignore (sim/ssd/drive.py applies it)
        if self.limit_obey not in ("obey", "late", "ignore"):
            raise ValueError(f"[power.self_report] limit_obey {self.limit_obey!r} is not obey, late or ignore")
        self.limit_delay_s = float(cfg.get("limit_delay_s", 5.0 if self.limit_obey == "late" else 0.2))
        self.power_threshold = 0      # feature 24h dword
        self.ocp = bool(cfg.get("ocp_c0", False))
        self.ocp_peak_w = int(cfg.get("ocp_peak_w", round(ssd.profile.state(0).mp_w * 1.4)))
        self.t_done = math.floor(t0 / self.interval_s) * self.interval_s     # intervals processed up to here
        self.recent: list[tuple[float, float]] = []         # (end, W) of the intervals of the last second
        self.max_avg_w = 0.0                                 # OCP current maximum average power (largest 1 s)
        # the measurement (feature 25h, log 25h)
        self.pmgn = 0
        self.active = False
        self.smt_min = 0
        self.t_start: float | None = None
        self.t_stop_at: float | None = None     # SMT's end
        self.smts: float | None = None          # end of the last interval counted, once stopped
        self.pmc = 0
        self.sum_w = 0.0
        self.max_w = 0.0
        self.max_t: float | None = None
        self.counts = np.zeros(self.bins, dtype=np.int64)
        self.overflow = 0

    # -- what the firmware computes ---------------------------------------------------------------
    def _reported(self, starts: np.ndarray) -> np.ndarray:
        """The interval power measurements of intervals starting at ``starts``."""
        k = (np.arange(self.samples) + 0.5) / self.samples * self.interval_s
        t = (starts[:, None] + k[None, :]).ravel() - self.lag_s
        if self.estimated:
            w = self.ssd._power_target(t)
        else:
            w = self._metered(t)
        return (w.reshape(len(starts), self.samples).mean(axis=1) - self.left_out_w) * self.gain + self.offset_w

    def update(self, t: float) -> None:
        """Process every interval that ended by ``t`` (called under the drive's lock, from advance)."""
        n = int((t - self.t_done) / self.interval_s + 1e-9)
        if n <= 0:
            return
        if n > MAX_CATCH_UP:            # nobody looked for a very long time: the oldest are not kept
            self.t_done += (n - MAX_CATCH_UP) * self.interval_s
            n = MAX_CATCH_UP
        for c0 in range(0, n, 4096):
            m = min(4096, n - c0)
            starts = self.t_done + (c0 + np.arange(m)) * self.interval_s
            self._account(starts, np.maximum(self._reported(starts), 0.0))
        self.t_done += n * self.interval_s

    def _account(self, starts: np.ndarray, w: np.ndarray) -> None:
        dt = self.interval_s
        ends = starts + dt
        self.lifetime_j += float(w.sum()) * dt
        cut = float(ends[-1]) - 1.0 - 1e-9
        sel = ends > cut
        self.recent = [r for r in self.recent if r[0] > cut] + list(zip(ends[sel].tolist(), w[sel].tolist()))
        per_s = max(1, int(round(1.0 / dt)))
        if len(w) >= per_s:
            c = np.convolve(w, np.ones(per_s) / per_s, mode="valid")
            self.max_avg_w = max(self.max_avg_w, float(c.max()))
        if len(self.recent) >= per_s:          # the last second, also when intervals come one at a time
            self.max_avg_w = max(self.max_avg_w, sum(x for _, x in self.recent[-per_s:]) / per_s)
        if not self.active:
            return
        keep = starts >= self.t_start - 1e-9
        if self.t_stop_at is not None:
            keep &= ends <= self.t_stop_at + 1e-9
        if keep.any():
            ww, ee = w[keep], ends[keep]
            self.pmc += len(ww)
            self.sum_w += float(ww.sum())
            k = int(np.argmax(ww))
            if ww[k] > self.max_w or self.max_t is None:
                self.max_w, self.max_t = float(ww[k]), float(ee[k])
            idx = np.floor(ww / BIN_W).astype(np.int64)
            over = idx >= self.bins
            self.overflow += int(over.sum())
            np.add.at(self.counts, idx[~over], 1)
        if self.t_stop_at is not None and ends[-1] >= self.t_stop_at - 1e-9:
            self._stopped(self.t_stop_at)

    def _stopped(self, t: float) -> None:
        self.active = False
        self.smts = math.floor(t / self.interval_s + 1e-9) * self.interval_s

    # -- Set / Get Features 25h ------------------------------------------------------------------
    def set_measurement(self, action: int, pmts: int, smt_min: int, t: float) -> None:
        """ACT 1 starts (counters cleared, PMGN + 1), 0 stops. Raises ValueError for what the
        controller refuses (Invalid Field)."""
        if pmts != 0:
            raise ValueError(f"power measurement type {pmts} is not supported (only 0, NVM subsystem total)")
        if action == 1:
            if smt_min > self.msmt_min:
                raise ValueError(f"stop measurement time {smt_min} min exceeds MSMT {self.msmt_min}")
            self.update(t)
            self.pmgn = (self.pmgn + 1) & 0xFF
            self.active, self.smt_min, self.t_start, self.smts = True, smt_min, t, None
            self.t_stop_at = t + 60.0 * smt_min if smt_min else None
            self.pmc, self.sum_w, self.max_w, self.max_t, self.overflow = 0, 0.0, 0.0, None, 0
            self.counts[:] = 0
        elif action == 0:
            self.update(t)
            if self.active:
                self._stopped(t)
        else:
            raise ValueError(f"power measurement action {action} is reserved")

    def measurement_dword(self) -> int:
        return (1 if self.active else 0) | ((self.smt_min & 0xFFFF) << 16)

    # -- what the logs carry ---------------------------------------------------------------------
    def log(self, t: float) -> dict:
        """Log 25h's values (sim/tools/nvme_cli.py lays out the bytes)."""
        self.update(t)
        remaining = 0
        if self.active and self.t_stop_at is not None:
            remaining = int(math.ceil(max(0.0, self.t_stop_at - t) / 60.0))
        return {"pmgn": self.pmgn, "enabled": self.active, "estimated": self.estimated, "pmc": self.pmc,
                "smtr_min": remaining, "smts_ms": int(round(self.smts * 1000)) if self.smts is not None else 0,
                "nphds": self.bins, "phdoc": self.overflow,
                "aipwr_w": self.sum_w / self.pmc if self.pmc else 0.0, "mipwr_w": self.max_w if self.pmc else 0.0,
                "mipwrt_ms": int(round(self.max_t * 1000)) if self.max_t is not None and self.pmc else 0,
                "ipwrpe": self.error_pct, "counts": [int(c) for c in self.counts], "bin_w": BIN_W}

    def ipm_w(self, t: float) -> float:
        """SMART IPM: the mean of the interval measurements that ended in the last second."""
        self.update(t)
        w = [x for e, x in self.recent if e > t - 1.0]
        return sum(w) / len(w) if w else 0.0

    def olec_wh(self, t: float) -> int:
        self.update(t)
        return int(math.ceil(self.lifetime_j / 3600.0 - 1e-9))

    def ocp_fields(self, t: float) -> dict:
        """OCP C0h 260-269 as the virtual drive fills them: W, W and kWh (a third-party reading of the
        units; the header names none)."""
        self.update(t)
        return {"max_peak_power_capability": self.ocp_peak_w, "current_max_avg_power": int(math.ceil(self.max_avg_w)),
                "lifetime_power_consumed": int(math.ceil(self.lifetime_j / 3.6e6 - 1e-9))}
