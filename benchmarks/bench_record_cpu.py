"""What recording one rig costs the host: `powerrig record` from a virtual interposer, in CPU time.

    .venv/bin/python benchmarks/bench_record_cpu.py [--seconds 120] [--no-burst] [--alone-seconds 30]

1. ``record_core_pct_100us``: `powerrig record --interval-us 100` for N and N/4 seconds of device
   time, each its own process; the share of a core is the difference of their CPU times over the
   difference of their wall times, so the start-up (imports, describe, the file's creation) and the
   first seconds' fast pings cancel out. Only the recording process is counted (its rusage from
   wait4), never the virtual rig's, which runs in a process of its own.
2. ``record_core_pct_burst``: the same recorder (powerrig.capture.recorder, in a child process of
   this script) at 100 us while the board uploads raw 4 us bursts back to back (trigger now, 5,000
   samples each: every BURST frame the link budget leaves the stream), N and N/4 seconds again.
3. ``decode_core_pct``: the firmware's frames of one second at 100 us (the simulator's reducer, the
   firmware's own Framer) through the host's FrameDecoder and records_to_si alone, as a share of a
   core per second of data.
4. ``tty_read_core_pct``: the same frames written into a pty at the board's pace (a process of its own,
   nice -10 as the virtual rig) and read, drained at the link's pace, by a reader that does nothing
   else (its line discipline gives at most 4 KB a read). Real time, ``--alone-seconds``. Beside it,
   taking turns with it on the same stream, ``tty_read_compiled_core_pct``: the same loop in C
   (tty_drain.c, built with the host's cc), with no interpreter in it: what the kernel alone charges
   to hand the bytes over, the floor under any reader of a tty, a compiled one included.
5. ``store_core_pct``: the capture's signals (capture.writer's own definitions) stored by the JLS library
   alone, a hand-over of WRITE_EVERY_S seconds and a flush at the recorder's pace, its thread
   included: what the file costs whoever writes it. Real time, ``--alone-seconds``.
6. ``wake_core_pct``: a Python thread that only sleeps the link reader's pace at 100 us (``serial_link.pace_for``) and
   wakes, nothing else, for ``--alone-seconds`` before the virtual rig starts: what this host
   charges a thread for waking at that pace. On a virtual machine a wake-up after an idle spell can
   be charged far more than on bare metal (docs/scale.md, "The ninth pass": 0.7-1.6 ms after 100 ms
   asleep on one such host, against microseconds), and every thread of a recorder pays it.

3 to 6 are the recorder's parts each alone, printed beside ``record_core_pct_100us``: what the tty and
the file format cost whoever reads and writes these bytes. Each alone pays its own wake-ups and cold
caches, which the recorder shares between them, so their sum is no floor under the recorder (it has
come out above it); the tty and the store alone have come to about what the recording costs, and
neither is ours.

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


def _pct(x: float | None) -> str:
    return "not measured" if x is None else f"{x:.2f} %"


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


_PTY_WRITER = """
import os, select, sys, time
fd, path, per_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
data = open(path, "rb").read()
size = len(data) // int(sys.argv[4])
os.set_blocking(fd, False)
t0 = time.monotonic()
for k in range(0, len(data), size):
    due = t0 + (k // size) / per_s            # a frame leaves when its records are complete, as on the board
    d = due - time.monotonic()
    if d > 0:
        time.sleep(d)
    view = memoryview(data)[k:k + size]
    while view:                               # what does not fit waits for room, as the virtual rig's writer
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [], 0.05)
"""


ALONE_TURNS = 3         # the Python and the compiled tty readers take turns, this many each, on one writer


def compiled_reader(tmp: Path):
    """tty_drain.c's ``drain_for`` built with the host's C compiler into ``tmp`` and loaded through ctypes,
    or None and why not (the benchmark then prints the Python reader alone)."""
    import ctypes
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None, "no C compiler on PATH (apt-get install gcc)"
    lib = tmp / "tty_drain.so"
    built = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(Path(__file__).with_name("tty_drain.c"))],
                           capture_output=True, text=True)
    if built.returncode != 0:
        return None, f"{cc} could not build tty_drain.c: {built.stderr.strip()[-200:]}"
    drain = ctypes.CDLL(str(lib)).drain_for
    drain.restype = ctypes.c_long
    drain.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_long, ctypes.c_double, ctypes.c_long,
                      ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_double)]
    return drain, None


def tty_alone(seconds: float, tmp: Path) -> dict:
    """CPU of reading the firmware's frames at 100 us through a pty and doing nothing else with them: the
    board's bytes written by a process of its own at its pace (what does not fit waits for room, as the
    virtual rig's writer waits for what its queue holds), read with the link's own termios (pyserial's: an
    empty read returns nothing) as the link reads, but without decoding, pings or replies: a wait in
    poll, the port drained, the link's own pace before the next wait (``serial_link.pace_for``: the most a board's
    USB port lets a host wait), on the reading thread's own CPU clock after
    the first second. Two readers take turns on the one stream, ``seconds`` each in all: this loop in
    Python, and the same loop compiled (tty_drain.c), whose share is the kernel's alone: the floor under
    any reader of a tty at this pace, a compiled one included."""
    import ctypes
    import pty
    import select

    import serial

    from powerrig.interposer.serial_link import pace_for

    drain, why_not = compiled_reader(tmp)
    total = 1.0 + seconds * (2 if drain else 1) + 2.0
    data, per_frame = make_frames(total)
    frames = len(data) // (22 + 46 * per_frame)
    pace = pace_for(len(data) / total)             # the link's own pace at this rate: 9.7 ms
    master, slave_fd = pty.openpty()
    port = serial.Serial(os.ttyname(slave_fd), timeout=0)
    os.close(slave_fd)
    view = memoryview(bytearray(1 << 18))
    cbuf = ctypes.create_string_buffer(len(view))
    poll = select.poll()
    poll.register(port.fd, select.POLLIN)

    def in_python(span: float) -> tuple[float, float, int, int]:
        t_end = time.monotonic() + span
        c0, t0 = time.thread_time(), time.monotonic()
        got = reads = 0
        while time.monotonic() < t_end:
            poll.poll(1000)
            n = 0
            while n < len(view) - 4096:
                k = os.readv(port.fd, (view[n:],))
                reads += 1
                if not k:
                    break
                n += k
            got += n
            time.sleep(pace)
        return time.thread_time() - c0, time.monotonic() - t0, got, reads

    def compiled(span: float) -> tuple[float, float, int, int]:
        reads, cpu = ctypes.c_long(), ctypes.c_double()
        t0 = time.monotonic()
        got = drain(port.fd, cbuf, len(cbuf), span, int(pace * 1e6), ctypes.byref(reads), ctypes.byref(cpu))
        return cpu.value, time.monotonic() - t0, got, reads.value

    sums = {"python": [0.0, 0.0, 0, 0], "compiled": [0.0, 0.0, 0, 0]}
    w = None
    try:
        with tempfile.NamedTemporaryFile(suffix=".bin") as f:
            f.write(data)
            f.flush()
            w = subprocess.Popen([sys.executable, "-c", _PTY_WRITER, str(master), f.name,
                                  str(frames / total), str(frames)],
                                 pass_fds=(master,), preexec_fn=_board_priority)
            in_python(1.0)                                      # the first second: caches, the writer's start
            for _turn in range(ALONE_TURNS):
                for name, reader in (("python", in_python), ("compiled", compiled if drain else None)):
                    if reader is not None:
                        for k, x in enumerate(reader(seconds / ALONE_TURNS)):
                            sums[name][k] += x
    finally:            # the writer never ends by itself once nobody reads: a full pty, retried for ever
        if w is not None:
            w.kill()
            w.wait()
        os.close(master)
        port.close()
    cpu, wall, got, reads = sums["python"]
    out = {"tty_pace_ms": round(pace * 1e3, 2),
           "tty_read_core_pct": round(100.0 * cpu / wall, 4), "tty_reads_per_s": round(reads / wall, 1),
           "tty_kb_per_s": round(got / wall / 1e3, 1), "tty_read_compiled_core_pct": None}
    if drain:
        cpu, wall, got, _reads = sums["compiled"]
        out.update(tty_read_compiled_core_pct=round(100.0 * cpu / wall, 4), tty_compiled_kb_per_s=round(got / wall / 1e3, 1))
    else:
        out["tty_compiled_why_not"] = why_not
    return out


def store_alone(seconds: float, tmp: Path) -> dict:
    """CPU of the JLS library storing the capture's signals (capture.writer's own definitions, from one
    first block) at the recorder's pace: WRITE_EVERY_S seconds of float32 and u8 columns a hand-over,
    the library's flush at each (as the recorder's writer: a hand-over a second or more after the last
    flush); the process's CPU (the library's thread included) after the
    first hand-over. None of the recorder's own Python (casts, sums, clip records) is in it."""
    import resource

    from powerrig.capture import layout
    from powerrig.capture.recorder import WRITE_EVERY_S
    from powerrig.capture.writer import CaptureWriter
    from powerrig.core.blocks import IntervalBlock

    rate = 1_000_000 // INTERVAL_US
    n = int(WRITE_EVERY_S * rate)
    rails = ("12V", "3V3")
    rng = np.random.default_rng(1)
    cols = [(rng.random(n, np.float32) + 1.0) for _ in range(4)]
    one = np.ones((1, 2))
    first = IntervalBlock(0, INTERVAL_US // 4, 4e-6, rails, one, one, one, one, one, one,
                          np.zeros(1, np.uint8), np.zeros(1, np.uint8), np.ones(1, bool))
    path = tmp / "store-alone.jls"
    with CaptureWriter(path) as cw:
        cw.write(first)
        w, sid0 = cw._w, cw.length
        f32 = [cw._ids[name] for name, _units in layout.signal_names(rails)]       # the writer's own ids
        u8 = [cw._ids[name] for name in layout.DIGITAL_FIELDS] + list(cw._gpi_ids.values())
        zeros = np.zeros(n, np.uint8)
        t_next = time.monotonic()
        t0 = c0 = None
        hand_overs = int(seconds / WRITE_EVERY_S) + 1
        for k in range(hand_overs):
            if k == 1:
                t0, c0 = time.monotonic(), resource.getrusage(resource.RUSAGE_SELF)
            for j, sid in enumerate(f32):
                w.fsr(sid, sid0, cols[j % 4])
            for sid in u8:
                w.fsr(sid, sid0, zeros)
            sid0 += n
            w.flush()                      # the recorder's: at a hand-over a second or more after the last
            t_next += WRITE_EVERY_S
            time.sleep(max(0.0, t_next - time.monotonic()))
        c1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    path.unlink(missing_ok=True)
    cpu = (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)
    return {"store_core_pct": round(100.0 * cpu / (t1 - t0), 4), "store_signals": len(f32) + len(u8)}


def wake_alone(seconds: float, pace: float) -> dict:
    """CPU a thread is charged for only sleeping ``pace`` and waking (the link reader's pace while a 100 us
    stream flows), touching nothing: on its own CPU clock, over ``seconds``."""
    c0, t0 = time.thread_time(), time.monotonic()
    wakes = 0
    while time.monotonic() - t0 < seconds:
        time.sleep(pace)
        wakes += 1
    wall = time.monotonic() - t0
    return {"wake_core_pct": round(100.0 * (time.thread_time() - c0) / wall, 4), "wakes_per_s": round(wakes / wall, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=120.0, help="the long run (the short is a quarter)")
    ap.add_argument("--no-burst", action="store_true", help="skip the burst-stream figure")
    ap.add_argument("--alone-seconds", type=float, default=30.0,
                    help="real seconds the tty read and the store are each measured alone over")
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
    tty = tty_alone(a.alone_seconds, tmp)
    compiled = (f"{tty['tty_read_compiled_core_pct']:.3f} % compiled" if tty["tty_read_compiled_core_pct"] is not None
                else f"the compiled reader not measured: {tty['tty_compiled_why_not']}")
    print(f"tty read alone, every {tty['tty_pace_ms']:.1f} ms: {tty['tty_read_core_pct']:.3f} % of a core in Python, {compiled} ({tty['tty_reads_per_s']:.0f} "
          f"reads/s, {tty['tty_kb_per_s']:.0f} kB/s; load {_load():.1f})", flush=True)
    store = store_alone(a.alone_seconds, tmp)
    print(f"storing alone (JLS, {store['store_signals']} signals): {store['store_core_pct']:.3f} % of a core "
          f"(load {_load():.1f})", flush=True)
    wake = wake_alone(a.alone_seconds, tty["tty_pace_ms"] / 1e3)
    print(f"waking alone at the reader's pace ({wake['wakes_per_s']:.0f} a second, nothing else): "
          f"{wake['wake_core_pct']:.3f} % of a core (load {_load():.1f})", flush=True)
    sim, port = start_virtual_rig(tmp / "board")
    result = {"seconds": a.seconds, "decode_core_pct": floor["decode_core_pct"], **tty, **store, **wake}
    try:
        r100 = share(lambda s, out: [sys.executable, "-m", "powerrig", "record", "--port", port, "--interval-us",
                                     str(INTERVAL_US), "--seconds", f"{s:g}", "--out", str(out)],
                     a.seconds, tmp, "record 100us")
        print(f"record at 100 us: {r100['core_pct']:.2f} % of a core, lost {r100['lost_s']:.3f} s (its parts alone: "
              f"decode {floor['decode_core_pct']:.2f} %, tty read {tty['tty_read_core_pct']:.2f} % "
              f"({_pct(tty['tty_read_compiled_core_pct'])} compiled), storing "
              f"{store['store_core_pct']:.2f} %, waking at the reader's pace {wake['wake_core_pct']:.2f} %)", flush=True)
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
