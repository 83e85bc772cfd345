"""labgrid integration (the optional extra ``powerrig[lab]``): a rig slot as a labgrid resource and
a driver that hands powerrig what it needs to run there. Nothing in the base package imports this:
labgrid brings ``pyserial-labgrid``, a fork that replaces pyserial, so it lives in its own
environment. Load it in a labgrid env YAML with ``imports: [powerrig.lab]``."""
from __future__ import annotations

from powerrig.lab import serial_fork

serial_fork.check()         # loudly, before labgrid runs on plain pyserial's files

from powerrig.lab.driver import PowerrigDriver  # noqa: E402
from powerrig.lab.resource import PowerrigSlot  # noqa: E402

__all__ = ["PowerrigDriver", "PowerrigSlot"]
