"""The interposer client: describe, start/stop a stream, ping, burst, calibration.

    with Interposer.open("/dev/ttyACM0") as dev:
        with dev.stream(interval_us=1000) as st:
            for block in st.blocks(seconds=10):   # IntervalBlocks, gaps included as NaN rows
                ...
        print(st.summary())
"""
from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from powerrig.interposer import frames as wire
from powerrig.core.sampling import INTERPOSER
from powerrig.core.sums import CompensatedSums
from powerrig.core.errors import DeviceError, LinkError
from powerrig.interposer.serial_link import SerialLink
from powerrig.interposer.pings import PingSchedule
from powerrig.core.blocks import IntervalBlock
from powerrig.core.names import DEVICE_NAME, PROTOCOL  # the firmware's own identity, restated nowhere
from powerrig.core.clock import ClockFit


def describe_problems(desc: dict) -> list[str]:
    """What a protocol-1 description lacks that this host needs, in words (empty when complete):
    a half-written firmware must be named as such, not fail later with a KeyError."""
    out = []
    missing = [k for k in ("sample_period_us", "peak_window_us", "rails", "interval_us") if k not in desc]
    if missing:
        out.append("lacks " + ", ".join(missing))
    if "interval_us" in desc and not (isinstance(desc["interval_us"], dict) and "default" in desc["interval_us"]):
        out.append("has no interval_us.default")
    rails = desc.get("rails")
    if "rails" in desc and not (isinstance(rails, list) and rails):
        out.append("lists no rails")
    elif isinstance(rails, list):
        for k, r in enumerate(rails):
            lack = [f for f in ("name", "v_lsb", "i_lsb") if not isinstance(r, dict) or f not in r]
            if lack:
                out.append(f"has rail {k} without {', '.join(lack)}")
    for k in ("sample_period_us", "peak_window_us"):
        if k in desc and not (isinstance(desc[k], int) and not isinstance(desc[k], bool) and desc[k] > 0):
            out.append(f"has {k} = {desc[k]!r}, not a positive integer")
    return out


SLOW_REPLY_S = 0.5      # a board answers describe in ~10 ms; this long means a slow (emulated) device


def learn_rate(link: SerialLink, desc: dict, timeout: float) -> None:
    """Set ``link.time_scale`` from two pings 0.2 s of host time apart, before any command with a
    deadline: a device that took long to describe itself may run far slower than real time (an
    emulated board, docs/emulator.md), and its replies' deadlines are in its own time."""
    period = desc["sample_period_us"] * 1e-6
    a = link.command("ping", timeout=timeout)
    time.sleep(0.2)
    b = link.command("ping", timeout=timeout)
    rate = (float(b["index"]) - float(a["index"])) * period / max(1e-6, b["_t_send"] - a["_t_send"])
    link.time_scale = 1.0 / min(1.0, max(1e-3, rate))


class Interposer:
    """One connection to one interposer. It pings in the background for its whole life, so the
    clock model (``clock.model()``) improves across streams rather than starting over. It is one
    measurement source among several (powerrig.sources): ``sampling`` is what it resolves."""
    sampling = INTERPOSER

    def __init__(self, link: SerialLink, description: dict, ping_interval: float = 0.1,
                 burst_s: float = 30.0, burst_interval: float = 0.01):
        self.link = link
        self.description = description
        self.clock = ClockFit(period_s=description["sample_period_us"] * 1e-6)
        # NTP's iburst, for the drift: the first burst_s of a connection ping ten times as often. The
        # drift is the slope through the fastest pings, and a capture's first seconds are placed with
        # it; more pings early settle it within 1 ppm by 30 s (docs/link.md). Then 10 a second until the
        # fit's bound is tight, then ten back to back every 5 s: the fit rests on the fastest ping of each
        # time bin, and each ping costs the link's reader wake-ups (interposer/pings.py, docs/scale.md).
        # A board may say how often its main loop can afford a ping (describe "ping_interval_min_us":
        # the RP2040's, beside a stream); never more often than that.
        floor = description.get("ping_interval_min_us", 0) * 1e-6
        self.pings = PingSchedule(burst_s=burst_s, burst_interval=burst_interval, interval=ping_interval,
                                  floor=floor)
        self.ping_errors = 0
        self.last_ping_error: str | None = None
        self.device_rate = 1.0          # device seconds per host second, as the pings see it
        self._closing = threading.Event()
        self._repace = threading.Event()    # ends the thread pinger's wait (close, a watchdog armed)
        self._t_open = time.monotonic()
        self._first_ping: tuple[float, float] | None = None
        self._pinger: threading.Thread | None = None
        keep = getattr(link, "keep_pinging", None)     # the serial link pings from its reader thread
        if keep is None or not keep(self._ping_every_s, self._on_ping_reply, self._on_ping_error):
            self._pinger = threading.Thread(target=self._ping_loop, name="powerrig-pinger", daemon=True)
            self._pinger.start()

    @property
    def ping_interval(self) -> float:
        """Device seconds between clock pings after the first burst_s, until the fit has settled."""
        return max(self.pings.interval, self.pings.floor)

    @ping_interval.setter
    def ping_interval(self, every_s: float) -> None:
        self.pings.interval = every_s

    @property
    def burst_interval(self) -> float:
        return max(self.pings.burst_interval, self.pings.floor)

    def _ping_every_s(self) -> float:
        """Host seconds to the next clock ping (see _ping_loop: in device time, burst first)."""
        return self.pings.next_s(time.monotonic() - self._t_open, self._fit_bound_us) / self.device_rate

    def _ping_soon(self) -> None:
        """Ping now rather than when the slower schedule said (the watchdog was just armed)."""
        soon = getattr(self.link, "ping_soon", None)
        if soon is not None:
            soon()
        self._repace.set()

    def _fit_bound_us(self) -> float | None:
        model = self.clock.model()
        return None if model is None else model.residual_us

    def _on_ping_reply(self, r: dict) -> None:
        """A ping's reply (from the link's reader thread, or _ping_loop) into the clock fit."""
        self.pings.answered()
        try:
            p = self._ping_tuple(r)
            self.clock.add(*p)
            self._first_ping = self._first_ping or (p[0], p[1])
            self._observe_rate(self._first_ping, p)
        except Exception as e:  # noqa: BLE001 - a malformed reply is a ping error, never the link's end
            self._count_ping_error(f"{e.__class__.__name__}: {e}")

    def _on_ping_error(self, text: str) -> None:
        self.pings.answered()
        self._count_ping_error(text)

    def _count_ping_error(self, text: str) -> None:
        self.ping_errors += 1
        self.last_ping_error = text

    def stop_pinging(self) -> None:
        """The host stops talking (the board's power watchdog then restores power); the link stays open."""
        self._closing.set()
        self._repace.set()
        stop = getattr(self.link, "stop_pinging", None)
        if stop is not None:
            stop()
        if self._pinger is not None:
            self._pinger.join(timeout=2.0)

    def _ping_loop(self) -> None:
        """Keeps the clock model fresh. A failed ping is counted (``ping_errors``), never fatal.

        The intervals are in DEVICE time: a board whose clock runs slower than the host's (an emulated
        one, docs/emulator.md) gets as many pings per device second as a real one, not a flood that
        would eat its CPU. ``device_rate`` is 1 on real hardware (within its crystal's ppm)."""
        while True:
            self._repace.wait(self._ping_every_s())
            self._repace.clear()
            if self._closing.is_set():
                return
            try:
                r = self.link.command("ping", timeout=1.0)
            except Exception as e:  # noqa: BLE001 - the clock must keep trying while the link lives
                self._on_ping_error(str(e))
                if self.link.error:
                    return
                continue
            self._on_ping_reply(r)

    def _observe_rate(self, first: tuple[float, float], ping: tuple[float, float, float, float]) -> None:
        """Device seconds per host second since the first ping (after 0.2 s of host time; at most 1)."""
        dt = ping[0] - first[0]
        if dt >= 0.2:
            rate = (ping[1] - first[1]) * self.clock.period_s / dt
            self.device_rate = min(1.0, max(1e-3, rate))
            self.link.time_scale = 1.0 / self.device_rate

    @classmethod
    def open(cls, port: str, timeout: float = 2.0) -> "Interposer":
        link = SerialLink(port)
        try:
            t0 = time.monotonic()
            desc = link.command("describe", timeout=timeout)
            slow = time.monotonic() - t0 > SLOW_REPLY_S
        except DeviceError as e:
            link.close()
            raise LinkError(f"the device on {port} is not a powerrig interposer ({e})") from None
        except BaseException:
            link.close()
            raise
        if desc.get("device") != DEVICE_NAME:
            link.close()
            raise LinkError(f"the device on {port} is {desc.get('device')!r}, not a powerrig interposer")
        if desc.get("protocol") != PROTOCOL:
            link.close()
            raise LinkError(f"interposer on {port} speaks protocol {desc.get('protocol')}, this host speaks "
                            f"{PROTOCOL}; update the firmware or powerrig")
        problems = describe_problems(desc)
        if problems:
            link.close()
            raise LinkError(f"the interposer on {port} speaks protocol {PROTOCOL} but its description "
                            f"{'; '.join(problems)}; update its firmware")
        try:
            if slow:
                learn_rate(link, desc, timeout)
            if desc.get("state") == "streaming":   # left streaming by a previous host process
                link.command("stop", timeout=timeout)
            return cls(link, desc)
        except BaseException:
            link.close()
            raise

    def __enter__(self) -> "Interposer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.stop_pinging()
        self.link.close()

    # ---- commands ------------------------------------------------------------------------------------
    def describe(self) -> dict:
        self.description = self.link.command("describe")
        return self.description

    def ping(self) -> tuple[float, float, float, float]:
        """(host UTC sent, device sample index when the ping arrived, host UTC received, device sample
        index when the reply left): the order ClockFit.add takes."""
        return self._ping_tuple(self.link.command("ping", timeout=1.0))

    @staticmethod
    def _ping_tuple(r: dict) -> tuple[float, float, float, float]:
        # the frame header's index is stamped after the reply was encoded (firmware 0.1.0 from 23 Nov 2026), so it is
        # the later, tighter of the two; older firmware stamped it first, hence the max
        tx = max(float(r["index"]), float(r.get("_index", 0)))
        return r["_t_send"], float(r.get("rx_index", r["index"])), r["_t_recv"], tx

    def status(self) -> dict:
        return self.link.command("status")

    def calibration(self) -> dict:
        return self.link.command("cal_get")["calibration"]

    def set_calibration(self, cal: dict, save: bool = True) -> dict:
        out = self.link.command("cal_set", calibration=cal, save=save)["calibration"]
        self.describe()
        return out

    def selftest(self, timeout: float = 10.0, link_rounds: int = 20) -> dict:
        """The device's self-test (reference, ADC noise per channel, digital inputs, firmware and
        build) plus the link's measured throughput: ``link_rounds`` pings carrying 1.5 kB each way."""
        out = self.link.command("selftest", timeout=timeout)
        echo = "x" * 1500
        t0 = time.monotonic()
        for _ in range(link_rounds):
            self.link.command("ping", echo=echo, timeout=2.0)
        dt = time.monotonic() - t0
        out["link"] = {"rounds": link_rounds, "bytes_each_way": len(echo),
                       "bytes_per_s": int(2 * link_rounds * len(echo) / dt) if dt > 0 else None,
                       "budget_bps": self.description.get("link_budget_bps")}
        return out

    def release_console(self) -> dict:
        """End the firmware's main loop so the board's REPL is back: the firmware ignores Ctrl-C (its
        command frames may carry 0x03), so this is how mpremote gets in to copy new firmware."""
        return self.link.command("repl")

    def reset(self) -> dict:
        """Stop everything on the device and reload its stored calibration (re-read here too)."""
        out = self.link.command("reset")
        self.describe()
        return out

    # ---- timed power actions (docs/protocol.md `power`; only through powerrig.dut.destructive) -------
    def power_enable(self, permit, watchdog_ms: int = 1000) -> dict:
        """Allow power actions for this session, with the Permit of ``powerrig.dut.destructive.power``
        (the guard passed for the drive in the slot); the device restores power if this host goes
        silent for ``watchdog_ms`` (the background pings keep it fed while this object lives)."""
        if permit is None or not permit.covers("power", None):
            raise DeviceError("power actions need the permit of powerrig.dut.destructive.power "
                              "(the drive's serial checked, never the host's own drive)")
        out = self.link.command("power", op="enable", watchdog_ms=int(watchdog_ms))
        self.pings.watchdog_s = int(watchdog_ms) * 1e-3      # the pings feed it: never outwait it
        self._ping_soon()
        return out

    def power_disable(self) -> dict:
        out = self.link.command("power", op="disable")
        self.pings.watchdog_s = None
        return out

    def power_status(self) -> dict:
        return self.link.command("power", op="status")

    def power_sequence(self, actions: list[dict]) -> dict:
        """Schedule [{output, level, at | after_us}]; the reply has each edge's sample index."""
        return self.link.command("power", op="sequence", actions=actions)

    def power_cancel(self) -> dict:
        return self.link.command("power", op="cancel")

    def power_edges(self, count: int, timeout: float = 5.0) -> list[dict]:
        """The next ``count`` executed edges ({output, level, requested, index}) from the device's
        NOTICEs (taken off the notice queue); LinkError when they do not come in time."""
        got: list[dict] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            for doc in list(self.link.notices):
                if doc.get("event") in ("power", "power_restored"):
                    self.link.notices.remove(doc)
                    if doc["event"] == "power_restored":
                        raise LinkError(f"the interposer restored power ({doc.get('why')}, at sample "
                                        f"{doc.get('index')}) before the sequence ended")
                    got.extend(doc["edges"])
            if len(got) >= count:
                break
            if time.monotonic() > deadline:
                raise LinkError(f"{len(got)} of {count} power edges reported within {timeout:g} s; "
                                "the sequence may still be pending (power status) or the link is down")
            time.sleep(0.005)
        return got

    def stream(self, interval_us: int | None = None, rails: list[str] | None = None,
               stall_timeout: float = 3.0) -> "Stream":
        return Stream(self, interval_us or self.description["interval_us"]["default"], rails, stall_timeout)

    def burst(self, pre: int = 2500, post: int = 2500, trigger: str = "now", timeout: float = 10.0,
              on_armed=None, **trig) -> "Burst":
        """Capture raw 4 us samples around a trigger and wait for the upload (streaming may go on).

        The chunks must be contiguous and add up to what the device announced; a burst that does
        not trigger in time is cancelled on the device, so a later burst never returns its data.
        """
        stride = 2 * len(self.description["rails"]) + 1
        q = self.link.bursts
        while True:                                   # chunks of an earlier, abandoned burst
            try:
                q.get_nowait()
            except queue.Empty:
                break
        # once triggered the upload may take the whole link budget: the reader paces for it from the start
        _expect_rate(self.link, self.description.get("link_budget_bps"), "burst")
        try:
            return self._burst_upload(q, stride, pre, post, trigger, timeout, on_armed, trig)
        finally:
            _expect_rate(self.link, 0, "burst")

    def _burst_upload(self, q, stride, pre, post, trigger, timeout, on_armed, trig) -> "Burst":
        self.link.command("burst", pre=pre, post=post, trigger=trigger, **trig)
        if on_armed is not None:       # e.g. a power sequence whose edge triggers it may go now
            on_armed()
        chunks: list[wire.Frame] = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                f = q.get(timeout=0.2)
            except queue.Empty:
                continue
            if f is None:
                raise LinkError(self.link.error or "link closed during burst upload")
            if chunks and f.index != chunks[-1].index + len(chunks[-1].payload) // (2 * stride):
                self.link.command("burst", trigger="off")
                raise LinkError(f"burst upload lost a chunk before sample {f.index}: "
                                "the raw capture is incomplete; take it again")
            if not chunks:       # triggered: the device paces the upload to the link budget the stream
                # leaves (at least 20 kB/s, firmware burst.MIN_SHARE_BPS), so give it that long
                deadline = max(deadline, time.time() + 2.0 + (pre + post) * stride * 2 / 20000)
            chunks.append(f)
            if f.flags & wire.F_LAST:
                break
        else:
            self.link.command("burst", trigger="off")
            raise LinkError(f"burst did not trigger and upload within {timeout:g} s; cancelled on the device "
                            "(check the trigger level, or give more time)")
        raw = np.frombuffer(b"".join(c.payload for c in chunks), dtype="<i2").reshape(-1, stride)
        if len(raw) != pre + post:
            raise LinkError(f"burst returned {len(raw)} samples, expected {pre + post} "
                            "(the device lost samples during the capture); take it again")
        return Burst(chunks[0].index, raw, self.description)


def _expect_rate(link, bytes_per_s, what: str = "stream") -> None:
    """Tell a serial link what the device will send for ``what`` (its reader paces for it); a stand-in
    link has no pace to set."""
    expect = getattr(link, "expect_rate", None)
    if expect is not None:
        expect(bytes_per_s or 0, what)


@dataclass
class Burst:
    """Raw 4 us samples: ``codes`` (samples x (2*rails+1)) and SI helpers."""
    first_index: int
    codes: np.ndarray
    description: dict

    def rail(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(volts, amps, watts) arrays of one rail."""
        names = [r["name"] for r in self.description["rails"]]
        k = names.index(name)
        s = wire.rail_scales(self.description, [name])[0]
        off = self.description["calibration"]["rails"][name]
        v = (self.codes[:, 2 * k].astype(np.float64) - off["v_offset"]) * s.v_per_code
        i = (self.codes[:, 2 * k + 1].astype(np.float64) - off["i_offset"]) * s.i_per_code
        return v, i, v * i


@dataclass
class StreamStats:
    frames: int = 0
    intervals: int = 0
    dropped_frames: int = 0
    gaps: int = 0
    gap_intervals: int = 0
    overruns: int = 0
    crc_errors: int = 0
    bad_headers: int = 0        # wrong version, over-size length, or a frame that never completed
    bad_bytes: int = 0
    gap_positions: list = field(default_factory=list)   # (first sample index, intervals, reason)


class Stream:
    """A running stream. Use as a context manager; iterate ``blocks()``."""

    def __init__(self, dev: Interposer, interval_us: int, rails: list[str] | None, stall_timeout: float):
        self.dev = dev
        self.interval_us = interval_us
        self.requested_rails = rails
        self.stall_timeout = stall_timeout
        self.stats = StreamStats()
        self.clock = dev.clock          # the connection's clock fit: one clock for everything
        self.config: dict = {}

    # ---- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> "Stream":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        link = self.dev.link
        while True:                    # frames of an earlier stream still in the queue
            try:
                link.data.get_nowait()
            except queue.Empty:
                break
        rails = list(self.requested_rails or [])
        twice = sorted({r for r in rails if rails.count(r) > 1})
        if twice:
            # the same refusal the firmware gives: a rail counted twice would double the total power
            raise DeviceError(f"rail {', '.join(twice)} listed more than once; list each rail once")
        args = {"interval_us": self.interval_us}
        if self.requested_rails:
            args["rails"] = list(self.requested_rails)
        self.config = link.command("start", **args)
        _expect_rate(link, self.config.get("bytes_per_s"))
        d = self.dev.description
        self.rails = tuple(self.config["rails"])
        self.scales = wire.rail_scales(d, list(self.rails))
        self.spi = self.interval_us // d["sample_period_us"]
        self.window = d["peak_window_us"] // d["sample_period_us"]
        self.per_frame = self.config["per_frame"]
        self.period_s = d["sample_period_us"] * 1e-6
        self._next_index = int(self.config["first_index"])
        self._yielded_end = self._next_index   # end of the last row handed out
        self._next_seq: int | None = self.config.get("first_seq")
        self._crc0 = link.decoder.crc_errors
        self._hdr0 = self._bad_headers(link.decoder)
        self._bad0 = link.decoder.bad_bytes
        self._power_sums = CompensatedSums(len(self.rails))
        self._valid_rows = 0
        self._pending: list[wire.Frame] = []    # frames received but not yet handed out
        self._remainder: wire.Frame | None = None   # rest of a frame split at a blocks() end
        self._started = False                   # seen this stream's first (RESTART) frame
        self.stale_frames = 0                   # frames of an earlier stream, dropped
        self.stop_error: str | None = None
        self.malformed_frames = 0               # DATA frames whose length disagrees with their count
        self._carry_reason: str | None = None   # reason of a gap cut at a blocks() end, for its rest

    def stop(self) -> None:
        """Ask the device to stop. If it does not answer, say so in the summary (``stop_error``): the
        next stream on this connection then drops the old stream's frames as stale."""
        try:
            self.dev.link.command("stop")
        except LinkError as e:
            self.stop_error = str(e)
        _expect_rate(self.dev.link, 0)

    # ---- data -------------------------------------------------------------------------------------------
    def blocks(self, seconds: float | None = None, max_rows: int = 5000, stop: threading.Event | None = None,
               every_s: float = 0.1, first_s: float | None = None):
        """Yield IntervalBlocks until ``seconds`` of device time have been covered (or forever, or
        until ``stop`` is set: a recorder's stop then ends it even while no data arrives).

        The run ends at its end index whatever happened around it: data lost just before the end
        (dropped, CRC-failed, a stall, an overrun) becomes a gap up to the end, so a timed stream
        always finishes. Frames received are handed out at least every ``every_s`` or ``max_rows``;
        the first hand-over after ``first_s`` when that is sooner (a caller waiting for the first
        samples is not kept waiting a whole ``every_s``).
        """
        end_index = None if seconds is None else self._next_index + int(round(seconds / self.period_s))
        pending, self._pending = self._pending, []      # what an earlier call received but did not hand out
        last_data = last_yield = time.monotonic()
        if first_s is not None and first_s < every_s:
            last_yield -= every_s - first_s
        rows = sum(f.count for f in pending)
        while end_index is None or self._next_index < end_index:
            # paced by the hand-over, not by each read: sleep to the next one, then take all that came
            rest = last_yield + every_s - time.monotonic()
            if rest > 0 and (stop.wait(rest) if stop is not None else time.sleep(rest)):
                break
            if stop is not None and stop.is_set():
                break
            got = self._receive(min(0.05, every_s), max_rows - rows)
            now = time.monotonic()
            if got:
                pending += got
                rows += sum(f.count for f in got)
                last_data = now
            if pending and (not got or rows >= max_rows or now - last_yield > every_s):
                yield from self._assemble(pending, end_index)
                pending = []
                rows = 0
                last_yield = now
            self._check_stall(now - last_data)
        if stop is not None and stop.is_set():
            # stopped between hand-overs: what the link has already read belongs to the run (a stop at
            # a workload's end must not cut the last every_s of it)
            with contextlib.suppress(LinkError):    # the link ended as well: the stop still ended the run
                pending += self._receive(0.0, max_rows)
        if pending:
            yield from self._assemble(pending, end_index)

    def _receive(self, wait_s: float = 0.05, rows: int = 5000) -> list[wire.Frame]:
        """This stream's DATA frames waiting on the link (the link hands them over as one list per
        read), about ``rows`` intervals' worth at most, or [] after a short wait without any."""
        link = self.dev.link
        got: list[wire.Frame] = []
        try:
            item = link.data.get(timeout=wait_s)
            while True:
                if item is None:
                    if got:                 # these first; the next call meets the end
                        link.data.put(None)
                        break
                    raise LinkError(link.error or f"link to {link.port} closed")
                if self._started and isinstance(item, list):
                    # the reader's lists hold DATA frames only: one check of their lengths for the lot
                    rs = self.config["record_size"]
                    ok = [f for f in item if len(f.payload) == f.count * rs]
                    self.malformed_frames += len(item) - len(ok)
                    got += ok
                    rows -= sum(f.count for f in ok)
                else:
                    for f in item if isinstance(item, list) else (item,):
                        if f.type == wire.T_DATA and self._accept(f):
                            got.append(f)
                            rows -= f.count
                if rows <= 0:
                    break
                item = link.data.get_nowait()
        except queue.Empty:
            pass
        return got

    def _check_stall(self, quiet_s: float) -> None:
        """A stall longer than the limit ends the stream with an error (shorter ones become gaps)."""
        if quiet_s > self.stall_timeout * getattr(self.dev.link, "time_scale", 1.0):
            raise LinkError(f"no data from {self.dev.link.port} for {quiet_s:.1f} s: the interposer stalled or "
                            "was unplugged; check USB and power, then `powerrig devices`")

    def _accept(self, f: wire.Frame) -> bool:
        """False for frames that are not this stream's: leftovers of an earlier stream (before the
        RESTART frame at our first index) and frames whose payload disagrees with their count."""
        if not self._started:
            if not (f.flags & wire.F_RESTART and f.index == self.config["first_index"]):
                if f.index < self.config["first_index"]:
                    self.stale_frames += 1
                    return False
            self._started = True
        if len(f.payload) != f.count * self.config["record_size"]:
            self.malformed_frames += 1
            return False
        return True

    def _assemble(self, frames: list[wire.Frame], end_index: int | None = None):
        """Turn in-order DATA frames into blocks, with gap blocks where frames or samples were lost.

        Nothing at or past end_index is yielded, so ``blocks(seconds=N)`` covers exactly N seconds.
        """
        st = self.stats
        dec = self.dev.link.decoder
        st.crc_errors = dec.crc_errors - self._crc0
        st.bad_headers = self._bad_headers(dec) - self._hdr0
        st.bad_bytes = dec.bad_bytes - self._bad0
        k = self._in_order(frames, end_index)
        if k:
            # the usual hand-over: its frames follow on without a gap, before the end; what the loop below
            # does frame by frame, done once for them (a second at 100 us is ~230 frames)
            head, frames = frames[:k], frames[k:]
            last = head[-1]
            self._next_index = last.index + last.count * self.spi
            self._next_seq = (last.seq + 1) & 0xFFFF
            st.frames += k
            yield self._decode_run(head, end_index)
        run: list[wire.Frame] = []
        for pos, f in enumerate(frames):
            if end_index is not None and f.index >= end_index:
                if run:
                    yield self._decode_run(run, end_index)
                    run = []
                if self._next_index < end_index:
                    # the data just before the end was lost: a gap up to the end, or the end is never reached
                    gap = self._gap_to_end(f, end_index)
                    if gap is not None:
                        yield gap
                    f = self._parked(f)
                self._pending = [*self._pending, f, *frames[pos + 1:]]   # the next blocks() call starts here
                break
            lost = 0
            if self._next_seq is not None:
                lost = (f.seq - self._next_seq) & 0xFFFF
            if f.index != self._next_index or lost:
                if run:
                    yield self._decode(run, end_index)
                    run = []
                gap = self._gap(f, lost, end_index)
                if gap is not None:
                    yield gap
            run.append(f)
            self._next_index = f.index + f.count * self.spi
            self._next_seq = (f.seq + 1) & 0xFFFF
            if f is not self._remainder:
                st.frames += 1
        if run:
            yield self._decode_run(run, end_index)

    def _in_order(self, frames: list[wire.Frame], end_index: int | None) -> int:
        """How many of ``frames``, from the first, continue this stream without a gap, a lost frame or an
        overrun and start before ``end_index`` (numpy over the headers, not a Python step per frame)."""
        first = frames[0]
        if (first is self._remainder or first.index != self._next_index
                or (self._next_seq is not None and first.seq != self._next_seq)):
            return 0
        try:
            head = np.array([(f.index, f.count, f.seq, f.flags) for f in frames], dtype=np.int64)
        except OverflowError:           # an index past 2**63: the loop's Python integers take it
            return 0
        idx, count, seq, flags = head.reshape(len(frames), 4).T
        good = (flags & wire.F_OVERRUN) == 0
        good[1:] &= (idx[1:] == idx[:-1] + count[:-1] * self.spi) & ((seq[1:] - seq[:-1]) & 0xFFFF == 1)
        if end_index is not None:
            good &= idx < end_index
        return len(frames) if good.all() else int(np.argmin(good))

    def _decode_run(self, run: list[wire.Frame], end_index: int | None) -> IntervalBlock:
        """Decode contiguous frames; if the last one was split at end_index, the next call continues
        right after the rows handed out (the rest waits first in ``_pending``)."""
        block = self._decode(run, end_index)
        if self._remainder is not None and self._pending and self._pending[0] is self._remainder:
            self._next_index = self._remainder.index
            self._next_seq = self._remainder.seq
        return block

    @staticmethod
    def _bad_headers(dec: wire.FrameDecoder) -> int:
        return dec.bad_version + dec.oversize + dec.stale_headers

    def _gap_to_end(self, f: wire.Frame, end_index: int) -> IntervalBlock | None:
        """The gap before frame ``f`` (which lies at or past the end), cut at the end. The lost frames
        are counted now, so the next blocks() call sees ``f`` as the next in sequence and only the
        rest of the gap, with the same reason."""
        lost = 0 if self._next_seq is None else (f.seq - self._next_seq) & 0xFFFF
        gap = self._gap(f, lost, end_index)
        if gap is not None:
            self._next_index = gap.end_index
            self._carry_reason = gap.flags["gap"]
        self._next_index = max(self._next_index, end_index)
        self._next_seq = f.seq
        return gap

    @staticmethod
    def _parked(f: wire.Frame) -> wire.Frame:
        """``f`` kept for the next call without its overrun flag: that overrun is counted already."""
        if not f.flags & wire.F_OVERRUN:
            return f
        return wire.Frame(f.type, f.flags & ~wire.F_OVERRUN, f.count, f.seq, f.index, f.payload, f.t_host, f.t_first)

    def _gap(self, f: wire.Frame, lost_seq: int, end_index: int | None) -> IntervalBlock | None:
        """A gap block for the samples missing before frame ``f``; counts lost frames and overruns."""
        st = self.stats
        missing = f.index - self._next_index
        if missing < 0:
            # the device restarted its index (reset or a second host): realign, count it as a gap
            st.gaps += 1
            st.gap_positions.append((f.index, 0, "restart"))
            self._next_index = f.index
            return None
        n = missing // self.spi
        if lost_seq:
            # seq is 16-bit: pick the wrap count that agrees with the missing sample count
            est = n / self.per_frame
            lost_seq += 65536 * max(0, round((est - lost_seq) / 65536))
        reason = "link" if lost_seq else "overrun"
        if not lost_seq and not f.flags & wire.F_OVERRUN and self._carry_reason:
            reason = self._carry_reason         # the rest of a gap cut at the previous call's end
        self._carry_reason = None
        st.dropped_frames += lost_seq
        if f.flags & wire.F_OVERRUN:
            st.overruns += 1
        if n <= 0:
            return None
        if end_index is not None:
            n = min(n, max(0, (end_index - self._next_index + self.spi - 1) // self.spi))
        st.gaps += 1
        st.gap_intervals += n
        st.gap_positions.append((self._next_index, n, reason))
        self._yielded_end = self._next_index + n * self.spi
        return IntervalBlock.gap(self._next_index, n, self.spi, self.period_s, self.rails, reason)

    def _decode(self, frames: list[wire.Frame], end_index: int | None = None) -> IntervalBlock:
        payload = b"".join(f.payload for f in frames)
        rs = self.config["record_size"]
        if end_index is not None:
            keep = max(0, (end_index - frames[0].index + self.spi - 1) // self.spi)
            if keep * rs < len(payload):
                # the rest of the last frame waits for the next blocks() call, as a frame of its own
                last = frames[-1]
                skip = (len(payload) - len(last.payload)) // rs
                used = keep - skip
                self._remainder = wire.Frame(last.type, last.flags & ~wire.F_OVERRUN & ~wire.F_RESTART,
                                             last.count - used, last.seq, last.index + used * self.spi,
                                             last.payload[used * rs:], last.t_host, last.t_first)
                self._pending.insert(0, self._remainder)
                payload = payload[: keep * rs]
        si = wire.records_to_si(payload, self.scales, self.spi, self.window)
        n = len(si["dig_or"])
        self.stats.intervals += n
        self._yielded_end = frames[0].index + n * self.spi
        self._power_sums.add(si["p"].sum(axis=0))   # compensated: hours of data do not drift
        self._valid_rows += n
        return IntervalBlock(frames[0].index, self.spi, self.period_s, self.rails, si["v"], si["i"], si["p"],
                             si["p_min"], si["p_max"], si["p_peak"], si["dig_or"], si["dig_and"],
                             np.ones(n, bool), clip=wire.records_clipped(payload, len(self.rails), self.spi))

    # ---- summary --------------------------------------------------------------------------------------
    def mean_power(self) -> dict[str, float]:
        if not self._valid_rows:
            return {r: math.nan for r in self.rails} | {"total": math.nan}
        m = self._power_sums.value / self._valid_rows
        out = {r: float(x) for r, x in zip(self.rails, m)}
        out["total"] = float(m.sum())
        return out

    def summary(self) -> dict:
        st = self.stats
        model = self.clock.model()
        return {
            "port": self.dev.link.port,
            "interval_us": self.interval_us,
            "rails": list(self.rails),
            "first_index": int(self.config["first_index"]),
            "end_index": int(self._yielded_end),
            "frames": st.frames,
            "samples": st.intervals,
            "raw_samples": st.intervals * self.spi,
            "dropped_frames": st.dropped_frames,
            "gaps": st.gaps,
            "gap_intervals": st.gap_intervals,
            "overruns": st.overruns,
            "crc_errors": st.crc_errors,
            "bad_headers": st.bad_headers,
            "bad_bytes": st.bad_bytes,
            "stale_frames": self.stale_frames,
            "malformed_frames": self.malformed_frames,
            "stop_error": self.stop_error,
            "mean_power_w": self.mean_power(),
            "clock": {
                "offset_s": model.offset_s if model else None,
                "drift_ppm": model.drift_ppm if model else None,
                "residual_us": model.residual_us if model else None,
                "pings": model.pings if model else 0,
                "model": model.to_dict() if model else None,
            },
        }
