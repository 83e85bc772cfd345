"""Serial transport: one reader thread turns bytes into frames and routes them.

DATA and BURST frames go to a queue for the stream; REPLY frames wake the caller waiting on that
command id; NOTICE frames go to their own queue. Every frame is stamped with the host UTC at which
its last bytes were read, which is what the clock fit needs for ping replies.
"""
from __future__ import annotations

import itertools
from collections import deque
import json
import os
import queue
import threading
import time

import serial

from powerrig import wire
from powerrig.errors import DeviceError, LinkError


def open_serial(port: str, timeout: float = 0.02) -> serial.Serial:
    """Open a port (or a pyserial URL such as socket://host:port) with a message that says what to do."""
    if not port:
        raise LinkError("no port given; pass --port (list interposers with `powerrig devices`)")
    is_url = "://" in port
    if not is_url and not os.path.exists(port) and not port.startswith("COM"):
        raise LinkError(f"port {port} does not exist; list interposers with `powerrig devices`")
    try:
        if is_url:
            return serial.serial_for_url(port, baudrate=2_000_000, timeout=timeout)
        return serial.Serial(port, baudrate=2_000_000, timeout=timeout, exclusive=True)
    except (serial.SerialException, OSError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        raise LinkError(f"cannot open {port}: {msg}; is another program using it?") from None


class SerialLink:
    def __init__(self, port: str, ser: serial.Serial | None = None):
        self.port = port
        self.ser = ser or open_serial(port)
        self.decoder = wire.FrameDecoder()
        self.data: queue.Queue[wire.Frame | None] = queue.Queue()     # DATA frames, for the stream
        self.bursts: queue.Queue[wire.Frame | None] = queue.Queue()   # BURST frames, for burst()
        self.notices: deque[dict] = deque(maxlen=256)   # unsolicited device messages, newest last
        self.bytes_in = 0
        self.last_rx = time.time()
        self.error: str | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, list]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read_loop, name=f"powerrig-link-{port}", daemon=True)
        self._thread.start()

    # ---- reader ----------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        ser = self.ser
        try:
            while not self._stop.is_set():
                data = ser.read(max(1, min(ser.in_waiting, 1 << 16)))
                if not data:
                    continue
                now = time.time()
                self.last_rx = now
                self.bytes_in += len(data)
                for f in self.decoder.feed(data, now):
                    self._route(f)
        except (serial.SerialException, OSError, TypeError) as e:
            if not self._stop.is_set():
                self.error = f"lost the serial port {self.port}: {str(e).splitlines()[0] if str(e) else e}"
        except Exception as e:  # noqa: BLE001 - a bug here must still end the stream with a message
            self.error = f"link reader failed on {self.port}: {e.__class__.__name__}: {e}"
        finally:
            self.data.put(None)
            self.bursts.put(None)
            with self._lock:
                for ev, _box in self._waiting.values():
                    ev.set()

    def _route(self, f: wire.Frame) -> None:
        if f.type == wire.T_DATA:
            self.data.put(f)
        elif f.type == wire.T_BURST:
            self.bursts.put(f)
        elif f.type == wire.T_REPLY:
            try:
                doc = json.loads(f.payload)
            except ValueError:
                return
            doc["_index"] = f.index
            doc["_t_recv"] = f.t_host
            with self._lock:
                w = self._waiting.get(doc.get("id"))
            if w:
                w[1].append(doc)
                w[0].set()
        elif f.type == wire.T_NOTICE:
            try:
                self.notices.append(json.loads(f.payload))
            except ValueError:
                pass

    # ---- commands -----------------------------------------------------------------------------------
    def command(self, cmd: str, timeout: float = 2.0, **args) -> dict:
        """Send a command and wait for its reply. Raises LinkError on timeout, DeviceError on refusal."""
        cid = next(self._ids)
        ev, box = threading.Event(), []
        with self._lock:
            self._waiting[cid] = (ev, box)
        doc = {"id": cid, "cmd": cmd, **args}
        try:
            try:
                frame = wire.encode_command(doc, cid)
            except (TypeError, ValueError) as e:
                raise LinkError(f"cannot send '{cmd}': {e}") from None
            if self.error:
                raise LinkError(self.error)
            t_send = time.time()
            self.write(frame)
            if not ev.wait(timeout) or not box:
                if self.error:
                    raise LinkError(self.error)
                raise LinkError(f"no reply to '{cmd}' from {self.port} within {timeout:g} s "
                                f"({self.bytes_in} bytes received, {self.decoder.frames} frames); "
                                "is this an interposer? list them with `powerrig devices`")
        finally:
            with self._lock:
                self._waiting.pop(cid, None)
        reply = box[0]
        reply["_t_send"] = t_send
        if not reply.get("ok"):
            raise DeviceError(f"interposer refused '{cmd}': {reply.get('error', 'no reason given')}")
        return reply

    def write(self, data: bytes) -> None:
        with self._write_lock:
            try:
                self.ser.write(data)
            except (serial.SerialException, OSError) as e:
                raise LinkError(f"cannot write to {self.port}: {e}") from None

    def close(self) -> None:
        self._stop.set()
        try:
            self.ser.cancel_read()
        except Exception:  # noqa: BLE001 - not every port type supports it
            pass
        self._thread.join(timeout=1.0)
        try:
            self.ser.close()
        except Exception:  # noqa: BLE001
            pass
