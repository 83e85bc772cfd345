"""A sweep's power-loss and PERST# stress steps: cycles of verified writes, each cut (or reset) by the
interposer (issue 29).

Why a step of its own: a drive that acknowledges a write promises it; the only proof it keeps the
promise through a surprise power loss is to cut the power while it writes, bring it back, and read
back everything it acknowledged, many times. One cycle:

1. fio writes crc32c verify headers sequentially with a seed of the cycle's own (``randseed``), so a
   block an earlier cycle left behind fails the verify like one never written;
2. once fio's status shows the writes flowing, the interposer cuts 12 V ``cut_ms`` later (a chosen
   point, or a random one in [from, to]) and restores it ``off_ms`` after that, both edges on their
   raw sample (firmware/powerrig_fw/actions.py); a raw burst around the restore holds the cut too;
3. nvme-cli polls the controller until it answers (power-on to controller ready);
4. one block read with fio: power-on to the first I/O;
5. fio's verify-state flow (powerrig.dut.verify) classifies every bad block: acknowledged and lost
   (the drive broke its promise) or in flight at the cut (never promised).

A PERST# stress step ([[perst_stress]]) is the same cycle with PERST# asserted for ``off_ms`` (a
random 10..100 ms by default) instead of the cut: the drive keeps power, so no acknowledged write may
be lost either, and power-on to ready becomes reset release to ready; there is no burst (no inrush).
A hot-plug step ([[hotplug]]) removes the drive by surprise (PERST#, 12 V and 3.3 Vaux off at once)
and inserts it ``off_ms`` later with the CEM's timing (:func:`pulse`); ready and first I/O count from
PERST#'s release, and the PCIe link's speed and width are read from sysfs after.

The cut is a planned power cycle: it is on the step's timeline as a NOTE "power cycle" (the capture
shows the rails falling), and only blocks fio's verify finds wrong are ever counted as data loss.
The session's permit comes from the one guarded door (powerrig.dut.destructive.power_session);
writes pass the drive guard each cycle (Fio.run). docs/power-loss.md.
"""
from __future__ import annotations

import json
import logging
import math
import threading
import time
import zlib
from pathlib import Path

import numpy as np

from powerrig.analysis import power_events
from powerrig.core import owned
from powerrig.core.errors import PowerrigError
from powerrig.core.timeline import NOTE, Event
from powerrig.dut import destructive, verify
from powerrig.dut.fio import FioJob, FioPlan, complete_documents
from powerrig.dut.sysfs import link as sysfs_link
from powerrig.sweep.measure import row

logger = logging.getLogger(__name__)
PERIOD_S = 4e-6                 # one raw sample (rails_default.SAMPLE_PERIOD_US)
EDGE_NAMES = {("12V", 0): "12 V off", ("12V", 1): "12 V on", ("3V3", 0): "3.3 Vaux off", ("3V3", 1): "3.3 Vaux on",
              ("PERST", 1): "PERST# asserted", ("PERST", 0): "PERST# released",
              ("PWRDIS", 1): "PWRDIS asserted", ("PWRDIS", 0): "PWRDIS released"}   # an edge in words


def edge_name(edge: dict) -> str:
    return EDGE_NAMES.get((edge["output"], edge["level"]), f"{edge['output']} -> {edge['level']}")
BURST_CAPACITY = 16384          # samples the board's burst RAM holds (firmware burst.DEFAULT_CAPACITY)
BURST_POST = 1000               # 4 ms after the restore: the inrush settles in a few hundred us
BURST_WAIT_S = 20.0             # beyond the restore's time: a starved virtual rig reads its samples late
FLOW_TIMEOUT_S = 60.0           # fio must show writes flowing within this (its set-up included)
WRITE_RUNTIME_S = 120.0         # fio's cap on a cycle's writes (the cut ends them long before)
WATCHDOG_MS = 5000              # the interposer restores power if this host goes silent this long
KEEP_OFFSETS = 64               # lost / in-flight offsets kept per cycle in the step's cycle log
PVPERL_US = 100_000             # PCIe CEM T_PVPERL: power stable to PERST# released, at least 100 ms
NOTE_NAMES = {"cut": "power cycle", "perst": "PERST# assertion", "hotplug": "hot-plug"}


def pulse(kind: str, at_us: int, off_us: int) -> list[dict]:
    """The interposer's sequence of one cycle: a 12 V cut and restore; PERST# asserted and released;
    or a surprise removal (PERST#, 12 V and 3.3 Vaux off together) and an insertion with the CEM's
    order (3.3 Vaux and 12 V on, PERST# released T_PVPERL later)."""
    if kind == "cut":
        return [{"output": "12V", "level": 0, "after_us": at_us}, {"output": "12V", "level": 1, "after_us": off_us}]
    if kind == "perst":
        return [{"output": "PERST", "level": 1, "after_us": at_us}, {"output": "PERST", "level": 0, "after_us": off_us}]
    return [{"output": "PERST", "level": 1, "after_us": at_us}, {"output": "12V", "level": 0},
            {"output": "3V3", "level": 0}, {"output": "3V3", "level": 1, "after_us": off_us},
            {"output": "12V", "level": 1}, {"output": "PERST", "level": 0, "after_us": PVPERL_US}]


ATTEMPT_STRIDE = 1 << 17         # > the most cycles a step has (plan: 1..100000)


def cycle_seed(seed: int, step_key: str, k: int, attempt: int = 1) -> int:
    """The cycle's fio randseed (and its random points'): new per cycle and per step (its key names the
    table, the name and the repetition), the same when the run is reproduced from what it wrote. A seed
    an earlier cycle used would let a block that cycle wrote pass for this one's (the headers would be
    the same): so a redone step (``attempt`` 2, 3, ... after the interposer was lost mid-step, or a
    cool-down retry) draws seeds no earlier attempt of the step used (each attempt its own block of
    ATTEMPT_STRIDE seeds), and each cycle records its seed and attempt (issue 41 item 6)."""
    return (seed * 1000003 + zlib.crc32(step_key.encode()) + (attempt - 1) * ATTEMPT_STRIDE + k + 1) % 2**32


def run_sequence(dev, actions: list[dict], timeout_s: float) -> tuple[list[dict], object, float]:
    """Send a timed sequence to the interposer (its session enabled) and wait for its executed edges:
    (edges, utc, round trip s), where ``utc(index)`` is a sample index in host UTC (the reply's "now"
    sample placed mid round trip, so to within half of it). The sweep's cycles and the desktop app's
    power panel place their edges on the timeline with it."""
    t_send = time.time()
    reply = dev.power_sequence(actions)
    t_recv = time.time()
    edges = dev.power_edges(len(actions), timeout=timeout_s)
    t_mid = (t_send + t_recv) / 2

    def utc(index):
        return t_mid + (index - reply["now"]) * PERIOD_S
    return edges, utc, t_recv - t_send


def burst_pre(off_us: int) -> int:
    """Samples the burst keeps before its trigger: the off time and 4 ms before the cut. The firmware
    lets the trigger fire only once that many samples came after arming (the window is always whole),
    so a cut sooner than ``burst_pre(off_us)`` samples after the sequence is sent misses its burst."""
    return min(BURST_CAPACITY - BURST_POST, math.ceil(off_us * 1e-6 / PERIOD_S) + 1000)


def arm_burst(dev, off_us: int, trigger_w: float, timeout: float):
    """A raw burst triggered by the restore's inrush (12 V above ``trigger_w``), with the off time (and
    the cut) before it, taken on a thread and armed on the device before this returns; hand the result
    to :func:`burst_figures`. It can miss (the board dropped samples just before the restore, so the
    ring lacks its pre-trigger history): the figures are then None, with why."""
    pre = burst_pre(off_us)
    got: dict = {}
    armed = threading.Event()

    def take():
        try:
            got["burst"] = dev.burst(pre=pre, post=BURST_POST, trigger="threshold", rail="12V",
                                     above_w=trigger_w, timeout=timeout, on_armed=armed.set)
        except PowerrigError as e:
            got["error"] = str(e)
        finally:
            armed.set()

    th = threading.Thread(target=take, name="power-burst", daemon=True)
    th.start()
    armed.wait(10.0)                         # armed on the device before the sequence is sent
    return th, got


def burst_figures(burst, with_cut: bool, holdup_threshold_v: float, edges: list[dict] | None = None) -> dict:
    """Hold-up after the cut and inrush at the restore, from the raw burst of :func:`arm_burst` (None
    where it has none, with the reason). ``edges``: the executed edges the interposer reported; the
    cut is found in the samples on its sample wherever they can show it, and where they cannot (on the
    burst's first sample, or before the burst: an off time longer than the burst holds) the hold-up
    counts from the reported cut while the drive side's decay is inside the burst
    (power_events.cut_holdup)."""
    th, got = burst
    th.join(40)
    b = got.get("burst")
    if b is None:
        why = got.get("error", "no burst")
        return {"holdup_s": None, "inrush_peak_a": None, "inrush_charge_c": None, "burst_error": why,
                "holdup_reason": f"no burst ({why})"}
    v, i, _ = b.rail("12V")
    out: dict = {}
    cut = -1
    if with_cut:
        off = next((e for e in edges or [] if e["output"] == "12V" and e["level"] == 0), None)
        rep = off["index"] - b.first_index if off is not None else None
        ch = power_events.cut_holdup(v, i, holdup_threshold_v, PERIOD_S, reported=rep)
        cut = ch["cut"] if ch["cut"] is not None else -1
        out.update({"holdup_s": ch["holdup_s"], "cut_found_at": b.first_index + cut if cut >= 0 else None,
                    **{k: ch[k] for k in ("cut_reason", "holdup_reason", "holdup_from") if ch[k]}})
        if cut < 0 and rep is not None and 0 < rep < len(i):
            cut = rep
    else:
        out.update({"holdup_s": None, "cut_found_at": None, "holdup_reason": "no 12 V cut in this sequence"})
    r = power_events.find_rise(i[max(cut, 0):])
    rise = max(cut, 0) + r if r >= 0 else -1
    ir = power_events.inrush(i, rise, PERIOD_S, min(BURST_POST, len(i) - rise)) if rise >= 0 else {}
    return {**out, "inrush_peak_a": ir.get("peak_a"), "inrush_charge_c": ir.get("charge_c"),
            "on_found_at": b.first_index + rise if rise >= 0 else None}


class PowerLossStep:
    def __init__(self, pl, step, dev, nvme, fio, controller: str, namespace: str, serial: str, out_dir: Path,
                 tl, emit=None, attempt: int = 1):
        self.pl, self.step, self.dev, self.nvme, self.fio = pl, step, dev, nvme, fio
        self.attempt = int(attempt)         # the sweep's attempt at this step: a redone one draws fresh seeds
        self.controller, self.namespace, self.serial = controller, namespace, serial
        self.out = Path(out_dir)
        self.tl = tl
        self.emit = emit or (lambda text: None)
        # fio ``fsync=N`` on the cycle's writes (the plan's fsync_every: a flush every N; 0 without):
        # the losses of writes a completed flush covered are counted apart (``lost_after_flush``)
        self.fsync_every = int(getattr(pl, "fsync_every", None) or 0)

    def run(self) -> list[dict]:
        """Every cycle, in one power session; the cycles' records (also OUT/cycles.jsonl)."""
        owned.owned_dir(self.out)
        cycles = []
        destructive.power_session(self.nvme, self.controller, self.serial, self.dev, WATCHDOG_MS)
        try:
            with owned.open_owned(self.out / "cycles.jsonl", "a") as log:
                for k in range(self.pl.cycles):
                    c = self.cycle(k)
                    cycles.append(c)
                    log.write(json.dumps(c) + "\n")
                    log.flush()
                    self.emit(f"{self.step.name}: cycle {k + 1}/{self.pl.cycles}: {c['acknowledged']} acknowledged, "
                              f"{c['lost']} lost, {c['in_flight']} in flight; ready after {c['ready_s'] * 1e3:.0f} ms")
        finally:
            try:
                destructive.power_release(self.dev)     # the safe state, power actions off for the session
            except PowerrigError as e:                  # the link gone: the interposer's watchdog restores power
                logger.warning("%s: releasing the power session failed (%s); the interposer's watchdog "
                               "restores power within %d ms", self.step.name, e, WATCHDOG_MS)
        return cycles

    def seed(self, k: int) -> int:
        """Cycle k's seed (from 0) in this attempt at the step."""
        return cycle_seed(self.pl.seed, self.step.key, k, self.attempt)

    # ---- one cycle ------------------------------------------------------------------------------------
    def cycle(self, k: int) -> dict:
        pl = self.pl
        seed = self.seed(k)
        rng = np.random.default_rng(seed)
        cut_ms, off_ms = (lo if lo == hi else float(rng.uniform(lo, hi)) for lo, hi in (pl.cut_ms, pl.off_ms))
        d = self.out / f"cycle{k + 1:05d}"
        job = FioJob(pl.name, rw="write", bs=pl.bs, iodepth=pl.iodepth, size=pl.size, runtime=WRITE_RUNTIME_S,
                     filename=self.namespace, direct=True, ioengine="libaio",
                     extra={**verify.write_options(seed), **({"fsync": self.fsync_every} if self.fsync_every else {})})
        flowing = threading.Event()
        out: dict = {}

        def on_status(st):
            if st["mib_s"] > 0:
                flowing.set()

        def write():
            try:
                out["result"] = self.fio.run(FioPlan([job], status_interval=1), d, name=pl.name, serial=self.serial,
                                             on_status=on_status)
            except PowerrigError as e:        # the cut fails fio's I/O: expected; its JSON says how far it got
                out["error"] = str(e)

        writer = threading.Thread(target=write, name="power-loss-fio", daemon=True)
        writer.start()
        deadline = time.monotonic() + FLOW_TIMEOUT_S
        while not flowing.wait(0.02):
            if not writer.is_alive() or time.monotonic() > deadline:
                writer.join(1.0)
                raise PowerrigError(f"{self.step.name}: cycle {k + 1}: fio's writes were not seen flowing "
                                    f"({out.get('error') or 'no status within %g s' % FLOW_TIMEOUT_S}); nothing was cut")
        off_us = int(round(off_ms * 1000))
        actions = pulse(pl.kind, max(2000, int(round(cut_ms * 1000))), off_us)
        powered = pl.kind != "perst"
        burst = arm_burst(self.dev, off_us, self.pl.inrush_trigger_w,
                          BURST_WAIT_S + (cut_ms + off_ms) / 1000) if powered else None
        edges, utc, rtt_s = run_sequence(self.dev, actions, 5.0 + (cut_ms + off_ms) / 1000 + PVPERL_US / 1e6)
        t_cut, t_on = utc(edges[0]["index"]), utc(edges[-1]["index"])    # the last edge: power on, or PERST# released
        ready_s, ready_lo_s = self._wait_ready(t_on)      # while fio winds down after its I/O errors
        link = sysfs_link(self.controller, getattr(self.nvme, "host", None))
        first_io_s = self._first_io(d, t_on)
        writer.join(WRITE_RUNTIME_S + 60)
        t_ready = t_on + ready_s
        self.tl.add(Event(NOTE, NOTE_NAMES[pl.kind], t_cut, t_ready, ok=True,
                          meta={"power_cycle": powered, "kind": pl.kind, "planned": True, "step": self.step.key,
                                "cycle": k + 1, "edges": edges}))
        # a hot-plug's removal cuts 12 V too: its hold-up is measured whenever the burst holds the decay
        rails = burst_figures(burst, pl.kind in ("cut", "hotplug"), pl.holdup_threshold_v, edges) if powered else {}
        acknowledged, flushed = self._acknowledged(d / f"{pl.name}.json")
        c = verify.classify(self.fio, pl.name, self.namespace, pl.bs, pl.iodepth, acknowledged, randseed=seed,
                            flushed=flushed)
        return {"cycle": k + 1, "kind": pl.kind, "attempt": self.attempt, "seed": seed, "cut_ms": cut_ms,
                "off_ms": off_ms, "edges": edges,
                "rtt_s": rtt_s,
                "cut_during_writes": "result" not in out, "acknowledged": c.acknowledged, "lost": len(c.lost),
                "flushed": flushed, "lost_after_flush": len(c.lost_after_flush),
                "lost_after_flush_offsets": list(c.lost_after_flush[:KEEP_OFFSETS]),
                "in_flight": len(c.in_flight), "lost_offsets": list(c.lost[:KEEP_OFFSETS]),
                "in_flight_offsets": list(c.in_flight[:KEEP_OFFSETS]), "ready_s": ready_s, "ready_lo_s": ready_lo_s,
                "first_io_s": first_io_s, "link": link, **rails}

    def _wait_ready(self, t_on: float) -> tuple[float, float]:
        """Poll the controller with nvme-cli until it answers: (upper, lower) bound of power-on to ready,
        from the answer's return and the last refused poll's start."""
        deadline = time.monotonic() + self.pl.ready_timeout_s
        last_refused = t_on
        while True:
            t0 = time.time()
            try:
                self.nvme.get_power_state(self.controller)
                return time.time() - t_on, max(0.0, last_refused - t_on)
            except PowerrigError as e:
                last_refused = t0
                if time.monotonic() > deadline:
                    raise PowerrigError(f"{self.step.name}: the controller did not answer within "
                                        f"{self.pl.ready_timeout_s:g} s of power-on ({e})") from None
            time.sleep(0.005)

    def _first_io(self, d: Path, t_on: float) -> float:
        """Power-on to the first I/O completed: one block read from the namespace's start, at once after
        the controller answered (the job's end, as fio reports it: an upper bound)."""
        job = FioJob("first-io", rw="read", bs=4096, size=4096, filename=self.namespace, direct=True, ioengine="libaio")
        res = self.fio.run(FioPlan([job]), d / "first-io", name="first-io")
        return max(j.end_utc for j in res.jobs) - t_on

    def _acknowledged(self, path: Path) -> tuple[int, int]:
        """Writes the drive acknowledged in the cut run (its final JSON document's write ``io_bytes``)
        and how many of them a completed flush covered (verify.flushed_writes; 0: the writes carry no
        flush, fsync_every)."""
        try:
            docs = complete_documents(path.read_text(errors="replace"))
        except OSError as e:
            raise PowerrigError(f"{self.step.name}: fio left no output at {path} ({e.strerror})") from None
        if not docs or not docs[-1].get("jobs"):
            raise PowerrigError(f"{self.step.name}: fio's output {path} holds no job report")
        job = docs[-1]["jobs"][0]
        return (verify.acknowledged_writes(job["write"], self.pl.bs),
                verify.flushed_writes(job, self.fsync_every, self.pl.iodepth))


# -- what the results store keeps ----------------------------------------------------------------------
def _stats(values) -> dict:
    v = [x for x in values if x is not None]
    return {"n": len(v), "min": min(v), "mean": sum(v) / len(v), "max": max(v)} if v else {"n": 0}


def measurements(cycles: list[dict], phase: str) -> list[dict]:
    """The step's figures: integrity verdict counts, power-on to ready and to first I/O, hold-up and
    inrush (each with min/mean/max in its notes)."""
    lost = sum(c["lost"] for c in cycles)
    after_flush = sum(c.get("lost_after_flush", 0) for c in cycles)
    seeds = [c["seed"] for c in cycles if "seed" in c]
    out = [row("power_loss.cycles", phase, len(cycles), "cycles",      # which seeds: the run reproduces from it
               notes=json.dumps({"attempt": cycles[0].get("attempt", 1) if cycles else None,
                                 "seeds": [seeds[0], seeds[-1]] if seeds else None})),
           row("power_loss.acknowledged_writes", phase, sum(c["acknowledged"] for c in cycles), "writes"),
           row("power_loss.lost_writes", phase, lost, "writes", "fail" if lost else "pass", upper=0.0,
               requirement_met=not lost,
               notes=json.dumps({"cycles_with_loss": [c["cycle"] for c in cycles if c["lost"]][:100],
                                 "after_flush": after_flush})),
           # of those, the writes a completed flush had covered: a broken durability promise, labelled apart
           row("power_loss.lost_after_flush_writes", phase, after_flush, "writes", "fail" if after_flush else "pass",
               upper=0.0, requirement_met=not after_flush,
               notes=json.dumps({"label": "lost after a completed flush",
                                 "flushed_writes": sum(c.get("flushed", 0) for c in cycles),
                                 "cycles": [c["cycle"] for c in cycles if c.get("lost_after_flush")][:100]})),
           row("power_loss.cycles_with_loss", phase, sum(1 for c in cycles if c["lost"]), "cycles"),
           row("power_loss.in_flight_writes", phase, sum(c["in_flight"] for c in cycles), "writes"),
           row("power_loss.cuts_after_writes_ended", phase, sum(1 for c in cycles if not c["cut_during_writes"]),
               "cycles")]
    for name, key, units, pick in (("power_loss.ready_s", "ready_s", "s", "max"),
                                   ("power_loss.first_io_s", "first_io_s", "s", "max"),
                                   ("power_loss.holdup_s", "holdup_s", "s", "min"),
                                   ("power_loss.inrush_peak_a", "inrush_peak_a", "A", "max"),
                                   ("power_loss.inrush_charge_c", "inrush_charge_c", "C", "max")):
        st = _stats(c.get(key) for c in cycles)
        if key == "ready_s":
            st["lower_bound_max"] = _stats(c["ready_lo_s"] for c in cycles).get("max")
        out.append(row(name, phase, st.get(pick), units, notes=json.dumps(st)))
    links = [c["link"] for c in cycles if c.get("link")]
    if links:       # a link that trained narrower or slower after a cycle shows here
        out.append(row("power_loss.link_width_min", phase, min(x["width"] for x in links), "lanes",
                       notes=json.dumps({"speeds": sorted({x["speed"] for x in links}), "cycles_read": len(links)})))
    return out
