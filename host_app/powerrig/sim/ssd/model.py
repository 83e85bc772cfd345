"""Steady-state operating point of a drive: bandwidth per job and power, for a workload in a state.

How the numbers arise (docs/virtual-ssd.md has the long form):
1. Each job's demand: queue depth / command latency x block size, or its rate limit.
2. Concurrent jobs share the drive's command slots unequally (``job_share_spread``), so bytes per
   second per job go with share x block size when the drive is the bottleneck.
3. Writes cost media time: each host byte is programmed WAF times, and each GC copy is also read
   back (``gc_read_cost``). WAF comes from running the FTL on the jobs' streams (``ftl.py``).
   The state's media bandwidth (``write_MiBps`` / ``read_MiBps``) is the budget; host bandwidth is
   therefore media bandwidth / WAF, less the GC read time.
4. Power = idle + active + energy per MiB (host transfer, program, read incl. GC reads). If that
   exceeds the state's MP (or the thermal limit) the drive throttles all I/O until it fits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from powerrig.sim.ssd.ftl import Ftl, WriteStream, run_streams
from powerrig.sim.ssd.profile import Profile, load

MiB = 2**20
FTL_PAGES = 16000          # scaled-down logical size the FTL runs at
FTL_RU_PAGES = 32


@dataclass(frozen=True)
class JobLoad:
    """One fio job (one clone of numjobs) as the drive sees it."""
    name: str
    rw: str = "write"          # read, write, randread, randwrite, rw/readwrite, randrw, trim, randtrim
    bs: int = 131072
    iodepth: int = 1
    rwmixread: int = 50
    offset_frac: float = 0.0   # where its LBA range starts, as a fraction of the namespace
    size_frac: float = 1.0     # how much of the namespace it covers
    handle: int = 0            # placement handle (FDP: one per namespace / reclaim unit handle)
    rate_bps: float | None = None     # rate limit in bytes/s (all directions), None = unlimited
    rate_iops: float | None = None

    @property
    def random(self) -> bool:
        return self.rw.startswith("rand")

    @property
    def read_fraction(self) -> float:
        base = self.rw.removeprefix("rand")
        if base in ("read",):
            return 1.0
        if base in ("write", "trim"):
            return 0.0
        return self.rwmixread / 100.0


@dataclass
class OperatingPoint:
    ps: int
    read_Bps: np.ndarray           # per job, bytes/s
    write_Bps: np.ndarray
    watts: float
    waf: float
    throttled_by: str | None = None    # None, "power_state", "thermal"
    detail: dict = field(default_factory=dict)

    @property
    def total_Bps(self) -> float:
        return float(self.read_Bps.sum() + self.write_Bps.sum())

    @property
    def write_MiBps(self) -> float:
        return float(self.write_Bps.sum()) / MiB

    @property
    def read_MiBps(self) -> float:
        return float(self.read_Bps.sum()) / MiB


def job_shares(n: int, spread: float) -> np.ndarray:
    """Persistent relative command shares of n concurrent jobs, evenly spread +-spread around 1."""
    if n <= 1:
        return np.ones(max(n, 0))
    return 1.0 + spread * np.linspace(-1.0, 1.0, n)


@lru_cache(maxsize=256)
def _steady_waf(streams: tuple, fdp: bool, op: float, seed: int = 1) -> float:
    """WAF the FTL settles at for write streams ((first_frac, size_frac, rel_rate, random, handle), ...)."""
    if not streams:
        return 1.0
    used = np.zeros(FTL_PAGES, dtype=bool)
    ftl_streams, handles = [], []
    for first, size, rate, rnd, handle in streams:
        a = int(round(first * FTL_PAGES))
        n = max(4 * FTL_RU_PAGES, int(round(size * FTL_PAGES)))
        a = min(a, FTL_PAGES - n)
        if used[a:a + n].any():        # overlapping ranges share data: merge into the first stream's range
            continue
        used[a:a + n] = True
        ftl_streams.append(WriteStream(a, n, rate, rnd))
        handles.append(handle if fdp else 0)
    # the rest of the namespace holds cold, valid data (the drive was preconditioned full)
    free = np.flatnonzero(~used)
    if len(free):
        cuts = np.flatnonzero(np.diff(free) != 1)
        starts = np.r_[free[0], free[cuts + 1]]
        ends = np.r_[free[cuts], free[-1]] + 1
        for s, e in zip(starts, ends):
            ftl_streams.append(WriteStream(int(s), int(e - s), 0.0))
            handles.append(0)
    n_handles = max(handles) + 1
    ftl = Ftl(FTL_PAGES, FTL_RU_PAGES, op, handles=n_handles)
    stats = run_streams(ftl, ftl_streams, handles=handles, seed=seed)
    return float(stats.waf)


def steady_waf(profile: Profile, jobs: list[JobLoad], write_rates: np.ndarray, fdp: bool) -> float:
    key = []
    total = float(write_rates.sum())
    if total <= 0:
        return 1.0
    for j, r in zip(jobs, write_rates):
        if r <= 0:
            continue
        key.append((round(j.offset_frac, 4), round(j.size_frac, 4), round(r / total, 3), j.random, j.handle))
    return _steady_waf(tuple(sorted(key)), fdp, float(profile.media["over_provisioning"]))


def operating_point(profile: Profile, ps: int, jobs: list[JobLoad], fdp: bool = False,
                    cap_w: float | None = None) -> OperatingPoint:
    """Steady-state bandwidth per job and drive power for ``jobs`` running in power state ``ps``."""
    st = profile.state(ps)
    pw = profile.power
    n = len(jobs)
    if n == 0 or st.nops:
        return OperatingPoint(ps, np.zeros(n), np.zeros(n), idle_power(profile, ps), 1.0)
    bs = np.array([j.bs for j in jobs], dtype=float)
    fr = np.array([j.read_fraction for j in jobs])
    fw = 1.0 - fr
    qd = np.array([max(1, j.iodepth) for j in jobs], dtype=float)
    # 1. demand: Little's law with the command latency plus transfer time at the state's bandwidth
    lat_s = (fr * pw["read_latency_us"] + fw * pw["write_latency_us"]) * 1e-6 \
        + bs / (max(st.read_MiBps, st.write_MiBps, 1.0) * MiB)
    demand = qd / lat_s * bs
    for k, j in enumerate(jobs):
        if j.rate_bps:
            demand[k] = min(demand[k], j.rate_bps)
        if j.rate_iops:
            demand[k] = min(demand[k], j.rate_iops * bs[k])
    shares = job_shares(n, float(profile.media["job_share_spread"])) * bs
    r = float(profile.media["gc_read_cost"])
    waf = 1.0
    for _ in range(2):   # WAF depends on the write mix, the mix on the shares: two passes settle it
        # media time per host byte: reads 1/R, writes (1 + (WAF-1)(1+r))/W
        cost = fr / (st.read_MiBps * MiB) + fw * (1.0 + (waf - 1.0) * (1.0 + r)) / (st.write_MiBps * MiB)
        rate = _share_out(demand, shares, cost, float(pw["max_kiops"]) * 1e3, bs)
        new = steady_waf(profile, jobs, rate * fw, fdp) if (fw > 0).any() else 1.0
        if abs(new - waf) < 1e-3:
            break
        waf = new
    cost = fr / (st.read_MiBps * MiB) + fw * (1.0 + (waf - 1.0) * (1.0 + r)) / (st.write_MiBps * MiB)
    rate = _share_out(demand, shares, cost, float(pw["max_kiops"]) * 1e3, bs)
    read, write = rate * fr, rate * fw
    base, dyn = _power_terms(profile, ps, read.sum(), write.sum(), waf)
    watts = base + dyn
    limit, why = st.mp_w, "power_state"
    if cap_w is not None and cap_w < limit:
        limit, why = cap_w, "thermal"
    throttled = None
    if watts > limit and dyn > 0:
        alpha = max(0.0, (limit - base) / dyn)
        read, write, watts, throttled = read * alpha, write * alpha, base + dyn * alpha, why
    return OperatingPoint(ps, read, write, float(watts), float(waf), throttled,
                          {"media_write_Bps": float(write.sum() * waf),
                           "gc_read_Bps": float(write.sum() * (waf - 1.0))})


def _share_out(demand: np.ndarray, shares: np.ndarray, cost: np.ndarray, max_iops: float,
               bs: np.ndarray) -> np.ndarray:
    """Rates: each job min(demand, s * share) with the largest s that fits media time and IOPS."""
    def load(s):
        rate = np.minimum(demand, s * shares)
        return max(float((rate * cost).sum()), float((rate / bs).sum()) / max_iops), rate
    hi = float(np.max(demand / shares)) * 2.0
    if load(hi)[0] <= 1.0:
        return demand.copy()
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if load(mid)[0] > 1.0:
            hi = mid
        else:
            lo = mid
    return load(lo)[1]


def idle_power(profile: Profile, ps: int) -> float:
    st = profile.state(ps)
    if st.idle_w is not None:
        return float(st.idle_w)
    return min(float(profile.power["idle_w"]), st.mp_w)


def _power_terms(profile: Profile, ps: int, read_Bps: float, write_Bps: float, waf: float) -> tuple[float, float]:
    """(fixed, throughput-proportional) watts: idle + active, and energy per MiB moved."""
    pw = profile.power
    busy = read_Bps + write_Bps > 0
    base = idle_power(profile, ps) + (pw["active_w"] if busy else 0.0)
    host = (read_Bps + write_Bps) / MiB
    media_w = write_Bps * waf / MiB
    media_r = (read_Bps + write_Bps * (waf - 1.0)) / MiB
    dyn = 1e-3 * (pw["host_mj_per_mib"] * host + pw["program_mj_per_mib"] * media_w + pw["read_mj_per_mib"] * media_r)
    return base, dyn


def pulsing_parts(profile: Profile, op: OperatingPoint) -> tuple[float, float, float]:
    """(NAND program of host data, GC copies programmed and read back, NAND reads of host data) in W: the
    parts of ``op.watts`` that pulse on the rail (sim/ssd/waveform.py); the host transfer and the
    fixed terms stay flat. The same terms as ``_power_terms``, on the rates ``op`` moves (throttled)."""
    pw = profile.power
    w, r = float(op.write_Bps.sum()) / MiB, float(op.read_Bps.sum()) / MiB
    extra = max(op.waf - 1.0, 0.0)
    return (1e-3 * pw["program_mj_per_mib"] * w,
            1e-3 * (pw["program_mj_per_mib"] + pw["read_mj_per_mib"]) * w * extra,
            1e-3 * pw["read_mj_per_mib"] * r)


def expected_point(profile: str | Profile, ps: int, rw: str = "write", bs: int = 131072, iodepth: int = 128,
                   numjobs: int = 1, fdp: bool = False) -> dict:
    """What the virtual SSD will do in steady state: for checks through the rig (the lead's e2e test).

    Returns {"watts", "MiBps", "bytes_per_s", "waf", "throttled_by"} for ``numjobs`` equal jobs
    each covering its own 1/numjobs of the namespace.
    """
    prof = profile if isinstance(profile, Profile) else load(profile)
    jobs = [JobLoad(f"j{k}", rw, bs, iodepth, offset_frac=k / numjobs, size_frac=1.0 / numjobs,
                    handle=k if fdp else 0) for k in range(numjobs)]
    op = operating_point(prof, ps, jobs, fdp=fdp)
    return {"watts": op.watts, "MiBps": op.total_Bps / MiB, "bytes_per_s": op.total_Bps, "waf": op.waf,
            "throttled_by": op.throttled_by}
