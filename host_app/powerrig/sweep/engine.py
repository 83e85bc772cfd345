"""The sweep engine: runs a plan step by step, one capture per step, into the results store.

Per step: set the power state and confirm it (get-feature); APST is disabled for the sweep's
static-state steps and restored afterwards, or kept (plan ``apst = "keep"``: no confirming read, the
drive may already have moved, and its moves are timed from the rails: analysis/apst.py); settle; an
idle window; the workload (with SNIA PTS steady-state rounds where the plan asks); smart-log before
and after (thermal throttling marks the step's verdicts invalid, and the plan may ask for a cool-down
and one retry); the capture is let catch up with the step's end; then the capture is
analysed and the step is stored in one transaction. The store is the checkpoint: with ``resume``
the latest unfinished run of the same plan (by hash) continues, skipping stored steps; a step cut
short (the process killed, the interposer gone) is simply run again. An interposer that vanishes
mid-step is waited for (rig.reconnect_s), the gap recorded, and the step redone.

Progress goes to ``on_progress(dict)`` callbacks (never Qt or pytest): kinds "start", "step",
"live", "step-done", "note", "done". Each finished step is also a line in the JSON-lines log.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from dataclasses import asdict
from pathlib import Path

from powerrig.analysis import analyse, referee
from powerrig.analysis.descriptors import transition_limit_s
from powerrig.analysis.drive_said import said
from powerrig.analysis.verdicts import summary
from powerrig.capture import CaptureReader
from powerrig.capture.recorder import Recorder
from powerrig.core import owned
from powerrig.core.errors import CaptureError, PowerrigError
from powerrig.core.timeline import NOTE, NVME, PHASE, Event, Timeline
from powerrig.dut import claims, destructive
from powerrig.dut.fio import FioJob, FioPlan
from powerrig.results import DatabaseFault
from powerrig.sources import open_source
from powerrig.sweep import clock_check, command_trace, measure
from powerrig.sweep.live import LiveState
from powerrig.sweep.ownership import RunLock, check_out_name, describe, this_process
from powerrig.sweep.plan import Plan, PlanError, Step, Workload, check_drive
from powerrig.sweep.plan_rig import bring_up, open_interposer
from powerrig.sweep.steps import StepRun, kind_of
from powerrig.sweep.steps.workload import LIMIT_STATUS_S, limit_lead_s, limit_run_s

logger = logging.getLogger(__name__)
UNSTORED = "unstored-steps.jsonl"   # finished steps the database could not take; --resume stores them
LIMIT_FLOW_WAIT_S = 30.0   # how long past the lead to wait for that document before setting the limit anyway
PRE_LEVEL_S = 0.25         # captured before the set-feature: the old level (analysis averages up to 0.5 s)
CATCH_UP_S = 10.0          # the longest wait at a step's end for the stream to reach it (a loaded host runs behind)


class StepLost(PowerrigError):
    """The interposer link went away during a step; the step is redone once it is back."""


def steady_state_met(values: list[float], rounds: int, range_pct: float, slope_pct: float) -> bool:
    """SNIA PTS: over the last ``rounds`` values, max - min <= range_pct of the mean and the
    least-squares slope across the window <= slope_pct of the mean."""
    if len(values) < rounds:
        return False
    w = values[-rounds:]
    mean = sum(w) / rounds
    if not mean or any(v is None or math.isnan(v) for v in w):
        return False
    xs = range(rounds)
    xm = (rounds - 1) / 2
    slope = sum((x - xm) * (y - mean) for x, y in zip(xs, w)) / sum((x - xm) ** 2 for x in xs)
    return (max(w) - min(w)) <= range_pct / 100 * abs(mean) and abs(slope * (rounds - 1)) <= slope_pct / 100 * abs(mean)


def software_versions() -> dict:
    try:        # a local import on purpose: the capture writer's optional dependencies may be absent
        from powerrig.capture.writer import software_versions as sv
        return sv()
    except ImportError:
        from powerrig import __version__       # (only then)
        return {"powerrig": __version__}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _keep_cut_capture(capture: Path) -> Path | None:
    """A capture already at ``capture`` is what a killed process left of this step: it is moved
    beside (NAME.cutN.jls, N from 1), never overwritten by the rerun. Returns where it went."""
    if not os.path.lexists(capture):
        return None
    n = 1
    while os.path.lexists(dst := capture.with_name(f"{capture.stem}.cut{n}.jls")):
        n += 1
    capture.rename(dst)
    return dst


class Sweep:
    def __init__(self, plan: Plan, store, out_dir: str | Path, on_progress=None, resume: bool = False,
                 on_block=None):
        """on_block(IntervalBlock): every block the steps' recorder receives (a live view; the GUI)."""
        self.plan = plan
        self.on_block = on_block
        self._source = None                      # what measures the rails, while open (clock_model)
        self._step_timelines: list[Timeline] = []   # each step's run here, for a live view (events)
        self.store = store
        self.out = Path(out_dir)
        self.on_progress = on_progress or (lambda d: None)
        self._live_state = LiveState(store)      # the web page's live view of this rig, from the same events
        self.resume = resume
        self.run_id: int | None = None
        self._t0 = 0.0
        self._step_times: list[float] = []
        self._planned_done = 0.0
        self._measured_s = 0.0
        self._live = {"watts": None, "mib_s": None, "lost_frames": 0}
        self._prev_ps: int | None = None     # the state the previous step left the drive in
        self._apst_kept = None               # plan apst = "keep": the APST setting in force (dut.nvme.ApstSetting)

    # -- progress ---------------------------------------------------------------------------------
    def _emit(self, kind: str, **d) -> None:
        d.update(kind=kind, run=self.run_id, elapsed_s=time.monotonic() - self._t0 if self._t0 else 0.0)
        try:
            self.on_progress(d)
        except Exception:  # noqa: BLE001 - a broken display must not end an overnight sweep
            logger.exception("progress callback failed")
        self._live_state(d)

    def _planned(self, s: Step) -> float:
        t = self.plan.timing
        return t.settle_s + t.idle_s + kind_of(s).planned_s(self.plan, s)

    def _eta(self, remaining: list[Step]) -> float:
        """Planned time of the remaining steps, scaled by how finished steps compared with their plan."""
        left = sum(self._planned(s) for s in remaining)
        if self._step_times and self._planned_done > 0:
            return left * sum(self._step_times) / self._planned_done
        return left

    # -- the sweep --------------------------------------------------------------------------------
    def run(self) -> int:
        """Run (or resume) the plan; returns the run id. Raises PlanError before anything runs."""
        try:
            return self._run()
        finally:
            self._live_state.end()   # the run's live row goes however the run ends (done, failed, interrupted)
            self._release()          # the output folder is free once the run's status and record are written

    def _run(self) -> int:

        plan = self.plan
        prior = None
        self._lock = None
        if self.resume:
            prior = self._resumable()
            # the run's folder first: a live owner (a second shell, a concurrent resume) is refused
            # before the rig, the drive or the run row is touched
            self._lock = RunLock(prior["out_dir"]).acquire(prior["id"], {"host": prior.get("host"),
                                                                         "pid": prior.get("pid")})
            again = self.store.resumable_run(plan)      # a resume that held the lock just before may have ended it
            if again is None or again["id"] != prior["id"]:
                self._lock.release()
                prior = self._resumable()
                self._lock = RunLock(prior["out_dir"]).acquire(prior["id"])
            self._took_over = self._lock.previous
        else:           # a name fio reads otherwise, or a link in the folder: refused before anything is made
            check_out_name(self.out)
            if self.out.exists():
                owned.check_tree(self.out)
        rig = bring_up(plan)
        try:
            dev = self._open_source(rig)
            try:
                tl = Timeline()
                nvme, fio = rig.runners(tl)          # the sweep's own (preparation); each step has its pair
                ident = nvme.id_ctrl(rig.controller)
                check_drive(plan, ident, rig.host_view())
                self._ident, self._rig = ident, rig
                drive = asdict(ident)
                rig_info = {"station": rig.station, "port": rig.port, "description": dev.description}
                rig_info["source"] = getattr(dev, "sampling", None) and dev.sampling.to_dict()
                try:
                    rig_info["calibration"] = dev.calibration()
                except PowerrigError as e:
                    rig_info["calibration_error"] = str(e)
                me = this_process()
                if prior:
                    self.run_id = prior["id"]
                    self.out = Path(prior["out_dir"])
                    self.store.claim_run(self.run_id, me["host"], me["pid"])
                    if self._took_over and self._took_over.get("pid") not in (None, me["pid"]):
                        self._emit("note", text=f"run {self.run_id}: its last owner ({describe(self._took_over)}) "
                                                "is gone; this process takes the run over")
                else:
                    self._lock = RunLock(self.out).acquire(None)     # a live run already writing here is refused
                    self.run_id = self.store.start_run(plan, str(self.out), rig.station, drive, rig_info,
                                                       software_versions(), **me)
                    self._lock.claim(self.run_id)
                owned.owned_dir(self.out, top=True)
                owned.write_owned(self.out / "plan.toml", plan.source)
                owned.write_owned(self.out / "plan.resolved.json", json.dumps(plan.resolved(), indent=1))
                dev = self._sweep(dev, nvme, fio, prior is not None)
            finally:
                if dev is not None:
                    dev.close()
        except BaseException as e:
            if self.run_id is not None:
                status = "interrupted" if isinstance(e, (KeyboardInterrupt, DatabaseFault)) else "failed"
                bare = "interrupted by Ctrl-C" if isinstance(e, KeyboardInterrupt) else type(e).__name__
                self._mark_run(status, str(e) or bare)
            raise
        finally:
            rig.close()
        self.store.set_run_status(self.run_id, "done")
        record = self.store.write_record(self.run_id, self.out)
        self._emit("done", record=str(record), out=str(self.out), verdicts=self._verdict_summary())
        return self.run_id

    def _verdict_summary(self) -> dict | None:
        """The run's verdict summary (analysis/verdicts.py) for the display's last lines; None (said in the
        log) when the store cannot give it: the run is stored and done either way."""
        try:
            return summary(self.store.measurements(self.run_id))
        except DatabaseFault as e:
            logger.warning("run %s: no verdict summary: %s", self.run_id, e)
            return None

    def _open_source(self, rig, wait_s: float = 0.0):
        """What measures the rails: the interposer on the rig's port, or the plan's rig.source (an N6705C,
        Joulescopes), used exactly as the interposer is (powerrig.sources)."""
        self._source = None
        if self.plan.rig.source == "interposer":
            self._source = open_interposer(rig.port, wait_s, reply_timeout=self.plan.rig.reply_timeout_s)
        else:
            self._source = open_source(self.plan.rig.source, rig.info)
        return self._source

    def clock_model(self):
        """The measuring source's clock (its sample index <-> UTC) while the sweep runs, for a live view
        that places the sweep's commands and phases on the stream it draws; None with no source open or
        a source that keeps no clock (read from another thread: the model is a snapshot)."""
        clock = getattr(self._source, "clock", None)
        return clock.model() if clock is not None else None

    def events(self, last: int | None = None) -> list:
        """The events of the steps run so far in this process (each step's own timeline: commands,
        phases, power-state changes), oldest first, only the newest ``last`` when given (a live view
        asks at every scroll step: the newest steps' timelines are read, not all); safe from another
        thread (a timeline copies under its lock)."""
        out: list = []
        for tl in reversed(list(self._step_timelines)):
            out[:0] = list(tl)
            if last is not None and len(out) >= last:
                return out[-last:]
        return out

    def events_added(self) -> int:
        """How many events the steps have added so far: a live view redraws when it changes."""
        return sum(tl.added for tl in list(self._step_timelines))

    def _resumable(self) -> dict:
        """The run --resume continues, or PlanError saying why there is none."""
        plan = self.plan
        prior = self.store.resumable_run(plan)
        if prior is None:
            other = self.store.latest_run_of_path(plan.path) if plan.path else None
            if other and other["hash"] != plan.hash and other["status"] != "done":
                raise PlanError(f"plan {plan.path} changed since run {other['id']} (plan hash {other['hash']} -> "
                                f"{plan.hash}): a resumed run never mixes two plans; run it without --resume")
            raise PlanError(f"nothing to resume: no unfinished run of plan {plan.name!r} (hash {plan.hash}) in "
                            f"{self.store.url}; run it without --resume")
        return prior

    def _release(self) -> None:
        if getattr(self, "_lock", None) is not None:
            self._lock.release()
            self._lock = None

    def _mark_run(self, status: str, error: str) -> None:
        """Record how the run ended. A database that cannot take even that (still locked, full) is tried
        three times, the last two without the error text (a full file's last free bytes may hold the
        status), then left with a log line: the error itself goes up to the caller."""
        for attempt in range(1, 4):
            try:       # after a first failure without the error text: a full database may still take the status
                self.store.set_run_status(self.run_id, status, error if attempt == 1 else None)
            except DatabaseFault as e:
                logger.warning("run %s: recording status %r, attempt %d of 3: %s", self.run_id, status, attempt, e)
                continue
            try:
                self.store.write_record(self.run_id, self.out)
            except (OSError, DatabaseFault) as we:   # a full or read-only disk: the database keeps the run
                logger.info("run %s: the JSON record was not written (%s)", self.run_id, we)
            return

    def _store(self, rec: dict) -> None:
        """Store a finished step; a database that cannot take it (locked past the timeout, full, gone)
        stops the sweep, the step kept in OUT/unstored-steps.jsonl for the next --resume to store."""
        try:
            self.store.store_step(self.run_id, rec["step"], rec["phases"], rec["measurements"])
        except DatabaseFault:
            with owned.open_owned(self.out / UNSTORED, "a") as f:
                f.write(json.dumps({"run": self.run_id, "step": rec["step"], "phases": rec["phases"],
                                    "measurements": rec["measurements"]}, default=str) + "\n")
            raise

    def _store_kept_steps(self) -> None:
        """Store the steps an earlier attempt finished but could not store (not run again)."""
        path = self.out / UNSTORED
        if not os.path.lexists(path):
            return
        done = self.store.finished_steps(self.run_id)
        with owned.open_owned(path, "r") as f:
            kept = f.read()
        for line in kept.splitlines():
            r = json.loads(line)
            if r["run"] == self.run_id and r["step"]["key"] not in done:
                self.store.store_step(self.run_id, r["step"], r["phases"], r["measurements"])
                done.add(r["step"]["key"])
                self._emit("note", text=f"{r['step']['name']}: stored from {UNSTORED} (finished before the "
                                        "database fault)")
        path.replace(path.with_name(UNSTORED + ".stored"))

    def _sweep(self, dev, nvme, fio, resumed: bool):
        plan, rig = self.plan, self._rig
        steps = plan.steps()
        if resumed:
            self._store_kept_steps()
        done = self.store.finished_steps(self.run_id)
        todo = [s for s in steps if s.key not in done]
        self._t0 = time.monotonic()
        self._emit("start", plan=plan.name, plan_hash=plan.hash, steps=len(steps), done=len(done), resumed=resumed,
                   station=rig.station,
                   eta_s=self._eta(todo), out=str(self.out))
        apst = None
        if plan.apst == "disable" and getattr(self._ident, "apsta", False):
            apst = nvme.get_apst(rig.controller)
            nvme.disable_apst(rig.controller)
        elif plan.apst == "keep" and getattr(self._ident, "apsta", False):
            self._apst_kept = nvme.get_apst(rig.controller)   # the table each step's APST moves are timed by
        try:
            if plan.preparation.kind != "none" and not done:
                self._prepare(nvme, fio)
            for n, step in enumerate(todo):
                t_step = time.monotonic()
                self._emit("step", n=len(done) + n + 1, m=len(steps), name=step.name, key=step.key,
                           eta_s=self._eta(todo[n:]))
                attempt = 1
                self._lost_attempts = []
                while True:
                    try:
                        rec = self._run_step(dev, step, attempt)
                    except StepLost as e:
                        t_lost = time.time()
                        self._emit("note", text=f"{step.name}: {e}; waiting up to {plan.rig.reconnect_s:g} s "
                                                f"for the interposer")
                        try:
                            dev.close()
                        except Exception as ce:  # noqa: BLE001 - already gone
                            logger.info("closing the lost interposer: %s", ce)
                        dev = None
                        dev = self._open_source(rig, plan.rig.reconnect_s)
                        self._lost_attempts.append({"attempt": attempt, "error": str(e), "lost_at_utc": t_lost,
                                                    "back_after_s": time.time() - t_lost,
                                                    "capture": str(self._capture_path(step, attempt))})
                        self._emit("note", text=f"{step.name}: interposer back after {time.time() - t_lost:.1f} s; "
                                                "redoing the step")
                        attempt += 1
                        continue
                    if rec["step"]["status"] == "invalid" and rec["throttled"] and plan.timing.cooldown_s > 0 \
                            and attempt == 1:
                        self._emit("note", text=f"{step.name}: {rec['step']['invalid_reason']}; cooling down "
                                                f"{plan.timing.cooldown_s:g} s, then one retry")
                        time.sleep(plan.timing.cooldown_s)
                        attempt += 1
                        continue
                    break
                rec["step"]["attempts"] = attempt
                t_store = time.monotonic()
                self._store(rec)
                rec["timing"]["store_s"] = time.monotonic() - t_store
                self._step_times.append(time.monotonic() - t_step)
                self._planned_done += self._planned(step)
                with owned.open_owned(self.out / "sweep.jsonl", "a") as f:
                    f.write(json.dumps({"run": self.run_id, "t": time.time(), **rec["step"],
                                        "measurements": rec["measurements"]}, default=str) + "\n")
                self._emit("step-done", n=len(done) + n + 1, m=len(steps), name=step.name, key=step.key,
                           status=rec["step"]["status"], figures=rec["figures"], timing=rec["timing"],
                           eta_s=self._eta(todo[n + 1:]))
        finally:
            if apst is not None and dev is not None:
                try:
                    nvme.set_apst(rig.controller, apst.enabled, list(apst.entries))
                except PowerrigError as e:
                    logger.warning("restoring APST failed: %s", e)
        return dev

    # -- preparation ------------------------------------------------------------------------------
    def _prepare(self, nvme, fio) -> None:
        """Format, precondition or a fio job: each through the guarded door (powerrig.dut.destructive),
        on the namespace the steps' fio uses (the virtual rig's own on sim: plans), checked there:
        its controller must be the plan's and its serial the plan's."""
        plan, rig = self.plan, self._rig
        kind = plan.preparation.kind
        self._emit("note", text=f"preparation: {kind}")
        if kind == "format":
            destructive.format(nvme, rig.namespaces[0], plan.drive.serial, ses=1, controller=rig.controller)
            return
        if kind == "precondition":
            cap = self._ident.tnvmcap or 0
            w = Workload("precondition", rw="write", bs=131072, iodepth=128, size=str(2 * cap) if cap else "200%")
        else:
            w = plan.preparation.job
        fio.run(self._fio_plan(w, self.plan.runtime_of(w) if w.size is None else None), self.out / "prepare",
                **self._fio_kw())

    # -- one step ---------------------------------------------------------------------------------
    def _fio_kw(self) -> dict:
        """Writes go through the drive guard: the serial the plan names must be the drive's."""
        return {"serial": self.plan.drive.serial}

    def _fio_plan(self, w: Workload, runtime: float | None, io_log: bool = False, block_trace: bool = False):
        jobs = []
        for k, s in enumerate(w.all_streams()):
            ns = s.namespace or self._rig.namespaces[0]
            offset = size = None
            if s.range_pct:
                offset, size = f"{s.range_pct[0]:g}%", f"{s.range_pct[1] - s.range_pct[0]:g}%"
            if w.size is not None and runtime is None:
                size = w.size if size is None else size
            engine, extra = None, {}
            if s.fdp:        # placement directives go through passthrough on the generic char device
                ns, engine, extra = re.sub(r"^/dev/nvme(\d+)n", r"/dev/ng\1n", ns), "io_uring_cmd", {"fdp": 1}
            jobs.append(FioJob(f"{w.name}.{k}" if len(w.all_streams()) > 1 else w.name, rw=s.rw, bs=s.bs,
                               iodepth=s.iodepth, numjobs=w.numjobs, size=size, offset=offset, filename=ns,
                               rwmixread=s.rwmixread, rate_iops=s.rate_iops, runtime=runtime,
                               time_based=runtime is not None, direct=True, ioengine=engine, extra=extra))
        return FioPlan(jobs, io_log=io_log, block_trace=block_trace)

    def _capture_path(self, step: Step, attempt: int) -> Path:
        return self.out / "captures" / f"{step.index:03d}-{_safe(step.key)}-a{attempt}.jls"

    def _run_step(self, dev, step: Step, attempt: int) -> dict:
        plan, rig = self.plan, self._rig
        tl = Timeline()
        self._step_timelines.append(tl)
        nvme, fio = rig.runners(tl)
        nvme._id[rig.controller] = self._ident          # id-ctrl read once per sweep
        owned.owned_dir(self.out / "captures")
        owned.owned_dir(self.out / "fio")
        capture = self._capture_path(step, attempt)
        cut = _keep_cut_capture(capture)
        if cut is not None:
            self._emit("note", text=f"{step.name}: the capture of the cut attempt is kept as {cut.name}")
        fio_dir = self.out / "fio" / f"{step.index:03d}-{_safe(step.key)}-a{attempt}"
        meta = {"device": dev.description,
                "drive": {"id_ctrl": asdict(self._ident), "mn": self._ident.mn.strip(), "sn": self._ident.sn.strip(),
                          "power_state": None},
                "plan": {"name": plan.name, "hash": plan.hash, "run": self.run_id, "step": step.key,
                         "attempt": attempt, "rig": rig.station}}

        have_pre = threading.Event()
        last_live = [0.0]

        def live(p):
            self._live["watts"] = p.watts.get("total")
            self._live["lost_frames"] = p.dropped_frames + p.gaps
            if p.covered_s >= PRE_LEVEL_S:
                have_pre.set()
            if time.monotonic() - last_live[0] >= 1.0:        # the display needs no more than 1 Hz
                last_live[0] = time.monotonic()
                self._emit("live", name=step.name, watts=self._live["watts"], mib_s=self._live["mib_s"],
                           lost_frames=self._live["lost_frames"], covered_s=p.covered_s)

        t_start = time.time()
        self._fio_overhead_s = 0.0
        kind = kind_of(step)            # what this kind of step does at each point below (sweep/steps/)
        run = StepRun(self, step, plan, tl, nvme, fio, fio_dir, dev, attempt, on_block=self.on_block)
        kind.start(run)
        # progress often: the step waits on it for the level before set-feature
        ipm, ipm_polls = None, []
        ctrace, ntrace = (None, "nvme_trace: off ([timing] command_trace = false)" if not plan.timing.command_trace else
                          "nvme_trace: the step ended before its first admin command"), None
        rec = run.rec = Recorder(dev, capture, interval_us=plan.rig.interval_us, metadata=meta, timeline=tl,
                                 on_progress=live, progress_every_s=0.1, on_block=run.on_block)
        rec.start()
        try:
            # the rails before the set-feature are part of the transition measurement (the level it
            # leaves); the recorder's first samples take a moment to arrive
            if not self._wait_for_level(rec, have_pre):
                logger.warning("step %s: the capture had no %.1f s of samples before the set-feature", step.key,
                               PRE_LEVEL_S)
            clock = clock_check.ClockCheck(rig).before()     # the drive host's clock map, checked again after
            if plan.timing.command_trace:        # every admin command from here on placed from the drive host's kernel
                ctrace = command_trace.recorder(rig, f"{self.run_id}-{step.index}-a{attempt}")
            # APST kept on: the drive may leave the state on its own before a get-feature could confirm it
            # (100 ms idle on a client drive); its moves are timed instead (command_trace.measurements)
            kept = self._apst_kept is not None and self._apst_kept.enabled
            nvme.set_power_state(rig.controller, step.power_state, confirm=not kept)
            settle = tl.begin(NOTE, "settle", meta={"settle": True})
            # the settle time counts from when the drive took the request (set-feature returned): the
            # get-feature that confirms it and the thermal reading before are made while it settles
            settle.t_start = min(settle.t_start, max((e.t_end for e in tl.events(kind=NVME)
                                                      if e.name == "set-feature power" and e.t_end), default=settle.t_start))
            nvme.smart_log(rig.controller)                  # the thermal reading before, while it settles
            time.sleep(max(0.0, plan.timing.settle_s - (time.time() - settle.t_start)))
            tl.end(settle)
            self._check_link(rec)
            kind.after_settle(run)
            sr = self._self_report_start(nvme) if plan.checks.self_reported_power else None
            ipm = self._ipm_poller(nvme) if sr is not None else None     # the referee's IPM each second
            idle = tl.begin(PHASE, "idle", meta={"idle": True, "power_state": step.power_state})
            time.sleep(plan.timing.idle_s)
            tl.end(idle)
            if sr is not None:
                self._self_report(nvme, tl, "idle", sr)
            self._check_link(rec)
            kind.act(run)
            if ipm is not None:
                ipm_polls = ipm()
            kind.after(run)
            t_after = time.time()
            try:
                nvme.smart_log(rig.controller)              # the thermal reading after ...
            except PowerrigError:
                if run.removal is None:
                    raise                                   # (a drive that went away may not be back yet)
            self._catch_up(rec, run, t_after)              # ... while the last intervals reach the capture
        finally:
            if ipm is not None and not ipm_polls:
                ipm()                                       # the poller stopped, however the step ended
            ntrace = command_trace.place(tl, *ctrace)[0]    # read (and removed) however the step ended
            try:
                run.stack.close()                           # e.g. a margined rail back at nominal, however it ended
            finally:
                rec.stop()
            res = rec.wait(30)
        if res is None or res.end_reason == "link-lost":
            raise StepLost(res.error if res else "the recorder did not finish")
        clock_moved = clock.after()
        if res.end_reason == "error":
            raise PowerrigError(f"step {step.name}: recording failed: {res.error}")
        t_an = time.monotonic()
        measure_name, removal = run.measure_name, run.removal
        with CaptureReader(capture) as cap:
            an = analyse(cap, cap.events, cap.metadata)
            limit_s, no_limit = self._transition_limit(self._prev_ps, step.power_state)
            traced = command_trace.measurements(cap, ntrace, limit_s, self._prev_ps, step.power_state,
                                                apst=self._apst_kept, limit_of=self._transition_limit_s,
                                                level_of=self._idle_power_w, no_limit=no_limit,
                                                no_limit_of=self._transition_no_limit)
            verdicts = self._referee(cap, tl, ipm_polls, step, an) if plan.checks.self_reported_power else []
            self._limit_verdicts = self._referee_limit(cap, tl) if plan.checks.power_limit_w else []
            said_rows = measure.drive_said(said(cap.events), lambda u: float(cap.sample_id(u)) * cap.interval_s)
            run.an, run.cap = an, cap
            own_first = kind.rows_first(run)
            own = kind.rows(run)
        t_an = time.monotonic() - t_an
        if said_rows:
            self._emit("note", text=f"{step.name}: the drive said: " + "; ".join(json.loads(m["notes"])[0]
                                                                                 for m in said_rows))
        phases = measure.phase_rows(an)
        extra = list(own_first)
        extra += measure.transition(an, limit_s, self._prev_ps, step.power_state,
                                    apst_from_s=command_trace.first_apst_s(traced), no_limit=no_limit)
        self._prev_ps = step.power_state
        extra += traced
        extra += measure.self_reported(an, plan.checks.self_reported_tolerance_pct)
        extra += measure.referee(verdicts)
        if plan.checks.power_limit_w:
            extra += measure.referee(self._limit_verdicts)
        extra += own
        extra += said_rows
        ms = measure.measurements(an, measure_name, "idle", self._ident.tnvmcap, extra)
        invalid = next((p["invalid"] for p in phases if p["invalid"] and p["name"] in (measure_name, "idle")), None)
        # only a throttled step is worth a cool-down and a retry ([timing] cooldown_s): clipping, a clock
        # that moved or lost data come back the same
        throttled = any(r.throttled for r in an.phases if r.name in (measure_name, "idle"))
        invalid = invalid or clock_moved
        lost_pct = 100.0 * res.lost_s / res.covered_s if res.covered_s else 0.0
        if invalid is None and plan.checks.max_lost_pct is not None and lost_pct > plan.checks.max_lost_pct:
            invalid = (f"{lost_pct:.1f} % of the step's recording was lost in gaps (link, overloads); the plan allows "
                       f"{plan.checks.max_lost_pct:g} % (checks.max_lost_pct)")
        figs = {m["name"]: m["value"] for m in ms if m["name"] in
                ("power.mean", "power.idle", "throughput.mib_s", "efficiency.mib_s_per_w")}
        params = {"power_state": step.power_state, "settle_s": plan.timing.settle_s, "idle_s": plan.timing.idle_s,
                  "workload": None, "runtime_s": None, "interval_us": plan.rig.interval_us, "fio_dir": None,
                  "power_loss": None, "margin": None,
                  "power_cycles": 0,     # planned cuts: never data loss
                  "recording": {"covered_s": res.covered_s, "lost_s": res.lost_s, "end_reason": res.end_reason},
                  "lost_attempts": list(getattr(self, "_lost_attempts", [])),
                  "cut_captures": sorted(str(p) for p in capture.parent.glob(f"{capture.stem}.cut*.jls"))}
        params.update(kind.params(run))       # a kind's own keys after these (the stored text as it was)
        step_row = {"idx": step.index, "key": step.key, "name": step.name, "power_state": step.power_state,
                    "workload": kind.row_workload(step), "repetition": step.repetition,
                    "params": json.dumps(params, default=str),
                    "status": "interrupted" if removal else "invalid" if invalid else "done",
                    "invalid_reason": removal or invalid, "started_utc": t_start, "finished_utc": time.time(),
                    "capture": str(capture), "lost_s": res.lost_s}
        nvme_s = sum(e.duration or 0.0 for e in tl.events(kind=NVME) if e.t_start > settle.t_end or e.t_end < settle.t_start)
        timing = {"wall_s": time.time() - t_start, "settle_s": plan.timing.settle_s, "analysis_s": t_an,
                  "nvme_s": nvme_s, "fio_overhead_s": self._fio_overhead_s,
                  "measured_s": plan.timing.idle_s + kind.measured_s(run)}
        return {"step": step_row, "phases": phases, "measurements": ms, "figures": figs, "timing": timing,
                "throttled": throttled}

    def _idle_power_w(self, ps: int) -> float | None:
        """The state's IDLP from id-ctrl (None when the drive does not state it): which state an APST move
        went to, by the level the rails settled at (analysis/apst.py)."""
        try:
            return self._ident.state(ps).idle_power_w
        except (AttributeError, IndexError, KeyError, TypeError, PowerrigError):
            return None

    def _transition_limit(self, old: int | None, new: int) -> tuple[float | None, str]:
        """NVMe worst case EXLAT(old) + ENLAT(new) from id-ctrl (the largest EXLAT when the state left
        is unknown: the first step), or None and why when the drive does not report a term (0); None
        and "" without id-ctrl."""
        try:
            olds = [old] if old is not None else range(self._ident.npss + 1)
            exlat = {o: self._ident.state(o).exit_latency_us for o in olds}
            enlat = self._ident.state(new).entry_latency_us
        except (AttributeError, IndexError, KeyError, TypeError) as e:
            logger.info("no transition latency limit from id-ctrl: %s", e)
            return None, ""
        return transition_limit_s(exlat, enlat, new)

    def _transition_limit_s(self, old: int | None, new: int) -> float | None:
        """:meth:`_transition_limit`'s limit alone (``limit_of`` for the APST moves)."""
        return self._transition_limit(old, new)[0]

    def _transition_no_limit(self, old: int | None, new: int) -> str:
        """Why :meth:`_transition_limit` gives none ("" when it gives one or without id-ctrl)."""
        return self._transition_limit(old, new)[1]

    def _self_report_start(self, nvme) -> float | None:
        """Start the drive's own power measurement (Set Features 25h, through the guarded door; the
        sample interval read once from Identify Controller's IPMSR): the host time it was asked, or
        None (a note) when the drive has no such measurement."""
        ctrl = self._rig.controller
        if getattr(self, "_sr_absent", False):
            return None                 # said once: the drive does not claim to measure its power
        try:
            if getattr(self, "_sr_interval", None) is None:
                ident = claims.read_id_ctrl_power(nvme, ctrl)
                if not ident.power_measurement_supported:
                    self._sr_absent = True
                    self._emit("note", text="self-reported power: the drive gives none (Identify Controller "
                                            "CTRATT bit 21, power measurement, is clear)")
                    return None
                self._sr_interval = ident.sample_interval_s or 0.0
                self._sr_ident = ident          # the power state descriptors too (id-ctrl -b), for IDLP / ACTP
            t = time.time()
            claims.set_measurement(nvme, ctrl, self.plan.drive.serial, start=True)
            return t
        except PowerrigError as e:
            self._emit("note", text=f"self-reported power: the drive gives none ({e})")
            return None

    def _self_report(self, nvme, tl, name: str, t_start: float) -> None:
        """Stop the measurement (guarded) and read log 25h: a PHASE over the span its average covers
        (claims.interval_span: to its stop timestamp, back its count of intervals), so the interposer's
        mean is taken over the same time, carrying the drive's average, maximum and stated error."""
        ctrl = self._rig.controller
        try:
            claims.set_measurement(nvme, ctrl, self.plan.drive.serial, start=False)
            t_stop = time.time()
            log = claims.read_power_measurement(nvme, ctrl)
        except PowerrigError as e:
            self._emit("note", text=f"self-reported power: {e}")
            return
        if not log.pmc or log.aipwr_w is None:
            self._emit("note", text=f"self-reported power over {name}: the drive counted no interval")
            return
        t0, t1 = claims.interval_span(log, self._sr_interval, t_start, t_stop)
        bin_w = log.phbs_mw / 1000.0 if log.phbs_mw else None
        claim = {"t0": t0, "t1": t1, "avg_w": log.aipwr_w, "max_w": log.mipwr_w,
                 "max_t": log.mipwrt.utc if log.mipwr_w is not None else None,
                 "counts": [b.count for b in log.bins], "bin_w": bin_w, "interval_s": self._sr_interval or None,
                 "pmc": log.pmc, "estimated": log.estimated,
                 "ipwrpe": 255 if log.ipwrpe_pct is None else log.ipwrpe_pct, "overflow": log.phdoc}
        tl.add(Event(PHASE, f"{measure.SELF_REPORT}{name}", t0, t1, ok=True,
                     meta={"self_report_w": log.aipwr_w, "self_report_intervals": log.pmc,
                           "self_report_max_w": log.mipwr_w, "self_report_error_bound_pct": log.ipwrpe_pct,
                           "self_report_estimated": log.estimated, "interval_s": self._sr_interval or None,
                           "referee_claim": claim}))

    def _power_limit(self, step: Step, tl, nvme, fio, fio_dir: Path) -> None:
        """Power Limit compliance: the workload again, the plan's limit set (Set Features 23h, through the
        guarded door) a lead (limit_lead_s) after its I/O began, a PHASE from the set to the workload's
        end; the limit the drive had before is set back in a ``finally``, however the run ends. On this
        host fio's first status says when its I/O began and the run is longer by the lead and that
        status interval; on a drive host (no status followed) the lead runs from the start and the run
        is longer by the lead; a size-based workload is not lengthened."""
        ctrl, serial, limit = self._rig.controller, self.plan.drive.serial, self.plan.checks.power_limit_w
        try:
            before = claims.read_feature(nvme, ctrl, claims.FID_POWER_LIMIT)
        except PowerrigError as e:
            self._emit("note", text=f"power limit: not checked ({e})")
            return
        w = step.workload
        rt = self.plan.runtime_of(w)
        lead = limit_lead_s(rt)
        # the lead is timed from when fio's I/O began (its first status says), not from its start-up, which
        # a loaded host can stretch; and the run is longer by the lead and that first status, so the stretch
        # under the limit is the free run's length less only the set's own time (a loaded host's slow
        # nvme-cli once left under the 1 s the verdict needs)
        follow = fio.follows_status
        plan = self._fio_plan(w, limit_run_s(rt, follow) if rt else rt)
        if follow:
            plan.status_interval = LIMIT_STATUS_S
        flowing = threading.Event()
        done: dict = {}

        def on_status(st):
            if (st["mib_s"] > 0 or st["iops"] > 0) and "io_from" not in done:
                done["io_from"] = st["t"] - st["runtime_s"]     # when its I/O began, by fio's own count
                flowing.set()

        def run():
            try:
                done["res"] = fio.run(plan, fio_dir / "limit", name="fio", on_status=on_status if follow else None,
                                      **self._fio_kw())
            except BaseException as e:  # noqa: BLE001 - told on the step's thread
                done["error"] = e
            finally:
                flowing.set()

        th = threading.Thread(target=run, name="limit-workload", daemon=True)
        t_set = t_done = None
        th.start()
        try:
            if follow:
                flowing.wait(lead + LIMIT_FLOW_WAIT_S)
                began = done.get("io_from")
                time.sleep(max(0.0, began + lead - time.time()) if began is not None else 0.0)
            else:
                time.sleep(lead)
            if "res" not in done and "error" not in done:   # (a run that already ended or failed gets none)
                t_set = time.time()
                claims.set_power_limit(nvme, ctrl, serial, limit)
                t_done = time.time()
            th.join()
        except PowerrigError as e:
            self._emit("note", text=f"power limit: {e}")
        finally:
            th.join()
            if t_set is not None:       # (nothing was set: nothing to set back)
                try:
                    claims.set_power_limit(nvme, ctrl, serial, before.watts, before.scale or None)
                except PowerrigError as e:
                    self._emit("note", text=f"power limit: the previous limit ({before.line()}) was not restored: {e}")
        if "error" in done:
            raise done["error"]
        res = done.get("res")
        if res is None or t_set is None or t_done is None:
            if res is not None:
                self._limit_not_checked(w, "it ended before the limit was set" if "io_from" in done or not follow
                                        else "it ended before its status showed any I/O flowing")
            return
        t1 = max(j.end_utc for j in res.jobs)
        if t_done >= t1:            # (fio's own end, before its process and our parse of it)
            self._limit_not_checked(w, "its I/O ended before Set Features 23h completed")
            return
        t0 = min(j.start_utc for j in res.jobs)
        bw = sum(d.bw_bytes for j in res.jobs for d in j.directions.values())
        tl.add(Event(PHASE, f"{measure.LIMIT}{w.name}", t_set, t1, ok=True,
                     meta={"limit_w": limit, "t_set": t_set, "t_set_done": t_done, "workload_start": t0,
                           "bw_bytes": bw, "previous_limit_w": before.watts, "power_state": step.power_state}))

    def _limit_not_checked(self, w: Workload, why: str) -> None:
        """Say why a workload got no Power Limit verdict, and what would give it one."""
        more = "a larger size" if self.plan.runtime_of(w) is None else "a longer runtime"
        self._emit("note", text=f"power limit: not checked on {w.name}: {why}; give the workload {more}")

    def _referee_limit(self, cap, tl) -> list:
        # timed from the set's completion (the drive has the limit by then; nvme-cli's own start-up is not the drive's)
        free = {e.name[len(measure.MEASURE):]: (e.meta or {}).get("bw_bytes") for e in tl.events(kind=PHASE)
                if e.name.startswith(measure.MEASURE)}

        def kept(e):        # the limited run's throughput (its first seconds unlimited) against the free run's
            a, b = (e.meta or {}).get("bw_bytes"), free.get(e.name[len(measure.LIMIT):])
            return 100.0 * a / b if a and b else None
        return [referee.referee_limit(cap, e.meta["limit_w"], e.meta.get("t_set_done") or e.meta["t_set"], e.t_end,
                                      e.name[len(measure.LIMIT):],
                                      notes={"t_set_issued": e.meta["t_set"], "bw_bytes": e.meta.get("bw_bytes"),
                                             "throughput_kept_pct": kept(e),
                                             "previous_limit_w": e.meta.get("previous_limit_w")})
                for e in tl.events(kind=PHASE) if e.name.startswith(measure.LIMIT) and (e.meta or {}).get("limit_w")]

    def _ipm_poller(self, nvme):
        """Read SMART's IPM (the drive's power over its last second) and OLEC about every second on a thread,
        for the referee's lag and lifetime verdicts, and OCP C0h at the first poll and after the last; returns
        a function that stops it and gives [(host UTC of the read, IPM W, OLEC Wh)] (the two C0h reads in
        ``self._ocp_reads``)."""
        stop, polls = threading.Event(), []
        ctrl = self._rig.controller
        self._ocp_reads = []

        def read_ocp():
            t0 = time.time()
            try:
                ocp = claims.read_ocp_power(nvme, ctrl)
                self._ocp_reads.append((0.5 * (t0 + time.time()), ocp))
            except PowerrigError as e:
                logger.info("OCP C0h: %s", e)

        def run():
            t_next = time.time()
            read_ocp()
            while not stop.is_set():
                t0 = time.time()
                try:
                    sp = claims.read_smart_power(nvme, ctrl)
                    polls.append((0.5 * (t0 + time.time()), sp.ipm_w, sp.olec_wh))
                except PowerrigError as e:
                    logger.info("IPM poll: %s", e)
                t_next += 1.0
                if stop.wait(max(0.0, t_next - time.time())):
                    return

        th = threading.Thread(target=run, name="ipm-poller", daemon=True)
        th.start()

        def finish():
            stop.set()
            th.join(timeout=10)
            if self._ocp_reads:
                read_ocp()
            return list(polls)
        return finish

    def _referee(self, cap, tl, polls, step: Step, an) -> list:
        """The referee's verdicts (analysis/referee.py): every window the drive measured (and its total against
        the slot's rails), its IPM, the step's power state descriptor (IDLP over the idle window, ACTP over
        the workload), SMART OLEC and OCP C0h's lifetime power over the polls, OCP's peak capability."""
        out = []
        for e in tl.events(kind=PHASE):
            claim = (e.meta or {}).get("referee_claim")
            if claim and e.name.startswith(measure.SELF_REPORT):
                name = e.name[len(measure.SELF_REPORT):]
                out += referee.referee_window(cap, claim, name)
                out.append(referee.referee_rail_split(cap, claim.get("avg_w"), claim["t0"], claim["t1"],
                                                      referee.stated_bound(claim.get("ipwrpe"))[0], name))
        ident = getattr(self, "_sr_ident", None)
        if ident is not None:
            psd = ident.state(step.power_state)
            for e in tl.events(kind=PHASE):
                if e.name == "idle" and (e.meta or {}).get("idle") and e.t_end:
                    out.append(referee.referee_idle(cap, psd, e.t_start, e.t_end, "idle"))
                elif e.name.startswith(measure.MEASURE) and e.t_end and step.workload is not None:
                    out.append(referee.referee_active(cap, psd, e.t_start, e.t_end, e.name[len(measure.MEASURE):],
                                                      step.workload))
        if polls:
            out.append(referee.referee_ipm(cap, polls))
            out += self._referee_lifetime(cap, polls, an)
        return out

    def _referee_lifetime(self, cap, polls, an) -> list:
        """SMART OLEC (first and last poll) and OCP C0h's lifetime power (read before and after) against the
        slot's energy between the reads; OCP's peak capability against the step's largest 100 us mean and its
        current maximum average power against the step's largest 1 s mean."""
        out = []
        olec = [(t, o) for t, _, o in polls if o is not None]
        t0, t1 = (olec[0][0], olec[-1][0]) if len(olec) >= 2 else (polls[0][0], polls[-1][0])
        e_wh, covered = referee.energy_wh(cap, t0, t1)
        bound = referee.DEFAULT_ERROR_PCT
        out.append(referee.referee_lifetime("referee.olec", "SMART OLEC", olec[0][1] if len(olec) >= 2 else None,
                                            olec[-1][1] if len(olec) >= 2 else None, 1.0, e_wh, bound, "step",
                                            {"t0": t0, "t1": t1, "covered": covered}))
        ocp = getattr(self, "_ocp_reads", [])
        if len(ocp) >= 2:
            (a, first), (b, last) = ocp[0], ocp[-1]
            ew, cov = referee.energy_wh(cap, a, b)
            out.append(referee.referee_lifetime("referee.ocp_lifetime", "OCP C0h lifetime power consumed (kWh?)",
                                                first.lifetime_power_consumed, last.lifetime_power_consumed, 1000.0,
                                                ew, bound, "step", {"t0": a, "t1": b, "covered": cov}))
        peaks = [r for r in an.phases if r.kind == "workload" and math.isfinite(r.peak_100us.value_w)]
        top = max(peaks, key=lambda r: r.peak_100us.value_w, default=None)
        cap_w = float(ocp[-1][1].max_peak_power_capability) if ocp else None
        out.append(referee.referee_ocp_peak(cap_w, top.peak_100us.value_w if top else None,
                                            bool(top.peak_exact) if top else False, bound, "step",
                                            {"phase": top.name if top else None}))
        means = [r for r in an.phases if r.kind == "workload" and math.isfinite(r.max_1s.value_w)]
        busiest = max(means, key=lambda r: r.max_1s.value_w, default=None)
        out.append(referee.referee_ocp_max_avg(float(ocp[-1][1].current_max_avg_power) if ocp else None,
                                               busiest.max_1s.value_w if busiest else None, bound, "step",
                                               {"phase": busiest.name if busiest else None}))
        return out

    def _check_link(self, rec) -> None:
        t = getattr(rec, "_thread", None)       # the stand-in tells early; the real recorder at the end
        res = rec.wait(0) if t is not None and not t.is_alive() else None
        if res is not None and isinstance(getattr(rec, "error", None), CaptureError):
            # the capture cannot be written (a full or read-only disk): no rerun can do better
            raise PowerrigError(res.error)
        if res is not None and res.end_reason in ("link-lost", "error"):
            raise StepLost(res.error or res.end_reason)

    def _catch_up(self, rec, run, t_after: float) -> None:
        """Before the recording stops: wait until the capture holds the step's samples up to its last
        command (a stream runs behind the wall clock on a loaded host: 0.7 s was seen, and a recording
        stopped at once cut the last command's window), at most CATCH_UP_S; without a clock to say where
        that is, the 0.3 s it takes on a quiet host."""
        model = self.clock_model()
        if model is None:
            time.sleep(max(0.0, 0.3 - (time.time() - t_after)))
            return
        if not rec.wait_for_index(float(model.index(time.time())), CATCH_UP_S):
            run.note(f"{run.step.name}: the recording had not caught up with the step's end after {CATCH_UP_S:g} s; "
                     "its last intervals may be missing")

    def _wait_for_level(self, rec, have_pre: threading.Event, timeout: float = 10.0) -> bool:
        """Wait for the level before the set-feature; a recorder that already ended is told by _check_link."""
        deadline = time.monotonic() + timeout
        while not have_pre.wait(0.1):
            t = getattr(rec, "_thread", None)
            if (t is not None and not t.is_alive()) or time.monotonic() > deadline:
                self._check_link(rec)
                return have_pre.is_set()
        return True

    def _workload(self, step: Step, tl, nvme, fio, fio_dir: Path, rec):
        """Run the workload (rounds until steady where asked); a PHASE over the measured part."""
        plan, w = self.plan, step.workload
        runtime = plan.runtime_of(w)
        rounds = plan.steady.max_rounds if w.steady_state else 1
        bw: list[float] = []
        watts: list[float] = []
        spans: list[tuple[float, float, float, float, float]] = []   # (start, end, bw, iops, io_bytes)
        steady = None
        waf_stop = threading.Event()
        sampler = None
        if w.waf_every_s:
            sampler = threading.Thread(target=self._sample_waf, args=(nvme, w.waf_every_s, waf_stop), daemon=True)
            sampler.start()
        try:
            for k in range(rounds):
                self._check_link(rec)
                samples: list[float] = []
                res = fio.run(self._fio_plan(w, runtime, plan.timing.io_log, plan.timing.block_trace), fio_dir / f"round{k + 1}", name="fio", **self._fio_kw())
                t0 = min(j.start_utc for j in res.jobs)
                t1 = max(j.end_utc for j in res.jobs)
                b = sum(d.bw_bytes for j in res.jobs for d in j.directions.values())
                iops = sum(d.iops for j in res.jobs for d in j.directions.values())
                io = sum(j.bytes_total for j in res.jobs)
                spans.append((t0, t1, b, iops, io))
                self._fio_overhead_s += (res.t_return - res.t_call) - (t1 - t0)   # fio start-up and wind-down
                bw.append(b)
                self._live["mib_s"] = b / 2**20
                if self._live["watts"] is not None:
                    samples.append(self._live["watts"])
                watts.append(sum(samples) / len(samples) if samples else math.nan)
                if w.steady_state:
                    checks = []
                    if "bandwidth" in plan.steady.metrics:
                        checks.append(bw)
                    if "power" in plan.steady.metrics and not any(math.isnan(x) for x in watts[-plan.steady.rounds:]):
                        checks.append(watts)
                    steady = all(steady_state_met(v, plan.steady.rounds, plan.steady.range_pct,
                                                  plan.steady.slope_pct) for v in checks)
                    self._emit("note", text=f"{step.name}: round {k + 1}: {b / 2**20:.0f} MiB/s"
                                            + (" (steady)" if steady else ""))
                    if steady:
                        break
        finally:
            waf_stop.set()
            if sampler is not None:
                sampler.join(timeout=30)
        window = spans[-plan.steady.rounds:] if w.steady_state else spans
        t0, t1 = window[0][0], window[-1][1]
        dur = sum(s[1] - s[0] for s in window) or (t1 - t0)
        streams = w.all_streams()
        meta = {"rw": streams[0].rw if len({s.rw for s in streams}) == 1 else "mixed",
                "bs": streams[0].bs if len({s.bs for s in streams}) == 1 else None,
                "iodepth": streams[0].iodepth, "numjobs": w.numjobs * len(streams),
                "bw_bytes": sum(s[4] for s in window) / dur, "iops": sum(s[3] * (s[1] - s[0]) for s in window) / dur,
                "io_bytes": sum(s[4] for s in window), "power_state": step.power_state, "rounds": len(window)}
        name = f"{measure.MEASURE}{w.name}"
        self._measured_s = sum(s[1] - s[0] for s in spans)        # every round ran under measurement
        tl.add(Event(PHASE, name, t0, t1, ok=True, meta=meta))
        return name, bw, steady

    def _sample_waf(self, nvme, every: float, stop: threading.Event) -> None:
        """Write-amplification counters every ``every`` s (FDP statistics, else SMART + OCP)."""
        fdp = getattr(self._ident, "fdp_supported", False)
        ctrl = self._rig.controller
        while True:
            try:
                if fdp:
                    nvme.fdp_stats(ctrl)
                else:
                    nvme.smart_log(ctrl)
                    nvme.ocp_smart_add_log(ctrl)
            except PowerrigError as e:
                logger.warning("write-amplification sample failed: %s", e)
            if stop.wait(every):
                return
