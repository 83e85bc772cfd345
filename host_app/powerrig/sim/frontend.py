"""Virtual analog front end: true rail voltage and current -> ADC codes, as the real board sees them.

What it adds to the truth, each a real error source of the interposer: IR droop on the rail, white
noise on every channel, quantization to 16-bit codes, per-channel gain and offset error (fixed per
board, i.e. per seed), each gain's temperature coefficient against the board temperature (what the
TMP117 between the shunts reports; the parts' drift, hw/error_budget.py), and clipping at full scale. The truth is kept so tests can measure how much
of it the pipeline gives back.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powerrig.core.rails import RailConfig, rails as default_rails

ACTIVITY_BIT, PERST_BIT, MARKER_BIT = 1, 2, 4


class ScriptedLoad:
    """A stand-in drive until a virtual SSD is plugged in: idle, then bursts of activity.

    A 4 s cycle on the 12 V rail: 1.5 s idle at 5.0 W, 2 s active at 12 W with a 20 W, 200 us
    spike every 50 ms, 0.5 s back to idle. 3.3 Vaux draws a steady 0.12 A; 5 V draws nothing.
    """

    nominal_volts = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}
    period_s = 4.0

    def rail_currents(self, t: np.ndarray) -> dict[str, np.ndarray]:
        ph = np.mod(t, self.period_s)
        active = (ph >= 1.5) & (ph < 3.5)
        w = np.where(active, 12.0, 5.0)
        spike = active & (np.mod(ph - 1.5, 0.05) < 200e-6)
        w = np.where(spike, 20.0, w)
        return {"12V": w / 12.0, "3V3": np.full_like(t, 0.12), "5V": np.zeros_like(t)}

    def activity(self, t: np.ndarray) -> np.ndarray:
        ph = np.mod(t, self.period_s)
        return (ph >= 1.5) & (ph < 3.5)


@dataclass
class FrontEndSpec:
    noise_v_lsb: float = 1.2       # rms, in codes
    noise_i_lsb: float = 2.5
    gain_error: float = 0.002      # each channel's gain is off by up to this fraction (fixed per seed; hw/error_budget.py)
    offset_codes: int = 12         # each channel's offset is off by up to this many codes
    droop_ohm: float = 0.008       # connector + trace resistance between slot and drive
    tc_ppm: float = 14.5           # each gain drifts by up to this many ppm/K (shunt 10 + amp 2.5 + ref 2)
    board_temp_c: float = 25.0     # the board's temperature now ...
    t_ref_c: float = 25.0          # ... and at the factory calibration


class FrontEnd:
    def __init__(self, load, seed: int = 1, spec: FrontEndSpec | None = None, cfg: RailConfig | None = None):
        self.load = load
        self.cfg = cfg or default_rails()
        self.spec = spec or FrontEndSpec()
        self.rng = np.random.default_rng(seed)
        n = len(self.cfg.rails)
        board = np.random.default_rng(seed + 1000)   # board errors do not depend on the noise stream
        self.gain = 1.0 + board.uniform(-1, 1, size=(n, 2)) * self.spec.gain_error
        self.offset = np.round(board.uniform(-1, 1, size=(n, 2)) * self.spec.offset_codes).astype(np.int64)
        self.tc = board.uniform(-1, 1, size=(n, 2)) * self.spec.tc_ppm * 1e-6    # per K
        self.stride = 2 * n + 1

    def factory_calibration(self) -> dict:
        """What a factory calibration against a reference meter finds for this board's errors."""
        return {"version": 1, "source": "simulated factory calibration", "t_ref_c": self.spec.t_ref_c,
                "rails": {r.name: {"v_offset": int(self.offset[k, 0]), "i_offset": int(self.offset[k, 1]),
                                   "v_gain": float(1.0 / self.gain[k, 0]), "i_gain": float(1.0 / self.gain[k, 1]),
                                   "v_tc": float(-self.tc[k, 0] * 1e6), "i_tc": float(-self.tc[k, 1] * 1e6)}
                          for k, r in enumerate(self.cfg.rails)}}

    def gains_now(self) -> np.ndarray:
        """Each channel's gain at the board's present temperature."""
        return self.gain * (1.0 + self.tc * (self.spec.board_temp_c - self.spec.t_ref_c))

    def true_rails(self, t_utc: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """True (volts, amps) of every rail at the interposer, at host UTC instants: what a reference
        meter on the same rail sees, before any of the interposer's own errors."""
        n = len(t_utc)
        amps = self.load.rail_currents(t_utc)
        nominal = getattr(self.load, "nominal_volts", ScriptedLoad.nominal_volts)
        # a switched-off rail (sim/power.py) shows the drive side's own volts where they are not NaN
        forced = self.load.rail_volts(t_utc) if hasattr(self.load, "rail_volts") else {}
        out = {}
        for r in self.cfg.rails:
            i_true = np.asarray(amps.get(r.name, np.zeros(n)), dtype=float)
            v = nominal.get(r.name, r.nominal_v) - self.spec.droop_ohm * i_true
            if r.name in forced:
                v = np.where(np.isnan(forced[r.name]), v, forced[r.name])
            out[r.name] = (v, i_true)
        return out

    def sample(self, t_utc: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Codes (n x stride, int16) for samples at host UTC times, and the true power per rail (W)."""
        n = len(t_utc)
        raw = np.empty((n, self.stride), dtype=np.int16)
        truth = {}
        sp = self.spec
        rails_now = self.true_rails(t_utc)
        gain = self.gains_now()
        for k, r in enumerate(self.cfg.rails):
            v_true, i_true = rails_now[r.name]
            truth[r.name] = v_true * i_true
            v = v_true / r.v_lsb * gain[k, 0] + self.offset[k, 0] + self.rng.normal(0, sp.noise_v_lsb, n)
            i = i_true / r.i_lsb * gain[k, 1] + self.offset[k, 1] + self.rng.normal(0, sp.noise_i_lsb, n)
            raw[:, 2 * k] = np.clip(np.rint(v), -32768, 32767)
            raw[:, 2 * k + 1] = np.clip(np.rint(i), -32768, 32767)
        act = getattr(self.load, "activity", None)
        perst = getattr(self.load, "perst_asserted", None)      # the line high (released) unless the board drives it
        dig = (np.where(perst(t_utc), 0, PERST_BIT).astype(np.int16) if perst else PERST_BIT) + \
            (act(t_utc).astype(np.int16) * ACTIVITY_BIT if act else 0)
        raw[:, -1] = dig
        return raw, truth
