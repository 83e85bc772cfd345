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


class FrameReader:
    """Device side: pulls whole COMMAND frames out of the bytes the host sends. Resyncs on garbage."""

    def __init__(self, crc_into=None, max_len=MAX_PAYLOAD):
        if crc_into is None:
            from powerrig_fw.crc import crc32_into_c as crc_into
        self.crc_into = crc_into
        self.buf = bytearray()
        self.max_len = max_len
        self.bad = 0
        self.oversize = 0

    def feed(self, data):
        self.buf.extend(data)
        out = []
        while True:
            b = self.buf
            i = b.find(b"\xa5\x5a")
            if i < 0:
                # keep a trailing A5 that may start the next sync word
                keep = 1 if (len(b) and b[-1] == SYNC0) else 0
                if len(b) - keep:
                    self.bad += len(b) - keep
                self.buf = b[len(b) - keep:]
                return out
            if i:
                self.bad += i
                self.buf = b = b[i:]
            if len(b) < HEADER_SIZE:
                return out
            length = b[6] | (b[7] << 8)
            if b[2] != VERSION or length > self.max_len:
                if b[2] == VERSION and b[3] == T_COMMAND:
                    # report it so the device can answer; then resync, as the header may be noise
                    self.oversize += 1
                    out.append((T_OVERSIZE, b[8] | (b[9] << 8), length))
                self.bad += 1
                self.buf = b[1:]
                continue
            end = HEADER_SIZE + length
            if len(b) < end + CRC_SIZE:
                return out
            frame = bytearray(b[:end + CRC_SIZE])
            self.crc_into(frame, 2, end)
            if frame[end:end + CRC_SIZE] != b[end:end + CRC_SIZE]:
                self.bad += 1
                self.buf = b[1:]
                continue
            self.buf = b[end + CRC_SIZE:]
            seq = b[8] | (b[9] << 8)
            out.append((b[3], seq, bytes(b[HEADER_SIZE:end])))
