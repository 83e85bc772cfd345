"""When a connection's clock pings go: often while the clock fit settles, a short burst every few
seconds after that.

Each ping costs the link's reader one to three wake-ups to read its reply the moment it comes (about
a third of a 100 us recording's reader at 10 a second, docs/scale.md "The fifth pass"). The fit needs
many pings early (NTP's iburst: the first 30 s settle the drift within 1 ppm) and later keeps only
the fastest ping of each time bin (one second or longer, ``powerrig.core.clock``). Once its bound is
tight, ``burst_pings`` back to back every ``burst_every`` seconds give one bin in each the best of
ten (the same pings spread evenly left each bin the best of two or three, and the looser extremes
tilted the fitted drift by ~0.2 ppm). A bound that widens again (a loaded host, a clock that wanders)
brings the steady faster rate back. Pure logic on given times and bounds, so it is tested without a clock.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

TIGHT_US = 100.0        # the fit's bound (ClockModel.residual_us) within this: thin out (docs/link.md's p99 target)
LOOSE_US = 200.0        # beyond this again: back to the steady rate (a gap, so the rate does not flap)
CHECK_S = 5.0           # the bound is looked at this often: a refit over 15,000 pings is not free
WATCHDOG_SHARE = 0.25   # the board's power watchdog armed: at least four pings inside its timeout


@dataclass
class PingSchedule:
    """Seconds (device time) from one clock ping to the next, given how long the connection has been
    open and the fit's bound. ``floor``: the board's minimum ping interval (describe
    "ping_interval_min_us"), never undercut; ``watchdog_s``: the power watchdog's timeout while armed,
    which the pings feed (Interposer.power_enable), never outwaited. ``answered`` is told of every
    ping's end (reply or error): a burst counts them."""
    burst_s: float = 30.0
    burst_interval: float = 0.01
    interval: float = 0.1            # after the first burst_s, until the bound is tight
    burst_every: float = 5.0         # once it is: a burst this often ...
    burst_pings: int = 10            # ... of this many, each sent when the last one has ended
    floor: float = 0.0
    watchdog_s: float | None = None
    settled: bool = False
    _checked: float = -math.inf
    _left: int = 0                   # pings of the current (or next) burst not yet ended
    _burst_at: float = -math.inf     # when it begins

    def next_s(self, elapsed_s: float, bound_us: Callable[[], float | None]) -> float:
        """The interval to the next ping, ``elapsed_s`` after the connection opened; ``bound_us()``
        gives the fit's bound in microseconds (None before a fit), asked at most every CHECK_S.
        Asking again without a ping ending in between gives the same answer (the link's reader asks
        while it paces)."""
        if elapsed_s < self.burst_s:
            every = self.burst_interval
        else:
            if elapsed_s - self._checked >= CHECK_S:
                self._checked = elapsed_s
                self._look(bound_us())
            if not self._thinning():
                every = self.interval
            else:
                if self._left <= 0:         # the last burst is over (or none began): set the next one
                    self._burst_at = max(self._burst_at + self.burst_every, elapsed_s)
                    self._left = self.burst_pings
                every = max(0.0, self._burst_at - elapsed_s)      # 0: within the burst
        if self.watchdog_s is not None:
            every = min(every, self.watchdog_s * WATCHDOG_SHARE)
        return max(every, self.floor)

    def answered(self) -> None:
        """A ping ended (its reply, or its error): one fewer left in the burst."""
        self._left = max(0, self._left - 1)

    def _thinning(self) -> bool:
        """Settled, and the bursts are no more pings a second than ``interval`` asks for."""
        return self.settled and self.burst_every >= self.burst_pings * self.interval

    def _look(self, bound: float | None) -> None:
        if bound is None or not math.isfinite(bound):
            return
        if not self.settled and bound <= TIGHT_US:
            self.settled = True
        elif self.settled and bound > LOOSE_US:
            self.settled = False
            self._left = 0
