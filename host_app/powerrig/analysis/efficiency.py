"""Efficiency per workload phase (MiB/s per W, IOPS per W, J per GiB, uJ per I/O) and curves over
power state, block size and queue depth (SNIA SDC / Micron FDP reports quote these)."""
from __future__ import annotations

import math
from collections import defaultdict

from powerrig.analysis.descriptors import number
from powerrig.analysis.result import PhaseResult

MIB = 1 << 20
GIB = 1 << 30


def phase_efficiency(r: PhaseResult) -> dict | None:
    """Figures of one workload phase; None when it has no throughput in its metadata."""
    m = r.phase.meta
    bw = number(m.get("bw_bytes"))
    iops = number(m.get("iops"))
    if bw is None and iops is None:
        return None
    w, e, t = r.mean_w, r.energy_j, r.duration_s - r.lost_s
    io_bytes = number(m.get("io_bytes")) or (bw * r.duration_s if bw is not None else None)
    ios = number(m.get("total_ios")) or (iops * r.duration_s if iops is not None else None)
    ok = w > 0 and not math.isnan(w)
    return {"phase": r.name, "rw": m.get("rw"), "bs": number(m.get("bs")), "iodepth": number(m.get("iodepth")),
            "power_state": r.phase.power_state, "mean_w": w, "mib_s": bw / MIB if bw is not None else math.nan,
            "iops": iops if iops is not None else math.nan,
            "mib_s_per_w": bw / MIB / w if ok and bw is not None else math.nan,
            "iops_per_w": iops / w if ok and iops is not None else math.nan,
            "j_per_gib": e / (io_bytes / GIB) if io_bytes else math.nan,
            "uj_per_io": e / ios * 1e6 if ios else math.nan, "measured_s": t,
            "invalid": r.invalid or ""}


def curves(rows: list[dict]) -> dict[str, dict[str, list[tuple]]]:
    """{axis: {series label: [(x, MiB/s/W, IOPS/W), ...]}} for axis in power_state, bs, iodepth.

    A series holds phases that differ only along the axis (same rw and the other two settings)."""
    axes = ("power_state", "bs", "iodepth")
    out = {}
    for axis in axes:
        others = [a for a in axes if a != axis]
        series = defaultdict(list)
        for r in rows:
            if r[axis] is None or r["invalid"]:
                continue
            label = f"{r['rw']} " + " ".join(f"{a}={_fmt(a, r[a])}" for a in others if r[a] is not None)
            series[label.strip()].append((r[axis], r["mib_s_per_w"], r["iops_per_w"]))
        out[axis] = {k: sorted(v) for k, v in series.items() if len({p[0] for p in v}) >= 2}
    return out


def _fmt(axis: str, v) -> str:
    if axis == "bs" and v:
        return f"{v / 1024:g}k"
    return f"{v:g}" if isinstance(v, float) else str(v)
