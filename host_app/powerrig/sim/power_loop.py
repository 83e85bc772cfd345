"""The firmware's power actions, the virtual drive and the host's writes on one stepped sample clock, in
one process: thousands of power-loss cycles in minutes (benchmarks/bench_power_loss.py).

Why not through the pty: a cycle there is tens of milliseconds of real time plus the link's latency
(and the starved simulator thread on a shared host); here the clock jumps. What runs is the same:
powerrig_fw.actions.PowerActions plans and fires the edges on a SwitchedOutputs board, the PoweredDrive
loses what its PLP flush cannot save, the FrontEnd turns the rails into ADC codes, and the host side
(the analysis, the verify) sees only codes and read-back tokens. tests/test_power_sim.py runs cycles
through the real pty path too.

Host I/O runs inside the clock: ``advance_to(i)`` writes every ``write_every`` samples up to sample i
while the drive is ready, so a board that waits for an edge's sample lets the writes before it land
first, as on a rig.
"""
from __future__ import annotations

import numpy as np

from powerrig.core.rails import rails as default_rails
from powerrig.interposer.client import Burst
from powerrig.interposer.frames import fw  # noqa: F401  (puts firmware/ on sys.path)
from powerrig.sim.interposer.frontend import FrontEnd
from powerrig.sim.ssd.power import PoweredDrive, PowerSpec, SteadyLoad, SwitchedOutputs
from powerrig_fw.actions import PowerActions

T0 = 1.8e9          # UTC of sample 0 (any fixed instant)


class _Device:
    """What PowerActions needs of powerrig_fw.device.Device: the board, notices, the host's last word."""

    def __init__(self, board, clock):
        self.board = board
        self.clock = clock
        self.notices: list[dict] = []

    @property
    def rx_index(self) -> int:          # the host talks all the time here: the watchdog stays quiet
        return self.clock()

    def notice(self, doc: dict) -> None:
        self.notices.append(doc)


class SteppedRig:
    def __init__(self, spec: PowerSpec | None = None, seed: int = 1, write_every: int = 5):
        self.period_s = default_rails().sample_period_us * 1e-6
        self.index = 10_000
        self.io_index = self.index
        self.write_every = write_every
        self.drive = PoweredDrive(SteadyLoad(), spec)
        self.frontend = FrontEnd(self.drive, seed=seed)
        self.board = SwitchedOutputs(self.drive, lambda: self.index, self.advance_to, self.utc_of_index,
                                     lambda: self.io_index)
        self.device = _Device(self.board, lambda: self.index)
        self.actions = PowerActions(self.device)
        self.description = {"rails": [{"name": r.name, "v_lsb": r.v_lsb, "i_lsb": r.i_lsb}
                                      for r in self.frontend.cfg.rails],
                            "calibration": self.frontend.factory_calibration()}
        self.acked: dict[int, int] = {}          # the host's record: lba -> token the drive acknowledged
        self.next_lba = 0
        self.rng = np.random.default_rng(seed)

    def utc_of_index(self, index):
        return T0 + np.asarray(index, dtype=np.float64) * self.period_s

    def advance_to(self, index: int) -> None:
        """The clock to ``index``; the host's writes in between, each acknowledged while the drive is ready."""
        ready = self.drive.ready_at()
        first = -(-self.io_index // self.write_every) * self.write_every
        for i in range(first, index, self.write_every):
            t = float(self.utc_of_index(i))
            if ready is not None and t >= ready:
                lba = self.next_lba
                self.next_lba += 1
                self.drive.cache.write(lba, lba + 1, t)       # token: anything the read-back can check
                self.acked[lba] = lba + 1
        self.io_index = max(self.io_index, index)
        self.index = max(self.index, index)

    def command(self, msg: dict) -> dict:
        return self.actions.command(msg)

    def run(self, actions: list[dict], max_step: int = 400) -> list[dict]:
        """Schedule a sequence and run the clock (passes of 1..max_step samples) until every edge is
        reported; the edges [{output, level, requested, index}]."""
        self.command({"op": "sequence", "actions": actions})
        edges: list[dict] = []
        while len(edges) < len(actions):
            self.advance_to(self.index + int(self.rng.integers(1, max_step + 1)))
            self.actions.poll()
            while self.device.notices:
                doc = self.device.notices.pop(0)
                if doc.get("event") == "power":
                    edges.extend(doc["edges"])
        return edges

    def burst(self, first: int, n: int) -> Burst:
        """Raw codes of samples first..first+n-1, as the interposer's burst uploads them."""
        raw, _truth = self.frontend.sample(self.utc_of_index(first + np.arange(n)))
        return Burst(first, raw, self.description)

    def wait_ready(self) -> None:
        """Until the controller answers again (the enumeration delay), no writes meanwhile."""
        ready = self.drive.ready_at()
        i = int(np.ceil((ready - T0) / self.period_s)) + 1
        self.io_index = max(self.io_index, i)
        self.index = max(self.index, i)

    def read_back(self) -> tuple[dict[int, int], dict[int, int | None]]:
        """What the drive returns now for every acknowledged write, then the host's record cleared."""
        out = {lba: self.drive.cache.read(lba) for lba in self.acked}
        acked, self.acked = self.acked, {}
        return acked, out
