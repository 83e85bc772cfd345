"""Raw frames on an interposer's port, for the command-path fuzz on the emulated RP2040
(tests/test_rp2_emulator.py; issue 43, items 1, 2 and 7; docs/protocol.md, "Resynchronisation", "Ids").

``fuzz(port, emulated_s)`` writes, with a seeded sample of cases: the issue's two reproductions (a
frame of type 0 with 2.6 kB behind it in one write; a header claiming 2,048 bytes left by a host that
went away, then a new host's resync preamble), frame types with lengths 0, 1, the maximum and over
it, a command frame over the maximum, a command cut across two writes, a write abandoned for two
timeouts of the board's time, and ids of every JSON shape that is not echoed; each followed by a
ping that must be answered. Every reply and notice must be strict JSON. The exhaustive fuzz (every
type 0-255, every length class, a thousand cases, a stream running) runs on MicroPython's unix port
with the same firmware logic: tests/micropython/fw_link.py.
"""
from __future__ import annotations

import json
import random
import time

import serial

from powerrig.interposer import frames as wire

fw = wire.fw
WAIT_S = 900                 # wall seconds for an answer (the emulated board runs at 0.3-10 % of real time)
IDS = (b"1e999", b"007", b"9007199254740993", b"1.5", b"true", b"[]", b'{"a":[1]}', b"[" * 200 + b"]" * 200,
       b'"' + b"z" * 65 + b'"', b"NaN")


def strict(payload: bytes) -> dict:
    """JSON as RFC 8259 has it: no NaN, Infinity or inf, no 007 (Python's json.loads takes NaN)."""
    def refuse(c):
        raise ValueError(f"not JSON: {c}")
    doc = json.loads(payload.decode("utf-8"), parse_constant=refuse)
    assert isinstance(doc, dict), payload
    return doc


class RawHost:
    """The host's bytes as written, the board's frames as decoded (replies and notices strict JSON)."""

    def __init__(self, port: str):
        self.ser = serial.Serial(port, baudrate=2_000_000, timeout=0.05)
        self.dec = wire.FrameDecoder(max_wait_s=1e9)
        self.replies: dict = {}
        self.notices: list[dict] = []

    def write(self, b: bytes) -> None:
        self.ser.write(b)
        self.ser.flush()

    def pump(self) -> None:
        for f in self.dec.feed(self.ser.read(max(1, self.ser.in_waiting))):
            if f.type == wire.T_REPLY:
                d = strict(f.payload)
                self.replies.setdefault(json.dumps(d.get("id")), []).append(d)
            elif f.type == wire.T_NOTICE:
                self.notices.append(strict(f.payload))

    def answer(self, *cids, timeout: float = WAIT_S) -> dict:
        """The reply to the first of ``cids`` answered (one id, or the ids a reply may carry)."""
        keys = [json.dumps(c) for c in cids]
        end = time.monotonic() + timeout
        while True:
            for key in keys:
                if key in self.replies:
                    box = self.replies[key]
                    d = box.pop(0)
                    if not box:
                        del self.replies[key]
                    return d
            assert time.monotonic() < end, f"no reply to id {cids!r} ({self.replies}, notices {self.notices[-3:]})"
            self.pump()

    def command(self, doc: dict) -> dict:
        self.write(wire.encode_command(doc))
        return self.answer(doc.get("id"))

    def close(self) -> None:
        self.ser.close()


def frame(ftype: int, payload: bytes, seq: int = 0) -> bytes:
    return wire.encode(ftype, payload, seq)


def ping(cid: int) -> bytes:
    return frame(wire.T_COMMAND, b'{"id":%d,"cmd":"ping"}' % cid)


def header(ftype: int, length: int, seq: int = 0) -> bytes:
    head = bytearray(fw.HEADER_SIZE)
    fw.put_header(head, ftype, 0, 0, length & 0xFFFF, seq, 0, 0)
    return bytes(head)


def fuzz(port: str, emulated_s, seed: int = 43) -> dict:
    """The cases above on ``port``; ``emulated_s()`` gives the board's time (s). The board's status
    afterwards, with the counts of what was sent ("sent")."""
    rng = random.Random(seed)
    host = RawHost(port)
    refused = 0
    try:
        host.write(bytes(fw.RESYNC_PREAMBLE))
        assert host.command({"id": 1, "cmd": "status"})["ok"]
        # 1. a frame of type 0 and 2.6 kB in one write: refused, and the next ping answered
        host.write(frame(0, b"") + bytes(2600))
        refused += 1
        host.write(ping(10))
        host.answer(10)
        # 2. a stale header claiming 2,048 bytes, then a new host's preamble: its command is answered
        stale = header(wire.T_COMMAND, 2048, 9) + b'{"id":'
        host.write(stale)
        host.write(bytes(fw.RESYNC_PREAMBLE) + wire.encode_command({"id": 11, "cmd": "status"}))
        assert host.answer(11)["ok"]
        # frame types (a seeded sample) with lengths 0, 1 and over the maximum, one of the maximum
        types = sorted({0, 1, 3, 4, 5, 255, rng.randrange(6, 255)})
        cid = 100
        for t in types:
            for n in (0, 1):
                host.write(frame(t, bytes(rng.randrange(256) for _ in range(n)), rng.randrange(65536)) + ping(cid))
                refused += 1
                cid += 1
            host.write(header(t, fw.MAX_PAYLOAD + 1 + rng.randrange(60000)) + ping(cid))
            cid += 1
        host.write(frame(rng.choice(types), bytes(rng.randrange(1, 256) for _ in range(fw.MAX_PAYLOAD))) + ping(cid))
        refused += 1
        cid += 1
        host.write(header(wire.T_COMMAND, 3000, 77) + ping(cid))       # a command over the maximum
        cid += 1
        for k in range(100, cid):
            host.answer(k)
        big = host.answer(None)
        assert not big["ok"] and big["seq"] == 77 and "exceeds" in big["error"], big
        # a command cut across two writes is one command
        raw = wire.encode_command({"id": 20, "cmd": "status"})
        host.write(raw[:9])
        time.sleep(0.05)
        host.write(raw[9:])
        assert host.answer(20)["ok"]
        # a write abandoned for two timeouts of the board's time: dropped, the next ping answered
        t0 = emulated_s()
        host.write(stale)
        while emulated_s() < t0 + 2 * fw.PARTIAL_TIMEOUT_MS / 1000:
            host.pump()
            time.sleep(0.1)
        host.write(ping(23))
        host.answer(23)
        # ids that are not echoed: answered with id null, the frame after them answered
        for k, shape in enumerate(IDS):
            host.write(frame(wire.T_COMMAND, b'{"id":' + shape + b',"cmd":"ping"}') + ping(30 + k))
            host.answer(30 + k)
            if shape == b"007":                 # not JSON: refused, or read as 7 by a lax parser
                host.answer(None, 7)
                continue
            r = host.answer(None)
            assert not r["ok"], (shape, r)
        # afterwards: the loop answers a ping and says what it refused and dropped
        host.write(ping(90))
        host.answer(90)
        st = host.command({"id": 92, "cmd": "status"})
        got = [n for n in host.notices if n.get("event") == "refused"]
        assert len(got) == st["reader"]["refused"] == refused and st["errors"] == 0, (refused, got, st)
        assert st["reader"]["timeouts"] >= 1 and st["reader"]["breaks"] >= 1, st
        assert not host.replies, host.replies
        st["sent"] = {"refused": refused, "pings": cid - 100 + len(IDS) + 4}
        return st
    finally:
        host.close()
