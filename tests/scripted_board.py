"""A board that sends exactly the frames a test scripts, at the serial boundary.

The simulator loses frames at random; the end of a timed stream needs losses at exact places (the
frames just before the end dropped, CRC-failed, behind a stall, or an overrun). ``ScriptedLink``
stands where ``SerialLink`` stands: the scripted frames are encoded as the firmware encodes them
and pass, as bytes, through the real host decoder.
"""
from __future__ import annotations

import queue
import threading
import time
from collections import deque

from powerrig.interposer import frames as wire
from powerrig.core.errors import LinkError
from powerrig.interposer.client import Interposer

RECORD_SIZE = 46          # 2 rails
PER_FRAME = 10
SPI = 250                 # 1 ms intervals of 4 us samples
FIRST = 1_000_000

DESCRIPTION = {
    "device": "powerrig-interposer", "firmware": "scripted", "protocol": 1, "board": "scripted",
    "serial": "SCRIPTED-1", "sample_period_us": 4, "peak_window_us": 100,
    "rails": [{"name": "12V", "index": 0, "v_lsb": 0.0004576721374475105, "i_lsb": 0.00030517578125, "optional": False},
              {"name": "3V3", "index": 1, "v_lsb": 0.000152587890625, "i_lsb": 3.0517578125e-05, "optional": False}],
    "digital": ["activity", "perst", "marker"],
    "interval_us": {"default": 1000, "min": 100, "max": 10000, "step": 4},
    "calibration": {"rails": {"12V": {"v_offset": 0, "i_offset": 0, "v_gain": 1.0, "i_gain": 1.0},
                              "3V3": {"v_offset": 0, "i_offset": 0, "v_gain": 1.0, "i_gain": 1.0}}},
    "state": "idle",
}
CONFIG = {"interval_us": 1000, "rails": ["12V", "3V3"], "per_frame": PER_FRAME, "record_size": RECORD_SIZE,
          "first_index": FIRST, "first_seq": 0}


def frame(k: int, index_shift_frames: int = 0, flags: int = 0) -> bytes:
    """Frame number k (seq k); its index is k frames after the first, plus a shift (an overrun)."""
    index = FIRST + (k + index_shift_frames) * PER_FRAME * SPI
    return wire.encode(wire.T_DATA, bytes(RECORD_SIZE * PER_FRAME), seq=k,
                       flags=flags | (wire.F_RESTART if k == 0 else 0), count=PER_FRAME, index=index)


def corrupt(b: bytes) -> bytes:
    """The same frame with one payload bit flipped: its CRC fails."""
    m = bytearray(b)
    m[30] ^= 0x10
    return bytes(m)


def lost_end(how: str, end_frame: int = 100, after: int = 50) -> list:
    """Frames 0..end_frame-1 cover the first end_frame/100 s; the last ones before the end are lost
    ``how``; then ``after`` more frames past the end. Items are bytes or a float (a pause, s)."""
    out: list = [frame(k) for k in range(end_frame - 3)]
    if how == "drop":
        pass
    elif how == "crc":
        out += [corrupt(frame(k)) for k in range(end_frame - 3, end_frame)]
    elif how in ("stall", "overrun"):
        if how == "stall":
            out.append(0.6)                       # shorter than the stall limit: a gap, not an error
        shift = 40                                # the device lost 40 frames' worth of samples
        return out + [frame(k, shift, wire.F_OVERRUN if k == end_frame - 3 else 0)
                      for k in range(end_frame - 3, end_frame - 3 + after)]
    else:
        raise ValueError(how)
    return out + [frame(k) for k in range(end_frame, end_frame + after)]


class ScriptedLink:
    """What ``SerialLink`` offers a Stream, fed from a script instead of a port."""

    def __init__(self, script: list):
        self.port = "scripted"
        self.decoder = wire.FrameDecoder()
        self.data: queue.Queue = queue.Queue()
        self.bursts: queue.Queue = queue.Queue()
        self.notices: deque = deque(maxlen=16)
        self.error = None
        self.script = script
        self.stops = 0
        self._thread: threading.Thread | None = None

    def _feed(self) -> None:
        time.sleep(0.1)                           # after the reply to start, as a board sends
        for item in self.script:
            if isinstance(item, float):
                time.sleep(item)
                continue
            for f in self.decoder.feed(item, time.time()):
                self.data.put(f)

    def command(self, cmd: str, timeout: float = 2.0, **args) -> dict:
        if cmd == "describe":
            return dict(DESCRIPTION, ok=True)
        if cmd == "start":
            self._thread = threading.Thread(target=self._feed, daemon=True)
            self._thread.start()
            return dict(CONFIG, ok=True)
        if cmd == "stop":
            self.stops += 1
            return {"ok": True}
        raise LinkError(f"the scripted board does not answer {cmd!r}")

    def close(self) -> None:
        pass


def scripted_interposer(script: list) -> Interposer:
    return Interposer(ScriptedLink(script), dict(DESCRIPTION), ping_interval=3600, burst_s=0)


class PtyBoard:
    """A device on a real pty that answers each command frame with ``reply(cmd) -> payload bytes``
    (a reply frame carrying the command's id as seq): for replies no real firmware should send."""

    def __init__(self, reply):
        import os

        self.reply = reply
        self.master, self.slave = os.openpty()
        self.port = os.ttyname(self.slave)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import json
        import os
        import select

        dec = wire.FrameDecoder()
        while not self._stop.is_set():
            r, _, _ = select.select([self.master], [], [], 0.05)
            if not r:
                continue
            try:
                data = os.read(self.master, 4096)
            except OSError:
                return
            for f in dec.feed(data):
                if f.type == wire.T_COMMAND:
                    cmd = json.loads(f.payload)
                    os.write(self.master, wire.encode(wire.T_REPLY, self.reply(cmd), seq=f.seq))

    def close(self) -> None:
        import os

        self._stop.set()
        self._thread.join()
        os.close(self.master)
        os.close(self.slave)
