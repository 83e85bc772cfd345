"""A simulated reference meter and calibration fixture on a local SCPI socket.

It measures the same virtual rails as the virtual interposer (``FrontEnd.true_rails``), with its own
smaller, independent errors (about 0.02 % gain, tens of microvolts/microamps offset), and speaks the
N6705C command set powerrig's driver uses, over TCP as `TCPIP::127.0.0.1::PORT::SOCKET`: so the
pyvisa driver, the calibration procedure and the CLI run unchanged against it.

Its outputs can take a rail over from the drive (``OUTP ON,(@n)``): the rail is then supplied at the
``VOLT`` setpoint and loaded with the ``CURR`` setpoint, which is how calibration steps each channel
over its range. Channel n is rail n-1 of hw/rails.toml (1 = 12V, 2 = 3V3, 3 = 5V). A channel put in
voltage priority (``FUNC VOLT``, as an SMU) instead feeds the drive at the ``VOLT`` setpoint with the
current the drive draws (``CURR:LIM`` its limit): how a lab margins the slot's rails (sweep/margin.py).
"""
from __future__ import annotations

import re
import socket
import socketserver
import threading
import time

import numpy as np

from powerrig import __version__

_LONG = {"MEASURE": "MEAS", "VOLTAGE": "VOLT", "CURRENT": "CURR", "SENSE": "SENS", "SWEEP": "SWE",
         "POINTS": "POIN", "FUNCTION": "FUNC", "TRIGGER": "TRIG", "SOURCE": "SOUR", "INITIATE": "INIT",
         "ACQUIRE": "ACQ", "FETCH": "FETC", "ARRAY": "ARR", "OUTPUT": "OUTP", "SYSTEM": "SYST",
         "ERROR": "ERR", "LIMIT": "LIM", "PERIOD": "PER", "ABORT": "ABOR", "TINTERVAL": "TINT"}
_CH = re.compile(r"\(@([\d,:]+)\)")
MIN_TINT = 20.48e-6
_CHANNEL_COMMANDS = {"MEAS:VOLT?", "MEAS:CURR?", "VOLT", "CURR", "OUTP", "SENS:SWE:TINT", "SENS:SWE:TINT?",
                     "SENS:SWE:POIN", "SENS:FUNC:VOLT", "SENS:FUNC:CURR", "TRIG:ACQ:SOUR", "TRIG:ELOG:SOUR",
                     "SENS:ELOG:FUNC:VOLT", "SENS:ELOG:FUNC:CURR", "INIT:ACQ", "FETC:ARR:VOLT?", "FETC:ARR:CURR?",
                     "SENS:ELOG:PER", "INIT:ELOG", "ABOR:ELOG", "FETC:ELOG?", "FUNC", "CURR:LIM"}


class BenchFixture:
    """The drive's load, except on rails the bench has taken over: supplied and loaded by setpoints
    (rail -> (V, A)), or only supplied (rail -> (V, None)): the drive then draws its own power, as
    constant power behind its DC-DC converters (the current scales with nominal / supplied volts)."""

    def __init__(self, load):
        self.load = load
        self.sourced: dict[str, tuple[float, float | None]] = {}

    @property
    def nominal_volts(self) -> dict[str, float]:
        base = dict(getattr(self.load, "nominal_volts", {}))
        base.update({r: v for r, (v, _a) in self.sourced.items()})
        return base

    def rail_currents(self, t):
        out = dict(self.load.rail_currents(t))
        own = getattr(self.load, "nominal_volts", {})
        for r, (v, a) in list(self.sourced.items()):
            if a is None:
                if r in out and v > 0:
                    out[r] = np.asarray(out[r], dtype=float) * own.get(r, v) / v
            else:
                out[r] = np.full(np.shape(t), a, dtype=float)
        return out

    def __getattr__(self, name):          # activity, power_at, ...: the drive's own
        return getattr(self.load, name)


class _Channel:
    def __init__(self):
        self.volt, self.curr, self.on = 0.0, 0.0, False
        self.priority = "CURR"             # the fixture's load (calibration); "VOLT": a supply, CURR:LIM its limit
        self.limit = 10.0
        self.tint, self.points = MIN_TINT, 1024
        self.armed = False
        self.t_trig: float | None = None
        self.elog_period, self.elog_armed = 0.1, False
        self.elog_t0: float | None = None
        self.elog_next = 0


class ReferenceMeter:
    """The instrument: SCPI in, readings out. Thread-safe enough for one client at a time."""

    def __init__(self, frontend, fixture: BenchFixture, seed: int = 7):
        self.frontend = frontend
        self.fixture = fixture
        self.rails = [r.name for r in frontend.cfg.rails]
        self.ch = {k + 1: _Channel() for k in range(len(self.rails))}
        rng = np.random.default_rng(seed + 5000)
        n = len(self.rails)
        self.gain = 1.0 + rng.uniform(-1, 1, size=(n, 2)) * 2e-4
        self.offset = rng.uniform(-1, 1, size=(n, 2)) * np.array([50e-6, 20e-6])
        self.noise = np.random.default_rng(seed + 6000)
        self.errors: list[str] = []
        self.serial = f"SIM{seed:05d}"
        self.fail_after_fetches: int | None = None    # fault injection: the meter errors mid-run
        self.fetches = 0
        self.lock = threading.Lock()

    # ---- physics -----------------------------------------------------------------------------------
    def _read(self, ch: int, t: np.ndarray, tint: float = MIN_TINT) -> tuple[np.ndarray, np.ndarray]:
        """Readings at ``t``, each the mean over its sample interval at the digitizer's 20.48 us rate
        (so a reading integrates what happened since the last one, as the instrument's does)."""
        k = ch - 1
        sub = max(1, int(round(tint / MIN_TINT)))
        tt = (t[:, None] + (np.arange(sub)[None, :] + 0.5) * (tint / sub)).ravel()
        v, i = self.frontend.true_rails(tt)[self.rails[k]]
        v, i = v.reshape(-1, sub).mean(1), i.reshape(-1, sub).mean(1)
        v = v * self.gain[k, 0] + self.offset[k, 0] + self.noise.normal(0, 1e-4, len(t))
        i = i * self.gain[k, 1] + self.offset[k, 1] + self.noise.normal(0, 5e-5, len(t))
        return v, i

    def _wait_until(self, t: float) -> None:
        dt = t - time.time()
        if dt > 0:
            time.sleep(dt)

    # ---- SCPI ----------------------------------------------------------------------------------------
    def handle(self, line: str) -> str | None:
        with self.lock:
            try:
                return self._handle(line.strip())
            except (ValueError, IndexError, KeyError):
                self.errors.append('-222,"Data out of range"')
                return None

    def _channels(self, arg: str) -> list[int]:
        m = _CH.search(arg)
        if not m:
            raise ValueError(arg)
        out = []
        for part in m.group(1).split(","):
            if ":" in part:
                a, b = part.split(":")
                out += list(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
        for c in out:
            if c not in self.ch:
                raise KeyError(c)
        return out

    def _handle(self, line: str) -> str | None:
        if not line:
            return None
        head, _, arg = line.partition(" ")
        head = ":".join(_LONG.get(p, p) for p in head.upper().lstrip(":").split(":"))
        arg = arg.strip()
        value = arg.split(",")[0].strip() if arg and not arg.startswith("(@") else ""
        if head == "*IDN?":
            return f"POWERRIG-SIM,N6705C,{self.serial},powerrig {__version__}"
        if head in ("*CLS",):
            self.errors.clear()
            return None
        if head == "*RST":
            for c in self.ch.values():
                c.on, c.priority = False, "CURR"
            self.fixture.sourced.clear()
            return None
        if head == "SYST:ERR?":
            return self.errors.pop(0) if self.errors else '+0,"No error"'
        if head == "*TRG":
            now = time.time()
            for c in self.ch.values():
                if c.armed:
                    c.t_trig, c.armed = now, False
                if c.elog_armed:
                    c.elog_t0, c.elog_armed, c.elog_next = now, False, 0
            return None
        if head not in _CHANNEL_COMMANDS:
            self.errors.append(f'-113,"Undefined header; {line[:40]}"')
            return None
        chs = self._channels(arg)
        if head in ("MEAS:VOLT?", "MEAS:CURR?"):
            t0 = time.time()
            t = t0 + np.arange(1024) * MIN_TINT
            self._wait_until(t[-1])
            v, i = self._read(chs[0], t)
            return f"{(v if head.endswith('VOLT?') else i).mean():.7E}"
        if head in ("VOLT", "CURR"):
            x = float(value)
            if x < 0 or x > (20.0 if head == "VOLT" else 10.0):
                raise ValueError(x)
            for c in chs:
                setattr(self.ch[c], head.lower(), x)
                self._apply(c)
            return None
        if head == "FUNC":
            if value.upper() not in ("VOLT", "CURR"):
                raise ValueError(value)
            for c in chs:
                self.ch[c].priority = value.upper()
                self._apply(c)
            return None
        if head == "CURR:LIM":
            for c in chs:
                self.ch[c].limit = float(value)
            return None
        if head == "OUTP":
            for c in chs:
                self.ch[c].on = value.upper() in ("ON", "1")
                self._apply(c)
            return None
        if head == "SENS:SWE:TINT":
            for c in chs:
                self.ch[c].tint = max(MIN_TINT, round(float(value) / MIN_TINT) * MIN_TINT)
            return None
        if head == "SENS:SWE:TINT?":
            return f"{self.ch[chs[0]].tint:.7E}"
        if head == "SENS:SWE:POIN":
            n = int(value)
            if not 1 <= n <= 512 * 1024:
                raise ValueError(n)
            for c in chs:
                self.ch[c].points = n
            return None
        if head in ("SENS:FUNC:VOLT", "SENS:FUNC:CURR", "TRIG:ACQ:SOUR", "TRIG:ELOG:SOUR",
                    "SENS:ELOG:FUNC:VOLT", "SENS:ELOG:FUNC:CURR"):
            return None
        if head == "INIT:ACQ":
            for c in chs:
                self.ch[c].armed, self.ch[c].t_trig = True, None
            return None
        if head in ("FETC:ARR:VOLT?", "FETC:ARR:CURR?"):
            c = self.ch[chs[0]]
            self.fetches += 1
            if self.fail_after_fetches is not None and self.fetches > self.fail_after_fetches:
                self.errors.append('-240,"Hardware error; digitizer overload"')
                return ""
            if c.t_trig is None:
                self.errors.append('-230,"Data corrupt or stale"')
                return ""
            t = c.t_trig + np.arange(c.points) * c.tint
            self._wait_until(t[-1] + c.tint)
            v, i = self._read(chs[0], t, c.tint)
            return ",".join(f"{x:.7E}" for x in (v if "VOLT" in head else i))
        if head == "SENS:ELOG:PER":
            for c in chs:
                self.ch[c].elog_period = float(value)
            return None
        if head == "INIT:ELOG":
            for c in chs:
                self.ch[c].elog_armed = True
            return None
        if head == "ABOR:ELOG":
            for c in chs:
                self.ch[c].elog_t0 = None
            return None
        if head == "FETC:ELOG?":
            c = self.ch[chs[0]]
            if c.elog_t0 is None:
                self.errors.append('-221,"Settings conflict"')
                return ""
            limit = int(value)
            done = int((time.time() - c.elog_t0) / c.elog_period)
            k = np.arange(c.elog_next, min(done, c.elog_next + limit))
            c.elog_next += len(k)
            if not len(k):
                return ""
            sub = 32
            t = (c.elog_t0 + (k[:, None] + (np.arange(sub)[None, :] + 0.5) / sub) * c.elog_period).ravel()
            v, i = self._read(chs[0], t)
            pairs = np.column_stack([v.reshape(-1, sub).mean(1), i.reshape(-1, sub).mean(1)]).ravel()
            return ",".join(f"{x:.7E}" for x in pairs)
        raise AssertionError(head)        # every name in _CHANNEL_COMMANDS is handled above

    def _apply(self, ch: int) -> None:
        c = self.ch[ch]
        rail = self.rails[ch - 1]
        if c.on:
            self.fixture.sourced[rail] = (c.volt, c.curr if c.priority == "CURR" else None)
        else:
            self.fixture.sourced.pop(rail, None)


def _lines_acked_at_once(sock: socket.socket):
    """The client's lines, each received chunk ACKed at once (TCP_QUICKACK): the driver writes a command
    and then ``SYST:ERR?``, and a meter that delays the ACK of a command it does not answer holds the
    second write in the client's Nagle buffer for the delayed-ACK time (40 ms on Linux) per command."""
    buf = b""
    while chunk := sock.recv(65536):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        *lines, buf = (buf + chunk).split(b"\n")
        yield from lines
    if buf:
        yield buf


class ReferenceServer:
    """The meter on 127.0.0.1:<port>, newline-terminated SCPI over a raw socket (port 5025 style)."""

    def __init__(self, meter: ReferenceMeter, port: int = 0):
        self.meter = meter

        class Handler(socketserver.StreamRequestHandler):
            def handle(inner):
                for raw in _lines_acked_at_once(inner.connection):
                    for cmd in raw.decode("ascii", "replace").split(";"):
                        out = meter.handle(cmd)
                        if out is not None:
                            inner.wfile.write((out + "\n").encode())
                            inner.wfile.flush()

        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.resource = f"TCPIP::127.0.0.1::{self.port}::SOCKET"

    def start(self) -> "ReferenceServer":
        threading.Thread(target=self.server.serve_forever, name="sim-reference", daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
