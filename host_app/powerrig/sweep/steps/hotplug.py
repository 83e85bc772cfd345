"""[[hotplug]]: a surprise removal (PERST#, 12 V, 3.3 V off) for off_ms (default 500), then an insertion with
the spec's timing (power, PERST# released 100 ms later), the link read after (docs/power-loss.md).
[[power_loss]]'s keys."""
from __future__ import annotations

from powerrig.sweep.steps.base import register
from powerrig.sweep.steps.power_loss import PowerLossKind


@register
class HotplugKind(PowerLossKind):
    name = table = "hotplug"
    pulse = "hotplug"
    default_off_ms = (500.0, 500.0)
    order = 220
