"""Write an imported measurement as a powerrig capture: the same writer `powerrig record` uses, so
nothing downstream can tell an import from a recording except by its metadata (``source``, ``imported``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from powerrig.capture.writer import CaptureWriter
from powerrig.core.blocks import IntervalBlock
from powerrig.core.clock import ClockModel
from powerrig.core.errors import CaptureError
from powerrig.core.names import GapReason
from powerrig.core.sampling import Sampling

ROWS_PER_BLOCK = 100_000


def write_import(out: str | Path, t0_utc: float, interval_s: float, rails: list[str], cols: dict[str, np.ndarray],
                 sampling: Sampling, events: list, imported: dict) -> Path:
    """``cols``: field -> (rows x rails) arrays (v, i, p and optionally p_min, p_max, p_peak); row k
    covers [t0 + k * interval, t0 + (k+1) * interval) host UTC. ``cols["reason"]`` (optional, per row):
    why a row holds no valid reading ("invalid", "missing"): its gap record and annotation say so."""
    out = Path(out)
    if out.exists():
        raise CaptureError(f"{out} exists; choose another --out (an import never overwrites a capture)")
    n = len(cols["p"])
    if n == 0:
        raise CaptureError("the import holds no complete interval; nothing to write")
    p = cols["p"]
    full = {k: cols.get(k, p) for k in ("p_min", "p_max", "p_peak")}
    valid = np.isfinite(p).all(axis=1)
    reason = np.asarray(cols.get("reason", np.where(valid, "", GapReason.INVALID)), dtype=object)
    reason = np.where(valid, "", np.where(reason == "", GapReason.INVALID, reason))
    # blocks end where the reason changes, so each gap record carries its own
    cuts = np.flatnonzero(reason[1:] != reason[:-1]) + 1
    edges = sorted(set(range(0, n, ROWS_PER_BLOCK)) | set(cuts.tolist()) | {n})
    model = ClockModel(index_ref=0, utc_ref=t0_utc, period_s=interval_s)
    meta = {"device": {"device": imported.get("instrument", "import"), "serial": imported.get("serial", "")},
            "source": sampling.to_dict(), "imported": imported}
    with CaptureWriter(out, metadata=meta, clock=model) as w:
        for a, b in zip(edges, edges[1:]):
            flags = {"gap": GapReason(reason[a])} if reason[a] else {}
            w.write(IntervalBlock(a, 1, interval_s, tuple(rails), cols["v"][a:b], cols["i"][a:b], p[a:b],
                                  full["p_min"][a:b], full["p_max"][a:b], full["p_peak"][a:b],
                                  np.zeros(b - a, np.uint8), np.zeros(b - a, np.uint8), valid[a:b], flags))
        for e in sorted(events, key=lambda e: e.t_start):
            w.add_event(e)
    return out
