"""A sweep's margin steps: the drive run at 12 V from 10.8 to 13.2 V (or 3.3 Vaux within its +-9 %),
throughput and power beside each voltage (issue 29).

Why a lab supply: the interposer switches the rails but cannot set their voltage; a programmable supply
(an N6705C-class analyzer, the one calibrate/validate drive through pyvisa) feeds the slot instead. Per
voltage point (one sweep step):

1. the guard's permit for "margin" on the drive (powerrig.dut.destructive.margin_permit);
2. the supply channel feeding the rail is set to the point's voltage, current-limited; ``settle_s``;
3. the interposer's own reading of the rail must agree within ``agree_pct``: otherwise the supply does
   not feed the slot (a wrong channel, a supply wired elsewhere) and the step fails, nothing run;
4. the plan's workload runs as in any step (throughput, per-rail power from the capture);
5. always, also on an error or Ctrl-C: the rail goes back to its nominal voltage (``finally``).

docs/power-loss.md#margining.
"""
from __future__ import annotations

import logging
import threading
import time

import numpy as np

from powerrig.core.errors import PowerrigError
from powerrig.instruments import open_analyzer
from powerrig.sweep.measure import row

logger = logging.getLogger(__name__)
READ_S = 0.5              # the interposer's reading that must agree with the set point
# Margining limits: 12 V from 10.8 to 13.2 V (+-10 %, issue 29; past the CEM's +5 %/-8 % operating
# tolerance on purpose: a margin test shows how far outside it the drive still works) and 3.3 Vaux
# within its +-9 % (PCIe CEM). A plan asking for more is refused: it could damage the drive.
MARGIN_LIMITS = {"12V": (10.8, 13.2), "3V3": (3.003, 3.597)}
MARGIN_NOMINAL = {"12V": 12.0, "3V3": 3.3}
DEFAULT_SUPPLY_CHANNELS = (("12V", 1), ("3V3", 2))


class MarginError(PowerrigError):
    """The supply does not feed the slot, or cannot be set; the rail is back at nominal."""


class RailVolts:
    """The interposer's mean voltage of one rail over the blocks it received since ``reset`` (fed from
    the step recorder's on_block: the capture keeps streaming while the supply moves)."""

    def __init__(self, rail: str):
        self.rail = rail
        self._lock = threading.Lock()
        self._sum, self._n = 0.0, 0

    def feed(self, block) -> None:
        if self.rail not in block.rails:
            return
        v = np.asarray(block.v)[:, block.rails.index(self.rail)][np.asarray(block.valid, dtype=bool)]
        v = v[np.isfinite(v)]
        with self._lock:
            self._sum += float(v.sum())
            self._n += len(v)

    def reset(self) -> None:
        with self._lock:
            self._sum, self._n = 0.0, 0

    def mean(self, wait_s: float = READ_S, timeout: float = 10.0) -> float | None:
        """The mean after at least ``wait_s`` of new readings (None: none came within ``timeout``)."""
        time.sleep(wait_s)
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._n:
                    return self._sum / self._n
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)


def supply_resource(spec, rig_info: dict) -> str:
    """The VISA resource of the supply the plan names ("reference": the virtual rig's simulated N6705C)."""
    if spec.supply == "reference":
        if not rig_info.get("reference"):
            raise MarginError('rig.supply = "reference": this rig has no simulated supply (a virtual rig prints '
                              "it in `powerrig sim list`)")
        return rig_info["reference"]
    return spec.supply


def channel_of(spec, rail: str) -> int:
    return dict(spec.supply_channels or DEFAULT_SUPPLY_CHANNELS).get(rail) or \
        dict(DEFAULT_SUPPLY_CHANNELS)[rail]


class MarginPoint:
    """One voltage point: ``apply`` sets and checks it, ``restore`` brings the rail back to nominal.
    Used as ``with MarginPoint(...) as p: p.apply(); run the workload`` so nominal returns however it ends."""

    def __init__(self, margin, volts: float, resource: str, channel: int, reading: RailVolts, emit=None):
        self.m, self.volts, self.resource, self.channel, self.reading = margin, volts, resource, channel, reading
        self.emit = emit or (lambda text: None)
        self.measured_v: float | None = None
        self._ref = None
        self._changed = False

    def __enter__(self) -> "MarginPoint":
        self._ref = open_analyzer(self.resource, "@py", f"margin {self.m.name} (it feeds the slot's {self.m.rail})")
        return self

    def apply(self) -> float:
        """Set the rail, settle, and return the interposer's reading; MarginError if it disagrees. A
        channel that does not read the rail's nominal first is refused before it is changed (a wrong
        channel number must not move another rail)."""
        nominal = MARGIN_NOMINAL[self.m.rail]
        before, _a = self._ref.measure(self.channel)
        if abs(before - nominal) > self.m.agree_pct / 100 * nominal:
            raise MarginError(f"margin {self.m.name}: supply channel {self.channel} reads {before:.3f} V, not "
                              f"{self.m.rail}'s nominal {nominal:g} V: it does not feed the slot's {self.m.rail}; "
                              "fix rig.supply_channels (nothing was changed)")
        self._changed = True
        self._ref.supply(self.channel, self.volts, self.m.current_limit_a)
        time.sleep(self.m.settle_s)
        self.reading.reset()
        got = self.reading.mean()
        if got is None:
            raise MarginError(f"margin {self.m.name}: the interposer gave no {self.m.rail} reading after the supply "
                              f"was set to {self.volts:g} V")
        if abs(got - self.volts) > self.m.agree_pct / 100 * self.volts:
            raise MarginError(f"margin {self.m.name}: the supply ({self.resource} channel {self.channel}) was set to "
                              f"{self.volts:g} V but the interposer reads {got:.3f} V on {self.m.rail}: the supply does "
                              "not feed the slot; check its wiring and rig.supply_channels")
        self.measured_v = got
        self.emit(f"margin {self.m.name}: {self.m.rail} set {self.volts:g} V, the interposer reads {got:.3f} V")
        return got

    def __exit__(self, *exc) -> None:
        """Nominal again, whatever happened (the supply keeps feeding the slot)."""
        try:
            if self._changed:
                self._ref.supply(self.channel, MARGIN_NOMINAL[self.m.rail], self.m.current_limit_a)
        except PowerrigError as e:
            logger.error("margin %s: restoring %s to %g V failed: %s; set the supply by hand", self.m.name,
                         self.m.rail, MARGIN_NOMINAL[self.m.rail], e)
            if exc[0] is None:
                raise
        finally:
            self._ref.close()


def measurements(m, set_v: float, measured_v: float | None, during_v: float | None) -> list[dict]:
    """The point's figures beside the step's throughput and per-rail power: the set and measured volts."""
    phase = f"margin:{m.name}"
    return [row("margin.volts_set", phase, set_v, "V", notes=m.rail),
            row("margin.volts_measured", phase, during_v if during_v is not None else measured_v, "V",
                notes=m.rail)]
