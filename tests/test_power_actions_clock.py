"""The firmware's power-action scheduler against a sample clock that moves while it works (as the
DMA-derived one does on the board): an action "after 0 us" is this sample, never "already past"."""
from __future__ import annotations

import types

import pytest

from powerrig_fw.actions import PowerActions


class MovingClockBoard:
    """Outputs that record their level, and a sample clock that advances on every read."""

    def __init__(self):
        self.t = 1000
        self.outputs = {"12V": lambda level: (0, level)}

    def sample_now(self):
        self.t += 3
        return self.t

    def fire(self, plan, n):
        pass


def test_a_first_action_after_0_us_is_scheduled_on_a_moving_clock():
    acts = PowerActions(types.SimpleNamespace(board=MovingClockBoard()))
    acts.command({"op": "enable", "watchdog_ms": 1000})
    out = acts.command({"op": "sequence", "actions": [{"output": "12V", "level": 0, "after_us": 0},
                                                      {"output": "12V", "level": 1, "after_us": 400}]})
    first, second = out["scheduled"]
    assert first["index"] == out["now"] and second["index"] - first["index"] == 100


def test_an_action_at_a_past_sample_is_still_refused():
    acts = PowerActions(types.SimpleNamespace(board=MovingClockBoard()))
    acts.command({"op": "enable", "watchdog_ms": 1000})
    with pytest.raises(ValueError, match="already past"):
        acts.command({"op": "sequence", "actions": [{"output": "12V", "level": 0, "at": 5}]})
