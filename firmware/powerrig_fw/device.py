"""The interposer application: command dispatch and the stream state machine (idle/streaming/burst).

Hardware comes in through a ``board`` object (see firmware/board/README.md for its interface):
the RP2350 board, or the simulator's virtual front end. The same Device runs on both.
"""
import gc
import json
import sys

from powerrig_fw import VERSION, PROTOCOL_VERSION, calibration, rails_default, wire
from powerrig_fw.actions import PowerActions
from powerrig_fw.burst import Burst, ARMED as BURST_ARMED, IDLE as BURST_IDLE, POST as BURST_POST, \
    UPLOAD as BURST_UPLOAD
from powerrig_fw.crc import crc32_into_c
from powerrig_fw.ping import ClockPing
from powerrig_fw.reduce import Reducer, MAX_INTERVAL_SAMPLES
from powerrig_fw.selftest import SelfTest
from powerrig_fw.timebase import Timebase, ticks_diff, ticks_ms, ticks_us

# MicroPython's collector stops the world for milliseconds: the board collects at start-up and between
# streams so that a stream's passes never do (they allocate nothing). CPython (the simulator) has its
# own generational collector and a full collection there can take long: left alone.
_collect = gc.collect if sys.implementation.name == "micropython" else (lambda: None)
# gc.mem_free() walks the whole allocation table: 7.4 ms on the emulated RP2040, most of what a
# `status` cost there (issue 43). It is read when nothing streams; a stream's status gives the last one.
_mem_free = getattr(gc, "mem_free", None) if sys.implementation.name == "micropython" else None

LINK_BUDGET_BPS = 500000       # what MicroPython moves over USB full speed, with margin
# the board's RAM queue between its frames and the USB CDC (board.usb.UsbLink): all a host's late read
# can borrow from the board (17 ms of the 100 us stream); a frame that does not fit is dropped whole
USB_QUEUE_BYTES = 8192
DEFAULT_INTERVAL_US = 1000
MIN_INTERVAL_US = 100
FRAME_TARGET_US = 10000        # aim for about 100 data frames per second
DIGITAL = ("activity", "perst", "marker")

IDLE = "idle"
STREAMING = "streaming"
MAX_ID_BYTES = 64              # an id longer than this (as JSON) is not echoed in an error reply
# The ids echoed (docs/protocol.md, "Ids"): null, an integer within +-2**53 (what every JSON reader
# holds exactly), a string of at most MAX_ID_CHARS characters. Anything else is answered with id null.
MAX_ID_CHARS = 64
ID_LIMIT = 1 << 53
# The command work of one pass (docs/protocol.md, "Resynchronisation"): at most FRAMES_PER_PASS whole
# frames checked (CRC), of which at most one through the JSON path (a command, a refusal, an error):
# the rest waits for the next pass, which comes at once (a pass with frames left does not idle).
FRAMES_PER_PASS = 4
# and at most this many bytes read from the host (the board reads them one at a time, some 20 us each
# on the emulated RP2040: a 2 KB command is read over several passes, not in one long one)
READ_PER_PASS = 256
# Beside a stream (or a burst) a JSON command and a burst upload chunk wait for a pass that finds no
# finished block unread (board.blocks.BlockRing.waiting): on the RP2040 at 2 ms such passes (3-9 ms
# each) that came while the loop was still catching up after another summed past the DMA ring's slack
# and lost 7-13 intervals, with the collector off too (issue 43, docs/emulator.md). They wait at most
# this many passes (a loop that never catches up still answers and uploads).
WAIT_PASSES = 16


def is_int(x):
    """A whole number that is not a bool (JSON true would otherwise pass as 1)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_finite(x):
    """A number JSON can write: not a bool, not inf or nan (json.loads reads 1e999 as inf, and
    json.dumps writes it back as `inf` or `Infinity`, which no JSON reader takes)."""
    return is_number(x) and x - x == 0


def id_problem(cid):
    """None when the command's id may be echoed, else why it is not (the reply then has id null)."""
    if cid is None:
        return None
    if isinstance(cid, str):
        if len(cid) <= MAX_ID_CHARS:
            return None
        return "the command's id is too long to echo (a string of at most %d characters)" % MAX_ID_CHARS
    if is_int(cid) and -ID_LIMIT <= cid <= ID_LIMIT:
        return None
    return ("the command's id must be null, an integer within +-2**53 or a string of at most %d "
            "characters; the command was not run" % MAX_ID_CHARS)


def _frames(interval_us, rec, per_frame):
    """(per_frame, bytes per second) of a setting; per_frame 0 picks about 100 frames/s."""
    if not per_frame:
        per_frame = max(1, min(255, FRAME_TARGET_US // interval_us, wire.MAX_PAYLOAD // rec))
    return per_frame, (wire.OVERHEAD + rec * per_frame) * 1000000 // (per_frame * interval_us)


def plan_stream(interval_us, n_rails, per_frame=0):
    """(per_frame, bytes_per_s) for a setting, or raise ValueError with a reason the user can act on."""
    period = rails_default.SAMPLE_PERIOD_US
    if not is_int(interval_us) or interval_us % period:
        raise ValueError("interval_us must be a whole multiple of %d us" % period)
    max_us = MAX_INTERVAL_SAMPLES * period
    if not MIN_INTERVAL_US <= interval_us <= max_us:
        raise ValueError("interval_us must be within %d..%d us" % (MIN_INTERVAL_US, max_us))
    rec = wire.record_size(n_rails)
    if per_frame and (not 1 <= per_frame <= 255 or rec * per_frame > wire.MAX_PAYLOAD):
        raise ValueError("per_frame must be 1..%d for %d rails" % (min(255, wire.MAX_PAYLOAD // rec), n_rails))
    chosen, bps = _frames(interval_us, rec, per_frame)
    if bps > LINK_BUDGET_BPS:
        us = interval_us
        while us < max_us and _frames(us, rec, per_frame)[1] > LINK_BUDGET_BPS:
            us += period
        raise ValueError("interval %d us with %d rails needs %d B/s, over the link budget of %d B/s; "
                         "use fewer rails or interval_us >= %d" % (interval_us, n_rails, bps, LINK_BUDGET_BPS, us))
    return chosen, bps


class Device:
    def __init__(self, board, crc_into=None):
        self.board = board
        self.crc_into = crc_into or getattr(board, "crc_into", None) or crc32_into_c
        self.rail_names = tuple(r[0] for r in rails_default.RAILS)
        self.framer = wire.Framer(board.write, self.crc_into)
        # the board's own milliseconds time a partial frame (a scripted board gives its own clock)
        self._ms = getattr(board, "ticks_ms", None) or ticks_ms
        self.reader = wire.FrameReader(self.crc_into, copy=getattr(board, "copy", None), ms=self._ms,
                                       read_max=READ_PER_PASS)
        self.refused = 0          # whole frames of a type the device does not take (a NOTICE each)
        self.timebase = getattr(board, "timebase", None) or Timebase()
        self.pings = ClockPing(board, self.timebase, self.crc_into)    # the host's clock pings, in place
        self.reducer = getattr(board, "reducer", None) or Reducer(len(self.rail_names))
        self.burst = Burst(self, len(self.rail_names), LINK_BUDGET_BPS)
        self.cal = calibration.load(board.cal_path)
        self.state = IDLE
        self.stream = None
        self.reply_seq = 0
        self.errors = 0
        self.overruns = 0
        self.overwritten = 0
        self.lost_samples = 0
        self.exit = False
        self.blocks = getattr(board, "blocks", board)    # whose adc_read() sets adc_n, adc_dropped
        self._intact = getattr(board, "adc_intact", None)
        self._pump = getattr(board, "pump", None)
        # a board may take, reduce and check a whole block in one call while nothing but the stream
        # runs (board.reducer.BoardReducer.stream: 0 no block, 1 done, 3 lost samples first, 4 overwritten)
        self._stream = getattr(board, "stream_block", None)
        # the block that call took, for an armed burst beside the stream (board.blocks.BlockRing.taken)
        self._taken = getattr(self.blocks, "taken", None)
        # sleep until the next interrupt (a DMA block, USB) when a pass found nothing to do: on the
        # board it saves power, in the emulator it saves the idle passes' emulation (docs/emulator.md)
        self._idle = getattr(board, "idle", None)
        # blocks finished and not read yet (none: the board cannot say, nothing waits for it)
        self._behind = getattr(self.blocks, "waiting", None)
        self.waited = 0          # passes the JSON command held waited for the loop to catch up
        self.upload_waited = 0   # passes the burst's next chunk waited for it
        # how long the passes that did work took (status "passes"): the one figure of the main loop's
        # budget that only the chip itself can give (docs/bring-up.md); reset at each start
        # block passes, their total us, worst block pass, worst command pass, command passes, their total us
        self.pass_stats = [0, 0, 0, 0, 0, 0]
        self.commands = {
            "describe": self.cmd_describe, "start": self.cmd_start, "stop": self.cmd_stop,
            "ping": self.cmd_ping, "burst": self.cmd_burst, "cal_get": self.cmd_cal_get,
            "cal_set": self.cmd_cal_set, "reset": self.cmd_reset, "status": self.cmd_status,
            "selftest": self.cmd_selftest, "repl": self.cmd_repl, "power": self.cmd_power,
        }
        self.selftest = None      # a running SelfTest: its reply is sent when it has its samples
        self.actions = PowerActions(self)
        self.heap_free = None     # gc.mem_free() when last read (status while nothing streams)

    # ---- main loop -------------------------------------------------------------------------
    def poll(self):
        """One pass of the main loop: commands in, samples reduced, frames out. Allocates nothing
        unless a command takes the JSON path (tests/micropython/mcu_whole_pass.py; a burst's fire,
        notice and upload: fw_burst.py). A pass
        that found nothing to do ends in the board's ``idle()`` (wait for the next interrupt)."""
        t0 = ticks_us()
        actions = self.actions
        if actions.busy:
            actions.poll()           # first: a timed action due soon is waited for, to its sample
        reader = self.reader
        if reader.pending:           # a partial frame held, or frames the last pass left (rare)
            got = self._held()
        else:
            got = self.board.read_into(reader.buf, reader.end, reader.free)
            if got:
                reader.added(got)
                self._commands(1)
        blocks = self.blocks
        raw = None
        hot = 0
        burst = self.burst
        bs = burst.state
        if self._stream is not None and self.state == STREAMING and self.selftest is None \
                and (bs is BURST_IDLE or bs is BURST_UPLOAD or self._taken is not None):
            # the board's one native call takes, reduces and checks a block (0: none ready)
            hot = self._stream(self.framer)
            if hot == 3:                # samples were lost before the oldest block: the path below counts them
                hot = 0
                raw = blocks.adc_read()
            elif hot == 4:
                self._overwritten()
            elif hot == 1 and (bs is BURST_ARMED or bs is BURST_POST):
                # an armed burst reads the block the native pass has just reduced (issue 43: through
                # adc_read and feed, a burst armed during a 2 ms stream outgrew the RP2040's block),
                # and the block is checked again after it
                burst.observe(self._taken(), blocks.adc_n, 0)
                if not self._intact():
                    self._overwritten()
        else:
            raw = blocks.adc_read()
        if raw is None:
            if not hot:
                self.timebase.poll()     # (it must run every 17 minutes; the passes between blocks do it)
        elif self.state == STREAMING or self.burst.state is not BURST_IDLE or self.selftest is not None:
            n = blocks.adc_n
            dropped = blocks.adc_dropped
            if dropped:
                self.overruns += 1
                self.lost_samples += dropped
            if self.state == STREAMING:
                if dropped:
                    self.framer.mark_overrun()
                    self.reducer.skip(dropped)
                self.reducer.feed(raw, n, self.framer)
            if burst.state is not BURST_IDLE:
                burst.observe(raw, n, dropped)
            if self.selftest is not None:
                self._selftest_step(raw, n, dropped)
            if self._intact is not None and not self._intact():
                self._overwritten()
        # else: a block nobody asked for (no stream, burst or self-test), taken to keep the ring
        # moving; one lost meanwhile (a long command pass while idle) is not an overrun of anything
        uploading = burst.state is BURST_UPLOAD
        if uploading:
            if self._behind is None or self.upload_waited >= WAIT_PASSES or not self._behind():
                self.upload_waited = 0
                burst.upload_step()
            else:
                self.upload_waited += 1
        sent = self._pump() if self._pump is not None else 0
        if raw is None and not got and not hot:
            if not sent and not uploading and not actions.busy and self._idle is not None:
                self._idle()
            return
        us = ticks_diff(ticks_us(), t0)
        ps = self.pass_stats
        if got:
            if us > ps[3]:
                ps[3] = us
            if ps[4] >= 0x10000:
                ps[4] >>= 1
                ps[5] >>= 1
            ps[4] += 1
            ps[5] += us
        else:
            if ps[0] >= 0x10000:          # a running mean: the sum stays a small int (no allocation)
                ps[0] >>= 1
                ps[1] >>= 1
            ps[0] += 1
            ps[1] += us
            if us > ps[2]:
                ps[2] = us

    def _overwritten(self):
        """DMA came round to the block just reduced while it was reduced: its records may hold newer
        samples. Counted; while streaming no record holding one of its samples is delivered (the
        frames of the block come back out of the link's queue, the records held and the interval in
        progress are dropped: the host sees an F_OVERRUN gap); an armed burst forgets the block."""
        self.overruns += 1
        self.overwritten += 1
        if self.state == STREAMING:
            abandon = getattr(self.reducer, "abandon", None)
            if abandon is not None:
                self.lost_samples += abandon(self.framer)
            else:                        # a reducer without a mark: what is held, and the interval
                framer = self.framer
                framer.n = 0
                framer.flags |= wire.F_OVERRUN
                self.reducer.skip(0)
        if self.burst.state is not BURST_IDLE:
            self.burst.overwritten()

    def _held(self):
        """The pass's commands when the reader holds something: a partial frame is dropped once it is
        PARTIAL_TIMEOUT_MS old (before the host's new bytes are read: they cannot finish it), frames
        left by the last pass's bound are answered (the new bytes wait for the next pass), else the
        host's bytes are read as usual. What poll counts as ``got`` (-1: frames answered, none read)."""
        reader = self.reader
        if reader.waiting and ticks_diff(self._ms(), reader.since) >= wire.PARTIAL_TIMEOUT_MS:
            reader.expire()
        if reader.more:
            if self.waited:
                if self._wait():
                    return 0         # a JSON command held for a pass with the ring caught up
                self.waited = -1     # its wait is over: it runs in this pass
            self._commands(0)
            return -1
        got = self.board.read_into(reader.buf, reader.end, reader.free)
        if got:
            reader.added(got)
            self._commands(1)
        return got

    def _commands(self, fresh):
        """The host's bytes (in the reader): commands answered, at most FRAMES_PER_PASS frames of which
        one through the JSON path; the rest next pass (``reader.more``). A clock ping allocates
        nothing. ``fresh``: bytes were just read (the clock ping's first stamp)."""
        pings = self.pings
        if fresh and not pings.by_board:
            pings.stamp()
        reader = self.reader
        reader.budget = FRAMES_PER_PASS
        try:
            while reader.start < reader.end:        # (a whole ping read: one call to next(), not two)
                ftype = reader.next()
                if not ftype:
                    return
                if ftype == wire.T_COMMAND and pings.answer(reader, self):
                    continue
                # the JSON path: this frame, then the next pass (reader.more is set when bytes are left)
                if ftype == wire.T_COMMAND and self._wait():
                    reader.again()       # the same frame next pass, when no block is left unread
                    return
                if ftype == wire.T_COMMAND:
                    self.handle_command(reader.payload())
                elif ftype == wire.T_OVERSIZE:
                    self.send(wire.T_REPLY, {"ok": False, "id": None, "seq": reader.seq,
                                             "error": "command frame of %d bytes exceeds the %d-byte limit; "
                                                      "send a shorter command" % (reader.length, wire.MAX_PAYLOAD)})
                else:
                    self._refuse(ftype)
                return
            reader.more = 0
        finally:
            reader.pending = reader.waiting | reader.more

    def _wait(self):
        """True when a JSON command should wait: a stream or a burst runs, blocks are left unread,
        and it has waited fewer than WAIT_PASSES passes (``waited``: 0 once it runs, -1 when its wait
        has just ended)."""
        w = self.waited
        behind = self._behind
        if w < 0 or w >= WAIT_PASSES or behind is None or (self.state != STREAMING and self.burst.state
                                                           is BURST_IDLE) or not behind():
            self.waited = 0
            return False
        self.waited = w + 1
        return True

    def _refuse(self, ftype):
        """A whole frame (its CRC right) of a type the device does not take: a NOTICE says so."""
        self.refused += 1
        reader = self.reader
        t = 0 if ftype == wire.T_ZERO else ftype
        self.send(wire.T_NOTICE, {"event": "refused", "type": t, "seq": reader.seq, "length": reader.length,
                                  "count": self.refused,
                                  "error": "frame of type %d: the device takes only COMMAND frames (type %d)"
                                           % (t, wire.T_COMMAND)})

    @property
    def rx_index(self):
        """The sample index when the last command's bytes were read (the clock ping's first stamp)."""
        return self.pings.rx_index()

    def run(self):
        """The board's main loop. An unexpected error is reported as a NOTICE and the loop goes on:
        the interposer must keep answering, whatever one pass tripped over. Only the "repl" command
        ends it (the console back for mpremote)."""
        _collect()
        while not self.exit:
            try:
                self.poll()
            except Exception as e:  # noqa: BLE001
                self.errors += 1
                try:
                    self.notice({"event": "error", "error": str(e) or e.__class__.__name__, "count": self.errors})
                except Exception:  # noqa: BLE001
                    pass
        if hasattr(self.board, "release_console"):
            self.board.release_console()

    # ---- replies -----------------------------------------------------------------------------
    def sample_index(self):
        return self.board.sample_index()

    def send(self, ftype, doc, flags=0):
        try:
            payload = json.dumps(doc).encode()
        except Exception as e:  # noqa: BLE001 - a value json cannot write (nested too deep): said instead
            payload = json.dumps({"ok": False, "id": None, "error": "the answer could not be written as JSON (%s)"
                                  % (str(e) or e.__class__.__name__)}).encode()
        if len(payload) > wire.MAX_PAYLOAD:
            # never let a big answer kill the main loop: say so in a reply that fits, without an id
            # that would make it too long as well
            cid = doc.get("id")
            error = "reply of %d bytes exceeds the %d-byte frame limit" % (len(payload), wire.MAX_PAYLOAD)
            if len(json.dumps(cid)) > MAX_ID_BYTES:
                cid = None
                error += "; the command's id is too long to echo (at most %d bytes of JSON)" % MAX_ID_BYTES
            payload = json.dumps({"ok": False, "id": cid, "error": error}).encode()
        self._send_payload(ftype, payload, flags)

    def _send_payload(self, ftype, payload, flags=0):
        idx = self.sample_index()   # after the encoding: the host times clock pings by it (latest stamp)
        frame = wire.encode_frame(ftype, payload, self.reply_seq, flags, 0,
                                  idx >> wire.INDEX_LO_BITS, idx & wire.INDEX_LO_MASK, self.crc_into)
        self.reply_seq = (self.reply_seq + 1) & 0xFFFF
        self.board.write(frame)

    def notice(self, doc):
        self.send(wire.T_NOTICE, doc)

    def handle_command(self, payload):
        """Never raises: a malformed or unknown command gets an error reply and the stream goes on."""
        cid = None
        try:
            msg = json.loads(payload)
            if not isinstance(msg, dict):
                raise ValueError("command must be a JSON object")
            cid = msg.get("id")
            why = id_problem(cid)
            if why:
                cid = None
                raise ValueError(why)
            name = msg.get("cmd")
            fn = self.commands.get(name) if isinstance(name, str) else None
            if fn is None:
                raise ValueError("unknown command %r; known: %s" % (name, ", ".join(sorted(self.commands))))
            result = fn(msg)
            if result is None:          # answered later (selftest, once it has its samples)
                return
            result["ok"] = True
        except Exception as e:  # noqa: BLE001 - the firmware must not die on a bad command
            result = {"ok": False, "error": str(e) or e.__class__.__name__}
        result["id"] = cid
        self.send(wire.T_REPLY, result)

    # ---- commands ------------------------------------------------------------------------------
    def describe(self):
        return {
            "device": "powerrig-interposer", "firmware": VERSION, "protocol": PROTOCOL_VERSION,
            "board": self.board.name, "serial": self.board.serial,
            "sample_period_us": rails_default.SAMPLE_PERIOD_US, "peak_window_us": rails_default.PEAK_WINDOW_US,
            "adc": {"part": rails_default.ADC_PART, "bits": rails_default.ADC_BITS},
            "rails": [{"name": n, "index": k, "v_lsb": v, "i_lsb": i, "optional": o, "units": ["V", "A", "W"]}
                      for k, (n, v, i, o) in enumerate(rails_default.RAILS)],
            "digital": list(DIGITAL),
            "interval_us": {"default": DEFAULT_INTERVAL_US, "min": MIN_INTERVAL_US,
                            "max": MAX_INTERVAL_SAMPLES * rails_default.SAMPLE_PERIOD_US,
                            "step": rails_default.SAMPLE_PERIOD_US},
            "link_budget_bps": LINK_BUDGET_BPS,
            # the shortest interval between clock pings this board's main loop affords beside its
            # streams (0: the host's own rate); the host pings no more often (docs/protocol.md)
            "ping_interval_min_us": getattr(self.board, "ping_interval_min_us", 0),
            "record": {"head": wire.RECORD_HEAD, "rail_format": wire.RAIL_FORMAT, "p_shift": wire.P_SHIFT,
                       "peak_none": wire.PEAK_NONE},
            "burst_capacity": self.burst.capacity,
            "calibration": self.cal, "state": self.state,
            "board_temp_c": self.board_temperature(),
        }

    def board_temperature(self):
        """The board sensor's temperature (C) for the calibration's temperature coefficients, or None
        on a board without one."""
        read = getattr(self.board, "temperature_c", None)
        return read() if read else None

    def cmd_describe(self, msg):
        return self.describe()

    def cmd_start(self, msg):
        interval_us = msg.get("interval_us", DEFAULT_INTERVAL_US)
        previous = self.stream if self.state == STREAMING else None
        names = msg.get("rails") or [n for n, _v, _i, opt in rails_default.RAILS if not opt]
        if not isinstance(names, list):
            raise ValueError("rails must be a list of rail names")
        idx = []
        for n in names:
            if not isinstance(n, str) or n not in self.rail_names:
                raise ValueError("unknown rail %r; rails are %s" % (n, ", ".join(self.rail_names)))
            if self.rail_names.index(n) in idx:
                raise ValueError("rail %s is listed twice; name each rail once" % n)
            idx.append(self.rail_names.index(n))
        per_frame = msg.get("per_frame", 0)
        if not is_int(per_frame):
            raise ValueError("per_frame must be a whole number")
        per_frame, bps = plan_stream(interval_us, len(idx), per_frame)
        spi = interval_us // rails_default.SAMPLE_PERIOD_US
        window = rails_default.PEAK_WINDOW_US // rails_default.SAMPLE_PERIOD_US
        rc = self.cal["rails"]
        for n in names:
            if n not in rc:
                raise ValueError("no calibration for rail %s; set one with cal_set" % n)
        self.framer.flush()
        _collect()       # between streams, never during one: the stream's passes allocate nothing
        if _mem_free is not None:
            self.heap_free = _mem_free()     # (status while streaming gives this one)
        self.reducer.configure(idx, spi, window,
                               [rc[n]["v_offset"] for n in names], [rc[n]["i_offset"] for n in names])
        self.framer.configure(wire.record_size(len(idx)), per_frame)
        skip = getattr(self.board, "adc_skip", None)
        if skip is not None and self.burst.state is BURST_IDLE and self.selftest is None:
            skip()      # no one needs the blocks not read yet: the stream starts with the ring's whole slack
        start = self.board.adc_restart()   # next sample index the reducer will see
        self.reducer.restart(start >> wire.INDEX_LO_BITS, start & wire.INDEX_LO_MASK)
        self.state = STREAMING
        self.pass_stats = [0, 0, 0, 0, 0, 0]
        self.stream = {"interval_us": interval_us, "rails": list(names), "per_frame": per_frame,
                       "record_size": wire.record_size(len(idx)), "bytes_per_s": bps, "first_index": start,
                       "first_seq": self.framer.seq}
        reply = dict(self.stream)
        # start while streaming is a restart, said out loud: the old stream ends (its partial frame is
        # sent), the new one begins with a RESTART frame, and the reply names the stream it replaced.
        # A host that reconnects to a board still streaming for a crashed client needs no extra stop.
        reply["restarted"] = previous
        return reply

    def cmd_stop(self, msg):
        if self.state == STREAMING:
            self.framer.flush()
        self.state = IDLE
        self.stream = None          # status shows no stream once it has stopped
        _collect()
        return {"frames": self.framer.frames_sent, "next_seq": self.framer.seq}

    def cmd_ping(self, msg):
        """Clock sync, NTP style: the sample index when the command arrived and when the reply leaves."""
        echo = msg.get("echo")
        if not (echo is None or isinstance(echo, (str, bool)) or is_finite(echo)):
            raise ValueError("echo must be a string, a finite number, true, false or null")
        return {"us": self.timebase.now_us(), "rx_index": self.rx_index, "index": self.sample_index(),
                "echo": echo}

    def cmd_status(self, msg):
        status = {"state": self.state, "stream": self.stream, "overruns": self.overruns,
                  "overwritten_blocks": self.overwritten, "lost_samples": self.lost_samples,
                  "frames": self.framer.frames_sent, "burst": self.burst.status(), "bad_bytes": self.reader.bad,
                  "errors": self.errors,
                  "reader": {"timeouts": self.reader.timeouts, "breaks": self.reader.breaks,
                             "refused": self.refused, "oversize": self.reader.oversize}}
        if hasattr(self.board, "link_status"):
            status["link"] = self.board.link_status()
        ps = self.pass_stats
        status["passes"] = {"blocks": ps[0], "mean_block_us": ps[1] // ps[0] if ps[0] else None,
                            "worst_block_us": ps[2], "worst_command_us": ps[3], "commands": ps[4],
                            "mean_command_us": ps[5] // ps[4] if ps[4] else None}
        if _mem_free is not None:            # MicroPython: the heap left (the RP2040 has ~190 kB in all),
            if self.state != STREAMING and self.burst.state is BURST_IDLE:
                self.heap_free = _mem_free()     # read while nothing streams (7.4 ms on the RP2040)
            status["heap_free"] = self.heap_free
        return status

    def cmd_power(self, msg):
        """Timed power actions (powerrig_fw.actions): enable, disable, status, sequence, cancel."""
        return self.actions.command(msg)

    def cmd_repl(self, msg):
        """End the main loop after this reply: the board's console (Ctrl-C, the REPL) is back, so
        mpremote can copy new firmware. A stream in progress stops."""
        if self.state == STREAMING:
            self.framer.flush()
        self.state = IDLE
        self.stream = None
        self.actions.restore("repl")
        self.exit = True
        return {"repl": True}

    def _selftest_step(self, raw, n, dropped):
        """Feed a block to the running self-test; its reply (or its error) once it is done."""
        job = self.selftest
        try:
            if not job.observe(raw, n, dropped):
                return
            reply = job.result()
        except Exception as e:  # noqa: BLE001 - the self-test must answer, whatever it tripped over
            reply = {"ok": False, "id": job.cid, "error": "self-test failed: %s" % (str(e) or e.__class__.__name__)}
        self.selftest = None
        self.send(wire.T_REPLY, reply)

    def cmd_selftest(self, msg):
        """Reference voltage, ADC noise per channel, digital inputs, firmware and build: the reply
        follows when SelfTest has read its blocks (a few ms); the host adds the link throughput."""
        if self.state == STREAMING:
            raise ValueError("stop the stream before the self-test: it reads the ADC blocks itself")
        if self.selftest is not None:
            raise ValueError("a self-test is already running; wait for its reply")
        self.selftest = SelfTest(self, msg.get("id"))
        return None

    def cmd_burst(self, msg):
        return self.burst.arm(msg)

    def cmd_cal_get(self, msg):
        return {"calibration": self.cal}

    def cmd_cal_set(self, msg):
        if self.state == STREAMING:
            raise ValueError("stop the stream before changing calibration")
        update = msg.get("calibration")
        err = calibration.validate(update)
        if err:
            raise ValueError(err)
        cal = calibration.merge(self.cal, update)
        if msg.get("save", True):
            calibration.save(self.board.cal_path, cal)
        self.cal = cal
        return {"calibration": cal}

    def cmd_reset(self, msg):
        self.framer.flush()
        self.state = IDLE
        self.stream = None
        self.burst.disarm()
        self.selftest = None
        self.actions.restore("reset")       # and power actions off until enabled again
        self.actions.enabled = False
        self.cal = calibration.load(self.board.cal_path)
        self.overruns = 0
        self.lost_samples = 0
        return {"state": self.state}
