"""The virtual interposer: the real firmware (powerrig_fw.device.Device) on a pseudo-terminal.

A ``SimBoard`` stands in for firmware/board: its ADC is the virtual front end, paced by a simulated
crystal that drifts against the host clock; its USB is a pty written through a thread that adds
latency jitter and, when asked, corrupts bytes, drops frames or stalls. Everything above the board
(commands, stream state machine, framing, CRC) is the firmware's own code.

Ground truth (true clock mapping, injected fault counts, true power per 1 ms) is written to a
truth file for tests to measure the pipeline against.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import signal
import subprocess
import sys
import tempfile
import termios
import threading
import time
import tty
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from powerrig.core.rails import rails as default_rails
from powerrig.sim.interposer import usb_rx
from powerrig.sim.interposer.frontend import FrontEnd, FrontEndSpec, ScriptedLoad
from powerrig.sim.ssd.power import PoweredDrive, PowerSpec, SwitchedOutputs
from powerrig.sim.interposer.reducer import NumpyReducer
from powerrig.interposer.frames import HEADER, fw  # (frames puts firmware/ on sys.path)
from powerrig.interposer.serial_link import ACM_IN_FLIGHT, N_TTY_BUF, N_TTY_THROTTLE
from powerrig_fw import crc as fw_crc
from powerrig_fw.burst import IDLE as BURST_IDLE
from powerrig_fw.device import STREAMING, USB_QUEUE_BYTES, Device
from powerrig_fw.timebase import Timebase

TRUTH_BIN = 250          # truth power kept per 250 samples (1 ms)
# Samples per DMA block of the board the simulator stands in for, the RP2350 (firmware/board/adc.py
# BLOCK: 250, 1 ms; the RP2040's is 500). The board's main loop reduces one whole block per pass and a
# DATA frame leaves in the pass of the block that completed it, so the simulator hands the firmware
# whole blocks too: its frames leave when the board's would, never an interval at a time.
DMA_BLOCK = 250
# The DMA ring: a stall longer than this loses samples (an overrun, recorded as a gap). Deeper than the
# board's own ring on purpose: the simulator runs when the host's scheduler lets it (a test machine
# spawning nvme-cli and fio processes starves it for a few hundred ms), while the board's firmware is
# proven real-time by its instruction budget on the emulated Cortex-M (docs/firmware-budget.md).
# (A 2 s ring was tried against the overrun gaps a loaded machine puts in a datasheet sweep's
# self-reported power window, about one loaded run in seven: two of the three fresh-clone runs with it
# failed the GUI reconnect test, which had passed before; not explained, so back to 0.5 s:
# docs/testing.md.)
ADC_RING_S = 0.5
GIL_SWITCH_S = 100e-6    # the sim process hands the GIL over this often (see serve)
IDLE_PASS_S = 0.05       # an idle device's pass interval when no host bytes arrive
MIN_PASS_S = 0.0005      # ... and a sampling one's, at least and at most (VirtualInterposer._pass_s)
MAX_PASS_S = 0.010
SAMPLER_PRIORITY_ENV = "POWERRIG_SIM_SAMPLER_PRIORITY"   # "N": N nicer; "idle": SCHED_IDLE
SPIN_S = 200e-6          # the USB writer thread spins this long before a transfer completes
THROTTLED_POLL_S = 0.001  # a throttled port (the host not reading) is looked at again this soon (a board's
THROTTLED_IDLE_S = 0.05   # URBs go out again within a USB frame of the host's read); throttled longer
THROTTLED_POLL_MAX_S = 0.004  # than this, twice as long each time up to this (a host that holds it idle)
UNSEEN_S = 0.002         # a write not yet in n_tty after this long is taken as read already
# A DATA frame sent this long after its last sample was taken is the simulator's own lateness (its
# process starved by the host, then catching up from its deep ring), which a board does not have: on a
# board it left on time, so it does not count against the board's USB queue (``write``)
LATE_US = 10_000
_INQ = struct.Struct("i")


@dataclass
class Faults:
    corrupt: float = 0.0        # probability that a byte of a DATA frame is flipped
    drop: float = 0.0           # probability that a DATA frame is not sent
    stall_at: float = -1.0      # seconds after start when the device stops running
    stall_for: float = 0.0
    stall_in_stream: float = -1.0   # ... or seconds after its first stream started (not the start's timing)
    jitter_ms: float = 1.0      # USB latency jitter, uniform 0..jitter_ms per write
    seed: int = 7


class SimBoard:
    """firmware/board interface, simulated. See firmware/board/README.md."""

    name = "sim"

    def __init__(self, master_fd: int, frontend: FrontEnd, drift_ppm: float, faults: Faults,
                 cal_path: str, boot_s: float = 10_800.0, host_fd: int | None = None):
        """host_fd: the pty's host side (never read here): how much the host has not read yet, so the
        port holds what a Linux host holds for a USB CDC port (``_host_room``)."""
        self.fd = master_fd
        self.host_fd = host_fd
        self.frontend = frontend
        self.faults = faults
        self.rng = np.random.default_rng(faults.seed)
        self.cal_path = cal_path
        self.serial = f"SIM-{os.getpid():05d}-{int(time.time()) % 100000:05d}"
        self.scale = 1.0 + drift_ppm * 1e-6            # device seconds per host second
        self.mono0 = time.monotonic_ns()
        self.utc0 = time.time()
        self.boot_us = boot_s * 1e6                     # device uptime at sim start
        self.period_us = default_rails().sample_period_us
        self.timebase = Timebase(self._ticks)
        self.reducer = NumpyReducer(len(frontend.cfg.rails))
        self.crc_into = fw_crc.crc32_into_c
        self.burst_capacity = 65536
        self.gen_index = self.sample_index()
        self.last_block_index = self.gen_index
        # Does the firmware look at samples now? (set by VirtualInterposer). When it does not (no
        # stream, burst, self-test or timed action), the samples are not synthesized: the board's DMA
        # would overwrite them unread. An idle virtual rig then costs 0.5% of a core instead of 26%
        # (250 kS/s of drive model and noise in numpy; benchmarks/bench_rig_cpu.py, docs/scale.md).
        self.samples_wanted = lambda: True
        self.samples_skipped = 0
        # truth
        self.truth_bins: dict[int, np.ndarray] = {}
        self.injected_corrupt_frames = 0
        self.corrupted_seqs: list[int] = []     # seq of each DATA frame the fault injector corrupted
        self.sync_corrupted_seqs: list[int] = []  # ... of those, the ones with a sync byte hit: unseen frames
        self.dropped_seqs: list[int] = []       # ... and of each it dropped
        self.writes_dropped = 0                 # frames the USB queue had no room for (board.usb.UsbLink's count)
        self.dropped_bytes = 0
        self.stream_config = lambda: None       # the firmware's stream dict (set by VirtualInterposer)
        # the host port's state (_host_room): bytes past n_tty's throttle, room before it, the last
        # write's (n_tty count before it, until when it may still be unseen)
        self._urbs = 0
        self._unthrottled = 0
        self._inq = -1
        self._unseen = (-1, 0, 0.0)
        # writer thread
        self._q: deque[tuple[float, bytes, bool]] = deque()     # (release, bytes, counted in the board's queue)
        self._q_bytes = 0
        self._q_board = 0                       # ... the bytes a board's queue would hold (not the sim's late ones)
        self._cv = threading.Condition()
        self._stop = False
        self._release = 0.0
        self._rx: deque[tuple[float, bytes]] = deque()
        self._rx_release = 0.0
        self._rx_at = time.monotonic()
        self._rx_held = bytearray()             # arrived bytes the firmware's reader had no room for yet
        self.rx_arrived = threading.Event()     # wakes an idle device loop (VirtualInterposer._run)
        self._writer = threading.Thread(target=self._write_loop, name="sim-usb", daemon=True)
        self._writer.start()
        self._rx_pipe, rx_w = os.pipe()
        self._rx_proc = subprocess.Popen([sys.executable, "-S", str(Path(__file__).with_name("usb_rx.py")),
                                          str(master_fd), str(rx_w), str(os.getpid())], pass_fds=(master_fd, rx_w),
                                         stdin=subprocess.DEVNULL)
        os.close(rx_w)
        self._reader = threading.Thread(target=self._rx_loop, name="sim-usb-rx", daemon=True)
        self._reader.start()
        drive = frontend.load
        if isinstance(drive, PoweredDrive):    # switchable outputs: powerrig_fw.actions runs on them
            sw = SwitchedOutputs(drive, self.sample_index, self.wait_index, self.utc_of_index,
                                 lambda: self.gen_index)
            self.outputs, self.fire, self.sample_now = sw.outputs, sw.fire, sw.sample_now
            self.switches = sw

    # ---- clock -------------------------------------------------------------------------------------
    def device_us(self) -> float:
        return self.boot_us + (time.monotonic_ns() - self.mono0) / 1000.0 * self.scale

    def _ticks(self) -> int:
        return int(self.device_us()) & 0x3FFFFFFF

    def sample_index(self) -> int:
        return int(self.device_us() // self.period_us)

    def wait_index(self, index: int) -> None:
        """Until the sample clock reaches index (sleep, then spin the last SPIN_S, as _wait_until)."""
        due = (index * self.period_us - self.boot_us) / 1e6 / self.scale + self.mono0 / 1e9
        self._wait_until(due)

    def utc_of_index(self, index):
        """Truth: host UTC of a sample index (or an array of them): one float copy, then in place (a
        streaming pass asks for every sample's time)."""
        t = np.array(index, dtype=np.float64)
        t *= self.period_us
        t -= self.boot_us
        t /= 1e6
        t /= self.scale
        t += self.utc0
        return t if t.ndim else t[()]

    def index_of_utc(self, t_utc: float) -> int:
        """The sample index at host UTC t (the inverse of utc_of_index, rounded down)."""
        return int(((t_utc - self.utc0) * self.scale * 1e6 + self.boot_us) // self.period_us)

    def clock_truth(self) -> dict:
        return {"utc_at_index0": float(self.utc_of_index(0)), "period_s": self.period_us * 1e-6,
                "drift_ppm": (self.scale - 1.0) * 1e6,
                "index_ref": int(self.gen_index), "utc_ref": float(self.utc_of_index(self.gen_index))}

    # ---- ADC -------------------------------------------------------------------------------------------
    def temperature_c(self) -> float:
        """The board sensor's reading (the front end's board temperature, to the TMP117's 1/128 K)."""
        return round(self.frontend.spec.board_temp_c * 128) / 128

    def adc_restart(self) -> int:
        return self.gen_index

    def block_index(self) -> int:
        return self.last_block_index

    def adc_read(self):
        now = self.sample_index()
        known = getattr(self.frontend.load, "known_until", None)
        if known is not None:            # a load fed live (a QEMU drive's trace): sample only what it knows
            now = min(now, self.index_of_utc(known()))
        n = (now - self.gen_index) // DMA_BLOCK * DMA_BLOCK    # the whole DMA blocks completed
        if n <= 0:
            return None
        if not self.samples_wanted():        # nobody reads them: the ring is overwritten, not lost
            self.samples_skipped += n
            self.gen_index += n
            self.last_block_index = self.gen_index
            return None
        dropped = 0
        ring = int(ADC_RING_S * 1e6 / self.period_us) // DMA_BLOCK * DMA_BLOCK
        if n > ring:                      # the CPU did not keep up: DMA overwrote old blocks
            dropped = n - ring
            self.gen_index += dropped
            n = ring
        raw, truth = self.frontend.sample(self._utc_of_block(self.gen_index, n))
        self._keep_truth(self.gen_index, truth)
        self.last_block_index = self.gen_index
        self.gen_index += n
        self.adc_n = n                   # the firmware's board interface: the block's length and the
        self.adc_dropped = dropped       # samples lost before it beside the block itself
        return raw.reshape(-1)

    def _utc_of_block(self, first: int, n: int) -> np.ndarray:
        """utc_of_index(first + arange(n)) (the indices are exact in a double)."""
        return self.utc_of_index(np.arange(first, first + n, dtype=np.float64))

    def _keep_truth(self, first: int, truth: dict[str, np.ndarray]) -> None:
        """Add the true power of samples first, first + 1, ... to their TRUTH_BIN bins (the bin edges
        follow from the first index: no per-sample index arrays). Rail-major, summed along each row:
        the same sums as per column of the sample-major stack (each bin's samples in the same order)."""
        p = np.stack([truth[r.name] for r in self.frontend.cfg.rails])
        starts = np.arange(-(first % TRUTH_BIN), p.shape[1], TRUTH_BIN)
        starts[0] = 0
        sums = np.ascontiguousarray(np.add.reduceat(p, starts, axis=1).T)
        for k, s in enumerate(sums):
            bi = first // TRUTH_BIN + k
            acc = self.truth_bins.get(bi)
            self.truth_bins[bi] = s if acc is None else acc + s

    def make_ring(self, n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.int16)

    def scan_trigger(self, raw, start, n, spec) -> int:
        """The burst trigger over samples start..n-1 of an interleaved block (numpy, not bytecode)."""
        stride = len(raw) // n
        x = np.asarray(raw[start * stride: n * stride]).reshape(n - start, stride).astype(np.int64)
        if spec["trigger"] == "threshold":
            c = 2 * spec["rail_index"]
            hit = np.flatnonzero((x[:, c] - spec["v_offset"]) * (x[:, c + 1] - spec["i_offset"]) > spec["code_product"])
        else:
            bit = (x[:, -1] >> spec["bit"]) & 1
            prev = np.concatenate([[spec["prev"]], bit[:-1]])
            hit = np.flatnonzero((bit > prev) if spec["rising"] else (bit < prev))
        return int(hit[0]) + start if len(hit) else -1

    # ---- USB -------------------------------------------------------------------------------------------
    def _rx_loop(self) -> None:
        """The USB OUT endpoint: host bytes arrive, stamped by the usb_rx process the moment it read
        them (no GIL in the way), and become readable after jitter."""
        buf = b""
        head = usb_rx.RECORD.size
        while True:
            try:
                chunk = os.read(self._rx_pipe, 1 << 16)
            except InterruptedError:
                continue
            except OSError:
                return
            if not chunk:               # the relay exited (sim closing)
                return
            buf += chunk
            while len(buf) >= head:
                t, n = usb_rx.RECORD.unpack_from(buf)
                if len(buf) < head + n:
                    break
                data, buf = buf[head:head + n], buf[head + n:]
                with self._cv:
                    self._rx_release = max(self._rx_release, t + self.rng.uniform(0, self.faults.jitter_ms) * 1e-3)
                    self._rx.append((self._rx_release, data))
                self.rx_arrived.set()

    def read_into(self, buf, at: int, room: int) -> int:
        """Host bytes whose USB transfer has completed, into buf[at:at + room] (the firmware's
        FrameReader); their count. What does not fit waits for the next call."""
        now = time.monotonic()
        with self._cv:
            while self._rx and self._rx[0][0] <= now:
                release, chunk = self._rx.popleft()
                self._rx_at = release
                self._rx_held += chunk
        n = min(room, len(self._rx_held))
        if n:
            buf[at:at + n] = self._rx_held[:n]
            del self._rx_held[:n]
        return n

    def rx_index(self) -> int:
        """Sample index at which the bytes just read finished arriving (the USB RX interrupt's stamp)."""
        dev_us = self.boot_us + (self._rx_at - self.mono0 / 1e9) * 1e6 * self.scale
        return int(dev_us // self.period_us)

    def write(self, data, n: int = -1) -> None:
        data = bytes(data[:n] if n >= 0 else data)
        on_time = not self._late(data)              # (its own header, before a fault flips a byte of it)
        f = self.faults
        if f.drop and data[3] == fw.T_DATA and self.rng.random() < f.drop:
            self.dropped_seqs.append(data[8] | (data[9] << 8))     # lost on the way, as USB can
            return
        if f.corrupt and data[3] == fw.T_DATA:
            seq = data[8] | (data[9] << 8)
            flips = np.flatnonzero(self.rng.random(len(data)) < f.corrupt)
            if len(flips):
                b = bytearray(data)
                for k in flips:
                    b[k] ^= 1 << int(self.rng.integers(8))
                data = bytes(b)
                self.injected_corrupt_frames += 1
                self.corrupted_seqs.append(seq)
                if flips[0] < 2:
                    self.sync_corrupted_seqs.append(seq)
        now = time.monotonic()
        release = max(self._release, now + self.rng.uniform(0, f.jitter_ms) * 1e-3)
        self._release = release
        with self._cv:
            if (self._q_board + len(data) > USB_QUEUE_BYTES and on_time) or self._q_bytes > 4 << 20:
                self.writes_dropped += 1        # the board's USB queue is full (the host does not read):
                self.dropped_bytes += len(data)     # the frame is dropped whole, as board.usb.UsbLink.write
                return
            inline = not self._q and release - now <= SPIN_S
            if not inline:
                self._enqueue(release, data, on_time)
                return
        # Due now and nothing queued ahead: the device thread completes the transfer itself. Handing it
        # to the writer thread would add that thread's wake-up (the GIL, 100-300 us) to exactly the
        # fastest replies, the ones the clock fit rests on: a device-to-host latency floor real USB
        # does not have (docs/link.md, "where the bias came from").
        self._wait_until(release)
        try:
            k = self._to_host(data)
        except BlockingIOError:
            k = 0
        except OSError:
            return
        if k < len(data):                   # the host is not reading fast enough: the rest queues
            with self._cv:
                self._enqueue(release, data[k:], on_time, first=True)

    def _enqueue(self, release: float, data: bytes, on_time: bool, first: bool = False) -> None:
        """Queue bytes for the writer thread (the caller holds ``_cv``)."""
        item = (release, data, on_time)
        self._q.appendleft(item) if first else self._q.append(item)
        self._q_bytes += len(data)
        self._q_board += len(data) if on_time else 0
        self._cv.notify()

    def _late(self, data) -> bool:
        """A DATA frame sent more than LATE_US after its last sample (see LATE_US)."""
        st = self.stream_config()
        _sync, _version, ftype, _flags, records, _size, _seq, index = HEADER.unpack_from(data)
        if ftype != fw.T_DATA or not st:
            return False
        end_us = (index + records * (st["interval_us"] // self.period_us)) * self.period_us
        return self.device_us() - end_us > LATE_US

    def _write_loop(self) -> None:
        while True:
            with self._cv:
                while not self._q and not self._stop:
                    self._cv.wait(0.1)
                if self._stop:
                    return
                release, data, on_time = self._q[0]
            self._wait_until(release)
            view = memoryview(data)
            idle, since = THROTTLED_POLL_S, None
            while view:
                try:
                    k = self._to_host(view)
                    if not k:                       # throttled: the host is not reading
                        now = time.monotonic()
                        since = since or now
                        if now - since > THROTTLED_IDLE_S:
                            idle = min(2 * idle, THROTTLED_POLL_MAX_S)
                        time.sleep(idle)
                        if self._stop:
                            return
                        continue
                    idle, since = THROTTLED_POLL_S, None
                    view = view[k:]
                    with self._cv:                  # the board's queue frees as its bytes leave (UsbLink.pump)
                        self._q_bytes -= k
                        self._q_board -= k if on_time else 0
                except BlockingIOError:
                    select.select([], [self.fd], [], 0.05)
                    if self._stop:
                        return
                except OSError:
                    break
            with self._cv:
                self._q.popleft()
                self._q_bytes -= len(view)          # what was never written (a closed port)
                self._q_board -= len(view) if on_time else 0

    def _to_host(self, data) -> int:
        """Write what the host's port takes now (``_host_room``); the bytes written."""
        room = self._host_room()
        if room <= 0:
            return 0
        k = os.write(self.fd, data[:room])
        if k:
            self._urbs += max(0, k - self._unthrottled)     # past n_tty's throttle: the URBs in flight
            now = time.monotonic()
            at, before, until = self._unseen                 # an earlier write not seen yet still counts
            before = before if at == self._inq and now < until else 0
            self._unseen = (self._inq, before + k, now + UNSEEN_S)
        return k

    def _host_room(self) -> int:
        """Bytes the host's port takes now, as Linux takes them from a USB CDC board: until its n_tty
        buffer has only N_TTY_THROTTLE bytes free, then the read URBs still in flight (ACM_IN_FLIGHT),
        nothing more until the host reads (serial_link says where in the kernel). A bare pty held
        twice that and refilled at once, which let a host that read too seldom for a board pass here.
        A write shows in n_tty only once the kernel's worker moved it: until then (UNSEEN_S at most)
        it is counted as there, else the same room would be counted twice (and not as a full port: a
        reply right behind a frame the host has read already goes out at once). The hold is a real
        port's to within the 2 KB the flip buffer may still hold when the host has just emptied n_tty."""
        if self.host_fd is None:
            return 1 << 30
        try:
            inq = _INQ.unpack(fcntl.ioctl(self.host_fd, termios.FIONREAD, bytes(4)))[0]
        except OSError:
            return 1 << 30
        seen_at, written, until = self._unseen
        self._inq = inq
        if inq == seen_at and time.monotonic() < until:
            inq = min(N_TTY_BUF - 1, inq + written)
        free = N_TTY_BUF - 1 - inq
        if free >= N_TTY_THROTTLE:                 # not throttled: the URBs go out again
            self._urbs = 0
            self._unthrottled = free - N_TTY_THROTTLE
            return self._unthrottled + ACM_IN_FLIGHT
        self._unthrottled = 0
        return ACM_IN_FLIGHT - self._urbs

    def link_status(self) -> dict:
        """The board's USB queue, as board.rp2350.Board.link_status reports it (status "link")."""
        return {"queued": self._q_board, "dropped_frames": self.writes_dropped, "dropped_bytes": self.dropped_bytes}

    @staticmethod
    def _wait_until(release: float) -> None:
        """Sleep until the simulated USB transfer completes, then spin the last SPIN_S: a plain sleep
        wakes 75-500 us late on a busy host (timer slack, the GIL), and that lateness lands on the
        device-to-host direction only, a latency asymmetry that real USB does not have (it biased
        the clock fit by about 100 us; docs/link.md)."""
        delay = release - time.monotonic() - SPIN_S
        if delay > 0:
            time.sleep(delay)
        while time.monotonic() < release:      # holds the GIL: at most SPIN_S of the device's time
            pass

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._writer.join(timeout=1.0)
        self._rx_proc.terminate()
        self._rx_proc.wait(timeout=5.0)
        self._reader.join(timeout=1.0)
        os.close(self._rx_pipe)


class VirtualInterposer:
    """Runs the firmware Device against a SimBoard on a new pty. ``port`` is the path to open."""

    def __init__(self, load=None, seed: int = 1, drift_ppm: float = 35.0, faults: Faults | None = None,
                 spec: FrontEndSpec | None = None, state_dir: str | None = None, calibrated: bool = True,
                 power: PowerSpec | None = None):
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)
        os.set_blocking(self.master, False)
        self.port = os.ttyname(self.slave)
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="powerrig-sim-"))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.faults = faults or Faults()
        # the drive sits behind the interposer's switches (sim/ssd/power.py): power actions work here
        self.drive = PoweredDrive(load or ScriptedLoad(), power)
        self.frontend = FrontEnd(self.drive, seed=seed, spec=spec)
        cal_path = str(self.state_dir / "calibration.json")
        if calibrated and not os.path.exists(cal_path):
            with open(cal_path, "w") as f:
                json.dump(self.frontend.factory_calibration(), f)
        self.board = SimBoard(self.master, self.frontend, drift_ppm, self.faults, cal_path, host_fd=self.slave)
        self.device = Device(self.board)
        self.board.stream_config = lambda: self.device.stream
        self.board.samples_wanted = self._samples_wanted
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t_start = time.monotonic()
        # Many virtual rigs on one host (benchmarks/bench_lab.py): the sampling thread runs N nicer than
        # the rest, or only on CPU nobody else wants ("idle"), so a host with more rigs than cores loses
        # samples (counted as overruns, seen as gaps) instead of starving the sweeps and the drive's
        # tools (docs/scale.md).
        self.sampler_priority = os.environ.get(SAMPLER_PRIORITY_ENV, "").strip()

    def _samples_wanted(self) -> bool:
        """Does any part of the firmware read ADC blocks now (Device.poll's consumers)?"""
        d = self.device
        return (d.state == STREAMING or d.burst.state is not BURST_IDLE or d.selftest is not None
                or d.actions.busy)

    def start(self) -> "VirtualInterposer":
        self._thread = threading.Thread(target=self._run, name="sim-interposer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        f = self.faults
        stalled = False
        streaming_since = None
        if self.sampler_priority:
            # this thread only (Linux: a thread's nice and policy are its own): the drive endpoint the
            # impersonated nvme-cli and fio talk to keeps the process's priority
            me = threading.get_native_id()
            if self.sampler_priority == "idle":
                os.sched_setscheduler(me, os.SCHED_IDLE, os.sched_param(0))
            else:
                nice = os.getpriority(os.PRIO_PROCESS, 0) + int(self.sampler_priority)
                os.setpriority(os.PRIO_PROCESS, me, min(19, nice))
        while not self._stop.is_set():
            el = time.monotonic() - self.t_start
            if streaming_since is None and self.device.state == STREAMING:
                streaming_since = el
            if not stalled and ((f.stall_at >= 0 and el >= f.stall_at) or (
                    f.stall_in_stream >= 0 and streaming_since is not None
                    and el - streaming_since >= f.stall_in_stream)):
                stalled = True
                time.sleep(f.stall_for)   # the firmware hangs: nothing read, nothing sent
            try:
                self.device.poll()
            except Exception as e:  # noqa: BLE001 - as Device.run: report and keep going
                self.device.errors += 1
                self.device.notice({"event": "error", "error": str(e), "count": self.device.errors})
            board = self.board
            board.rx_arrived.clear()
            if board._rx or board._rx_held:     # a command on its way (or not all read): served at once
                time.sleep(MIN_PASS_S)
            elif not self._samples_wanted():
                # idle: nothing to sample and no command on its way, so wait for one (a pass every
                # IDLE_PASS_S still runs the timebase) instead of 2000 empty passes a second
                board.rx_arrived.wait(IDLE_PASS_S)
            else:
                board.rx_arrived.wait(self._pass_s())     # a command wakes it at once

    def _pass_s(self) -> float:
        """Sampling: how long to let samples come due before a pass. Each pass has a fixed cost (~40 numpy
        calls and the firmware's Python) whatever its length, so fewer, longer passes cost less CPU per
        simulated second (benchmarks/bench_rig_cpu.py, docs/scale.md). A stream's pass takes whole DMA
        blocks as the board's does, and waits for the block that completes the next DATA frame (never
        more than MAX_PASS_S; a command still wakes the loop at once): the frame leaves in the pass of
        that block, as the board's would, and the blocks before it, which send nothing, share that pass
        (a 1 ms stream's 10 records a frame: a pass every 10 ms, not 10; issue 39). A burst or self-test
        beside a stream keeps the interval's whole blocks (a burst uploads a step a pass); timed power
        actions pass every block; not streaming: MIN_PASS_S."""
        d = self.device
        stream = d.stream
        if not stream:
            return MIN_PASS_S
        b = self.board
        block_s = DMA_BLOCK * b.period_us * 1e-6
        if d.actions.queue:
            return block_s          # timed power actions: the board's loop passes every block, and the firmware
                                    # waits for an edge only within a short horizon of a pass (actions.py)
        if d.burst.state is not BURST_IDLE or d.selftest is not None:
            return min(MAX_PASS_S, max(1, stream["interval_us"] // (DMA_BLOCK * b.period_us)) * block_s)
        # the sample that ends the frame's last interval, and the first block boundary at or after it
        fr = d.framer
        end = b.reducer.index + (fr.per_frame - fr.n) * (stream["interval_us"] // b.period_us)
        due = b.gen_index + -(-(end - b.gen_index) // DMA_BLOCK) * DMA_BLOCK
        wait = (due * b.period_us - b.device_us()) / 1e6 / b.scale      # host seconds until that block is done
        if wait <= 0:               # due already, yet not taken (a live load's trace lags): a block's pace
            return block_s
        return min(MAX_PASS_S, wait)

    def truth(self) -> dict:
        fr = self.device.framer
        b = self.board
        return {"port": self.port, "clock": self.board.clock_truth(),
                "injected": {"dropped_frames": len(b.dropped_seqs), "corrupted_frames": len(b.corrupted_seqs),
                             "lost_frames": len(b.dropped_seqs) + len(b.corrupted_seqs),
                             "writes_dropped": self.board.writes_dropped},
                "frames_sent": fr.frames_sent, "overruns": self.device.overruns,
                "samples_skipped_idle": b.samples_skipped,
                "lost_samples": self.device.lost_samples,
                "dropped_seqs": b.dropped_seqs, "corrupted_seqs": b.corrupted_seqs,
                "sync_corrupted_seqs": b.sync_corrupted_seqs,
                "faults": asdict(self.faults), "serial": self.board.serial,
                "power": {"edges": [list(e) for e in self.board.switches.edges], "cuts": self.drive.truth,
                          "lost_writes": len(self.drive.cache.lost)}}

    def write_truth(self, path: str | os.PathLike) -> None:
        """Truth JSON at path, and the true power per 1 ms bin beside it (path + .npz)."""
        with open(path, "w") as f:
            json.dump(self.truth(), f, indent=1)
        bins = sorted(self.board.truth_bins)
        if bins:
            p = np.stack([self.board.truth_bins[b] for b in bins]) / TRUTH_BIN
            np.savez(str(path) + ".npz", bin_index=np.asarray(bins, np.int64) * TRUTH_BIN, power_w=p,
                     rails=np.array([r.name for r in self.frontend.cfg.rails]))

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2.0)
        self.board.close()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


def serve(args) -> int:
    """`powerrig sim interposer`: print the pty path, run until SIGINT/SIGTERM."""
    # the USB threads must get the GIL within ~100 us of their moment, not the default 5 ms
    sys.setswitchinterval(GIL_SWITCH_S)
    faults = Faults(corrupt=args.corrupt, drop=args.drop, stall_at=args.stall_at, stall_for=args.stall_for,
                    stall_in_stream=args.stall_in_stream, jitter_ms=args.jitter_ms, seed=args.seed)
    sim = VirtualInterposer(seed=args.seed, drift_ppm=args.drift_ppm, faults=faults, state_dir=args.state_dir,
                            calibrated=not args.uncalibrated)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    sim.start()
    print(sim.port, flush=True)
    print(f"powerrig sim interposer: streaming firmware on {sim.port} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    while not stop.wait(0.2):
        if deadline and time.monotonic() > deadline:
            break
    sim.stop()
    if args.truth:
        sim.write_truth(args.truth)
    return 0
