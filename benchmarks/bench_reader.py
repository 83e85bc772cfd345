"""Reading a capture: pyjls (what CaptureReader uses) against a direct reader, alone and inside analyse().

    .venv/bin/python benchmarks/bench_reader.py [--hours 10] [--runs 3] [--tmp DIR]

Why: reading is a third of the analysis' CPU (docs/analysis.md), so is a faster reader the way to
a faster analysis? The direct reader exists here only, as the alternative measured: it finds each
float32 data chunk through its signal's level-1 index chunks (jls/format.h) and reads each run of
neighbouring chunks with one ``os.preadv`` straight into the output array (clean files only; other
reads go to pyjls). Prints, for the 10-hour capture of bench_analysis (36 M intervals, 1,801 phases):
1) the system calls pyjls makes per data chunk (strace, when installed); 2) reading the 7 signals
analyse() reads, alone; 3) reading them on a thread while the main thread runs Python (how the two
share the GIL); 4) analyse() warm with each reader (median of --runs); 5) the main thread's pass as
a share of analyse() under cProfile. Figures only; asserts nothing.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import numpy as np

from bench_analysis import make_tmp_folder, write_capture
from hostinfo import machine
from powerrig.analysis import analyse
from powerrig.capture import CaptureReader
from powerrig.capture.jls_tail import CHUNK_HEADER, FILE_HEADER_SIZE, payload_on_disk

TAG_FSR_HEAD, TAG_FSR_DATA, TAG_FSR_INDEX = 0x21, 0x22, 0x23       # jls/format.h: FSR track chunks
DATA_HEADER = 16                        # jls_payload_header_s before a data chunk's samples
SIGNALS = ["p_12V", "p_3V3", "p_total", "p_peak_12V", "p_peak_3V3", "p_max_12V", "p_max_3V3"]


class DirectReader(CaptureReader):
    """A CaptureReader whose float reads of a clean file bypass pyjls (see the module docstring)."""

    def __init__(self, path):
        super().__init__(path)
        self._fd = os.open(self.path, os.O_RDONLY)
        self._heads = self._track_heads()
        self._offsets: dict[int, np.ndarray] = {}
        self._junk = memoryview(bytearray(1 << 16))      # the bytes between two chunks' samples

    def close(self) -> None:
        os.close(self._fd)
        super().close()

    def _track_heads(self) -> dict[int, tuple]:
        """Signal id -> its FSR track head (the first chunk offset of each level), from the
        definitions at the start of the file."""
        heads, off, size = {}, FILE_HEADER_SIZE, os.fstat(self._fd).st_size
        while off + CHUNK_HEADER.size <= size:
            _, _, tag, _, meta, length, _, _ = CHUNK_HEADER.unpack(os.pread(self._fd, CHUNK_HEADER.size, off))
            if tag == TAG_FSR_DATA:
                break
            if tag == TAG_FSR_HEAD:
                heads[meta & 0xFF] = struct.unpack("<16Q", os.pread(self._fd, 128, off + CHUNK_HEADER.size))
            off += CHUNK_HEADER.size + payload_on_disk(length)
        return heads

    def _data_offsets(self, sid: int) -> np.ndarray:
        """File offsets of the signal's data chunks, in order, from its level-1 index chunks."""
        if sid not in self._offsets:
            out, off = [], self._heads[sid][1]
            while off:
                nxt, _, tag, _, _, length, _, _ = CHUNK_HEADER.unpack(os.pread(self._fd, CHUNK_HEADER.size, off))
                if tag == TAG_FSR_INDEX:
                    payload = os.pread(self._fd, length, off + CHUNK_HEADER.size)
                    count = struct.unpack_from("<qI", payload)[1]
                    out.append(np.frombuffer(payload, np.int64, count, DATA_HEADER))
                off = nxt
            self._offsets[sid] = np.concatenate(out) if out else np.empty(0, np.int64)
        return self._offsets[sid]

    def _read(self, name: str, start: int, n: int) -> np.ndarray:
        sid = self._id(name)
        spd = int(self._r.signals[sid].samples_per_data)
        offs = self._data_offsets(sid) if self.file_finalised and not self.damaged else np.empty(0)
        k0, k1 = start // spd, -(-(start + n) // spd)
        if name not in SIGNALS or start + n > self.intact[name] or k1 > len(offs):
            return super()._read(name, start, n)
        out = np.empty((k1 - k0) * spd, np.float32)
        mv, size = memoryview(out).cast("B"), 4 * spd
        pos = (offs[k0:k1] + CHUNK_HEADER.size + DATA_HEADER).tolist()
        j = 0
        while j < len(pos):                      # one preadv per run of neighbouring chunks
            iov, end, e = [mv[j * size:(j + 1) * size]], pos[j] + size, j + 1
            while e < len(pos) and len(iov) < 1000 and 0 <= pos[e] - end <= len(self._junk):
                if pos[e] > end:
                    iov.append(self._junk[:pos[e] - end])
                iov.append(mv[e * size:(e + 1) * size])
                end, e = pos[e] + size, e + 1
            if os.preadv(self._fd, iov, pos[j]) != end - pos[j]:
                return super()._read(name, start, n)
            j = e
        s = start - k0 * spd
        return out[s:s + n]


def syscalls_per_chunk(path: Path) -> str:
    """strace's count of read/lseek calls for reading 1,024 data chunks of one signal, minus a run
    reading none (Python's own start-up reads)."""
    if shutil.which("strace") is None:
        return "strace not installed: skipped"
    code = ("import sys, pyjls\nr = pyjls.Reader(sys.argv[1])\nfor s in range(0, int(sys.argv[2]), 1 << 20):\n"
            "    r.fsr(3, s, min(1 << 20, int(sys.argv[2]) - s))\n")
    calls = []
    for n in (0, 1024 * 1024):
        with tempfile.NamedTemporaryFile("r", suffix=".strace") as f:
            subprocess.run(["strace", "-f", "-c", "-e", "trace=read,lseek", "-o", f.name, sys.executable, "-c", code,
                            str(path), str(n)], check=True, capture_output=True)
            total = [ln.split() for ln in f.read().splitlines() if ln.strip().endswith("total")]
            calls.append(int(total[0][3]) if total else 0)
    return f"{(calls[1] - calls[0]) / 1024:.1f} read/lseek calls per 4 KB data chunk (strace, 1,024 chunks)"


def read_all(cap) -> None:
    deque(cap.chunks(SIGNALS), maxlen=0)        # read every chunk, keep none


def timed(fn) -> tuple[float, float]:
    c, t = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def beside_python(cap) -> tuple[float, float]:
    """(wall s of reading on a thread, share of the main thread's Python loop rate kept meanwhile)."""
    def spin(seconds):
        n, t = 0, time.perf_counter()
        while time.perf_counter() - t < seconds:
            n += 1
        return n / seconds
    alone = spin(1.0)
    th = threading.Thread(target=read_all, args=(cap,))
    n, t = 0, time.perf_counter()
    th.start()
    while th.is_alive():
        n += 1
    wall = time.perf_counter() - t
    return wall, n / wall / alone


def analyse_warm(cls, path: Path, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        with cls(path) as cap:
            out.append(timed(lambda: analyse(cap, cap.events, cap.metadata))[0])
    return out


def main_thread_share(path: Path) -> float:
    with CaptureReader(path) as cap:
        analyse(cap, cap.events, cap.metadata)
        prof = cProfile.Profile()
        prof.enable()
        analyse(cap, cap.events, cap.metadata)
        prof.disable()
    st = pstats.Stats(prof).stats
    total = max(v[3] for k, v in st.items() if k[2] == "analyse")
    feed = sum(v[3] for k, v in st.items() if k[2] == "feed" and k[0].endswith("pipeline.py"))
    return feed / total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=3, help="warm analyses per reader (the median is shown)")
    ap.add_argument("--tmp", default=None, help="folder for the capture file (2 GB for 10 h)")
    args = ap.parse_args()
    make_tmp_folder(ap, args.tmp)
    with tempfile.TemporaryDirectory(dir=args.tmp) as d:
        path = Path(d) / "long.jls"
        write_capture(path, args.hours)
        print(f"{args.hours:g} h capture at 1 ms; host: {machine()}")
        print(f"  pyjls: {syscalls_per_chunk(path)}")
        for label, cls in (("pyjls ", CaptureReader), ("direct", DirectReader)):
            with cls(path) as cap:
                read_all(cap)                                  # warm: from the page cache
                wall, cpu = timed(lambda: read_all(cap))
                beside, kept = beside_python(cap)
            print(f"  {label} read of the {len(SIGNALS)} signals alone {wall:5.2f} s (CPU {cpu:.2f} s); on a thread "
                  f"beside a Python loop {beside:5.2f} s, the loop kept {kept:.0%} of its rate")
        with CaptureReader(path) as a, DirectReader(path) as b:
            same = all(np.array_equal(a.samples(n, s, s + 3_000_017), b.samples(n, s, s + 3_000_017), equal_nan=True)
                       for n in SIGNALS for s in (0, a.length // 2, a.length - 3_000_017))
        print(f"  the two readers return the same values: {'yes' if same else 'NO'}")
        for label, cls in (("pyjls ", CaptureReader), ("direct", DirectReader)):
            ws = analyse_warm(cls, path, args.runs)
            print(f"  {label} analyse() warm {statistics.median(ws):5.2f} s (median of "
                  f"{', '.join(f'{w:.2f}' for w in ws)})")
        print(f"  the main thread's pass (_Pass.feed) is {main_thread_share(path):.0%} of analyse() under cProfile")


if __name__ == "__main__":
    main()
