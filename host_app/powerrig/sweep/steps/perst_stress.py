"""[[perst_stress]]: PERST# asserted for off_ms (default a random 10..100 ms) under verified writes: a reset
under load, power kept, so nothing acknowledged may be lost (docs/power-loss.md). [[power_loss]]'s keys."""
from __future__ import annotations

from powerrig.sweep.steps.base import register
from powerrig.sweep.steps.power_loss import PowerLossKind


@register
class PerstStressKind(PowerLossKind):
    name = table = "perst_stress"
    pulse = "perst"
    default_off_ms = (10.0, 100.0)
    order = 210
