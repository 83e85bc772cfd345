"""``powerrig sim fio``: fio at its command line, running its jobs on a virtual SSD.

Accepts job files and command-line job options (the subset the fio runner writes), takes real
wall-clock time for the run so the rails show the work while it happens, and writes fio 3.33
shaped JSON/json+ and bandwidth/IOPS logs ($POWERRIG_SIM_FIO_VERSION=3.36 adds ``job_start``).
Jobs must target virtual namespaces (/dev/nvmeXnY); anything else fails the way fio fails to open it.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time

if __name__ == "__main__" and not __package__:      # run by path (sim/rig.py: tool_command): find powerrig
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from powerrig.sim.ssd.client import EndpointError, endpoint_from, request

VERSION_ENV = "POWERRIG_SIM_FIO_VERSION"
PERCENTILES = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)
DIRS = ("read", "write", "trim")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtTpP]?)(?:[iI]?[bB]?)\s*$")


def parse_size(text, whole: int | None = None) -> int:
    """A size as fio reads it (kb_base=1024: 4k = 4096; "4KiB", "1m", "10%" of ``whole``).

    The impersonation's own reading, written apart from the runner's (powerrig.dut.fio.parse_size),
    so a mistake in one is caught by tests that run the other."""
    t = str(text).strip()
    if t.endswith("%"):
        if whole is None:
            raise ValueError(f"percentage {t} is not allowed here")
        return int(whole * float(t[:-1]) / 100)
    m = _SIZE.match(t)
    if m is None:
        raise ValueError(f"bad size {t!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])

_DEV = re.compile(r"^/dev/(?:nvme|ng)(\d+)n(\d+)$")
FDP_ENGINES = ("io_uring_cmd", "xnvme")
DEFAULT_RANDSEED = "46386204153304124"      # fio's FIO_RANDSEED
START_TIMEOUT_S = 300.0


def parse_time_s(s: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)?", str(s).strip())
    if not m:
        raise ValueError(f"bad time {s!r}")
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]


class Job:
    """One [section] of a job file (or of the command line): its name and options."""

    def __init__(self, name: str, opts: dict | None = None):
        self.name = name
        self.opts = {} if opts is None else opts


def _norm_cdf(z: float) -> float:
    """The standard normal CDF. math.erf rather than statistics.NormalDist: importing statistics
    (decimal, fractions, random) doubled what this short-lived process imports (docs/scale.md)."""
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _norm_ppf(p: float) -> float:
    """Its inverse, by bisection (a few fixed percentiles per report; 1e-12 is far below an ns)."""
    lo, hi = -40.0, 40.0
    while hi - lo > 1e-12:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _norm_cdf(mid) < p else (lo, mid)
    return 0.5 * (lo + hi)


def parse_job_file(text: str) -> tuple[dict, list[Job]]:
    glob, jobs, cur = {}, [], None
    for raw in text.splitlines():
        line = raw.split(";")[0].strip() if not raw.strip().startswith("#") else ""
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1].strip()
            cur = glob if name == "global" else Job(name, {})
            if cur is not glob:
                jobs.append(cur)
            continue
        k, _, v = line.partition("=")
        target = glob if cur is None or cur is glob else cur.opts
        target[k.strip()] = v.strip() if _ else "1"
    return glob, jobs


def parse_argv(argv: list[str]) -> tuple[dict, dict, list[Job]]:
    """(control options, global options, jobs) from a fio command line."""
    control, glob, jobs, cur = {}, {}, [], None
    control_keys = {"output-format", "output", "status-interval", "version", "help", "showcmd", "eta",
                    "minimal", "parse-only"}
    for a in argv:
        if a.startswith("--"):
            k, _, v = a[2:].partition("=")
            v = v if _ else "1"
            if k in control_keys:
                control[k] = v
            elif k == "name":
                cur = Job(v, {})
                jobs.append(cur)
            else:
                (cur.opts if cur else glob)[k] = v
        else:
            try:
                with open(a) as f:
                    g, js = parse_job_file(f.read())
            except OSError as e:
                raise ValueError(f"failed to open job file {a}: {e.strerror}") from None
            glob.update(g)
            jobs.extend(js)
            cur = None
    return control, glob, jobs


class FioFailure(Exception):
    pass


def _on(opts: dict, key: str) -> bool:
    return key in opts and str(opts[key]).strip().lower() not in ("0", "false", "no", "off")


def _clone_jobs(glob: dict, jobs: list[Job]) -> list[dict]:
    """Expand numjobs into clones with fio's global job numbering (the log file index), reporting group
    (``stonewall``/``wait_for_previous`` and ``new_group`` start one once the current has a job) and
    stage (``stonewall``: runs after every job before it)."""
    out, gid, stage = [], 0, 0
    for job in jobs:
        o = {**glob, **job.opts}
        wall = _on(o, "stonewall") or _on(o, "wait_for_previous")
        if (wall or _on(o, "new_group")) and out:
            gid += 1
            stage += 1 if wall else 0
        for c in range(int(o.get("numjobs", 1))):
            out.append({"name": job.name, "clone": c, "opts": o, "index": len(out) + 1, "groupid": gid,
                        "stage": stage})
    return out


def _placement(o: dict, ident: dict, nsid: int, fn: str) -> int:
    """The reclaim unit handle a job's writes land in. As on a real FDP drive, only writes that carry a
    placement directive (fio ``fdp=1``, which needs a passthrough engine on the generic char device)
    go to the namespace's own handle; every other write lands in the default handle 0, shared by all
    namespaces, where the streams mix. A drive without FDP has one handle."""
    engine = o.get("ioengine", "psync")
    if engine == "io_uring_cmd" and not fn.startswith("/dev/ng"):
        raise ValueError(f"ioengine io_uring_cmd only works with nvme ns generic char devices (/dev/ngXnY), "
                         f"not {fn}")
    if not _on(o, "fdp"):
        return 0
    if engine not in FDP_ENGINES:
        raise ValueError(f"{engine}: engine does not support fdp=1 (use ioengine=io_uring_cmd)")
    if not ident["fdp"]:
        raise ValueError(f"{fn}: fdp=1 but the device reports no Flexible Data Placement (fetch ruhs failed)")
    return nsid - 1


def _span(o: dict, ident: dict) -> tuple[int, int]:
    """The job's (offset, size) in bytes within its namespace, exact integers. What a verify pass and
    a sized job's end are counted in: size_frac x capacity in floats lost a byte in ~4 % of sizes, and
    a healthy drive's last acknowledged block then read back short, as lost (issue 41 item 4)."""
    ns_size = ident["capacity_bytes"] // max(1, ident["namespaces"])
    offset = parse_size(o.get("offset", "0"), ns_size)
    size = parse_size(o["size"], ns_size) if "size" in o else ns_size - offset
    return offset, max(1, min(size, ns_size - offset))


def _load_for(clone: dict, ident: dict, nsid: int) -> dict:
    o = clone["opts"]
    handle = _placement(o, ident, nsid, o.get("filename", ""))
    ns_size = ident["capacity_bytes"] // max(1, ident["namespaces"])
    offset, size = _span(o, ident)
    bs = parse_size(o.get("bs", o.get("blocksize", "4k")))
    rate = o.get("rate")
    rate_bps = parse_size(rate.split(",")[0]) if rate else None
    rate_iops = o.get("rate_iops")
    cap = ident["capacity_bytes"]
    load = {"name": clone["name"], "rw": o.get("rw", o.get("readwrite", "read")), "bs": bs,
            "iodepth": int(o.get("iodepth", 1)), "rwmixread": int(o.get("rwmixread", 50)),
            "offset_frac": ((nsid - 1) * ns_size + offset) / cap, "size_frac": size / cap,
            "handle": handle, "rate_bps": float(rate_bps) if rate_bps else None,
            "rate_iops": float(rate_iops.split(",")[0]) if rate_iops else None}
    if o.get("verify", "0") not in ("0", "", "null") and load["rw"] == "write":
        # a sequential write with verify headers: the drive keeps which seed's headers each block holds
        load["verify"] = {"ns": nsid, "offset": offset, "pattern": _seed(o), "fsync": _fsync(o)}
    return load


def _fsync(o: dict) -> int:
    """fio ``fsync=N``: a flush (fsync of the device: an NVMe Flush) after every N writes; 0: none."""
    v = str(o.get("fsync", "0")).strip()
    if not v.isdigit():
        raise ValueError(f"fsync={v}: not a number of writes")
    return int(v)


def _seed(o: dict) -> str:
    """The verify headers' seed: fio derives it from ``randseed`` (its default when not given)."""
    return str(o.get("randseed", DEFAULT_RANDSEED))


def main(argv: list[str]) -> int:
    ep, argv = endpoint_from(list(argv))
    version = os.environ.get(VERSION_ENV, "3.33")
    if "--version" in argv:
        print(f"fio-{version}")
        return 0
    try:
        control, glob, jobs = parse_argv(argv)
        if not jobs:
            print("No job(s) defined", file=sys.stderr)
            return 1
        return _run(ep, version, control, glob, jobs)
    except ValueError as e:
        print(f"fio: {e}", file=sys.stderr)
        return 1
    except EndpointError as e:
        print(f"fio (powerrig sim): {e}", file=sys.stderr)
        return 1


def _run(ep, version, control, glob, jobs) -> int:
    clones = _clone_jobs(glob, jobs)
    fmt = control.get("output-format", "normal")
    plus = "json+" in fmt
    out_path = control.get("output")
    status_interval = parse_time_s(control["status-interval"]) if "status-interval" in control else None
    # resolve devices; a path that is not a virtual namespace fails like fio's open() would
    idents = {}
    for c in clones:
        fn = c["opts"].get("filename", "")
        m = _DEV.match(fn)
        ctrl = f"/dev/nvme{m.group(1)}" if m else None
        r = request(ep, {"op": "identify", "dev": f"{ctrl}n{m.group(2)}"}) if m else {"ok": False}
        if not r.get("ok"):
            print(f"fio: pid=0, err=2/file:filesetup.c:805, func=open(\"{fn or c['name']}\"), "
                  f"error=No such file or directory", file=sys.stderr)
            _emit(fmt, out_path, _report(version, glob, clones, None, error=2, now=time.time(), plus=plus))
            return 1
        idents[ctrl] = r
        c["ctrl"] = ctrl
        c["load"] = _load_for(c, r, int(m.group(2)))
    for c in clones:
        if c["opts"].get("time_based", "0") not in ("0", "") and not parse_time_s(c["opts"].get("runtime", "0")):
            raise ValueError("time_based needs runtime=")
    if any(_on(c["opts"], "verify_only") for c in clones):
        return _verify_only(ep, version, fmt, out_path, glob, clones, idents, plus)
    failed = False
    for stage in sorted({c["stage"] for c in clones}):      # stonewall: one stage after the other
        failed = _run_stage(ep, [c for c in clones if c["stage"] == stage], idents, fmt, out_path,
                            status_interval, version, glob, clones, plus)
        if failed:
            break
    t_end = time.time()
    for c in clones:
        _write_logs(c)
    _emit(fmt, out_path, _report(version, glob, clones, True, now=t_end, error=5 if failed else 0, plus=plus),
          append=status_interval is not None)
    return 1 if failed else 0


def _run_stage(ep, stage: list[dict], idents, fmt, out_path, status_interval, version, glob, clones, plus) -> bool:
    """Run one stage's jobs together on their drives until their runtime or size is done; True if one failed."""
    by_ctrl: dict[str, list] = {}
    for c in stage:
        by_ctrl.setdefault(c["ctrl"], []).append(c)
    runtime = max(parse_time_s(c["opts"].get("runtime", "0")) for c in stage)
    time_based = any(c["opts"].get("time_based", "0") not in ("0", "") for c in stage)
    limit = runtime if runtime else 3600.0
    # Job set-up may take the virtual SSD a while: a new job mix's steady-state WAF comes from running
    # the FTL (seconds of CPU for many random streams, more on a loaded host), so this request waits
    # as long as fio's own set-up would, not the endpoint's default 10 s.
    runs = {ctrl: request(ep, {"op": "start_io", "dev": ctrl, "jobs": [c["load"] for c in cs],
                                "runtime_s": limit}, timeout=START_TIMEOUT_S)["run_id"] for ctrl, cs in by_ctrl.items()}
    t0 = time.time()     # as fio: runtime counts from when the jobs are running, not from job setup
    failed = False
    next_status = t0 + status_interval if status_interval else None
    sizes = {id(c): _span(c["opts"], idents[c["ctrl"]])[1] for c in stage}
    while True:
        now = time.time()
        if now - t0 >= limit:
            break
        time.sleep(min(0.05, max(0.0, limit - (now - t0))))
        done = True
        for ctrl, rid in runs.items():
            st = request(ep, {"op": "run_status", "dev": ctrl, "run_id": rid})
            if st.get("failed"):
                failed = True
            if not time_based:
                moved = [a + b for a, b in zip(st.get("read_bytes", []), st.get("write_bytes", []))]
                done &= all(m >= sizes[id(c)] for m, c in zip(moved, by_ctrl[ctrl]))
        if failed or (not time_based and done):
            break
        if next_status and time.time() >= next_status:
            _emit(fmt, out_path, _report(version, glob, clones, None, now=time.time(), plus=plus,
                                         partial=(ep, runs, by_ctrl, t0)), append=True)
            next_status += status_interval
    results = {ctrl: request(ep, {"op": "stop_io", "dev": ctrl, "run_id": rid}) for ctrl, rid in runs.items()}
    for ctrl, res in results.items():
        for k, c in enumerate(by_ctrl[ctrl]):
            c["result"] = {"t_start": res["t_start"], "t_end": res["t_end"], "read": res["read_bytes"][k],
                           "write": res["write_bytes"][k], "history": [(h[0], h[1][k], h[2][k]) for h in res["history"]],
                           "failed": res["failed"], "failed_at": res["failed_at"]}
            if res["failed"]:
                failed = True
                print(f"fio: io_u error on file {c['opts'].get('filename')}: Input/output error: "
                      f"{c['load']['rw'].removeprefix('rand')} offset=0, buflen={c['load']['bs']}", file=sys.stderr)
    return failed


def _verify_only(ep, version, fmt, out_path, glob, clones, idents, plus) -> int:
    """``--verify_only``: read back what the job would have written and check each block's header; a
    block holding another seed's headers (or none) is reported as fio reports it, and fio fails."""
    bad_any = False
    t0 = time.time()
    for c in clones:
        o, load = c["opts"], c["load"]
        fn = o.get("filename", "")
        ident = idents[c["ctrl"]]
        offset, size = _span(o, ident)          # exact integers (not size_frac x capacity)
        want = _seed(o)
        bad = request(ep, {"op": "verify", "dev": fn, "offset": offset, "size": size, "bs": load["bs"],
                           "pattern": want})["bad"]
        for off in bad:
            print(f"verify: bad header rand_seed ?, wanted {want} at file {fn} offset {off}, length {load['bs']} "
                  f"(requested block: offset={off}, length={load['bs']})", file=sys.stderr)
        if bad:
            bad_any = True
            print(f"fio: pid=0, err=84/file:io_u.c:2213, func=io_u_queued_complete, error=Invalid or incomplete "
                  f"multibyte or wide character", file=sys.stderr)
        read_s = size / max(1.0, max((s["read_MiBps"] or 0) for s in ident["states"]) * 2**20)
        c["result"] = {"t_start": t0, "t_end": t0 + read_s, "read": float(size), "write": 0.0,
                       "history": [(t0, size / read_s if read_s else 0.0, 0.0)], "failed": bool(bad),
                       "failed_at": None}
    _emit(fmt, out_path, _report(version, glob, clones, True, now=time.time(), error=84 if bad_any else 0, plus=plus))
    return 1 if bad_any else 0


def _emit(fmt: str, out_path: str | None, report: dict, append: bool = False) -> None:
    text = json.dumps(report, indent=2, separators=(",", " : ")) + "\n" if fmt.startswith("json") else _normal(report)
    if out_path:
        with open(out_path, "a" if append else "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _normal(report: dict) -> str:
    lines = []
    for j in report["jobs"]:
        lines.append(f"{j['jobname']}: (groupid={j['groupid']}, jobs=1): err={j['error']:2d}")
        for d in DIRS:
            s = j[d]
            if s["io_bytes"]:
                lines.append(f"  {d}: IOPS={s['iops']:.0f}, BW={s['bw']}KiB/s ({s['bw_bytes']}B/s)"
                             f"({s['io_bytes']}B/{s['runtime']}msec)")
    return "\n".join(lines) + "\n"


def _dir_split(c: dict) -> dict:
    """Bytes per direction for a clone: the drive reports read/write; trims count as writes there."""
    rw = c["load"]["rw"].removeprefix("rand")
    if rw == "trim":
        return {"read": 0.0, "write": 0.0, "trim": c["result"]["write"]}
    return {"read": c["result"]["read"], "write": c["result"]["write"], "trim": 0.0}


def _lat_block(mean_ns: float, n: int, plus: bool) -> dict:
    sigma = 0.35
    mu = math.log(max(mean_ns, 1.0)) - sigma * sigma / 2
    pct = {f"{p:.6f}": int(math.exp(mu + sigma * _norm_ppf(p / 100))) for p in PERCENTILES}
    blk = {"min": int(mean_ns * 0.4) if n else 0, "max": int(mean_ns * 4) if n else 0, "mean": mean_ns if n else 0.0,
           "stddev": mean_ns * sigma if n else 0.0, "N": n}
    if n:
        blk["percentile"] = pct
        if plus:
            blk["bins"] = {str(v): max(1, n // len(pct)) for v in pct.values()}
    return blk


LAT_EDGES = {"latency_ns": (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000),
             "latency_us": (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000),
             "latency_ms": (2, 4, 10, 20, 50, 100, 250, 500, 750, 1000, 2000)}
DEPTHS = (1, 2, 4, 8, 16, 32)


def _latency_buckets(mean_ns: float, sigma: float = 0.35) -> dict:
    """fio's latency_ns/us/ms tables: % of I/Os whose completion latency falls in each bucket (up to the
    key, from the previous key), from the same log-normal the percentiles come from."""
    out = {k: {str(e): 0.0 for e in edges} for k, edges in LAT_EDGES.items()}
    out["latency_ms"][">=2000"] = 0.0
    if mean_ns <= 0:
        return out
    mu = math.log(mean_ns) - sigma * sigma / 2
    cdf = lambda ns: _norm_cdf((math.log(ns) - mu) / sigma)  # noqa: E731
    prev = 0.0
    for key, scale in (("latency_ns", 1), ("latency_us", 1e3), ("latency_ms", 1e6)):
        for e in LAT_EDGES[key]:
            c = cdf(e * scale)
            out[key][str(e)] = round(100 * (c - prev), 6)
            prev = c
    out["latency_ms"][">=2000"] = round(100 * (1 - prev), 6)
    return out


def _depth_table(qd: int, ge: str = ">=64", keys=DEPTHS) -> dict:
    """iodepth_level: 100 % at the bucket of the job's real depth (fio's keys: 1 2 4 8 16 32 >=64)."""
    table = {str(k): 0.0 for k in keys}
    table[ge] = 0.0
    slot = ge if qd >= 64 else str(max(k for k in keys if k <= max(qd, 1)))
    table[slot] = 100.0
    return table


def _dir_stats(bytes_: float, runtime_ms: int, bs: int, iodepth: int, plus: bool) -> dict:
    ios = int(bytes_ // bs) if bs else 0
    secs = max(runtime_ms, 1) / 1000
    bw_bytes = int(bytes_ / secs) if ios else 0
    iops = ios / secs if ios else 0.0
    clat = (iodepth / iops * 1e9) if iops else 0.0
    return {"io_bytes": int(ios * bs), "io_kbytes": int(ios * bs) // 1024, "bw_bytes": bw_bytes,
            "bw": bw_bytes // 1024, "iops": iops, "runtime": runtime_ms if ios else 0, "total_ios": ios,
            "short_ios": 0, "drop_ios": 0,
            "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
            "clat_ns": _lat_block(clat, ios, plus), "lat_ns": _lat_block(clat * 1.01, ios, False),
            "bw_min": bw_bytes // 1024, "bw_max": bw_bytes // 1024, "bw_agg": 100.0 if ios else 0.0,
            "bw_mean": float(bw_bytes // 1024), "bw_dev": 0.0, "bw_samples": max(0, int(secs * 2)) if ios else 0,
            "iops_min": int(iops), "iops_max": int(iops), "iops_mean": iops, "iops_stddev": 0.0,
            "iops_samples": max(0, int(secs * 2)) if ios else 0}


def _report(version, glob, clones, results, now: float, error: int = 0, partial=None, plus: bool = False) -> dict:
    entries = []
    group_reporting = any(c["opts"].get("group_reporting", "0") not in ("0", "") for c in clones) or \
        glob.get("group_reporting", "0") not in ("0", "")
    progress = {}
    if partial:
        ep, runs, by_ctrl, t0 = partial
        for ctrl, rid in runs.items():
            st = request(ep, {"op": "run_status", "dev": ctrl, "run_id": rid})
            for k, c in enumerate(by_ctrl[ctrl]):
                progress[id(c)] = (st["read_bytes"][k], st["write_bytes"][k], t0)
    for c in clones:
        o = c["opts"]
        res = c.get("result")
        if res:
            t_s, t_e = res["t_start"], (res["failed_at"] or res["t_end"])
            split = _dir_split(c)
            err = 5 if res["failed"] else 0
        elif id(c) in progress:
            r, w, t_s = progress[id(c)]
            t_e = now
            split = {"read": r, "write": w, "trim": 0.0}
            err = 0
        else:
            t_s = t_e = now
            split = {d: 0.0 for d in DIRS}
            err = error
        rt_ms = int(round((t_e - t_s) * 1000))
        bs = c.get("load", {}).get("bs", 4096)
        qd = c.get("load", {}).get("iodepth", 1)
        e = {"jobname": c["name"], "groupid": c["groupid"], "error": err, "eta": 0,
             "elapsed": int(math.ceil(t_e - t_s)), "job options": {k: v for k, v in o.items() if k not in glob}}
        for d in DIRS:
            e[d] = _dir_stats(split[d], rt_ms, bs, qd, plus)
        # fsync=N: one completed flush per N completed writes (the drive flushes them as they complete)
        every = _fsync(o)
        syncs = int(split["write"] // bs) // every if every and bs else 0
        e["sync"] = {"total_ios": syncs, "lat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": syncs}}
        e["job_runtime"] = rt_ms
        if tuple(int(x) for x in version.split(".")[:2]) >= (3, 36):
            e["job_start"] = int(t_s * 1000)
        clat = max((e[d]["clat_ns"]["mean"] for d in DIRS), default=0.0)
        e.update({"usr_cpu": 1.5, "sys_cpu": 3.0, "ctx": int(rt_ms * 10), "majf": 0, "minf": 20,
                  "iodepth_level": _depth_table(qd),
                  "iodepth_submit": _depth_table(qd, keys=(0, 4, 8, 16, 32, 64)) if qd > 1 else
                  {"0": 0.0, "4": 100.0, "8": 0.0, "16": 0.0, "32": 0.0, "64": 0.0, ">=64": 0.0},
                  "iodepth_complete": _depth_table(qd, keys=(0, 4, 8, 16, 32, 64)) if qd > 1 else
                  {"0": 0.0, "4": 100.0, "8": 0.0, "16": 0.0, "32": 0.0, "64": 0.0, ">=64": 0.0},
                  **_latency_buckets(clat), "latency_depth": qd,
                  "latency_target": 0, "latency_percentile": 100.0, "latency_window": 0})
        e["_split"], e["_bs"] = split, bs
        entries.append(e)
    disk_util = _disk_util(clones, entries)
    if group_reporting and entries:
        groups: dict[int, list] = {}
        for e in entries:
            groups.setdefault(e["groupid"], []).append(e)
        entries = [_merge(g) for _, g in sorted(groups.items())]
    for e in entries:
        e.pop("_split", None)
        e.pop("_bs", None)
    glob_opts = {k: v for k, v in glob.items()}
    report = {"fio version": f"fio-{version}", "timestamp": int(now), "timestamp_ms": int(now * 1000),
              "time": time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)), "global options": glob_opts,
              "jobs": entries}
    if disk_util:
        report["disk_util"] = disk_util
    return report


def _disk_util(clones: list[dict], entries: list[dict]) -> list[dict]:
    """fio's disk_util: per device the I/Os, ticks (ms busy per direction) and % utilisation."""
    per: dict[str, dict] = {}
    for c, e in zip(clones, entries):
        fn = c["opts"].get("filename", "")
        if not _DEV.match(fn) or "result" not in c:
            continue
        name = os.path.basename(fn)
        d = per.setdefault(name, {"name": name, "read_ios": 0, "write_ios": 0, "read_merges": 0, "write_merges": 0,
                                  "read_ticks": 0, "write_ticks": 0, "in_queue": 0, "util": 0.0, "_rt": 0})
        for dd, col in (("read", "read"), ("write", "write"), ("trim", "write")):
            s = e[dd]
            d[f"{col}_ios"] += s["total_ios"]
            d[f"{col}_ticks"] += int(s["total_ios"] * s["clat_ns"]["mean"] / 1e6) if s["total_ios"] else 0
        d["_rt"] = max(d["_rt"], e["job_runtime"])
    out = []
    for d in per.values():
        d["in_queue"] = d["read_ticks"] + d["write_ticks"]
        d["util"] = 100.0 if (d["read_ios"] or d["write_ios"]) else 0.0
        d.pop("_rt")
        out.append(d)
    return out


def _merge(entries: list[dict]) -> dict:
    """group_reporting, as fio does it: one entry per group named after its first job; bytes and I/Os
    summed, each direction's runtime the longest, ``job_runtime`` the SUM over the group's jobs."""
    first = dict(entries[0])
    first["job_runtime"] = sum(e["job_runtime"] for e in entries)
    first["error"] = max(e["error"] for e in entries)
    for d in DIRS:
        rt = max(e[d]["runtime"] for e in entries)
        tot = sum(e[d]["io_bytes"] for e in entries)
        ios = sum(e[d]["total_ios"] for e in entries)
        merged = dict(entries[0][d])
        secs = max(rt, 1) / 1000
        merged.update({"io_bytes": tot, "io_kbytes": tot // 1024, "total_ios": ios,
                       "bw_bytes": int(tot / secs) if ios else 0, "bw": int(tot / secs) // 1024 if ios else 0,
                       "iops": ios / secs if ios else 0.0, "runtime": rt if ios else 0})
        first[d] = merged
    return first


def _write_logs(c: dict) -> None:
    o = c["opts"]
    res = c.get("result")
    if not res:
        return
    avg_ms = int(o.get("log_avg_msec", "0") or 0) or 500
    epoch = o.get("log_unix_epoch", "0") not in ("0", "")
    t_s, t_e = res["t_start"], res["failed_at"] or res["t_end"]
    hist = res["history"]
    bs = c["load"]["bs"]
    ddir_of = {"read": 0, "write": 1, "trim": 2}
    rw = c["load"]["rw"].removeprefix("rand")
    dirs = ["trim"] if rw == "trim" else [d for d, v in (("read", res["read"]), ("write", res["write"])) if v > 0]
    for kind in ("bw", "iops"):
        prefix = o.get(f"write_{kind}_log")
        if not prefix:
            continue
        rows = []
        t = t_s
        while t < t_e - 1e-6:
            w_end = min(t + avg_ms / 1000, t_e)
            for d in dirs:
                col = 1 if d == "read" else 2
                moved = _integrate(hist, t, w_end, col if d != "trim" else 2)
                rate = moved / max(w_end - t, 1e-9)
                val = int(rate / 1024) if kind == "bw" else int(rate / bs)
                stamp = int(w_end * 1000) if epoch else int(round((w_end - t_s) * 1000))
                rows.append(f"{stamp}, {val}, {ddir_of[d]}, 0, 0\n")
            t = w_end
        with open(f"{prefix}_{kind}.{c['index']}.log", "w") as f:
            f.writelines(rows)
    prefix = o.get("write_lat_log")
    if prefix and o.get("log_avg_msec", "0") in ("0", ""):
        # per-I/O latency logs: only each direction's first and last I/O (the lines powerrig places
        # a phase's edges by; a simulated million IOPS would otherwise write millions of lines)
        depth = max(int(o.get("iodepth", "1") or 1), 1)
        rows = []
        for d in dirs:
            ios = _integrate(hist, t_s, t_e, 1 if d == "read" else 2) / max(bs, 1)
            lat = min(depth * (t_e - t_s) / ios, t_e - t_s) if ios >= 1 else 0.0
            for done in ((t_s + lat, t_e) if ios >= 1 else ()):
                stamp = int(done * 1000) if epoch else int((done - t_s) * 1000)
                rows.append((stamp, f"{stamp}, {{}}, {ddir_of[d]}, {bs}, 0\n", lat))
        rows.sort()
        for kind, part in (("lat", 1.0), ("clat", 1.0), ("slat", 0.0)):
            with open(f"{prefix}_{kind}.{c['index']}.log", "w") as f:
                f.writelines(r[1].format(int(r[2] * part * 1e9)) for r in rows)


def _integrate(hist, a: float, b: float, col: int) -> float:
    """Bytes moved in [a, b] from a piecewise-constant rate history [(t, read_Bps, write_Bps)]."""
    total = 0.0
    for i, h in enumerate(hist):
        seg_a = h[0]
        seg_b = hist[i + 1][0] if i + 1 < len(hist) else float("inf")
        lo, hi = max(a, seg_a), min(b, seg_b)
        if hi > lo:
            total += h[col] * (hi - lo)
    return total


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
