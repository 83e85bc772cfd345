"""What recording one rig costs the host: `powerrig record` from a virtual interposer, in CPU time.

    .venv/bin/python benchmarks/bench_record_cpu.py [--seconds 120] [--no-burst]

1. ``record_core_pct_100us``: `powerrig record --interval-us 100` for N and N/4 seconds of device
   time, each its own process; the share of a core is the difference of their CPU times over the
   difference of their wall times, so the start-up (imports, describe, the file's creation) and the
   first seconds' fast pings cancel out. Only the recording process is counted (its rusage from
   wait4), never the virtual rig's, which runs in a process of its own.
2. ``record_core_pct_burst``: the same recorder (powerrig.capture.recorder, in a child process of
   this script) at 100 us while the board uploads raw 4 us bursts back to back (trigger now, 5,000
   samples each: every BURST frame the link budget leaves the stream), N and N/4 seconds again.
3. ``decode_core_pct``: the floor: the firmware's frames of one second at 100 us (the simulator's
   reducer, the firmware's own Framer) through the host's FrameDecoder and records_to_si alone, as a
   share of a core per second of data.

On a shared host CPU seconds still move with the load (caches, SMT siblings): the load average is
printed beside every figure. The last line is a JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from hostinfo import machine

INTERVAL_US = 100
BOARD_NICE = -10


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def run_measured(argv: list[str]) -> tuple[float, float, str]:
    """(CPU s of the process alone, wall s, its stdout)."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = p.stdout.read()
    err = p.stderr.read()
    _pid, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:5])} ... failed ({p.returncode}): {err.strip()[-400:]}")
    return ru.ru_utime + ru.ru_stime, wall, out


def _board_priority() -> None:
    """The virtual rig stands in for a board with its own MCU, which a busy host never starves: run it
    BOARD_NICE ahead of the rest when allowed (root), so the host's load lands on the recording
    process measured here, not on the stand-in's sampling (an overrun there is no host figure)."""
    try:
        os.nice(BOARD_NICE)
    except OSError:
        pass


def start_virtual_rig(state_dir: Path) -> tuple[subprocess.Popen, str]:
    """A virtual interposer (`powerrig sim interposer`) in a process of its own, ahead of the rest
    (``_board_priority``): the process and its port."""
    sim = subprocess.Popen([sys.executable, "-m", "powerrig", "sim", "interposer", "--state-dir", str(state_dir)],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=_board_priority)
    return sim, sim.stdout.readline().strip()


def lost(path: Path) -> tuple[float, dict]:
    """Seconds lost in the capture, and why: the board's overruns (the virtual rig starved) or frames
    lost on the link (the host did not read in time)."""
    from powerrig.capture.reader import CaptureReader

    with CaptureReader(path) as r:
        s = r.metadata.get("stream", {})
        why = {k: s.get(k) for k in ("overruns", "dropped_frames", "crc_errors")}
        return float(r.metadata["recording"]["lost_s"]), why


def share(argv_of, seconds: float, tmp: Path, name: str) -> dict:
    """Core share from a long and a quarter-length run (the start-up cancels out)."""
    runs = {}
    for s in (seconds, seconds / 4):
        out = tmp / f"{name}-{s:g}.jls"
        load0 = _load()
        cpu, wall, said = run_measured(argv_of(s, out))
        lost_s, why = lost(out)
        runs[s] = {"cpu_s": round(cpu, 3), "wall_s": round(wall, 2), "lost_s": lost_s, "lost_why": why,
                   "load": [load0, _load()]}
        last = said.strip().splitlines()[-1:]
        if last and last[0].startswith("{"):         # the burst child's own count
            runs[s]["child"] = json.loads(last[0])
        print(f"  {name} {s:g} s: {cpu:.2f} CPU s in {wall:.1f} s wall, lost {runs[s]['lost_s']:.3f} s {why}, "
              f"load {load0:.1f} -> {_load():.1f}{'; ' + json.dumps(runs[s]['child']) if 'child' in runs[s] else ''}",
              flush=True)
        out.unlink(missing_ok=True)
    long, short = runs[seconds], runs[seconds / 4]
    pct = 100.0 * (long["cpu_s"] - short["cpu_s"]) / (long["wall_s"] - short["wall_s"])
    return {"core_pct": round(pct, 3), "lost_s": long["lost_s"] + short["lost_s"], "runs": runs}


def burst_child(port: str, seconds: float, out: str) -> int:
    """The recorder at 100 us with raw bursts uploading back to back beside it (one process)."""
    from powerrig.capture.recorder import Recorder
    from powerrig.core.errors import PowerrigError
    from powerrig.interposer.client import Interposer

    with Interposer.open(port) as dev:
        rec = Recorder(dev, out, interval_us=INTERVAL_US, seconds=seconds)
        rec.start()
        bursts = failed = 0
        while rec._thread.is_alive():
            try:
                dev.burst(pre=2500, post=2500, trigger="now", timeout=10.0)
                bursts += 1
            except PowerrigError as e:    # counted: a loaded host's virtual rig may lose a burst's blocks
                failed += 1
                print(f"burst not taken: {e}", file=sys.stderr)
        res = rec.wait(30)
    print(json.dumps({"bursts": bursts, "failed": failed, "lost_s": res.lost_s}))
    return 0


def make_frames(seconds: float) -> tuple[bytes, int]:
    """The firmware's DATA frames of ``seconds`` at 100 us, 2 rails: the simulator's reducer into the
    firmware's own Framer, records per frame as the firmware's plan_stream picks them."""
    from powerrig.sim.interposer.reducer import NumpyReducer
    from powerrig_fw import crc, wire as fw
    from powerrig_fw.device import plan_stream

    per_frame, _bps = plan_stream(INTERVAL_US, 2)
    out: list[bytes] = []
    framer = fw.Framer(lambda mv: out.append(bytes(mv)), crc.crc32_into_c)
    red = NumpyReducer(3)
    red.configure([0, 1], INTERVAL_US // 4, 25)
    framer.configure(fw.record_size(2), per_frame)
    rng = np.random.default_rng(0)
    block = 250                                 # one DMA block (1 ms) per feed, as the board
    for _k in range(int(seconds * 1000)):
        raw = np.zeros((block, 7), np.int16)
        raw[:, 0] = 26000 + rng.integers(-3, 4, block)
        raw[:, 1] = 1500 + rng.integers(0, 3000, block)
        raw[:, 2], raw[:, 3] = 21600, 3900
        red.feed(raw.reshape(-1), block, framer)
    return b"".join(out), per_frame


def decode_floor(seconds: float = 5.0) -> dict:
    """CPU per second of data of the host's decode alone: FrameDecoder over reads of 12 KB (what the
    link's reader takes per wake-up) and records_to_si over half a second of records at a time."""
    from powerrig.interposer import frames as wire
    from powerrig.core.rails import rails

    data, per_frame = make_frames(seconds)
    desc = {"rails": [{"name": r.name, "v_lsb": r.v_lsb, "i_lsb": r.i_lsb} for r in rails().rails], "calibration": {}}
    scales = wire.rail_scales(desc, ["12V", "3V3"])
    best = []
    for _rep in range(5):
        dec = wire.FrameDecoder()
        c0 = time.process_time()
        pend = []
        rows = 0
        for k in range(0, len(data), 12 * 1024):
            for f in dec.feed(data[k:k + 12 * 1024], 0.0):
                pend.append(f)
                rows += f.count
            if rows >= 5000:
                wire.records_to_si(b"".join(f.payload for f in pend), scales, INTERVAL_US // 4, 25)
                pend, rows = [], 0
        best.append(time.process_time() - c0)
    pct = 100.0 * min(best) / seconds
    return {"decode_core_pct": round(pct, 4), "frames_per_s": len(data) / (22 + 46 * per_frame) / seconds,
            "per_frame": per_frame, "bytes_per_s": len(data) / seconds}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="the long run (the short is a quarter)")
    ap.add_argument("--no-burst", action="store_true", help="skip the burst-stream figure")
    ap.add_argument("--child-burst", nargs=3, metavar=("PORT", "SECONDS", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_burst:
        return burst_child(a.child_burst[0], float(a.child_burst[1]), a.child_burst[2])
    print(machine(), flush=True)
    print("CPU counted: the recording process only (wait4 rusage of `powerrig record` / the burst child); "
          f"the virtual rig runs in its own process (nice {BOARD_NICE} when allowed: it stands in for the "
          "board's own MCU) and is not counted", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="powerrig-reccpu-"))
    floor = decode_floor()
    print(f"decode alone: {floor['decode_core_pct']:.3f} % of a core ({floor['frames_per_s']:.0f} frames/s of "
          f"{floor['per_frame']} records, {floor['bytes_per_s'] / 1e3:.0f} kB/s; load {_load():.1f})", flush=True)
    sim, port = start_virtual_rig(tmp / "board")
    result = {"seconds": a.seconds, "decode_core_pct": floor["decode_core_pct"]}
    try:
        r100 = share(lambda s, out: [sys.executable, "-m", "powerrig", "record", "--port", port, "--interval-us",
                                     str(INTERVAL_US), "--seconds", f"{s:g}", "--out", str(out)],
                     a.seconds, tmp, "record 100us")
        print(f"record at 100 us: {r100['core_pct']:.2f} % of a core, lost {r100['lost_s']:.3f} s", flush=True)
        result.update(record_core_pct_100us=r100["core_pct"], lost_s=r100["lost_s"], runs_100us=r100["runs"])
        if not a.no_burst:
            rb = share(lambda s, out: [sys.executable, __file__, "--child-burst", port, f"{s:g}", str(out)],
                       a.seconds, tmp, "record 100us + raw bursts")
            print(f"record at 100 us with raw bursts back to back: {rb['core_pct']:.2f} % of a core, lost "
                  f"{rb['lost_s']:.3f} s", flush=True)
            result.update(record_core_pct_burst=rb["core_pct"], lost_s_burst=rb["lost_s"], runs_burst=rb["runs"])
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    result["cpu_counted"] = "the recording process only (not the virtual rig)"
    result["load_average"] = list(np.round(os.getloadavg(), 2))
    result["machine"] = machine()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
