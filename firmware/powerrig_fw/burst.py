"""Raw 4 us capture around a trigger, kept in RAM and uploaded after the fact as BURST frames.

The link cannot carry raw samples live, so the device keeps a ring of the most recent samples while
armed; when the trigger fires it records ``post`` more, then uploads ``pre + post`` samples in chunks,
one chunk per main-loop pass, interleaved with the interval stream.

The ring always holds interleaved samples (v0 i0 v1 i1 v2 i2 digital), whatever the board's block
layout (powerrig_fw.layout): a board whose DMA writes one region per ADC gives ``burst_copy`` and
``scan_trigger`` kernels that read its layout in place (board/kernels.py), so an armed burst costs
machine code per sample, never bytecode, and the interval stream keeps up.

Triggers: {"trigger": "now"}, {"trigger": "threshold", "rail": "12V", "above_w": 20.0},
{"trigger": "edge", "bit": 2, "rising": true} (digital inputs: 0 activity, 1 PERST#, 2 marker).
"""
import array

from powerrig_fw import layout, rails_default, wire

IDLE, ARMED, POST, UPLOAD = "idle", "armed", "post", "upload"

# the burst_triggered notice, written in place (as json.dumps writes the dict: docs/protocol.md)
_N_EVENT = b'{"event": "burst_triggered", "trigger_index": '
_N_FIRST = b', "first_index": '
_N_SAMPLES = b', "samples": '
# the upload's machine-code copy (board.copy) takes a source offset below 2**14 (it is packed with
# the count into one small int): the ring is seen through views that start every 16 KB
_VIEW_SHIFT = 14
_N_MAX = len(_N_EVENT) + len(_N_FIRST) + len(_N_SAMPLES) + 3 * 20 + 1   # 3 numbers of at most 20 digits, }


def _whole(x):
    """A whole number, not a bool (JSON true == 1 would pass a plain int check)."""
    return isinstance(x, int) and not isinstance(x, bool)
DEFAULT_CAPACITY = 16384   # samples: 65 ms at 4 us; 14 bytes each with 3 rails + digital
MIN_SHARE_BPS = 20000      # what an upload gets even beside a stream that fills the link budget


class Burst:
    def __init__(self, device, n_rails_total, link_bps=500000):
        self.device = device
        self.link_bps = link_bps
        self.stride = 2 * n_rails_total + 1
        board = device.board
        self.capacity = getattr(board, "burst_capacity", DEFAULT_CAPACITY)
        make = getattr(board, "make_ring", None)
        self.ring = make(self.capacity * self.stride) if make else array.array("h", bytes(2 * self.capacity * self.stride))
        self.unit = len(self.ring) // (self.capacity * self.stride)   # ring items per halfword: 2 for a board's bytes
        self.chunk = (wire.MAX_PAYLOAD // (2 * self.stride))
        # the upload's frame, made once: a chunk a pass beside a stream allocates nothing (two 2 kB
        # objects a chunk filled the RP2040's heap, and its 10 ms collection cost a 2 ms stream samples)
        self.out = bytearray(wire.OVERHEAD + 2 * self.chunk * self.stride)
        self.view = memoryview(self.ring) if self.unit == 2 else None    # a board's ring of bytes
        # a board's allocation-free byte copy: a chunk into the upload's frame without the memoryview
        # a slice of the ring makes (the reference boards slice)
        copy = getattr(board, "copy", None)
        views = None
        if copy is not None:
            whole = memoryview(self.ring)
            per = 2 // self.unit                           # bytes per ring item
            views = [whole[k // per:] for k in range(0, len(self.ring) * per, 1 << _VIEW_SHIFT)]
        self.bases, self.step, self.dbase, self.dstep, self.dshift = layout.of(board, n_rails_total)
        self.copy = getattr(board, "burst_copy", None)     # (ring, head, raw, start, run)
        self.scan = getattr(board, "scan_trigger", None)   # (raw, start, n, spec) -> k or -1
        if self.copy is None and (self.step != self.stride or self.dbase != self.stride - 1 or self.dshift):
            raise ValueError("a board with its own block layout must give burst_copy")
        self._last_dig = 0
        self.pre = 0
        self.edge = False
        # every attribute the fire and the upload set, made here: a new one grows the instance's
        # table, an allocation in the pass that fires the burst beside a stream
        self.trigger_index = self.count = self.read_pos = self.paced_at = self.allowance = 0
        # the notice's frame and digits, made once: on the RP2040 the notice through json.dumps was
        # the upload's one allocation beside a stream (docs/emulator.md, "Bursts beside a stream")
        # (one attribute for the four: the armed block pass looks its own up in a smaller table)
        self.up = (copy, views, bytearray(wire.OVERHEAD + _N_MAX), getattr(board, "put_dec", None) or wire.put_dec)
        self.disarm()

    def disarm(self):
        self.state = IDLE
        self.filled = 0        # samples in the ring
        self.head = 0          # next write position (samples)
        self.remaining = 0     # post samples still to record
        self.sent = 0
        self.first_index = 0
        self.spec = None

    def status(self):
        return {"state": self.state, "filled": self.filled, "sent": self.sent}

    def arm(self, msg):
        trig = msg.get("trigger", "now")
        if trig == "off":            # a cancel needs no window (the defaults exceed an RP2040's RAM)
            self.disarm()
            return {"armed": None, "capacity": self.capacity}
        pre = msg.get("pre", 2500)
        post = msg.get("post", 2500)
        if not _whole(pre) or not _whole(post) or pre < 0 or post < 1:
            raise ValueError("pre must be >= 0 and post >= 1 samples")
        if pre + post > self.capacity:
            raise ValueError("pre + post = %d samples exceeds the burst RAM of %d samples" % (pre + post, self.capacity))
        if self.state == UPLOAD:
            raise ValueError("a burst upload is in progress; wait for its last chunk or send trigger off")
        spec = {"trigger": trig, "pre": pre, "post": post}
        if trig == "threshold":
            names = [r[0] for r in rails_default.RAILS]
            rail = msg.get("rail", names[0])
            if rail not in names:
                raise ValueError("unknown rail %r" % rail)
            k = names.index(rail)
            _n, v_lsb, i_lsb, _o = rails_default.RAILS[k]
            cal = self.device.cal["rails"][rail]
            watts = msg.get("above_w", 0)
            if not isinstance(watts, (int, float)) or isinstance(watts, bool) or not 0 <= watts < 1e9:
                raise ValueError("above_w must be a finite number of watts, 0 or more")
            watts = float(watts)
            spec["rail_index"] = k
            # clamped to 31 bits: a product of two offset 16-bit codes never exceeds it, and a
            # 32-bit viper int on the MCU must hold it
            spec["code_product"] = max(0, min(0x7FFFFFFF, int(watts / (v_lsb * i_lsb * cal["v_gain"] * cal["i_gain"]))))
            spec["v_offset"] = cal["v_offset"]
            spec["i_offset"] = cal["i_offset"]
            spec["rail"] = rail
            spec["above_w"] = watts
        elif trig == "edge":
            bit = msg.get("bit", 2)
            if not _whole(bit) or bit not in (0, 1, 2):
                raise ValueError("bit must be 0 (activity), 1 (PERST#) or 2 (marker)")
            spec["bit"] = bit
            rising = msg.get("rising", True)
            if not isinstance(rising, bool):
                raise ValueError("rising must be true or false")
            spec["rising"] = rising
        elif trig != "now":
            raise ValueError("trigger must be now, threshold, edge or off")
        self.disarm()
        self.spec = spec
        # read for every block while armed: attributes, not the spec's keys (fewer lookups a block)
        self.pre = pre
        self.edge = trig == "edge"
        self.state = ARMED
        return {"armed": spec, "capacity": self.capacity}

    def _dig(self, raw, k):
        return (int(raw[self.dbase + k * self.dstep]) & 0xFFFF) >> self.dshift

    def _scan(self, raw, n, start):
        """Offset of the first triggering sample at or after ``start`` in this block, or -1.

        ``start`` keeps the trigger out of the first ``pre`` samples after arming, so the
        pre-trigger window is always complete ("now" fires exactly ``pre`` samples after arming).
        """
        spec = self.spec
        if start >= n:
            return -1
        if self.edge:
            mask = 1 << spec["bit"]
            # (_dig inline: this runs every block while armed)
            d = (int(raw[self.dbase + (start - 1) * self.dstep]) & 0xFFFF) >> self.dshift if start else self._last_dig
            spec["prev"] = 1 if d & mask else 0
        elif spec["trigger"] == "now":
            return start
        if self.scan is not None:
            return self.scan(raw, start, n, spec)
        if spec["trigger"] == "threshold":
            at = self.bases[spec["rail_index"]]
            thr = spec["code_product"]
            ov = spec["v_offset"]
            oi = spec["i_offset"]
            st = self.step
            for k in range(start, n):
                j = at + k * st
                if (raw[j] - ov) * (raw[j + 1] - oi) > thr:
                    return k
            return -1
        prev = spec["prev"]
        rising = spec["rising"]
        for k in range(start, n):
            d = 1 if self._dig(raw, k) & mask else 0
            if (d and not prev) if rising else (prev and not d):
                return k
            prev = d
        return -1

    def observe(self, raw, n, dropped):
        if self.state != ARMED and self.state != POST:     # (no tuple: this runs for every block)
            return
        if dropped:
            self.filled = 0          # raw history is no longer contiguous
        start = 0
        take = n
        if self.state == ARMED:
            pre = self.pre
            filled = self.filled
            if self.edge and filled == 0:
                self._last_dig = self._dig(raw, 0)
            k = self._scan(raw, n, pre - filled if pre > filled else 0)
            if self.edge:                       # (_dig inline)
                self._last_dig = (int(raw[self.dbase + (n - 1) * self.dstep]) & 0xFFFF) >> self.dshift
            if k >= 0:
                self.state = POST
                self.remaining = self.spec["post"]
                self.trigger_index = self.device.board.block_index() + k
                self._store(raw, 0, k)
                start = k
                take = n - k
            elif n > pre:
                # only the block's last `pre` samples can precede a trigger in a later block: the
                # history starts again there, and an armed burst copies at most `pre` samples a block
                # (a whole block each pass outgrew the RP2040's 2 ms block beside a stream, issue 43).
                # At least one: filled 0 means no history (the edge's previous input is then unknown)
                keep = pre if pre else 1
                self.filled = 0
                self._store(raw, n - keep, keep)
                return
            else:
                self._store(raw, 0, n)
                return
        m = min(take, self.remaining)
        self._store(raw, start, m)
        self.remaining -= m
        if self.remaining == 0:
            want = min(self.filled, self.spec["pre"] + self.spec["post"])
            self.count = want
            self.first_index = self.device.board.block_index() + start + m - want
            self.read_pos = (self.head - want) % self.capacity
            self.sent = 0
            self.state = UPLOAD
            self.paced_at = self.device.sample_index()
            self.allowance = wire.OVERHEAD + 2 * self.chunk * self.stride     # the first chunk goes at once

    def overwritten(self):
        """DMA came round to the block just observed while it was scanned and copied (the main loop
        was a whole ring behind): what was stored from it, and a trigger found in it, may be a later
        block's. On the emulated RP2040 such a burst came back 4,000 samples from where its index
        said. The history starts again: a trigger found in that block is forgotten and the burst
        waits for the next one; after a trigger found earlier the upload comes back short (none of
        it, when the block was its last), which the host reports as lost samples."""
        if self.state == IDLE or self.state == UPLOAD and self.sent:
            return                   # (an upload under way observes no blocks)
        if self.state == ARMED or self.trigger_index >= self.device.board.block_index():
            self.state = ARMED       # no trigger yet, or one found in that block
            self.remaining = 0
            self.filled = 0
        elif self.state == POST:
            self.filled = 0
        else:
            self.count = 0

    def _store(self, raw, start, m):
        """Append m samples from raw[start:] to the ring (interleaved)."""
        s = self.stride
        while m > 0:
            run = min(m, self.capacity - self.head)
            if self.copy is not None:
                self.copy(self.ring, self.head, raw, start, run)
            else:
                self.ring[self.head * s:(self.head + run) * s] = raw[start * s:(start + run) * s]
            self.head = (self.head + run) % self.capacity
            self.filled = min(self.capacity, self.filled + run)
            start += run
            m -= run

    def _notify(self):
        """The NOTICE {"event": "burst_triggered", "trigger_index", "first_index", "samples"} from
        the preallocated frame: nothing allocated (tests/micropython/fw_burst.py, heap locked)."""
        _copy, _views, out, put = self.up
        lo_bits = wire.INDEX_LO_BITS
        mask = wire.INDEX_LO_MASK
        p = wire.HEADER_SIZE
        p = self._put(out, p, _N_EVENT)
        p = put(out, p, self.trigger_index >> lo_bits, self.trigger_index & mask)
        p = self._put(out, p, _N_FIRST)
        p = put(out, p, self.first_index >> lo_bits, self.first_index & mask)
        p = self._put(out, p, _N_SAMPLES)
        p = put(out, p, self.count >> lo_bits, self.count & mask)
        out[p] = 0x7D                                     # }
        dev = self.device
        seq = dev.reply_seq
        idx = dev.sample_index()         # as Device.send stamps a notice: after it is written
        wire.put_header(out, wire.T_NOTICE, 0, 0, p + 1 - wire.HEADER_SIZE, seq,
                        idx >> lo_bits, idx & mask)
        dev.crc_into(out, 2, p + 1)
        dev.reply_seq = (seq + 1) & 0xFFFF
        dev.board.write(out, p + 1 + wire.CRC_SIZE)

    @staticmethod
    def _put(out, p, text):
        n = len(text)
        out[p:p + n] = text
        return p + n

    def upload_step(self):
        """One chunk when the link has room for it: the upload is paced to the link budget left over by
        the interval stream (at least MIN_SHARE_BPS), so a burst never starves the stream nor blocks the
        main loop on a full USB buffer."""
        if self.state != UPLOAD:
            return
        now = self.device.sample_index()
        stream = self.device.stream
        rate = max(MIN_SHARE_BPS, self.link_bps - (stream["bytes_per_s"] if stream else 0))
        us = min((now - self.paced_at) * rails_default.SAMPLE_PERIOD_US, 100000)   # small ints on the MCU
        self.paced_at = now
        full = wire.OVERHEAD + 2 * self.chunk * self.stride
        self.allowance = min(full, self.allowance + us * (rate // 1000) // 1000)
        s = self.stride
        n = min(self.chunk, self.count - self.sent, self.capacity - self.read_pos)
        cost = wire.OVERHEAD + 2 * n * s
        if self.allowance < cost:
            return
        self.allowance -= cost
        if not self.sent:        # the block that completed it has passed the board's overwrite check
            self._notify()
        u = s * self.unit
        a = self.read_pos * u
        size = 2 * n * s
        out = self.out
        h = wire.HEADER_SIZE
        copy, views, _note, _put = self.up
        if copy is not None:
            b = 2 * self.read_pos * s                   # the chunk's first byte in the ring
            copy(out, h, views[b >> _VIEW_SHIFT], b & ((1 << _VIEW_SHIFT) - 1), size)
        elif self.view is not None:
            out[h:h + size] = self.view[a:a + size]
        else:                    # a ring of halfwords (the reference boards): its bytes
            out[h:h + size] = bytes(memoryview(self.ring)[a:a + n * u])
        idx = self.first_index + self.sent
        self.sent += n
        self.read_pos = (self.read_pos + n) % self.capacity
        last = self.sent >= self.count
        wire.put_header(out, wire.T_BURST, wire.F_LAST if last else 0, s, size, self.sent & 0xFFFF,
                        idx >> wire.INDEX_LO_BITS, idx & wire.INDEX_LO_MASK)
        self.device.crc_into(out, 2, h + size)
        self.device.board.write(out, h + size + wire.CRC_SIZE)
        if last:
            self.state = IDLE
