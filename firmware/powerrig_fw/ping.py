"""The host's clock ping, answered in place: nothing parsed into objects, nothing allocated.

Why: pings come 25-100 times a second, during streams too (powerrig.interposer.client). Through the
JSON path each took ~1 kB of heap on the board, and on the RP2040 the collection that followed (10 ms)
outlasted the DMA ring's slack (docs/emulator.md). The ping in the form the host always sends
(``{"id":N,"cmd":"ping"}``, byte for byte as powerrig.interposer.frames.encode_command writes it) is
recognised in the FrameReader's buffer and answered from a preallocated frame with cmd_ping's fields
in cmd_ping's order; any other form takes the JSON path (Device.handle_command).

The numbers are written as the decimal digits of (hi, lo) small-int pairs, value = hi * 2**24 + lo
(wire.put_dec, or the board's machine-code ``put_dec``): a sample index passes 2**30 after 71 minutes
and a microsecond count after 18, where the int itself would be a big int on a 32-bit MicroPython.
"""
import array

from powerrig_fw import wire

_HEAD = b'{"id":'
_TAIL = b',"cmd":"ping"}'
_ID_MAX = 15                   # digits of an id echoed here: below 2**53 (docs/protocol.md, "Ids"); longer
                               # ids, negative ones and zero-padded ones (not JSON) take the JSON path
_US = b'{"us":'
_RX = b',"rx_index":'
_INDEX = b',"index":'
_ID = b',"echo":null,"ok":true,"id":'
_L_HEAD = len(_HEAD)
_L_TAIL = len(_TAIL)
_L_US = len(_US)
_L_RX = len(_RX)
_L_INDEX = len(_INDEX)
_L_ID = len(_ID)
_PAYLOAD_MAX = 120 + _ID_MAX   # the reply's longest payload: 3 x 20 digits, the keys, the id


class ClockPing:
    def __init__(self, board, timebase, crc_into):
        self.board = board
        self.timebase = timebase
        self.crc_into = crc_into
        self.when = array.array("i", [0, 0, 0, 0, 0, 0])   # (hi, lo) of now_us, rx_index, index
        self.out = bytearray(wire.OVERHEAD + _PAYLOAD_MAX)
        self.rx_index_of = getattr(board, "rx_index", None)          # (the simulator's USB stamp)
        self.index_of = getattr(board, "sample_index_into", None)
        self.put_dec = getattr(board, "put_dec", None) or wire.put_dec   # (machine code on the board)
        # a board that stamps as its read finds the host's first byte (before reading any: the RP2040
        # reads a ping's bytes one by one for ~0.5 ms) takes the stamp; else the device stamps after the read
        hook = getattr(board, "stamp_rx_with", None)
        self.by_board = hook is not None
        if hook is not None:
            hook(self.stamp)

    def index_into(self, k, index=None):
        """A sample index (now, when None) into when[k], when[k + 1]: on the board without forming
        the int (Board.sample_index_into), elsewhere split."""
        w = self.when
        if index is None:
            into = self.index_of
            if into is not None:
                into(w, k)
                return
            index = self.board.sample_index()
        w[k] = index >> wire.INDEX_LO_BITS
        w[k + 1] = index & wire.INDEX_LO_MASK

    def stamp(self):
        """The host's bytes were just read: the ping's first stamp (rx_index)."""
        rx = self.rx_index_of
        self.index_into(2, rx() if rx is not None else None)

    def rx_index(self):
        return (self.when[2] << wire.INDEX_LO_BITS) + self.when[3]

    def answer(self, reader, device):
        """Answer the frame ``reader`` just gave if it is the host's ping (True); False: not that form.
        The reply takes ``device.reply_seq``, as every reply does."""
        b = reader.buf
        at = reader.at
        end = at + reader.length
        head = at + _L_HEAD
        tail = end - _L_TAIL
        if not 0 < tail - head <= _ID_MAX or b.find(_HEAD, at, head) != at or b.find(_TAIL, tail, end) != tail:
            return False
        for k in range(head, tail):
            if not 48 <= b[k] <= 57:
                return False
        if b[head] == 48 and tail - head > 1:       # 007 is not a JSON number: never echoed as it came
            return False
        w = self.when
        out = self.out
        put_dec = self.put_dec
        self.timebase.now_into(w, 0)
        p = wire.HEADER_SIZE                        # (slice stores of constants: nothing allocated)
        out[p:p + _L_US] = _US
        p = put_dec(out, p + _L_US, w[0], w[1])
        out[p:p + _L_RX] = _RX
        p = put_dec(out, p + _L_RX, w[2], w[3])     # (stamped when the bytes were read)
        out[p:p + _L_INDEX] = _INDEX
        self.index_into(4)                          # the latest stamp: the host times the ping by it
        p = put_dec(out, p + _L_INDEX, w[4], w[5])
        out[p:p + _L_ID] = _ID
        p += _L_ID
        reader.copy(out, p, b, head, tail - head)
        p += tail - head
        out[p] = 0x7D                               # }
        seq = device.reply_seq
        wire.put_header(out, wire.T_REPLY, 0, 0, p + 1 - wire.HEADER_SIZE, seq, w[4], w[5])
        self.crc_into(out, 2, p + 1)
        device.reply_seq = (seq + 1) & 0xFFFF
        self.board.write(out, p + 1 + wire.CRC_SIZE)
        return True
