"""A step's NVMe commands from the drive host's kernel (dut/nvmetrace.py): the recorder the step's rig
offers, started before the step's first admin command and read after its last, and the admin
command events moved onto the traced submission and completion.

The capture writes each event when it ends, so the placed events are added to the step's timeline
as new events that name the host-stamped start they replace (``meta["replaces"]``); a capture
reader keeps the placed one (capture/reader.py). A rig without a drive host or virtual drive host
(the tools run on this host) keeps the host intervals and says so on each event.
"""
from __future__ import annotations

import copy

from powerrig.core.timeline import NOTE, NVME, POWER_STATE, Event
from powerrig.dut import nvmetrace

LOCAL = ("nvme_trace: the drive's tools run on this host (no drive host, no virtual drive host): "
         "the host intervals stand")


def recorder(rig, name: str):
    """A started recorder for the step (KernelTrace on a drive host, SimTrace on a virtual rig), or
    None and why not."""
    endpoint = (rig.info or {}).get("endpoint")
    if rig.drive_host:
        from powerrig.dut.remote import drive_host
        rec = nvmetrace.KernelTrace(drive_host(rig.drive_host), rig.controller, name).start()
    elif endpoint:
        from powerrig.sim.drive_trace import SimTrace
        rec = SimTrace(endpoint, rig.controller, name).start()
    else:
        return None, LOCAL
    return (rec, None) if rec.started else (None, rec.reason)


def place(tl, rec, why: str | None) -> tuple[nvmetrace.NvmeTrace | None, str]:
    """Read the recorder (None: ``why``) and add the placed copies of the step's admin command and
    power-state events to ``tl``; a NOTE event carries the trace's one-line summary or why not."""
    trace, note = nvmetrace.load(rec) if rec is not None else (None, why or LOCAL)
    evs = [e for e in tl.events() if e.kind in (NVME, POWER_STATE) and e.t_end is not None
           and "replaces" not in (e.meta or {})]
    copies = [copy.deepcopy(e) for e in evs]
    for c in copies:
        c.meta["replaces"] = c.t_start
    nvmetrace.place(copies, trace, None if trace is not None else note)
    for c in copies:
        tl.add(c)
    t = max((e.t_end for e in evs), default=None)
    if t is not None:
        tl.add(Event(NOTE, "nvme_trace", t, t, meta={"nvme_trace": note,
                                                      "placed": sum(c.meta.get("placed") == "nvme_trace" for c in copies
                                                                    if c.kind == NVME)}))
    return trace, note
