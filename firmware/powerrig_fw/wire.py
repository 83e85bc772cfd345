"""Wire format v1 (docs/protocol.md): frame layout, record layout, and the device's framer.

Frame, little-endian:
    0  u16 sync 0x5AA5 (bytes A5 5A)   2  u8 version   3  u8 type   4  u8 flags   5  u8 count
    6  u16 payload length               8  u16 sequence 10 u64 first sample index
    18 payload                          18+len u32 CRC-32 over bytes 2 .. 18+len
"""
import struct

SYNC0 = 0xA5
SYNC1 = 0x5A
VERSION = 1
HEADER_SIZE = 18
CRC_SIZE = 4
OVERHEAD = HEADER_SIZE + CRC_SIZE
MAX_PAYLOAD = 2048

# frame types
T_DATA = 1     # interval records
T_COMMAND = 2  # host -> device, JSON
T_REPLY = 3    # device -> host, JSON (answer to a command, or an error)
T_BURST = 4    # raw 4 us samples, int16 interleaved
T_NOTICE = 5   # device -> host, JSON, unsolicited (overrun, burst triggered, ...)
T_OVERSIZE = 0x100  # not on the wire: FrameReader's report of a command frame over max_len (payload = its length)
T_ZERO = 0x101      # not on the wire: FrameReader's report of a whole frame of type 0 (0 means "no frame")

# The receiver's resynchronisation (docs/protocol.md, "Resynchronisation"):
PARTIAL_TIMEOUT_MS = 80   # a partial frame held this long (board time) is dropped when no byte completes it
# The break: BREAK_ZEROS zero bytes in a row. No COMMAND frame holds them (its payload is JSON text, which
# has no NUL byte, and its header and CRC fewer than 20 in a row), so a partial frame in whose bytes they appear
# is dropped at once. A host sends RESYNC_PREAMBLE zero bytes when it opens the link, before its first
# command: whatever half frame a previous host left in the board meets the break (or, a header cut
# short, is completed by zeros and fails its CRC), and zeros hold no sync word.
BREAK_ZEROS = 32
RESYNC_PREAMBLE = 64
_BREAK = bytes(BREAK_ZEROS)

# flags
F_OVERRUN = 0x01    # the device lost samples just before this frame (sample index jumps)
F_LAST = 0x02       # last chunk of a burst upload
F_RESTART = 0x04    # first frame of a new stream

# interval record: u8 digital OR, u8 digital AND, then per enabled rail RAIL_FORMAT
RECORD_HEAD = 2
RAIL_FORMAT = "<iiiHhhi"  # sum_v, sum_i, sum_p_hi, sum_p_lo, p_min>>15, p_max>>15, peak window>>15
RAIL_SIZE = 22
P_SHIFT = 15            # products are split p = hi * 2**15 + lo so every sum fits a small int
PEAK_NONE = -0x40000000  # no complete 100 us window yet in this interval (after start or overrun)
INDEX_LO_BITS = 24      # 64-bit sample index kept as (hi, lo) with lo < 2**24: no big ints on MCU
INDEX_LO_MASK = (1 << INDEX_LO_BITS) - 1


def record_size(n_rails):
    return RECORD_HEAD + RAIL_SIZE * n_rails


def put_index(buf, off, hi, lo):
    """Store the u64 sample index hi * 2**24 + lo at buf[off:off+8] without forming a big int."""
    buf[off] = lo & 0xFF
    buf[off + 1] = (lo >> 8) & 0xFF
    buf[off + 2] = (lo >> 16) & 0xFF
    buf[off + 3] = hi & 0xFF
    buf[off + 4] = (hi >> 8) & 0xFF
    buf[off + 5] = (hi >> 16) & 0xFF
    buf[off + 6] = (hi >> 24) & 0xFF
    buf[off + 7] = 0


def put_header(buf, ftype, flags, count, length, seq, idx_hi, idx_lo):
    """The 18 header bytes in one pack (the u64 index as lo's 3 bytes, hi's 4, a zero: small ints only)."""
    struct.pack_into("<BBBBBBHHHBHBBB", buf, 0, SYNC0, SYNC1, VERSION, ftype, flags, count, length, seq,
                     idx_lo & 0xFFFF, (idx_lo >> 16) & 0xFF, idx_hi & 0xFFFF, (idx_hi >> 16) & 0xFF,
                     (idx_hi >> 24) & 0xFF, 0)


class Framer:
    """Packs interval records into DATA frames in one preallocated buffer and sends full frames.

    ``slot()`` gives the offset where the next record goes; ``commit()`` counts it and sends the
    frame when it holds ``per_frame`` records. Nothing allocates on this path once configured.
    """

    def __init__(self, write, crc_into, max_payload=MAX_PAYLOAD):
        self.write = write
        self.crc_into = crc_into
        self.buf = bytearray(OVERHEAD + max_payload)
        self.mv = memoryview(self.buf)
        self.max_payload = max_payload
        self.seq = 0
        self.rec_size = 0
        self.per_frame = 1
        self.n = 0
        self.flags = 0
        self.idx_hi = 0
        self.idx_lo = 0
        self.full_mv = self.mv
        self.frames_sent = 0

    def configure(self, rec_size, per_frame):
        if rec_size * per_frame > self.max_payload:
            raise ValueError("frame payload too large")
        self.rec_size = rec_size
        self.per_frame = per_frame
        self.n = 0
        self.flags = F_RESTART
        self.full_mv = self.mv[:OVERHEAD + rec_size * per_frame]

    def slot(self):
        return HEADER_SIZE + self.n * self.rec_size

    def commit(self, idx_hi, idx_lo):
        """Count the record just written at slot(); idx is the first sample index of its interval."""
        if self.n == 0:
            self.idx_hi = idx_hi
            self.idx_lo = idx_lo
        self.n += 1
        if self.n == self.per_frame:
            self._send(self.full_mv)

    def send_full(self):
        """Send the frame a kernel filled in place (it set n, idx_hi, idx_lo): allocation-free."""
        self._send(self.full_mv)

    def mark_overrun(self):
        """Samples were lost: send what we have, the next frame carries F_OVERRUN."""
        self.flush()
        self.flags |= F_OVERRUN

    def flush(self):
        """Send a partial frame (stop, overrun). Allocates one memoryview: not a hot path."""
        if self.n:
            self._send(self.mv[:OVERHEAD + self.n * self.rec_size])

    def _send(self, view):
        n = self.n
        length = n * self.rec_size
        put_header(self.buf, T_DATA, self.flags, n, length, self.seq, self.idx_hi, self.idx_lo)
        self.crc_into(self.buf, 2, HEADER_SIZE + length)
        self.seq = (self.seq + 1) & 0xFFFF
        self.n = 0
        self.flags = 0
        self.write(view)
        self.frames_sent += 1


def encode_frame(ftype, payload, seq=0, flags=0, count=0, idx_hi=0, idx_lo=0, crc_into=None):
    """One whole frame as a new bytearray (commands, replies, bursts: not the data hot path)."""
    if crc_into is None:
        from powerrig_fw.crc import crc32_into_c as crc_into
    n = len(payload)
    if n > MAX_PAYLOAD:
        raise ValueError("payload too large")
    buf = bytearray(OVERHEAD + n)
    put_header(buf, ftype, flags, count, n, seq, idx_hi, idx_lo)
    buf[HEADER_SIZE:HEADER_SIZE + n] = payload
    crc_into(buf, 2, HEADER_SIZE + n)
    return buf


def put_dec(buf, at, hi, lo):
    """The decimal digits of hi * 2**24 + lo at buf[at:], with small ints only (a microsecond count
    or a sample index passes 2**30 within an hour: on a 32-bit MicroPython a big int, which allocates);
    the offset after them. Long division by 10 over the two halves: (r << 24) + lo < 10 * 2**24."""
    k = at
    while True:
        r = hi % 10
        hi //= 10
        x = (r << 24) + lo
        lo = x // 10
        buf[k] = 48 + x - 10 * lo
        k += 1
        if not (hi or lo):
            break
    i = at
    j = k - 1
    while i < j:                       # the digits came least significant first
        c = buf[i]
        buf[i] = buf[j]
        buf[j] = c
        i += 1
        j -= 1
    return k


def _copy(dst, at, src, start, n):
    """dst[at:at + n] = src[start:start + n] (front to back, so a move down within one buffer is
    safe). Allocates a slice on MicroPython: the board gives FrameReader its machine-code copy."""
    dst[at:at + n] = src[start:start + n]


class FrameReader:
    """Pulls whole frames out of received bytes, in place in one preallocated buffer, resyncing on
    garbage: the device's command reader, which must not allocate while a stream runs (an automatic
    collection stops the RP2040 for longer than its DMA slack, docs/emulator.md).

    The bytes come in at ``buf[end:end + free]`` (the board's ``read_into`` writes there; then
    ``added(k)``: attributes, not a call, as the main loop asks every pass); ``next()`` gives the type
    of the next whole frame (T_ZERO for type 0, as 0 means none), its sequence in ``seq`` and its
    payload at ``buf[at:at + length]`` (for T_OVERSIZE, ``length`` is the length its header claimed),
    valid until bytes are added; it makes room when it finds no whole frame (``free``: at most
    ``read_max``, what one read may add). ``feed(data)`` is the allocating convenience for tests and
    tools.

    Every byte sequence has an outcome (docs/protocol.md, "Resynchronisation"): a whole frame is
    given; a header of another version, a header over ``max_len`` (a command's reported as
    T_OVERSIZE) or a frame failing its CRC costs one byte, and the search goes on from the next one; so
    does a partial frame whose bytes so far hold a break (BREAK_ZEROS zero bytes in a row: ``breaks``).
    A partial frame is held, and ``waiting`` says so with ``since``, the board's ms when it was first
    held; ``expire()`` (the device calls it once the partial frame is PARTIAL_TIMEOUT_MS old) makes
    every byte held so far stale: a frame they hold whole is still given, a frame they begin but do
    not finish is dropped one byte at a time (``timeouts`` counts them), even when later bytes would
    finish it. ``budget`` bounds the frames
    whose CRC one call sequence checks (the device sets it each pass; negative: no bound); when it
    runs out next() says none and sets ``more``, as it does when bytes are left for a later pass.
    """

    def __init__(self, crc_into=None, max_len=MAX_PAYLOAD, room=512, copy=None, ms=None, read_max=0):
        if crc_into is None:
            from powerrig_fw.crc import crc32_into_c as crc_into
        if ms is None:
            from powerrig_fw.timebase import ticks_ms as ms
        self.crc_into = crc_into
        self.copy = copy or _copy
        self.ms = ms
        self.max_len = max_len
        self.buf = bytearray(OVERHEAD + max_len + room)
        self.read_max = read_max or len(self.buf)
        self.start = 0                 # the first byte not consumed
        self.end = 0                   # the end of the bytes held
        self.free = self.read_max      # room after end (at most read_max: what one read may add)
        self._crc = bytearray(CRC_SIZE)
        self.seq = 0
        self.at = 0
        self.length = 0
        self.bad = 0
        self.oversize = 0
        self.waiting = 0               # 1: a partial frame is held, first held at ``since`` (ms)
        self.since = 0
        self.stale = 0                 # the bytes before buf[stale] are older than the timeout
        self.timeouts = 0              # partial frames dropped as stale
        self.breaks = 0                # partial frames dropped at a break (BREAK_ZEROS zero bytes)
        self.budget = -1               # frames (CRC checks) left for this pass; negative: unbounded
        self.more = 0                  # 1: bytes are held that a later next() may make frames of
        self.pending = 0               # waiting or more, as the device last saw them (one test a pass)

    def _make_room(self):
        """Set ``free``, after moving an unfinished frame to the front if that is needed (a command
        cut between two reads: rare, and a copy without allocation)."""
        if self.start == self.end:
            self.start = self.end = self.stale = 0
        elif len(self.buf) - self.end < OVERHEAD + 64 and self.start:
            n = self.end - self.start
            self.copy(self.buf, 0, self.buf, self.start, n)
            self.stale = self.stale - self.start if self.stale > self.start else 0
            self.start = 0
            self.end = n
        f = len(self.buf) - self.end
        self.free = f if f < self.read_max else self.read_max

    def added(self, n):
        self.end += n
        self.free -= n

    def expire(self):
        """The partial frame held is PARTIAL_TIMEOUT_MS old: every byte held now is stale (above)."""
        self.stale = self.end
        self.waiting = 0
        self.more = self.pending = 1

    def _none(self):
        """No whole frame now: start the partial frame's clock if one is held, make room."""
        self.more = 0
        if self.start < self.end:
            if not self.waiting:
                self.waiting = 1
                self.since = self.ms()
        else:
            self.waiting = 0
        self._make_room()
        return 0

    def _drop(self, s):
        """The stale partial frame at s: one byte dropped, the search goes on after it."""
        self.timeouts += 1
        self.bad += 1
        self.start = s + 1

    def next(self):
        """The type of the next whole frame held (0: none yet), its sequence and payload span set."""
        b = self.buf
        while True:
            s = self.start
            e = self.end
            i = b.find(b"\xa5\x5a", s, e)
            if i < 0:
                # keep a trailing A5 that may start the next sync word (unless it is stale)
                keep = 1 if e > s and b[e - 1] == SYNC0 and e - 1 >= self.stale else 0
                if e - keep > s:
                    self.waiting = 0
                self.bad += e - s - keep
                self.start = e - keep
                return self._none()
            if i > s:
                self.bad += i - s
                self.start = s = i
                self.waiting = 0
            if s < self.stale and s + HEADER_SIZE > self.stale:
                self._drop(s)               # a stale header not whole before the timeout
                continue
            if e - s < HEADER_SIZE:
                return self._none()
            length = b[s + 6] | (b[s + 7] << 8)
            if b[s + 2] != VERSION or length > self.max_len:
                self.bad += 1
                self.start = s + 1
                self.waiting = 0
                if b[s + 2] == VERSION and b[s + 3] == T_COMMAND:
                    # reported so the device can answer; then resync, as the header may be noise
                    self.oversize += 1
                    self.seq = b[s + 8] | (b[s + 9] << 8)
                    self.length = length
                    self.more = 1
                    return T_OVERSIZE
                continue
            end = s + HEADER_SIZE + length
            if s < self.stale and end + CRC_SIZE > self.stale:
                self._drop(s)               # a stale frame not whole before the timeout
                continue
            if e < end + CRC_SIZE:
                if b.find(_BREAK, s + 2, e) >= 0:
                    self.breaks += 1        # a break in a partial frame (a new host's preamble)
                    self.bad += 1
                    self.start = s + 1
                    self.waiting = 0
                    continue
                return self._none()
            if not self.budget:             # this pass's frames are checked: the rest next pass
                self.more = 1
                return 0
            self.budget -= 1
            self.waiting = 0
            got = self._crc
            for k in range(CRC_SIZE):
                got[k] = b[end + k]
            self.crc_into(b, s + 2, end)           # writes the CRC it finds over the received one
            if b[end] != got[0] or b[end + 1] != got[1] or b[end + 2] != got[2] or b[end + 3] != got[3]:
                for k in range(CRC_SIZE):
                    b[end + k] = got[k]
                self.bad += 1
                self.start = s + 1
                continue
            self.start = end + CRC_SIZE
            if self.start == e:             # all read: the next bytes go to the front (the payload
                self.start = self.end = self.stale = 0   # stays where it is until they come)
                self.free = self.read_max
                self.more = 0
            else:
                self.more = 1
            self.seq = b[s + 8] | (b[s + 9] << 8)
            self.at = s + HEADER_SIZE
            self.length = length
            t = b[s + 3]
            return t if t else T_ZERO

    def again(self):
        """Give the frame next() just gave once more at the next call (its bytes are still in
        ``buf``; nothing was added since): a command the device holds for a later pass."""
        s = self.at - HEADER_SIZE
        if self.start == self.end == 0:      # it was the last frame held: the reader had reset
            self.end = self.at + self.length + CRC_SIZE
            f = len(self.buf) - self.end
            self.free = f if f < self.read_max else self.read_max
        self.start = s
        self.more = 1

    def payload(self):
        """The payload of the frame next() gave, as bytes (allocates)."""
        return bytes(self.buf[self.at:self.at + self.length])

    def feed(self, data):
        """[(type, seq, payload bytes)] of the whole frames in ``data`` and what came before it;
        payload is the claimed length for T_OVERSIZE. Allocates: for tests and tools."""
        out = []
        data = memoryview(data)
        k = 0
        self.budget = -1
        while True:
            n = min(self.free, len(data) - k)
            self.copy(self.buf, self.end, data, k, n)
            self.added(n)
            k += n
            while True:
                t = self.next()
                if not t:
                    break
                out.append((t, self.seq, self.length if t == T_OVERSIZE else self.payload()))
            if k >= len(data):
                return out
