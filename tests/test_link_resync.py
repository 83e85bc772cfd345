"""A new host never inherits a half frame (issue 43, items 1 and 2): the host's open sends the resync
preamble before its first command, and the virtual interposer (the real firmware logic on a pty)
answers a new host after a crashed one left a stale header or a frame of type 0 with 2.6 kB behind it.
The firmware's side, every frame type and length, partial and abandoned writes, timed in board time:
tests/micropython/fw_link.py (docs/protocol.md, "Resynchronisation").
"""
from __future__ import annotations

import binascii
import time

import serial

from powerrig.interposer import frames as wire
from powerrig.interposer.client import Interposer
from powerrig.interposer.serial_link import SerialLink

TYPE0 = binascii.unhexlify("a55a01000000000000000000000000000000c4dad342")


class RecordingSerial:
    """A port that records what is written and never has anything to read."""

    def __init__(self):
        self.written: list[bytes] = []
        self.in_waiting = 0

    def write(self, data):
        self.written.append(bytes(data))
        return len(data)

    def read(self, n):
        time.sleep(0.01)
        return b""

    def cancel_read(self):
        pass

    def close(self):
        pass


def test_open_sends_the_resync_preamble_before_anything_else():
    ser = RecordingSerial()
    link = SerialLink("fake", ser=ser)
    try:
        assert ser.written and ser.written[0] == bytes(wire.fw.RESYNC_PREAMBLE), ser.written[:1]
        # a break (no COMMAND frame holds it) with room to complete a header cut short
        assert wire.fw.RESYNC_PREAMBLE >= wire.fw.BREAK_ZEROS + wire.fw.HEADER_SIZE
        assert bytes(wire.fw.BREAK_ZEROS) in bytes(wire.fw.RESYNC_PREAMBLE)
    finally:
        link.close()
    quiet = RecordingSerial()
    SerialLink("fake", ser=quiet, resync=False).close()
    assert quiet.written == []


def test_a_slow_device_s_half_frame_waits_its_stretched_quiet():
    """A half frame is given up after 1 s of quiet in device time: on an emulated board at 1/20 of real
    time (time_scale 20) a frame whose rest comes 1.5 host seconds later is kept, not dropped as stale."""
    link = SerialLink("fake", ser=RecordingSerial(), resync=False)
    try:
        frame = wire.encode(wire.T_NOTICE, b'{"event": "x"}', seq=7)
        cut = wire.fw.HEADER_SIZE + 2                               # its header and two bytes of payload
        for scale, kept in ((1.0, False), (20.0, True)):
            link.time_scale = scale
            assert link.decoder.max_wait_s == 1.0 * scale
            dec = wire.FrameDecoder(max_wait_s=link.decoder.max_wait_s)   # (one the link's reader does not feed)
            before = dec.stale_headers
            t0 = 1000.0
            assert dec.feed(frame[:cut], t0) == []
            dec.feed(b"", t0 + 1.5)                     # 1.5 host seconds of quiet
            got = dec.feed(frame[cut:], t0 + 1.6)
            assert (dec.stale_headers == before) == kept and (len(got) == 1) == kept, (scale, got)
    finally:
        link.close()


def _crashed_host(port: str, data: bytes) -> None:
    """A host that wrote ``data`` and went away."""
    with serial.Serial(port, baudrate=2_000_000, timeout=0.1) as s:
        s.write(data)
        s.flush()


def test_a_new_host_is_answered_after_a_crashed_one(sim):
    s = sim()
    stale = bytearray(wire.fw.HEADER_SIZE)
    wire.fw.put_header(stale, wire.T_COMMAND, 0, 0, 2048, 9, 0, 0)
    # a half-sent command claiming 2,048 bytes: the next host's describe is answered at once
    _crashed_host(s.port, bytes(stale) + b'{"id":')
    with Interposer.open(s.port, timeout=5.0) as dev:
        assert dev.describe()["device"] == "powerrig-interposer"
        dev.link.command("start", interval_us=1000, timeout=5.0)
    # a frame of type 0 with 2.6 kB behind it in one write, while the board streams: refused, and
    # the next host pings and stops the stream
    _crashed_host(s.port, TYPE0 + bytes(2600))
    with Interposer.open(s.port, timeout=5.0) as dev:
        dev.ping()
        st = dev.status()
        assert st["state"] == "idle" and st["reader"]["refused"] >= 1, st      # (open stopped the stream)
        assert st["errors"] == 0, st
