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
NOISE_ROWS = 1 << 16      # the noise table: ~0.26 s of samples, 3 MB for three rails


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
        self._lsb = np.array([[r.v_lsb, r.i_lsb] for r in self.cfg.rails]).reshape(-1)
        self._offset_col = self.offset.reshape(-1, 1).astype(float)
        self._noise_key = None
        self._scale_key = None

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

    def _code_scale(self) -> np.ndarray:
        """Codes per true unit of each channel (a column), recomputed only when the temperatures change:
        sample runs a thousand times a second on 250 samples, where each numpy call's overhead counts."""
        key = (self.spec.board_temp_c, self.spec.t_ref_c)
        if self._scale_key != key:
            self._scale = (self.gains_now().reshape(-1) / self._lsb)[:, None]
            self._scale_key = key
        return self._scale

    def true_rails(self, t_utc: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """True (volts, amps) of every rail at the interposer, at host UTC instants: what a reference
        meter on the same rail sees, before any of the interposer's own errors."""
        x = self._true_rows(t_utc)
        return {r.name: (x[2 * k], x[2 * k + 1]) for k, r in enumerate(self.cfg.rails)}

    def _true_rows(self, t_utc: np.ndarray) -> np.ndarray:
        """The true volts and amps as rows (v0, i0, v1, i1, ...; 2 x rails by n), written in place:
        ``i x -droop + nominal`` is ``nominal - droop x i`` bit for bit. A switched-off rail
        (sim/ssd/power.py) shows the drive side's own volts where they are not NaN."""
        x = np.empty((2 * len(self.cfg.rails), len(t_utc)))
        amps = self.load.rail_currents(t_utc)
        nominal = getattr(self.load, "nominal_volts", ScriptedLoad.nominal_volts)
        forced = self.load.rail_volts(t_utc) if hasattr(self.load, "rail_volts") else {}
        neg_droop = -self.spec.droop_ohm
        for k, r in enumerate(self.cfg.rails):
            v, i = x[2 * k], x[2 * k + 1]
            i[...] = amps.get(r.name, 0.0)
            np.multiply(i, neg_droop, out=v)
            v += nominal.get(r.name, r.nominal_v)
            if r.name in forced:
                f = forced[r.name]
                np.copyto(v, f, where=~np.isnan(f))
        return x

    def _noise(self, n: int) -> np.ndarray:
        """White noise for n samples of every channel (2 rails x n, in codes): columns of a table of
        NOISE_ROWS drawn once, from a random column on (wrapping). The same distribution as a fresh draw
        per sample, at the cost of one slice: drawing 1.5 M normals a second was a fifth of a streaming
        rig's CPU. Two passes share noise only where their random starts overlap (about n / NOISE_ROWS)."""
        sp = self.spec
        key = (sp.noise_v_lsb, sp.noise_i_lsb)
        if self._noise_key != key:
            sigma = np.tile([sp.noise_v_lsb, sp.noise_i_lsb], len(self.cfg.rails))[:, None]
            self._noise_table = self.rng.standard_normal((len(sigma), NOISE_ROWS)) * sigma
            self._noise_key = key
        start = int(self.rng.integers(NOISE_ROWS))
        if start + n <= NOISE_ROWS:
            return self._noise_table[:, start:start + n]
        return np.take(self._noise_table, np.arange(start, start + n), axis=1, mode="wrap")

    def sample(self, t_utc: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Codes (n x stride, int16) for samples at host UTC times, and the true power per rail (W).
        Every channel at once, channel-major (one row of n per channel: numpy's loops run along the
        samples): ~20 numpy calls a pass, not a set per channel. The true volts and amps are
        true_rails' rows, scaled into codes in place, and a digital lane that is constant over the pass
        (the usual case) is one value, not four arrays."""
        n = len(t_utc)
        rails = self.cfg.rails
        raw = np.empty((n, self.stride), dtype=np.int16)
        x = self._true_rows(t_utc)
        p = x[0::2] * x[1::2]
        truth = {r.name: p[k] for k, r in enumerate(rails)}
        # codes = true x (gain / lsb) + offset + noise
        x *= self._code_scale()
        x += self._offset_col
        x += self._noise(n)
        np.rint(x, out=x)
        np.minimum(x, 32767, out=x)          # np.clip's result without its Python wrapper
        np.maximum(x, -32768, out=x)
        raw[:, :-1] = x.T
        raw[:, -1] = self._digital(t_utc)
        return raw, truth

    def _digital(self, t_utc: np.ndarray):
        """The digital lane: PERST_BIT while PERST# is released, plus ACTIVITY_BIT while the LED is lit;
        one int when it does not change over the samples."""
        act = getattr(self.load, "activity", None)
        perst = getattr(self.load, "perst_asserted", None)      # the line high (released) unless the board drives it
        held = perst(t_utc) if perst else None
        lit = act(t_utc) if act else None
        if (held is None or held.dtype == bool) and (lit is None or lit.dtype == bool):
            if (held is None or not held.any()) and (lit is None or lit.all() or not lit.any()):
                return PERST_BIT + (ACTIVITY_BIT if lit is not None and len(lit) and lit[0] else 0)
        return (np.where(held, 0, PERST_BIT).astype(np.int16) if perst else PERST_BIT) + \
            (lit.astype(np.int16) * ACTIVITY_BIT if act else 0)
