"""Where a placed admin command's width and error go (bench_qemu_nvme.py's ``command_split``): each
command the guest kernel traced, paired with QEMU's own record of it (same command id, nearest
submission), split into the guest's ``nvme_setup_cmd`` -> QEMU taking it (``take``: the doorbell,
QEMU's main loop waking for its submission-queue timer), QEMU taking it -> QEMU's completion
(``run``: the emulated command, its DMA), QEMU's completion -> the guest's ``nvme_complete_rq``
(``back``: the interrupt, the vCPU woken, the driver's completion path). take + run + back is the
placed event's width; ``take`` is its error. A negative ``take`` or ``back`` can only be the
guest->host clock map's error (the order is causal), so their minima bound that error from below.
"""
from __future__ import annotations

import numpy as np

STAGES = ("take", "run", "back", "width")
SIZES = {"nvme_admin_get_log_page": 512, "nvme_admin_identify": 4096}   # smart-log's 512 B, id-ctrl's 4 KiB


def matches(traced, qemu, window_s: float = 0.05):
    """(traced, QEMU) pairs: each traced admin command (nvmetrace.Command, on this host's clock) with
    its QEMU command (trace.Command, qid 0, completed, same cid, the nearest submission within
    ``window_s``)."""
    by_cid: dict[int, list] = {}
    for c in qemu:
        if c.qid == 0 and c.t_complete is not None:
            by_cid.setdefault(c.cid, []).append(c)
    for k in traced:
        if not k.admin or k.t_complete is None:
            continue
        cands = [q for q in by_cid.get(k.cid, ()) if abs(q.t_submit - k.t_submit) < window_s]
        if cands:
            yield k, min(cands, key=lambda q: abs(q.t_submit - k.t_submit))


def pair(traced, qemu, window_s: float = 0.05) -> list[dict]:
    """Each matched command's stages in ms (see ``matches``)."""
    return [{"t": k.t_submit, "opcode": k.opcode, "bytes": SIZES.get(k.opcode),
             "take": (q.t_submit - k.t_submit) * 1e3, "run": (q.t_complete - q.t_submit) * 1e3,
             "back": (k.t_complete - q.t_complete) * 1e3, "width": (k.t_complete - k.t_submit) * 1e3}
            for k, q in matches(traced, qemu, window_s)]


def summary(rows: list[dict], t0: float, tail: int = 8) -> dict:
    """Per stage p50 / p99 / max (ms), per opcode, and the ``tail`` widest commands with their stages
    and when (s after ``t0``, the first admin command)."""
    def stats(rs):
        return {s: [round(float(np.percentile([r[s] for r in rs], q)), 3) for q in (50, 99, 100)] for s in STAGES}
    if not rows:
        return {}
    out = {"n": len(rows), "all": stats(rows),
           "take_min_ms": round(min(r["take"] for r in rows), 3), "back_min_ms": round(min(r["back"] for r in rows), 3)}
    for op in sorted({r["opcode"] for r in rows}):
        out[op] = stats([r for r in rows if r["opcode"] == op])
    out["widest"] = [{"at_s": round(r["t"] - t0, 2), "op": r["opcode"].replace("nvme_admin_", ""),
                      **{s: round(r[s], 2) for s in STAGES}} for r in sorted(rows, key=lambda r: -r["width"])[:tail]]
    return out
