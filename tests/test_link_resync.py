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
