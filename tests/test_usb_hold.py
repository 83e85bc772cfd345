"""What a real board's USB holds while the host does not read, and a reader that paces within it.

The virtual rig's USB is the board's (firmware device.USB_QUEUE_BYTES: a frame that does not fit the
board's queue is dropped whole and counted in status "link") behind a port that holds what Linux
holds for a USB CDC port (serial_link.HOST_HOLD_BYTES: n_tty's buffer until it throttles, then the
read URBs in flight). Its queue used to hold 4 MB and the pty 20 KB: a reader paced at 100 ms passed
here and would have lost most of a 100 us stream on a board (docs/scale.md, "The tenth pass").
"""
from __future__ import annotations

import json
import math
import os
import pty
import time

import serial

from powerrig.interposer import frames as wire
from powerrig.interposer.serial_link import (BATCH_S, HOST_HOLD_BYTES, PACE_SHARE, USB_FULL_SPEED_BPS,
                                             SerialLink)
from powerrig_fw.device import USB_QUEUE_BYTES

INTERVAL_US = 100


def _read_for(ser: serial.Serial, dec: wire.FrameDecoder, seconds: float) -> list[wire.Frame]:
    """The frames of ``seconds`` of prompt reading (every 2 ms: a host that keeps up)."""
    out: list[wire.Frame] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        data = ser.read(1 << 16)
        if data:
            out += dec.feed(data, time.time())
        else:
            time.sleep(0.002)
    return out


def _reply(frames: list[wire.Frame], cid: int) -> dict | None:
    for f in frames:
        if f.type == wire.T_REPLY:
            doc = json.loads(bytes(f.payload))
            if doc.get("id") == cid:
                return doc
    return None


def _seq_runs(frames: list[wire.Frame]) -> list[list[wire.Frame]]:
    """DATA frames split where their sequence numbers jump (the frames a board dropped)."""
    runs: list[list[wire.Frame]] = []
    for f in frames:
        if f.type != wire.T_DATA:
            continue
        if runs and f.seq == (runs[-1][-1].seq + 1) & 0xFFFF:
            runs[-1].append(f)
        else:
            runs.append([f])
    return runs


def test_a_host_that_stops_reading_loses_what_the_board_cannot_hold(sim):
    """A 100 us stream read promptly loses nothing; after 0.5 s of no reads, the frames that come first
    are at most what the port and the board's queue hold, the rest were dropped by the board, and the
    board's count of them (status link.dropped_frames) is the host's count of the missing sequence
    numbers. Then the stream goes on whole."""
    s = sim()
    ser = serial.Serial(s.port, timeout=0)
    try:
        ser.write(bytes(wire.fw.RESYNC_PREAMBLE))
        ser.write(wire.encode_command({"id": 1, "cmd": "start", "interval_us": INTERVAL_US}, 1))
        dec = wire.FrameDecoder()
        before = _read_for(ser, dec, 1.0)
        start = _reply(before, 1)
        assert start is not None and start["ok"], start
        assert len(_seq_runs(before)) == 1, "a host reading every 2 ms lost frames"
        frame_bytes = wire.HEADER.size + 4 + start["per_frame"] * start["record_size"]
        last = _seq_runs(before)[-1][-1].seq
        time.sleep(0.5)                                   # the host stops reading
        after = _read_for(ser, dec, 1.0)
        ser.write(wire.encode_command({"id": 2, "cmd": "status"}, 2))
        after += _read_for(ser, dec, 0.3)
        status = _reply(after, 2)
        ser.write(wire.encode_command({"id": 3, "cmd": "stop"}, 3))
    finally:
        ser.close()
    runs = _seq_runs(after)
    assert runs[0][0].seq == (last + 1) & 0xFFFF, "frames read before the pause came again or went missing"
    assert len(runs) == 2, [(r[0].seq, len(r)) for r in runs]       # one gap: the pause, then whole again
    held = len(runs[0]) * frame_bytes
    # what the port and the board held through the pause (12,276 bytes, 6 frames, measured): the board's
    # queue and the host's hold, to within what the pty's own buffer may keep besides (below a frame); a
    # bare pty held 22.5 KB with the same queue
    assert USB_QUEUE_BYTES <= held <= HOST_HOLD_BYTES + USB_QUEUE_BYTES + frame_bytes, (held, len(runs[0]))
    missing = (runs[1][0].seq - runs[0][-1].seq - 1) & 0xFFFF
    per_s = 1e6 / INTERVAL_US / start["per_frame"]
    assert missing >= 0.5 * per_s * 0.5, (missing, per_s)        # most of the pause's frames
    assert status is not None and status["link"]["dropped_frames"] == missing, (status, missing)


def test_the_reader_paces_for_what_the_host_holds():
    """The wait between a stream's reads holds no more than the host holds for the port (13 ms of the
    100 us stream), PACE_SHARE of it so a late read's backlog is paid back; BATCH_S for a slow one; a rate told (expect_rate: a stream's, a burst's, each its
    own) counts in device seconds, a rate measured at once when it rises (never above what a USB
    full-speed endpoint moves) and over RATE_HOLD_S when it falls."""
    master, slave = pty.openpty()
    link = SerialLink(os.ttyname(slave), resync=False)
    try:
        assert link.pace_s() == BATCH_S                               # nothing flows yet
        link.expect_rate(465_000)
        assert math.isclose(link.pace_s(), PACE_SHARE * HOST_HOLD_BYTES / 465_000)
        assert 0.008 < link.pace_s() < HOST_HOLD_BYTES / 465_000 < 0.015
        link.expect_rate(30_000)                                      # a slow stream: 200 ms would fit
        assert link.pace_s() == BATCH_S
        link.expect_rate(500_000, "burst")                            # a burst may take the link budget
        assert math.isclose(link.pace_s(), PACE_SHARE * HOST_HOLD_BYTES / 500_000)
        link.expect_rate(0)                                           # the stream stops during the burst
        assert math.isclose(link.pace_s(), PACE_SHARE * HOST_HOLD_BYTES / 500_000)
        link.expect_rate(0, "burst")
        assert link.pace_s() == BATCH_S
        link.expect_rate(465_000)
        link.time_scale = 100.0                                       # an emulated board at 1 % of real time
        assert link.pace_s() == BATCH_S
        link.time_scale = 1.0
        link.expect_rate(0)
        link._rate_bytes, link._rate_t = 0, time.monotonic() - 0.1    # 46.5 KB came in the last 100 ms
        link._measure(46_500)
        assert 400_000 < link.rate_bps < 480_000
        assert math.isclose(link.pace_s(), PACE_SHARE * HOST_HOLD_BYTES / link.rate_bps)
        rate = link.rate_bps
        link._rate_t = time.monotonic() - 2.0                         # then nothing for 2 s: it decays
        link._measure(0)
        assert 0.3 * rate < link.rate_bps < 0.4 * rate
        link._rate_t = time.monotonic() - 0.005                       # a backlog read at once
        link._measure(100_000)
        assert link.rate_bps == USB_FULL_SPEED_BPS
    finally:
        link.close()
        os.close(master)
        os.close(slave)
