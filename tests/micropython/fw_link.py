# A command path that cannot wedge (issue 43, items 1, 2 and 7), with the real Device and FrameReader
# and a scripted board whose clock (ticks_ms) the test moves: every frame type, length and partial
# write has a defined outcome, the reader resynchronises on the next header, a partial frame older
# than wire.PARTIAL_TIMEOUT_MS of board time is dropped, a new host's resync preamble completes any half
# frame, the command work of one pass is bounded, and only bounded JSON scalars are echoed as ids.
# Every byte the device sends must be strict JSON (RFC 8259: MicroPython's json.loads takes `inf`
# and `007`, so a checker of its own). The reproductions of the issue first, then a seeded fuzz with a
# stream running; afterwards the loop answers a ping and the stream is exact.
# Runs on MicroPython (the unix port) and CPython. ARGS: [vectors dir (unused)] [fuzz rounds].
import array
import binascii
import json
import sys

try:
    ARGS
except NameError:
    ARGS = sys.argv[1:]
ROUNDS = int(ARGS[1]) if len(ARGS) > 1 else 1

from fwtest.host_bytes import HostBytes
from powerrig_fw import wire
from powerrig_fw.device import Device

CAL = "powerrig-cal.json"      # in the working directory: parallel runs do not share it
try:
    import os
    os.remove(CAL)
except OSError:
    pass

SPB = 250                      # samples per block (1 ms)


class FakeBoard(HostBytes):
    name = "fake"
    serial = "F1"
    cal_path = CAL
    burst_capacity = 2048

    def __init__(self):
        HostBytes.__init__(self)
        self.index = 1000
        self.ms = 5000             # board time (ms), moved by the test
        self.block = array.array("h", bytes(2 * 7 * SPB))
        for s in range(SPB):
            self.block[s * 7] = 26000 + s
            self.block[s * 7 + 1] = 4000 - s
            self.block[s * 7 + 2] = 21600
            self.block[s * 7 + 3] = 3900 + 2 * s
            self.block[s * 7 + 6] = 2
        self.pending = 0
        self.given = 0             # blocks handed to the device

    def ticks_ms(self):
        return self.ms

    def adc_read(self):
        if not self.pending:
            return None
        self.pending -= 1
        self.given += 1
        self.index += SPB
        self.adc_n = SPB
        self.adc_dropped = 0
        return self.block

    def adc_restart(self):
        return self.index

    def sample_index(self):
        return self.index


# ---- a strict JSON checker (RFC 8259) ------------------------------------------------------------
def _ws(t, i):
    while i < len(t) and t[i] in " \t\r\n":
        i += 1
    return i


def _string(t, i):
    i += 1
    while True:
        c = t[i]
        if c == '"':
            return i + 1
        if c == "\\":
            d = t[i + 1]
            if d == "u":
                int(t[i + 2:i + 6], 16)
                if len(t[i + 2:i + 6]) != 4:
                    raise ValueError("short \\u escape")
                i += 6
                continue
            if d not in '"\\/bfnrt':
                raise ValueError("bad escape \\%s" % d)
            i += 2
            continue
        if ord(c) < 0x20:
            raise ValueError("control character in a string")
        i += 1


def _digits(t, j):
    k = j
    while j < len(t) and "0" <= t[j] <= "9":
        j += 1
    if j == k:
        raise ValueError("digits expected at %d" % k)
    return j


def _number(t, i):
    j = i
    if t[j] == "-":
        j += 1
    if t[j] == "0":
        j += 1
    else:
        j = _digits(t, j)
    if j < len(t) and t[j] == ".":
        j = _digits(t, j + 1)
    if j < len(t) and t[j] in "eE":
        j += 1
        if t[j] in "+-":
            j += 1
        j = _digits(t, j)
    return j


def _value(t, i, depth):
    if depth > 40:
        raise ValueError("nested too deep")
    c = t[i]
    if c == "{" or c == "[":
        close = "}" if c == "{" else "]"
        i = _ws(t, i + 1)
        if t[i] == close:
            return i + 1
        while True:
            if c == "{":
                if t[i] != '"':
                    raise ValueError("key expected at %d" % i)
                i = _ws(t, _string(t, i))
                if t[i] != ":":
                    raise ValueError(": expected at %d" % i)
                i = _ws(t, i + 1)
            i = _ws(t, _value(t, i, depth + 1))
            if t[i] == ",":
                i = _ws(t, i + 1)
                continue
            if t[i] == close:
                return i + 1
            raise ValueError("%s expected at %d" % (close, i))
    if c == '"':
        return _string(t, i)
    for lit in ("true", "false", "null"):
        if t[i:i + len(lit)] == lit:
            return i + len(lit)
    return _number(t, i)


def strict_json(payload):
    """The payload as a JSON object, or raise: what the host's json.loads would refuse, refused."""
    t = payload.decode()
    try:
        i = _ws(t, _value(t, _ws(t, 0), 0))
    except IndexError:
        raise ValueError("JSON ends early: %r" % t[:200])
    except ValueError as e:
        raise ValueError("not JSON (%s): %r" % (e, t[:200]))
    if i != len(t):
        raise ValueError("not JSON (bytes after the value at %d): %r" % (i, t[:200]))
    doc = json.loads(t)
    assert isinstance(doc, dict), t
    return doc


# ---- the board ----------------------------------------------------------------------------------
def depth(x):
    """How deep lists and objects nest in x."""
    most = 0
    todo = [(x, 0)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (list, dict)):
            d += 1
            most = max(most, d)
            todo.extend((w, d) for w in (v.values() if isinstance(v, dict) else v))
    return most


class SmallStackJson:
    """json as the RP2040 has it: loads keeps its own stack, dumps recurses and the C stack ends
    after a few dozen levels (the issue's "recursion-depth notice"). The unix port's stack is deep."""
    loads = staticmethod(json.loads)

    @staticmethod
    def dumps(x):
        if depth(x) > 30:
            raise RuntimeError("maximum recursion depth exceeded")
        return json.dumps(x)


import powerrig_fw.device
powerrig_fw.device.json = SmallStackJson
board = FakeBoard()
dev = Device(board)


def poll():
    """One pass as Device.run makes it: an error in a pass is a NOTICE, and the loop goes on."""
    try:
        dev.poll()
    except Exception as e:  # noqa: BLE001
        dev.errors += 1
        dev.notice({"event": "error", "error": str(e) or e.__class__.__name__, "count": dev.errors})


# ---- the host side ------------------------------------------------------------------------------
host = wire.FrameReader()
data = []           # the payload of every DATA frame
seqs = []           # and its sequence


def passes(n=12):
    """Passes until the board has read everything sent, then n more with nothing new: what a pass
    leaves for the next is done by then (the bound per pass is smaller than n)."""
    for _ in range(400):
        if not board.inbox:
            break
        poll()
    for _ in range(n):
        poll()


def collect():
    """[(type, doc)] of the REPLY and NOTICE frames sent since the last call, each strict JSON."""
    got = []
    for b in board.sent:
        for t, seq, p in host.feed(b):
            if t == wire.T_REPLY or t == wire.T_NOTICE:
                got.append((t, strict_json(p)))
            elif t == wire.T_DATA:
                data.append(p)
                seqs.append(seq)
            else:
                assert t == wire.T_BURST, t
    board.sent = []
    return got


def replies(got):
    return [d for t, d in got if t == wire.T_REPLY]


def notices(got):
    return [d for t, d in got if t == wire.T_NOTICE]


def frame(ftype, payload, seq=0):
    return bytes(wire.encode_frame(ftype, payload, seq))


def command(doc):
    return frame(wire.T_COMMAND, json.dumps(doc).encode())


def ping(cid):
    """The host's clock ping byte for byte (the fast path)."""
    return frame(wire.T_COMMAND, ('{"id":%d,"cmd":"ping"}' % cid).encode())


def answered(got, cid):
    return [d for d in replies(got) if d.get("id") == cid]


def exchange(raw, n=12):
    board.inbox.append(raw)
    passes(n)
    return collect()


# ---- 1. a frame of type 0 ----------------------------------------------------------------------
TYPE0 = binascii.unhexlify("a55a01000000000000000000000000000000c4dad342")
assert TYPE0 == frame(0, b""), "the issue's frame is a valid type-0 frame"
# with 2.6 kB behind it in one write (more than the reader's buffer holds): the board answers again
got = exchange(TYPE0 + bytes(2600))
got += exchange(ping(101))
assert len(answered(got, 101)) == 1, ("the command path wedged after a type-0 frame", got)
refused = [d for d in notices(got) if d.get("event") == "refused"]
assert len(refused) == 1 and refused[0]["type"] == 0, got
# a type-0 frame and a ping in one write: the ping is answered without waiting for more bytes
board.inbox.append(TYPE0 + ping(102))
for _ in range(8):
    poll()
got = collect()
assert len(answered(got, 102)) == 1, ("a type-0 frame stopped the parser", got)

# ---- 2. a half-sent command left by a host that went away ------------------------------------------
stale = bytearray(wire.HEADER_SIZE)
wire.put_header(stale, wire.T_COMMAND, 0, 0, 2048, 9, 0, 0)
stale = bytes(stale) + b'{"id":'
# (a) the next host comes later than the timeout: its describe is answered
assert exchange(stale) == []
board.ms += wire.PARTIAL_TIMEOUT_MS + 1
got = exchange(command({"id": 201, "cmd": "describe"}))
assert len(answered(got, 201)) == 1 and answered(got, 201)[0]["ok"], ("a stale half frame locked the next host out", got)
assert dev.reader.timeouts >= 1
# (b) the next host comes at once: its open's resync preamble completes and rejects the half frame
assert exchange(stale) == []
got = exchange(bytes(wire.RESYNC_PREAMBLE) + command({"id": 202, "cmd": "describe"}))
assert len(answered(got, 202)) == 1 and answered(got, 202)[0]["ok"], ("the preamble did not resync", got)
# (c) the same half frame in the middle of the preamble's bytes, and a stale 1-byte sync
for junk in (b"\xa5", b"\xa5\x5a\x01", stale[:7], stale + bytes(100)):
    exchange(junk)
    got = exchange(bytes(wire.RESYNC_PREAMBLE) + ping(203))
    assert len(answered(got, 203)) == 1, (junk, got)
# the break: no COMMAND frame holds BREAK_ZEROS zero bytes in a row, so a partial frame that does is
# dropped at once; a whole command of the longest length, zero header fields and all, read 100 bytes
# at a time, is not
b0 = dev.reader.breaks
big = frame(wire.T_COMMAND, b'{"id":207,"cmd":"describe"}' + b" " * (wire.MAX_PAYLOAD - 27))
assert len(big) == wire.OVERHEAD + wire.MAX_PAYLOAD
for k in range(0, len(big), 100):
    board.inbox.append(big[k:k + 100])
got = exchange(b"")
assert len(answered(got, 207)) == 1 and dev.reader.breaks == b0, got
zeros = frame(4, bytes(wire.MAX_PAYLOAD))
exchange(zeros[:300])
got = exchange(ping(208))                    # (no board time passes)
assert len(answered(got, 208)) == 1 and dev.reader.breaks == b0 + 1, got
# a command split across two reads within the timeout is one command; beyond it, dropped and said
raw = command({"id": 204, "cmd": "status"})
exchange(raw[:11])
board.ms += wire.PARTIAL_TIMEOUT_MS // 2
got = exchange(raw[11:])
assert len(answered(got, 204)) == 1, got
t0 = dev.reader.timeouts
exchange(raw[:30])
board.ms += wire.PARTIAL_TIMEOUT_MS
got = exchange(raw[30:] + ping(205))
assert answered(got, 204) == [] and len(answered(got, 205)) == 1 and dev.reader.timeouts == t0 + 1, got
st = replies(exchange(command({"id": 206, "cmd": "status"})))[0]
assert st["reader"]["timeouts"] == dev.reader.timeouts and "refused" in st["reader"], st

# ---- 7. ids: only bounded JSON scalars are echoed ------------------------------------------------
for payload, want in (
        (b'{"id":' + b"[" * 100 + b"]" * 100 + b',"cmd":"ping"}', None),
        (b'{"id":' + b"[" * 1000 + b"]" * 1000 + b',"cmd":"ping"}', None),
        (b'{"id":1e999,"cmd":"ping"}', None),
        (b'{"id":-1e999,"cmd":"ping"}', None),
        (b'{"id":007,"cmd":"ping"}', "either"),        # not JSON: refused, or read as 7 by a lax parser
        (b'{"id":00,"cmd":"ping"}', "either"),
        (b'{"id":99999999999999999999,"cmd":"ping"}', None),
        (b'{"id":9007199254740993,"cmd":"ping"}', None),
        (b'{"id":9007199254740992,"cmd":"ping"}', 9007199254740992),
        (b'{"id":-9007199254740992,"cmd":"ping"}', -9007199254740992),
        (b'{"id":999999999999999,"cmd":"ping"}', 999999999999999),
        (b'{"id":0,"cmd":"ping"}', 0),
        (b'{"id":1.5,"cmd":"ping"}', None),
        (b'{"id":true,"cmd":"ping"}', None),
        (b'{"id":null,"cmd":"ping"}', "null"),
        (b'{"id":{"a":1},"cmd":"ping"}', None),
        (b'{"id":[],"cmd":"ping"}', None),
        (b'{"id":"x1","cmd":"ping"}', "x1"),
        (b'{"id":"' + b"i" * 65 + b'","cmd":"ping"}', None),
        (b'{"id":NaN,"cmd":"ping"}', None),
        (b'{"id":7,"cmd":"ping","echo":1e999}', 7),
        (b'{"id":8,"cmd":"ping","echo":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}', 8),
        (b'{"id":9,"cmd":"burst","trigger":"threshold","above_w":1e999}', 9),
        (b'{"id":10,"cmd":"ping","echo":"' + b"e" * 1980 + b'"}', 10)):
    got = exchange(frame(wire.T_COMMAND, payload) + ping(301))
    rs = replies(got)
    assert len(answered(got, 301)) == 1, ("the frames after it stalled", payload[:60], got)
    rs = [d for d in rs if d.get("id") != 301]
    assert len(rs) == 1, (payload[:60], got)
    if want == "either":
        assert rs[0]["id"] in (None, 7, 0), rs
    elif want == "null":                                # null is an id (echoed): the command runs
        assert rs[0]["id"] is None and rs[0]["ok"], rs
    else:
        assert rs[0]["id"] == want, (payload[:60], rs)
    if want is None:
        assert not rs[0]["ok"], rs
    if want in (7, 8, 9, 10):
        assert not rs[0]["ok"], rs

# ---- the command work of one pass is bounded -----------------------------------------------------
from powerrig_fw.device import FRAMES_PER_PASS
board.inbox.append(b"".join(command({"id": 400 + k, "cmd": "status"}) for k in range(12)))
poll()
first = replies(collect())
assert len(first) == 1, ("one JSON command per pass", len(first))
board.inbox.append(b"".join(ping(500 + k) for k in range(3 * FRAMES_PER_PASS)))
passes(0)
assert not board.inbox
for _ in range(40):
    poll()
got = collect()
assert sorted(d["id"] for d in replies(got)) == list(range(401, 412)) + list(range(500, 500 + 3 * FRAMES_PER_PASS)), got
board.inbox.append(b"".join(ping(600 + k) for k in range(3 * FRAMES_PER_PASS)))
poll()
assert len(replies(collect())) <= FRAMES_PER_PASS
passes()
collect()
print("link reproductions ok")


# ---- a seeded fuzz, with a stream running ----------------------------------------------------------
class Lcg:
    def __init__(self, seed):
        self.x = seed

    def next(self, n):
        self.x = (self.x * 1103515245 + 12345) & 0x7FFFFFFF
        return (self.x >> 8) % n

    def bytes(self, n):
        return bytes(self.next(256) for _ in range(n))


IDS = (b"0", b"1", b"-1", b"42", b"007", b"9007199254740992", b"9007199254740993", b"-9007199254740993",
       b"123456789012345678901234567890", b"1.5", b"-0.0", b"1e999", b"-1e999", b"1e-999", b"true", b"false",
       b"null", b'""', b'"x"', b'"' + b"y" * 64 + b'"', b'"' + b"z" * 65 + b'"', b'"\\u00e9\\n"', b"[]", b"{}",
       b"[1,2]", b'{"a":[1]}', b"[" * 600 + b"]" * 600, b"[" * 30 + b"1" + b"]" * 30, b"NaN", b"Infinity",
       b"", b"01", b"0x10", b'"unterminated')
CMDS = (b'"ping"', b'"status"', b'"describe"', b'"nope"', b"7", b"null", b'["ping"]')


def fuzz(seed):
    rng = Lcg(seed)
    r = replies(exchange(command({"id": 1, "cmd": "start", "interval_us": 1000, "rails": ["12V", "3V3"],
                                  "per_frame": 4})))
    assert r and r[0]["ok"], r
    del data[:]
    del seqs[:]
    board.given = 0
    expect = {}              # command id -> must be answered (a well-formed frame, type 2)
    next_ping = 10000
    cases = 0
    for ftype in range(256):
        for length in (0, 1, wire.MAX_PAYLOAD, wire.MAX_PAYLOAD + 1 + rng.next(60000)):
            cases += 1
            if ftype == wire.T_COMMAND and length and length <= wire.MAX_PAYLOAD:
                # a command: ids of every JSON shape, some commands, some not JSON at all
                cid = IDS[rng.next(len(IDS))]
                payload = b'{"id":' + cid + b',"cmd":' + CMDS[rng.next(len(CMDS))] + b"}"
                if length == 1:
                    payload = payload[:rng.next(len(payload) + 1)]
                elif length == wire.MAX_PAYLOAD:
                    payload += b" " * (wire.MAX_PAYLOAD - len(payload))
            elif length <= wire.MAX_PAYLOAD:
                payload = rng.bytes(length) if length < 64 else bytes(length)
            else:
                payload = None
            if payload is not None:
                raw = frame(ftype, payload, rng.next(65536))
            else:
                head = bytearray(wire.HEADER_SIZE)
                wire.put_header(head, ftype, 0, 0, length & 0xFFFF, rng.next(65536), 0, 0)
                raw = bytes(head) + rng.bytes(rng.next(40))
            how = rng.next(6)
            if how == 0 and payload is not None:           # a corrupt byte: costs that frame only
                k = 2 + rng.next(len(raw) - 2)
                raw = raw[:k] + bytes([raw[k] ^ (1 + rng.next(255))]) + raw[k + 1:]
            p = ping(next_ping)
            expect[next_ping] = 1
            next_ping += 1
            if how == 1 and payload is not None:           # a partial write, the rest within the timeout
                cut = 1 + rng.next(len(raw) - 1)
                board.pending += 1
                exchange(raw[:cut], 1)
                board.ms += rng.next(wire.PARTIAL_TIMEOUT_MS // 2)
                got = exchange(raw[cut:] + p)
            elif how == 2:                                  # an abandoned write: the host went away
                cut = 1 + rng.next(len(raw) - 1)
                exchange(raw[:cut], 1)
                board.pending += 2
                board.ms += wire.PARTIAL_TIMEOUT_MS + rng.next(50)
                if rng.next(2):
                    passes(2)
                got = exchange(p)
            elif how == 3:                                  # an abandoned write, then a new host's open
                cut = 1 + rng.next(len(raw) - 1)
                exchange(raw[:cut], 1)
                board.pending += 1
                got = exchange(bytes(wire.RESYNC_PREAMBLE) + p)
            else:                                           # in one write, read in random pieces
                board.pending += 1
                both = raw + p
                a = rng.next(len(both))
                b = a + rng.next(len(both) - a)
                for piece in (both[:a], both[a:b], both[b:]):
                    if piece:
                        board.inbox.append(piece)
                got = exchange(b"")
            for d in replies(got):
                expect.pop(d.get("id"), None)
            if expect and how == 0:
                # a corrupt length may claim bytes that never come: the ping waits for the timeout
                board.ms += wire.PARTIAL_TIMEOUT_MS + 1
                passes(2)
                for d in replies(collect()):
                    expect.pop(d.get("id"), None)
            missing = [k for k in expect if k >= 10000]
            assert not missing, ("no answer to the ping after", ftype, length, how, raw[:40], got)
    assert cases == 1024
    # afterwards: the loop answers a ping, and the stream is exact
    got = exchange(ping(99))
    assert len(answered(got, 99)) == 1, got
    got = exchange(command({"id": 98, "cmd": "stop"}))
    assert answered(got, 98)[0]["ok"], got
    st = replies(exchange(command({"id": 97, "cmd": "status"})))[0]
    assert st["overruns"] == 0 and st["lost_samples"] == 0 and st["errors"] == 0, st
    rec = wire.record_size(2)
    records = []
    for p in data:
        for k in range(0, len(p), rec):
            records.append(p[k:k + rec])
    assert len(records) == board.given and len(records) > 500, (len(records), board.given)
    assert all(x == records[1] for x in records[1:]), "a record differs: the stream was disturbed"
    assert all((seqs[k] + 1) & 0xFFFF == seqs[k + 1] for k in range(len(seqs) - 1)), "a DATA frame is missing"
    return cases, len(records)


for k in range(ROUNDS):
    n, recs = fuzz(11 + k)
print("fuzz ok", n, "cases x", ROUNDS, recs, "records")
print("ok")
