"""Serial transport: one reader thread turns bytes into frames and routes them.

DATA and BURST frames go to a queue for the stream; REPLY frames wake the caller waiting on that
command id; NOTICE frames go to their own queue. Every frame is stamped with the host UTC at which
its last bytes were read, which is what the clock fit needs for ping replies.
"""
from __future__ import annotations

import errno
import itertools
import json
import logging
import math
import os
import select
import stat
from collections import deque
import queue
import threading
import time

import serial

from powerrig.interposer import frames as wire
from powerrig.core.errors import DeviceError, LinkError

logger = logging.getLogger(__name__)

# The reader's pace (docs/scale.md, "Where a recording's CPU goes"; "The tenth pass"): while a stream
# flows and no command waits, the reader lets bytes gather between reads, but never more than a host
# holds for a USB CDC port: past that the board keeps them, and the board holds little. Linux's n_tty
# buffers 4,096 bytes and throttles the port when fewer than 128 are free (drivers/tty/n_tty.c,
# n_tty_check_throttle); cdc-acm then stops resubmitting its 16 read URBs of twice the endpoint's 64
# bytes, so at most those still come in (drivers/usb/class/cdc-acm.c: ACM_NR, readsize,
# acm_read_bulk_callback). Every byte more waits in the board's USB queue (firmware
# device.USB_QUEUE_BYTES, 8 KB), whose overflow drops frames. So the pace is PACE_SHARE of
# HOST_HOLD_BYTES at the rate the port brings (6 KB: 13 ms of the 100 us stream's 465 kB/s, paced at
# 9.7 ms: a wake-up takes the hold, more than came since the last, so a late one's backlog is paid
# back) and at most BATCH_S (the clock pings' interval, Interposer.ping_interval: one wake-up serves a
# ping and the bytes between).
N_TTY_BUF = 4096
N_TTY_THROTTLE = 128
ACM_IN_FLIGHT = 16 * 2 * 64
HOST_HOLD_BYTES = N_TTY_BUF - N_TTY_THROTTLE + ACM_IN_FLIGHT
PACE_SHARE = 0.75
BATCH_S = 0.1
RATE_SPAN_S = 0.005      # the port's rate is measured over reads at least this far apart
RATE_HOLD_S = 2.0        # ... and a higher rate is taken at once, a lower one over about this long
USB_FULL_SPEED_BPS = 19 * 64 * 1000     # the most a full-speed bulk endpoint moves: 19 packets a 1 ms frame
# A tty read returns at most 4,095 bytes (the line discipline's buffer) and the kernel moves the next
# piece in a moment later: a read that found this much means more is queued, so the same wake-up waits
# up to DRAIN_S for it (its caches still warm) instead of the next select waking the thread again
DRAIN_MIN = 2048
DRAIN_S = 0.002
FLOWING_S = 0.1          # a stream whose frames came this recently still flows
PING_MERGE = 1.2         # a ping due within this many paces is waited for instead
PING_TIMEOUT_S = 1.0      # a clock ping's reply (as Interposer.ping waits for it)
# a ping's reply is read the moment it comes only this long after the ping: the clock fit uses the
# fastest round trips alone (docs/link.md), so a slower reply gains nothing from a prompt stamp, while
# waking for every DATA frame until it came cost a loaded host dozens of wake-ups a second (round trips
# of 10-80 ms at load 10); a later reply is read at the next paced read, its stamp a looser bound
PING_EAGER_S = 0.008
PARTIAL_POLL_S = 0.25    # a held partial frame: look again this often (its wait is bounded in time)
READ_MAX = 1 << 18       # bytes taken in one wake-up at most (reads of up to 4 KB each, drained)
TTY_PIECE = 1 << 16      # the most one read may return (a tty's is 4 KB; a socket-like port's more)


def pace_for(bytes_per_s: float) -> float:
    """The wait between a stream's reads at this rate: PACE_SHARE of what a host holds for the port
    between reads (HOST_HOLD_BYTES), at most BATCH_S (see the constants above)."""
    return min(BATCH_S, PACE_SHARE * HOST_HOLD_BYTES / bytes_per_s) if bytes_per_s > 0 else BATCH_S


def _posix_fd(ser) -> int | None:
    """The port's file descriptor when it is a local POSIX serial port (read with select and one
    os.read); None for pyserial URL ports (rfc2217://, socket://, loop://), read through pyserial."""
    try:
        from serial.serialposix import Serial as PosixSerial
    except ImportError:           # Windows
        return None
    fd = getattr(ser, "fd", None)
    return fd if isinstance(ser, PosixSerial) and isinstance(fd, int) and fd >= 0 else None


def open_serial(port: str, timeout: float = 0.02) -> serial.Serial:
    """Open a port (or a pyserial URL such as socket://host:port) with a message that says what to do."""
    if not port:
        raise LinkError("no port given; pass --port (list interposers with `powerrig devices`)")
    is_url = "://" in port
    if not is_url and not os.path.exists(port) and not (os.name == "nt" and port.upper().startswith("COM")):
        raise LinkError(f"port {port} does not exist; list interposers with `powerrig devices`")
    if not is_url and os.path.exists(port):
        _check_is_character_device(port)
    try:
        if port.startswith("rfc2217://"):         # pyserial's client, with a data path that keeps up
            from powerrig.interposer.rfc2217 import open_rfc2217
            return open_rfc2217(port, baudrate=2_000_000, timeout=timeout)
        if is_url:
            return serial.serial_for_url(port, baudrate=2_000_000, timeout=timeout)
        return serial.Serial(port, baudrate=2_000_000, timeout=timeout, exclusive=True)
    except (serial.SerialException, OSError, ValueError) as e:
        if _not_a_tty(e):
            raise LinkError(f"{port} is not a serial port; list interposers with `powerrig devices`") from None
        msg = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        raise LinkError(f"cannot open {port}: {msg}; is another program using it?") from None


def _check_is_character_device(port: str) -> None:
    """A file or a folder given as a port is a typo, not a busy port: say so before opening it."""
    mode = os.stat(port).st_mode
    if not stat.S_ISCHR(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a file" if stat.S_ISREG(mode) else "not a device"
        raise LinkError(f"{port} is not a serial port ({kind}); list interposers with `powerrig devices`")


def _not_a_tty(e: BaseException) -> bool:
    """pyserial reports a device that is not a terminal (/dev/null) as "Could not configure port:
    (25, 'Inappropriate ioctl for device')": find ENOTTY in the error or what caused it."""
    while e is not None:
        if getattr(e, "errno", None) == errno.ENOTTY or (e.args and e.args[0] == errno.ENOTTY):
            return True
        if f"({errno.ENOTTY}, " in str(e) or os.strerror(errno.ENOTTY) in str(e):
            return True
        e = e.__cause__ or e.__context__
    return False


class SerialLink:
    """One open serial port: a reader thread routes frames; ``command`` sends and waits for a reply.

    ``bad_replies`` counts replies and notices that are not JSON objects (or not UTF-8): a device
    that sends them is not speaking this protocol, which is not the same as losing the port.
    """

    def __init__(self, port: str, ser: serial.Serial | None = None, resync: bool = True):
        self.port = port
        self.ser = ser or open_serial(port)
        if resync:
            try:
                self.resync()
            except LinkError:
                if ser is None:           # (the port this link opened; a caller's stays theirs)
                    self.ser.close()
                raise
        self.decoder = wire.FrameDecoder()
        self.data: queue.Queue[wire.Frame | None] = queue.Queue()     # DATA frames, for the stream
        self.bursts: queue.Queue[wire.Frame | None] = queue.Queue()   # BURST frames, for burst()
        self.notices: deque[dict] = deque(maxlen=256)   # unsolicited device messages, newest last
        self.bytes_in = 0
        self.last_rx = time.time()
        self.error: str | None = None
        self.bad_replies = 0
        self.last_bad_reply: str | None = None
        self._quiet_s = self.decoder.max_wait_s     # a half frame's allowed quiet, in device seconds
        self.time_scale = 1.0
        # what the port brings, bytes a second (the pace: pace_s): measured, and what the device was
        # told to send (expect_rate: a stream's, a burst's), whichever is more
        self._expected: dict[str, float] = {}
        self.rate_bps = 0.0
        self._rate_bytes = 0
        self._rate_t = time.monotonic()
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, list]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()      # set by a command: the reader reads at once (see _read_loop)
        # clock pings sent by the reader itself (keep_pinging): (every_s, on_reply, on_error) or None
        self._beat: tuple | None = None
        self._beat_due = 0.0                # monotonic time the next one is due
        self._beat_out: tuple[int, float, float] | None = None   # (id, t_send, monotonic deadline) in flight
        self._fd = _posix_fd(self.ser)
        # the reader's pieces land here one behind the other (os.readv), READ_MAX and one more piece
        self._rbuf = bytearray(READ_MAX + TTY_PIECE) if self._fd is not None else None
        self._rview = memoryview(self._rbuf) if self._rbuf is not None else None
        # the reader's select ends when a byte is written here (close, keep_pinging)
        self._abort_r, self._abort_w = os.pipe() if self._fd is not None else (-1, -1)
        if self._abort_w >= 0:
            os.set_blocking(self._abort_w, False)      # a poke never blocks the caller (a full pipe is poked already)
        # the reader's waits, registered once (select.select built its lists and fd sets every wake-up):
        # the port and the abort pipe; the abort pipe alone for the pace
        self._poll_rx = self._poll_abort = None
        if self._fd is not None:
            self._poll_rx, self._poll_abort = select.poll(), select.poll()
            self._poll_rx.register(self._fd, select.POLLIN)
            for p in (self._poll_rx, self._poll_abort):
                p.register(self._abort_r, select.POLLIN)
        self._thread = threading.Thread(target=self._read_loop, name=f"powerrig-link-{port}", daemon=True)
        self._thread.start()

    @property
    def time_scale(self) -> float:
        """Host seconds per device second (1 for a board; more for an emulated one, docs/emulator.md): a
        reply's deadline is in device time, so command timeouts are stretched by it, and so is the quiet
        after which a half frame is given up (an emulated board at 1 % of real time sends a frame's
        pieces host seconds apart: unstretched, they were dropped as stale headers under load)."""
        return self._time_scale

    @time_scale.setter
    def time_scale(self, scale: float) -> None:
        self._time_scale = scale
        self.decoder.max_wait_s = self._quiet_s * scale

    # ---- reader ----------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        """Read, decode, route; then, while a stream flows and no command waits for its reply, let
        bytes gather for ``pace_s`` before the next read (``_pace``). A board's USB sends a 2 KB frame as
        32 packets of 64 bytes and the kernel wakes a reader for each: read at once, a 100 us stream
        cost hundreds of wake-ups a second, each with its decode and queue hand-over (docs/scale.md,
        "Where a recording's CPU goes"). A command wakes the reader at once (``_wake``), so a reply
        (a clock ping's) is still read and stamped the moment it arrives."""
        ser = self.ser
        fd = self._fd
        flowed = 0.0            # when a stream's frames last came
        try:
            while not self._stop.is_set():
                self._wake.clear()
                if fd is not None:
                    frames, got = self._read_fd(fd)
                else:
                    data = ser.read(max(1, min(ser.in_waiting, 1 << 16)))
                    got = len(data)
                    frames = self.decoder.feed(data, time.time()) if data else []
                now = time.time()
                if got:
                    self.last_rx = now
                    self.bytes_in += got
                    self._measure(got)
                    if self._route_all(frames):
                        flowed = now
                elif self.decoder.buffered:      # lets a false header's bounded wait run out
                    self._route_all(self.decoder.feed(b"", now))
                if self._beat is not None:
                    # after the read: a ping sent once the port is drained finds no backlog ahead of its
                    # reply on the device's side, so its round trip is the link's, not the backlog's
                    self._heartbeat()
                if got and now - flowed < FLOWING_S:     # a reply between a stream's reads paces too
                    self._pace()
        except (serial.SerialException, OSError, TypeError) as e:
            if not self._stop.is_set():
                self.error = f"lost the serial port {self.port}: {str(e).splitlines()[0] if str(e) else e}"
        except Exception as e:  # noqa: BLE001 - a bug here must still end the stream with a message
            logger.exception("link reader on %s failed", self.port)
            self.error = f"link reader failed on {self.port}: {e.__class__.__name__}: {e}"
        finally:
            self.data.put(None)
            self.bursts.put(None)
            with self._lock:
                for ev, _box in self._waiting.values():
                    ev.set()

    def _read_fd(self, fd: int) -> tuple[list[wire.Frame], int]:
        """The frames the port's bytes complete and how many bytes came, once it holds something: a wait
        in poll with no timer while nothing is expected (a held partial frame's bounded wait and the
        next clock ping excepted); ``close`` ends it through the abort pipe. The pieces are decoded in
        one pass, each with the time of its own read, so a reply is stamped by the read that brought it."""
        wait = PARTIAL_POLL_S if self.decoder.buffered else None
        if self._beat is not None:
            due = max(0.0, (self._beat_out[2] if self._beat_out else self._beat_due) - time.monotonic())
            wait = due if wait is None else min(wait, due)
        try:
            ready = self._poll_rx.poll(None if wait is None else wait * 1000.0)
        except InterruptedError:
            return [], 0
        if not ready:
            return [], 0
        abort = self._abort_r
        if any(r == abort for r, _ev in ready):   # poked: look at the stop flag and the pings again
            os.read(abort, 4096)
            return [], 0
        view = self._rview
        try:
            got = os.readv(fd, (view,))
        except (BlockingIOError, InterruptedError):
            return [], 0
        if not got:        # as pyserial says it: readable yet empty is a port that went away
            raise serial.SerialException("device reports readiness to read but returned no data "
                                         "(device disconnected or multiple access on port?)")
        big = got >= DRAIN_MIN
        reads = [(got, time.time())]
        # the port holds more than one read gives (see DRAIN_MIN): take it in this wake-up, each piece read
        # straight behind the last in the one buffer (no bytes object per read, no join). An empty read
        # after a big one is the port between pieces, not drained (pyserial's termios, VMIN 0, make
        # it return 0 bytes, never EAGAIN): the kernel moves n_tty's next piece, or a board refills the
        # port once it unthrottles, so wait up to DRAIN_S for it; a board's backlog is taken now, while
        # it still fits the board's queue
        while got < READ_MAX:
            try:
                last = os.readv(fd, (view[got:],))
            except (BlockingIOError, InterruptedError):
                last = 0
            if last:
                got += last
                reads.append((got, time.time()))
                big = last >= DRAIN_MIN
                continue
            if not big:
                break
            big = False
            try:
                if not select.select([fd], [], [], DRAIN_S)[0]:
                    break
            except InterruptedError:
                break
        data = view[:got]
        try:
            return self.decoder.feed(data, reads[-1][1], reads if len(reads) > 1 else None), got
        finally:
            data.release()

    def expect_rate(self, bytes_per_s: float, what: str = "stream") -> None:
        """What the device may send from now on for ``what`` (a stream's bytes_per_s; the link budget
        while a burst may upload, the whole link's; 0 when it ends): the reader paces for the most of
        them before its own measure has seen it."""
        self._expected[what] = float(bytes_per_s or 0.0)

    @property
    def expected_bps(self) -> float:
        return min(max(self._expected.values(), default=0.0), USB_FULL_SPEED_BPS)

    def _measure(self, got: int) -> None:
        """The port's rate from the bytes read over at least RATE_SPAN_S: a rise is taken at once (the
        board's queue is short), a fall decays over RATE_HOLD_S."""
        self._rate_bytes += got
        t = time.monotonic()
        dt = t - self._rate_t
        if dt >= RATE_SPAN_S:      # (a backlog read at once is no rate a board's USB could bring)
            now_bps = min(self._rate_bytes / dt, USB_FULL_SPEED_BPS)
            self.rate_bps = max(now_bps, self.rate_bps * math.exp(-dt / RATE_HOLD_S))
            self._rate_bytes, self._rate_t = 0, t

    def pace_s(self) -> float:
        """The wait between reads of a flowing stream at the rate the port brings (``pace_for``)."""
        return pace_for(max(self.expected_bps / self.time_scale, self.rate_bps))

    def _hold_s(self) -> float:
        """How long the host's hold lasts at the rate the port brings (told in device seconds)."""
        rate = max(self.expected_bps / self.time_scale, self.rate_bps)
        return HOST_HOLD_BYTES / rate if rate > 0 else math.inf

    def _pace(self) -> None:
        """Between reads of a flowing stream: wait ``pace_s`` for more bytes unless a command waits for
        its reply (then read at once): never longer than the host holds the port's bytes for, so
        pacing never costs the board a frame."""
        if self._waiting or self._stop.is_set():
            return
        pace = wait = self.pace_s()
        out = self._beat_out
        if out is not None:
            # a ping in flight: read at once while its reply may still be among the fastest, and always
            # during the first seconds' fast pings (every 10 ms: their rate settles the drift)
            every = self._beat[0]() if self._beat is not None else BATCH_S
            if every < BATCH_S or time.time() < out[1] + PING_EAGER_S * self.time_scale:
                return
            wait = min(wait, out[2] - time.monotonic(), every)    # a late reply: read within a ping interval
        elif self._beat is not None:
            # a ping due soon ends the wait and its read takes the bytes too: one wake-up, not two (a
            # wait stretched for it only where the hold has room to spare: a slow stream's)
            due = self._beat_due - time.monotonic()
            wait = due if due < min(pace * PING_MERGE, PACE_SHARE * self._hold_s()) else min(wait, due)
        if wait <= 0:
            return
        if self._abort_r < 0:
            self._wake.wait(wait)
            return
        # a local port: sleep in poll on the abort pipe alone (a command pokes it), one system call
        # and no lock: Event.wait with a timeout builds and takes a fresh lock every time
        try:
            ready = self._poll_abort.poll(wait * 1000.0)
        except InterruptedError:
            return
        if ready:
            os.read(self._abort_r, 4096)

    # ---- clock pings from the reader thread --------------------------------------------------------
    def keep_pinging(self, every_s, on_reply, on_error) -> bool:
        """Send a clock ping every ``every_s()`` seconds from the reader thread for the life of the
        link: ``on_reply(reply)`` (the reply as ``command`` returns it) or ``on_error(text)`` runs in
        that thread. A pinger thread of its own cost two thread hand-overs per ping (its wake-up, the
        reply's) beside the reader's: a quarter of a recording's CPU at 25 pings a second
        (docs/scale.md). True: this link does it (a stand-in link without the method does not)."""
        self._beat_due = time.monotonic() + every_s()
        self._beat = (every_s, on_reply, on_error)
        self._poke()
        return True

    def _poke(self) -> None:
        """End the reader's wait (its select, or its pace) so it looks at its flags again."""
        self._wake.set()
        if self._abort_w >= 0:
            try:
                os.write(self._abort_w, b"x")
            except OSError:
                pass

    def ping_soon(self) -> None:
        """The next clock ping now (unless one is out): the schedule changed to a shorter interval."""
        self._beat_due = time.monotonic()
        self._poke()

    def stop_pinging(self) -> None:
        self._beat = None
        self._beat_out = None

    def _heartbeat(self) -> None:
        """In the reader thread: a ping past its deadline is an error; a due one is sent."""
        every_s, _on_reply, on_error = self._beat
        now = time.monotonic()
        out = self._beat_out
        if out is not None:
            if now < out[2]:
                return
            self._beat_out = None
            on_error(f"no reply to 'ping' from {self.port} within {PING_TIMEOUT_S * self.time_scale:g} s")
            self._beat_due = now + every_s()
            return
        if now < self._beat_due or self.error:
            return
        cid = next(self._ids)
        frame = wire.encode(wire.T_COMMAND, b'{"id":%d,"cmd":"ping"}' % cid, cid)   # encode_command's bytes, no json
        t_send = time.time()
        self._beat_out = (cid, t_send, now + PING_TIMEOUT_S * self.time_scale)
        try:
            self.write(frame)
        except LinkError as e:
            self._beat_out = None
            on_error(str(e))
            self._beat_due = now + every_s()

    def _beat_reply(self, doc: dict) -> bool:
        """The reply to the reader's own ping (True), handed to on_reply; else False."""
        out, beat = self._beat_out, self._beat
        if out is None or beat is None or doc.get("id") != out[0]:
            return False
        self._beat_out = None
        every_s, on_reply, on_error = beat
        if doc.get("ok"):
            doc["_t_send"] = out[1]
            on_reply(doc)
        else:
            on_error(f"interposer refused 'ping': {doc.get('error', 'no reason given')}")
        # after the reply is counted: the schedule's next interval may depend on it (a burst's pings)
        self._beat_due = time.monotonic() + every_s()
        return True

    def _route_all(self, frames: list[wire.Frame]) -> bool:
        """DATA frames go to the stream as one list per read (one queue hand-over, not one per frame);
        True when a stream's frames (DATA, BURST) came: the reader then paces itself."""
        data = [f for f in frames if f.type == wire.T_DATA]
        if data:
            self.data.put(data)
        flowing = bool(data)
        if len(data) != len(frames):
            for f in frames:
                if f.type != wire.T_DATA:
                    flowing |= f.type == wire.T_BURST
                    self._route(f)
        return flowing

    def _route(self, f: wire.Frame) -> None:
        if f.type == wire.T_DATA:
            self.data.put(f)
        elif f.type == wire.T_BURST:
            self.bursts.put(f)
        elif f.type == wire.T_REPLY:
            doc = self._json_object(f, "reply")
            if doc is None:
                return
            doc["_index"] = f.index
            doc["_t_recv"] = f.t_first
            cid = doc.get("id")
            if not isinstance(cid, int) or isinstance(cid, bool):
                self._bad_reply(f"a reply whose id is {cid!r}, not a command number")
                return
            if self._beat_out is not None and self._beat_reply(doc):
                return
            with self._lock:
                w = self._waiting.get(cid)
            if w:
                w[1].append(doc)
                w[0].set()
        elif f.type == wire.T_NOTICE:
            doc = self._json_object(f, "notice")
            if doc is not None:
                self.notices.append(doc)

    def _json_object(self, f: wire.Frame, what: str) -> dict | None:
        """The frame's payload as a JSON object (UTF-8, as the protocol says), or None, counted."""
        try:
            doc = json.loads(f.payload.decode("utf-8"))
        except UnicodeDecodeError as e:
            self._bad_reply(f"a {what} that is not UTF-8 text ({e.reason} at byte {e.start})")
            return None
        except ValueError as e:
            self._bad_reply(f"a {what} that is not JSON ({e})")
            return None
        if not isinstance(doc, dict):
            self._bad_reply(f"a {what} that is a JSON {type(doc).__name__}, not an object")
            return None
        return doc

    def _bad_reply(self, what: str) -> None:
        self.bad_replies += 1
        self.last_bad_reply = what
        logger.info("%s sent %s; ignored", self.port, what)   # the waiting command reports it

    # ---- commands -----------------------------------------------------------------------------------
    def command(self, cmd: str, timeout: float = 2.0, **args) -> dict:
        """Send a command and wait for its reply. Raises LinkError on timeout, DeviceError on refusal."""
        cid = next(self._ids)
        ev, box = threading.Event(), []
        with self._lock:
            self._waiting[cid] = (ev, box)
        doc = {"id": cid, "cmd": cmd, **args}
        try:
            try:
                frame = wire.encode_command(doc, cid)
            except (TypeError, ValueError) as e:
                raise LinkError(f"cannot send '{cmd}': {e}") from None
            if self.error:
                raise LinkError(self.error)
            t_send = time.time()
            bad0 = self.bad_replies
            self._poke()                 # the reader stops pacing and reads the reply as it comes
            self.write(frame)
            if not ev.wait(timeout * self.time_scale) or not box:
                if self.error:
                    raise LinkError(self.error)
                if self.bad_replies != bad0:
                    raise LinkError(f"the device on {self.port} answered '{cmd}' with {self.last_bad_reply}; "
                                    "it does not speak the powerrig protocol (list interposers with "
                                    "`powerrig devices`)")
                raise LinkError(f"no reply to '{cmd}' from {self.port} within {timeout * self.time_scale:g} s "
                                f"({self.bytes_in} bytes received, {self.decoder.frames} frames); "
                                "is this an interposer? list them with `powerrig devices`")
        finally:
            with self._lock:
                self._waiting.pop(cid, None)
        reply = box[0]
        reply["_t_send"] = t_send
        if not reply.get("ok"):
            raise DeviceError(f"interposer refused '{cmd}': {reply.get('error', 'no reason given')}")
        return reply

    def resync(self) -> None:
        """The resync preamble (docs/protocol.md, "Resynchronisation"): zero bytes as many as the
        longest frame, before the first command. Whatever half frame a previous host left in the board
        (a crash mid-write) is completed by them and fails its CRC, so the board looks for the next
        header in bytes that hold none and this host's first command is read whole. Zeros are never a
        sync word; the board counts them in ``bad_bytes``."""
        try:
            self.ser.write(bytes(wire.fw.RESYNC_PREAMBLE))
        except (serial.SerialException, OSError) as e:
            raise LinkError(f"cannot write to {self.port}: {e}") from None

    def write(self, data: bytes) -> None:
        with self._write_lock:
            try:
                if self._fd is not None:
                    self._write_fd(data)
                else:
                    self.ser.write(data)
            except (serial.SerialException, OSError) as e:
                raise LinkError(f"cannot write to {self.port}: {e}") from None

    def _write_fd(self, data: bytes) -> None:
        """A local port: os.write straight to its descriptor (a command, a clock ping: tens of bytes the
        kernel takes at once); pyserial's write for what is left when it does not (a full buffer: it
        waits for room). pyserial's write added a Timeout object and a select per call: 25 times a
        second from the reader thread for the pings alone."""
        try:
            k = os.write(self._fd, data)
        except BlockingIOError:
            k = 0
        if k < len(data):
            self.ser.write(data[k:])

    def close(self) -> None:
        self._stop.set()
        self._poke()
        try:
            self.ser.cancel_read()
        except (AttributeError, NotImplementedError, OSError, serial.SerialException) as e:
            logger.debug("cancel_read on %s: %s (the reader ends at its next timeout)", self.port, e)
        self._thread.join(timeout=1.0)
        if self._abort_w >= 0 and not self._thread.is_alive():
            for fd in (self._abort_r, self._abort_w):
                os.close(fd)
            self._abort_r = self._abort_w = -1
        try:
            self.ser.close()
        except (OSError, serial.SerialException) as e:
            logger.warning("closing %s: %s", self.port, e)
