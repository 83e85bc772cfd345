"""A sweep on the virtual client drive with APST kept (issue 37), shared by the simulator tier's
tests/test_apst_transitions.py and the browser tier's tests/test_web_browser.py."""
from __future__ import annotations

import dataclasses

from powerrig.results import ResultStore
from powerrig.sim import rig as simrig
from powerrig.sim.ssd.client import request
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import parse

# one workload step per state: the set-feature, 0.6 s idle (APST to PS3 100 ms after the drive entered
# the state), the workload (4 KiB reads, never 100 ms without I/O: no move while it runs), then idle again
# until the capture ends (APST to PS3 100 ms after the last I/O). PS3 -> PS4 needs 2 s: not reached.
PLAN = '''name = "{name}"
power_states = {states}
idle_steps = false
apst = "keep"
[rig]
port = "rig:{rig}"
interval_us = 100
[drive]
serial = "VCL0000000000001"
[timing]
settle_s = 0.2
idle_s = 0.6
measure_s = 0.6
[[workload]]
name = "r4k"
rw = "randread"
bs = "4k"
iodepth = 2
'''


def told_itpt(real, entry: int, ms: int):
    """NvmeCli.get_apst as the host is told it: the table's ``entry`` (a power state) moves after ``ms``,
    while the drive keeps its own (the virtual client drive moves after 100 ms)."""
    def get_apst(self, dev):
        got = real(self, dev)
        e = list(got.entries)
        e[entry] = dataclasses.replace(e[entry], idle_time_ms=ms)
        return dataclasses.replace(got, entries=tuple(e))
    return get_apst


def sweep_on_client_apst(tmp_path, name: str, states: list[int]) -> tuple[ResultStore, int, list[dict]]:
    """The plan run on a virtual client drive of its own: the store (tmp_path/r.sqlite), the run, and the
    drive's own APST moves (its truth)."""
    st = simrig.start("client-apst", owned=True)
    try:
        store = ResultStore(tmp_path / "r.sqlite")
        run = Sweep(parse(PLAN.format(name=name, states=states, rig=st["id"]), "p.toml"), store,
                    tmp_path / "out").run()
        truth = request(st["endpoint"], {"op": "apst_truth", "dev": st["controller"]})["transitions"]
    finally:
        simrig.stop(st["id"])
    return store, run, truth
