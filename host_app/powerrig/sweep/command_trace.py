"""A step's NVMe commands from the drive host's kernel (dut/nvmetrace.py): the recorder the step's rig
offers, started before the step's first admin command and read after its last, and the admin
command events moved onto the traced submission and completion.

The capture writes each event when it ends, so the placed events are added to the step's timeline
as new events that name the host-stamped start they replace (``meta["replaces"]``); a capture
reader keeps the placed one (capture/reader.py). A rig without a drive host or virtual drive host
(the tools run on this host) keeps the host intervals and says so on each event.
"""
from __future__ import annotations

import json
import logging
import math

from powerrig.analysis.admin_energy import MAX_S as COMMAND_MAX_S, PRE_S as COMMAND_PRE_S, energy_above
from powerrig.analysis.apst import LATE_S as APST_LATE_S, apst_moves, next_move
from powerrig.analysis.io_energy import io_energy
from powerrig.analysis.transitions import time_transition
from powerrig.core.timeline import NOTE, NVME, POWER_STATE
from powerrig.dut import nvmetrace
from powerrig.dut.remote import drive_host
from powerrig.sim.ssd.drive_trace import SimTrace
from powerrig.sweep.measure import row

LOCAL = ("nvme_trace: the drive's tools run on this host (no drive host, no virtual drive host): "
         "the host intervals stand")


class Recorders:
    """The step's two trace instances: the admin queue's (powerrig's commands: a few, never lost to
    an overflow) and the I/O queues' (every read and write, in a buffer of its own), or the reason
    the I/O one could not start."""

    def __init__(self, admin, io, io_reason: str | None):
        self.admin, self.io, self.io_reason = admin, io, io_reason


def _maker(drive_host_url, endpoint: str | None, controller: str):
    """A function (instance name, queues) -> started recorder for the rig's drive host (KernelTrace)
    or virtual drive host (SimTrace), or None when the tools run on this host."""
    remote = drive_host(drive_host_url) if drive_host_url else None
    if remote is not None:
        return lambda name, queues: nvmetrace.KernelTrace(remote, controller, name, queues).start()
    if endpoint:
        return lambda name, queues: SimTrace(endpoint, controller, name, queues).start()
    return None


def recorder(rig, name: str):
    """Started recorders for the step (KernelTrace on a drive host, SimTrace on a virtual rig), or
    None and why not."""
    make = _maker(rig.drive_host, (rig.info or {}).get("endpoint"), rig.controller)
    if make is None:
        return None, LOCAL
    admin = make(name + "-a", "admin")
    if not admin.started:
        return None, admin.reason
    io = make(name + "-q", "io")
    return Recorders(admin, io if io.started else None, io.reason), None


def admin_recorder(rig: dict, name: str):
    """The admin queue's started recorder alone for a rig description (``drive_host``, ``endpoint``,
    ``controller``: the desktop app's drive, whose actions are a few admin commands and no I/O), or
    None and why not; read it with :func:`place`."""
    make = _maker(rig.get("drive_host"), rig.get("endpoint"), rig.get("controller"))
    if make is None:
        return None, LOCAL
    rec = make(name, "admin")
    return (rec, None) if rec.started else (None, rec.reason)


def _load(rec) -> tuple[nvmetrace.NvmeTrace | None, str]:
    """Both instances read: the admin queue's trace with the I/O queues' commands merged in (or, when
    they could not be had, the reason on ``io_note``) and one line saying what was traced."""
    if not isinstance(rec, Recorders):
        return nvmetrace.load(rec)
    trace, note = nvmetrace.load(rec.admin)
    io, io_note = nvmetrace.load(rec.io) if rec.io is not None else (None, rec.io_reason)
    if trace is None:
        return None, note
    if io is not None:
        trace.merge(io)
        n_io = trace.n_io()
        return trace, note.replace(" and 0 I/O commands traced", f" and {n_io} I/O commands traced")
    trace.io_note = io_note
    return trace, f"{note}; I/O not traced: {io_note}"


def place(tl, rec, why: str | None, events=None, note_event: bool = True) -> tuple[nvmetrace.NvmeTrace | None, str]:
    """Read the recorder (None: ``why``) and add placed copies of the admin command and power-state
    events (``events``, default all of ``tl``'s) to ``tl`` (dut/nvmetrace.add_placed); a NOTE event
    carries the trace's one-line summary or why not (unless ``note_event`` is False)."""
    try:
        trace, note = _load(rec) if rec is not None else (None, why or LOCAL)
    except Exception as e:  # noqa: BLE001 - runs in the step's finally: never hides why the step ended
        trace, note = None, f"nvme_trace: the trace could not be read ({' '.join(str(e).split())[:200]}); the host intervals stand"
    nvmetrace.add_placed(tl, tl.events() if events is None else events, trace, note, note_event)
    return trace, note


# -- what the placed commands and traced I/O give the step's measurements --------------------------------
TRANSITION_WINDOW_S = 0.6        # samples read around the set-feature
UNPREDICTED = "apst.unpredicted_s"   # a rails step in idle the APST table does not give (analysis/apst.py)
MEASURE = "measure:"


def measurements(cap, trace, limit_s: float | None, old_ps: int | None, new_ps: int, apst=None,
                 limit_of=None, level_of=None, no_limit: str = "", no_limit_of=None) -> list[dict]:
    """The step's rows: the power-state change timed from its traced submission (analysis/transitions.py)
    and the energy per I/O class of each workload phase the trace covers (analysis/io_energy.py); a
    phase without a trace gets one row saying why (its phase-level figures stand); each reset,
    format, sanitize, flush and firmware commit's energy above the level before (analysis/admin_energy.py);
    and with APST on (``apst``: the dut.nvme.ApstSetting in force, ``limit_of(old, new)``: EXLAT + ENLAT in
    s) each autonomous move timed from when it was due and each the table does not give flagged
    (analysis/apst.py; ``level_of(ps)``: the state's IDLP in W, or None). ``no_limit`` / ``no_limit_of(old,
    new)``: why there is no limit (a latency the drive does not report): the change timed, judged n/a, why said."""
    try:
        moves = _apst_rows(cap, trace, apst, new_ps, limit_of, level_of, no_limit_of)
        # a move the table does not give, before the table's first: the Set Features' window ends there too
        early = [json.loads(m["notes"])["expected_s"] / cap.interval_s for m in moves if m["name"] == UNPREDICTED]
        return (_transition_rows(cap, limit_s, old_ps, new_ps, apst, early[:1], no_limit) + moves
                + _io_rows(cap, trace) + command_rows(cap))
    except Exception as e:  # noqa: BLE001 - a refinement: the step's own figures stand without it
        logging.getLogger(__name__).warning("nvme_trace measurements: %s", e, exc_info=True)
        return []


def _apst_due(cap, e, apst, ps: int) -> list[float]:
    """With APST on: the sample id ITPT after the Set Features completed, before which the drive cannot
    have moved on its own (its window ends there), as a one-element list; [] otherwise."""
    move = next_move(_apst_table(apst), ps) if apst is not None and apst.enabled else None
    return [] if move is None else [float(cap.sample_id(e.t_end)) + move[1] / cap.interval_s]


def _apst_table(apst) -> list[tuple[int, int]]:
    """(ITPS, ITPT ms) per power state of the APST setting in force (dut.nvme.ApstSetting)."""
    return [(x.idle_transition_ps, x.idle_time_ms) for x in apst.entries]


def _power_set(cap):
    """The step's (last) Set Features power management, as placed, or None."""
    sets = [e for e in cap.events if e.kind == NVME and e.name == "set-feature power" and e.t_end is not None]
    return sets[-1] if sets else None


def _transition_rows(cap, limit_s, old_ps, new_ps, apst=None, ends=(), no_limit: str = "") -> list[dict]:
    e = _power_set(cap)
    if e is None:
        return []
    source = "nvme_trace" if e.meta.get("placed") == "nvme_trace" else "host"
    dt = cap.interval_s
    s = float(cap.sample_id(e.t_start))
    lo = max(0, int(s) - int(TRANSITION_WINDOW_S / dt))
    hi = min(cap.length, int(s) + int(TRANSITION_WINDOW_S / dt))
    if hi - lo < 8:
        return []
    nxt = [float(cap.sample_id(x.t_start)) for x in cap.events if x.t_start > e.t_end and _changes_load(x)]
    nxt += _apst_due(cap, e, apst, new_ps) + list(ends)
    p = cap.samples("p_total", lo, hi).astype(float)
    limit = math.nan if limit_s is None else float(limit_s)
    tr = time_transition(p, lo, s, dt, limit, old_ps, new_ps, source=source, end_at=min(nxt) if nxt else None,
                         no_limit=no_limit)
    notes = {"from_ps": old_ps, "to_ps": new_ps, "before_w": tr.before_w, "after_w": tr.after_w, "from": source,
             "why": tr.note or e.meta.get("nvme_trace"), "limit": "EXLAT(old) + ENLAT(new)"}
    ok = tr.verdict == "pass"
    return [row("transition.latency_s", e.name, tr.latency_s, "s", "info", notes=json.dumps(notes, default=str)),
            row("transition.rails_settle_s", e.name, tr.settle_s, "s", tr.verdict,
                upper=None if math.isnan(limit) else limit, marginal_upper=tr.marginal_from,
                requirement_met=ok if tr.verdict != "n/a" else None,
                notes=json.dumps(notes, default=str))]


def _apst_rows(cap, trace, apst, ps: int, limit_of, level_of=None, no_limit_of=None) -> list[dict]:
    """``apst.entry_latency_s`` (expected start -> the rails leave the old level) and ``apst.rails_settle_s``
    (expected start -> settled, judged against EXLAT(old) + ENLAT(new)) per APST move, from the step's
    Set Features (power management) to the capture's end; ``apst.unpredicted_s`` (the idle time before it,
    marginal: a reader's eye) per rails step in idle the table does not give, with why; one n/a row when
    the I/O was not traced (the idle time cannot be known). ``level_of(ps)``: IDLP in W or None."""
    if apst is None or not apst.enabled:
        return []
    e = _power_set(cap)
    if e is None:
        return []
    if trace is None or trace.io_note:
        why = (trace.io_note if trace is not None else None) or "no trace of the drive host's I/O"
        return [row("apst.rails_settle_s", "apst", None, "s", "n/a",
                    notes=json.dumps({"why": f"{why}: when the drive went idle is unknown"}))]
    dt = cap.interval_s
    # the state entered: the Set Features' rails step (its onset) when it moved them, else its completion
    s = float(cap.sample_id(e.t_start))
    lo, hi = max(0, int(s) - int(TRANSITION_WINDOW_S / dt)), min(cap.length, int(s) + int(TRANSITION_WINDOW_S / dt))
    entry = float(cap.sample_id(e.t_end))
    settled = entry
    if hi - lo >= 8:
        # its window ends LATE_S after it (or where APST could first move): a drive moving earlier than its
        # table gives would otherwise be read as the end of this change and go unseen
        end_at = min([s + APST_LATE_S / dt] + _apst_due(cap, e, apst, ps))
        tr = time_transition(cap.samples("p_total", lo, hi).astype(float), lo, s, dt, end_at=end_at)
        if math.isfinite(tr.latency_s):
            entry = max(entry, s + tr.latency_s / dt)
        if math.isfinite(tr.settle_s):
            settled = max(entry, s + tr.settle_s / dt)
    io = trace.io_arrays()
    busy = [(float(cap.sample_id(a)), float(cap.sample_id(b))) for a, b in zip(io["submit"], io["complete"])]
    # a format, reset or another Set Features later in the step moves the rails for a reason of its own
    later = [float(cap.sample_id(x.t_start)) for x in cap.events
             if x.kind == NVME and x is not e and x.t_start > e.t_end and _changes_load(x)]
    table = _apst_table(apst)
    moves = apst_moves(lambda a, b: cap.samples("p_total", max(0, a), min(cap.length, b)), dt, busy, entry,
                       float(cap.length), ps, table, limit_of or (lambda old, new: None), level_of,
                       quiet_until=min(later) if later else None, look_from=settled, no_limit_of=no_limit_of)
    out = []
    for m in moves:
        tr = m.tr
        notes = json.dumps({"from_ps": tr.from_ps, "to_ps": tr.to_ps, "expected_s": m.expected_s,
                            "idle_from_s": m.idle_from_s, "itpt_ms": None if math.isnan(m.itpt_s) else m.itpt_s * 1e3,
                            "before_w": tr.before_w, "after_w": tr.after_w, "from": "apst",
                            "predicted": m.predicted, "why": m.flag or tr.note,
                            "limit": "EXLAT(old) + ENLAT(new)"}, default=str)
        limit = None if math.isnan(tr.limit_s) else tr.limit_s
        name = f"apst PS{_ps(tr.from_ps)}->PS{_ps(tr.to_ps)}"
        if not m.predicted:        # not the table's move: flagged for a reader, never judged as if it were
            out.append(row(UNPREDICTED, name, m.expected_s - m.idle_from_s, "s", "marginal", notes=notes))
            continue
        out.append(row("apst.entry_latency_s", name, tr.latency_s, "s", "info", notes=notes))
        out.append(row("apst.rails_settle_s", name, tr.settle_s, "s", tr.verdict, upper=limit,
                       marginal_upper=tr.marginal_from,
                       requirement_met=(tr.verdict == "pass") if tr.verdict != "n/a" else None, notes=notes))
    return out


def _ps(ps) -> str:
    return "?" if ps is None else str(ps)


def first_apst_s(rows: list[dict]) -> float | None:
    """Capture seconds where the step's first APST move the rails showed began (a predicted one's due
    time + latency, a flagged one's onset), from the rows :func:`measurements` made; None without one."""
    out = []
    for m in rows:
        if m["name"] not in ("apst.entry_latency_s", UNPREDICTED) or m["value"] is None:
            continue
        t = json.loads(m["notes"]).get("expected_s")
        if isinstance(t, (int, float)) and math.isfinite(m["value"]):
            out.append(t + (m["value"] if m["name"] == "apst.entry_latency_s" else 0.0))
    return min(out) if out else None


def _changes_load(e) -> bool:
    """Events after which the rails may move for a reason of their own (a workload, another state, a
    format): the transition's window ends at the first. Reads (get-feature, logs, identify) do not."""
    if e.kind in ("fio", POWER_STATE):
        return True
    if e.kind == "phase":
        return e.name != "idle"
    return e.kind == NVME and e.name.startswith(("set-feature", "format", "sanitize", "reset", "fw-", "flush"))


ENERGY_COMMANDS = ("reset", "format", "sanitize", "flush", "fw-commit")


def command_rows(cap, events=None) -> list[dict]:
    """``command.energy_above_j`` per reset, format, sanitize, flush and firmware commit in the capture:
    from its placed submission (the host's call when it was not traced, said so) until the rails settle
    back or the next load-changing event (then ``cut_short`` says so); the baseline, the time to settle
    and the command's own submit -> complete in the notes. ``events``: the placed events (default the
    capture's)."""
    events = cap.events if events is None else events
    evs = sorted((e for e in events if e.kind == NVME and e.name in ENERGY_COMMANDS and e.t_end is not None),
                 key=lambda e: e.t_start)
    if not evs:
        return []
    loads = sorted((x for x in events if _changes_load(x) and x.t_end is not None), key=lambda x: x.t_start)
    dt = cap.interval_s
    out = []
    for e in evs:
        s = float(cap.sample_id(e.t_start))
        nxt = [x.t_start for x in loads if x.t_start > e.t_end and x is not e]
        before = max((x for x in loads if x.t_end <= e.t_start and x is not e), key=lambda x: x.t_end, default=None)
        lo = max(0, int(s) - int(COMMAND_PRE_S / dt) - 2)
        end_t = min(nxt) if nxt else None
        hi = cap.length if end_t is None else min(cap.length, int(cap.sample_id(end_t)) + 2)
        hi = min(hi, int(s + COMMAND_MAX_S / dt) + 2)
        if hi - lo < 4:
            continue
        p = cap.samples("p_total", lo, hi).astype(float)
        c = energy_above(p, s - lo, dt, complete=float(cap.sample_id(e.t_end)) - lo,
                         end_at=None if end_t is None else float(cap.sample_id(end_t)) - lo,
                         pre_from=None if before is None else float(cap.sample_id(before.t_end)) - lo,
                         pre_by="" if before is None else before.name)
        source = "nvme_trace" if e.meta.get("placed") == "nvme_trace" else "host"
        notes = {"command": e.name, "opcode": e.meta.get("opcode"), "from": source, "baseline_w": c.baseline_w,
                 "duration_s": c.duration_s, "command_s": e.t_end - e.t_start, "peak_w": c.peak_w,
                 "cut_short": c.cut_short, "why": c.note or (None if source == "nvme_trace" else e.meta.get("nvme_trace"))}
        value = None if math.isnan(c.energy_j) else c.energy_j
        out.append(row("command.energy_above_j", e.name, value, "J", "info" if value is not None else "n/a",
                       notes=json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v)
                                         for k, v in notes.items()}, default=str)))
    return out


def _io_rows(cap, trace) -> list[dict]:
    phases = [e for e in cap.events if e.kind == "phase" and e.name.startswith(MEASURE) and e.t_end is not None]
    if not phases:
        return []
    if trace is None or trace.io_note:
        why = trace.io_note if trace is not None else \
            next((e.meta.get("nvme_trace") for e in cap.events if e.kind == NOTE and e.name == "nvme_trace"), None)
        return [row("io.energy_per_io", ph.name, None, "J", "n/a",
                    notes=json.dumps({"why": why or "no trace of the drive host's I/O: the phase-level figures only"}))
                for ph in phases]
    idle = next((e for e in cap.events if e.kind == "phase" and e.name == "idle" and e.t_end is not None), None)
    io = trace.io_arrays()
    dt = cap.interval_s
    out = []
    for ph in phases:
        t0 = idle.t_start if idle is not None and idle.t_end <= ph.t_start else ph.t_start
        lo, hi = max(0, int(cap.sample_id(t0))), min(cap.length, int(cap.sample_id(ph.t_end)) + 1)
        if hi - lo < 10:
            continue
        t_first = cap.utc(lo)
        p = cap.samples("p_total", lo, hi).astype(float)
        m = (io["complete"] >= ph.t_start) & (io["submit"] <= ph.t_end)
        sub = {k: v[m] for k, v in io.items()}
        sub["submit"], sub["complete"] = sub["submit"] - t_first, sub["complete"] - t_first
        span = [(ph.t_start - t_first, ph.t_end - t_first)]
        idle_span = (idle.t_start - t_first, idle.t_end - t_first) if idle is not None and idle.t_end <= ph.t_start else None
        got = io_energy(p, 0.0, dt, sub, span, idle_span)
        if not got:
            out.append(row("io.energy_per_io", ph.name, None, "J", "n/a",
                           notes=json.dumps({"why": "no I/O traced in the phase"})))
        for g in got:
            out.append(row("io.energy_per_io", ph.name, g.energy_j, "J", "info",
                           notes=json.dumps({"class": g.io_class, "ci_low_j": g.ci_low_j, "ci_high_j": g.ci_high_j,
                                             "baseline_w": g.baseline_w, "ios": g.count, "windows": g.windows,
                                             "why": g.note, "ci": "95 %"}, default=lambda o: None)))
    return out
