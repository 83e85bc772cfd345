"""The interposer behind an RFC 2217 server (ser2net, a labgrid exporter): pyserial's client, fast.

pyserial's ``rfc2217://`` client parses the Telnet stream one byte at a time and queues every byte
on its own: about 35 kB/s on a loaded host, while the interposer streams ~0.5 MB/s at the 100 us
interval, so its ring overran. This subclass keeps pyserial's negotiation and control (baud rate,
purge, modem lines) and changes only the data path: runs of data between Telnet IAC bytes are
copied whole into one byte buffer. The URL and its options are pyserial's
(``rfc2217://host:port?ign_set_control&timeout=5``).
"""
from __future__ import annotations

import logging
import re
import socket
import threading
import time
import urllib.parse

import serial
from serial import rfc2217 as _r
from powerrig.core.errors import LinkError

logger = logging.getLogger(__name__)

# pyserial's rfc2217:// options (serial/rfc2217.py from_url) and whether each takes a value
URL_OPTIONS = {"ign_set_control": False, "poll_modem": False, "timeout": True, "logging": True}
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")


def check_url(url: str) -> str:
    """``rfc2217://host:port[?option[&option=value]]`` with pyserial's options only (``ign_set_control``
    for ser2net, ``poll_modem``, ``timeout=S``, ``logging=LEVEL``); a bad one is a one-line LinkError
    saying how to write it, before any connection. Returns the URL unchanged."""
    how = "write rfc2217://host:port, with ?ign_set_control for ser2net"
    parts = urllib.parse.urlsplit(url)
    hostport = parts.netloc
    host, _, port = hostport.rpartition(":")
    if (parts.scheme != "rfc2217" or parts.path not in ("", "/") or parts.fragment
            or not _HOST.fullmatch(host) or not port.isdigit() or not 0 < int(port) < 65536):
        raise LinkError(f"{url!r} is not an RFC2217 URL ({how})")
    for item in filter(None, parts.query.split("&")):
        name, eq, value = item.partition("=")
        if name not in URL_OPTIONS:
            raise LinkError(f"{url!r}: unknown option {name!r} (pyserial's are {', '.join(URL_OPTIONS)}; {how})")
        if URL_OPTIONS[name] and not value:
            raise LinkError(f"{url!r}: option {name!r} needs a value ({name}=...)")
        if name == "timeout":
            try:
                if not float(value) > 0:
                    raise ValueError
            except ValueError:
                raise LinkError(f"{url!r}: timeout={value!r} is not a number of seconds > 0") from None
        if name == "logging" and value not in ("debug", "info", "warning", "error"):
            raise LinkError(f"{url!r}: logging={value!r} is not debug, info, warning or error")
    return url


class _ByteBuffer:
    """Received data: appended in runs by the reader thread, taken in any size by read()."""

    def __init__(self):
        self._buf = bytearray()
        self._cv = threading.Condition()
        self.ended = False

    def put(self, chunk: bytes | None) -> None:
        """Append data; None marks the connection's end."""
        with self._cv:
            if chunk is None:
                self.ended = True
            else:
                self._buf += chunk
            self._cv.notify_all()

    def qsize(self) -> int:
        return len(self._buf)

    def take(self, size: int, timeout: float | None) -> bytes:
        with self._cv:
            if not self._buf and not self.ended:
                self._cv.wait_for(lambda: self._buf or self.ended, timeout)
            out = bytes(self._buf[:size])
            del self._buf[:size]
            return out

    def clear(self) -> None:
        with self._cv:
            self._buf.clear()


class FastRfc2217(_r.Serial):
    """pyserial's RFC 2217 client with a data path that keeps up with a streaming interposer."""

    @property
    def _read_buffer(self):
        return self.__dict__.get("_bytes")

    @_read_buffer.setter
    def _read_buffer(self, value) -> None:
        # pyserial's open() installs a Queue here; a byte buffer takes its place
        self.__dict__["_bytes"] = None if value is None else _ByteBuffer()

    @property
    def in_waiting(self) -> int:
        if not self.is_open:
            raise serial.PortNotOpenError()
        return self._read_buffer.qsize()

    def read(self, size: int = 1) -> bytes:
        if not self.is_open:
            raise serial.PortNotOpenError()
        buf = self._read_buffer
        data = bytearray()
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while len(data) < size:
            if (self._thread is None or not self._thread.is_alive()) and not buf.qsize():
                if data:
                    break
                raise serial.SerialException("connection failed (reader thread died)")
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            chunk = buf.take(size - len(data), left)
            data += chunk
            if not chunk and (buf.ended or (deadline is not None and time.monotonic() >= deadline)):
                break
        return bytes(data)

    def reset_input_buffer(self) -> None:
        if not self.is_open:
            raise serial.PortNotOpenError()
        self.rfc2217_send_purge(_r.PURGE_RECEIVE_BUFFER)
        self._read_buffer.clear()

    def _telnet_read_loop(self) -> None:
        """pyserial's state machine, with runs of plain data (no IAC) copied in one step."""
        IAC, SB, SE = _r.IAC, _r.SB, _r.SE
        mode = _r.M_NORMAL
        suboption = None
        command = None
        try:
            while self.is_open:
                try:
                    data = self._socket.recv(1 << 16)
                except socket.timeout:
                    continue
                except OSError as e:
                    logger.debug("rfc2217 reader on %s: %s", self.portstr, e)
                    self._read_buffer.put(None)
                    break
                if not data:
                    self._read_buffer.put(None)
                    break
                i, n = 0, len(data)
                while i < n:
                    if mode == _r.M_NORMAL and suboption is None:
                        j = data.find(IAC, i)
                        if j < 0:
                            self._read_buffer.put(data[i:])
                            break
                        if j > i:
                            self._read_buffer.put(data[i:j])
                        mode, i = _r.M_IAC_SEEN, j + 1
                        continue
                    byte = data[i:i + 1]
                    i += 1
                    if mode == _r.M_NORMAL:            # inside a suboption
                        if byte == IAC:
                            mode = _r.M_IAC_SEEN
                        else:
                            suboption += byte
                    elif mode == _r.M_IAC_SEEN:
                        if byte == IAC:                # doubled IAC: the data byte 0xFF
                            if suboption is not None:
                                suboption += IAC
                            else:
                                self._read_buffer.put(IAC)
                            mode = _r.M_NORMAL
                        elif byte == SB:
                            suboption = bytearray()
                            mode = _r.M_NORMAL
                        elif byte == SE:
                            self._telnet_process_subnegotiation(bytes(suboption or b""))
                            suboption = None
                            mode = _r.M_NORMAL
                        elif byte in (_r.DO, _r.DONT, _r.WILL, _r.WONT):
                            command = byte
                            mode = _r.M_NEGOTIATE
                        else:
                            self._telnet_process_command(byte)
                            mode = _r.M_NORMAL
                    else:                              # M_NEGOTIATE: the option after DO/DONT/WILL/WONT
                        self._telnet_negotiate_option(command, byte)
                        mode = _r.M_NORMAL
        finally:
            logger.debug("rfc2217 reader on %s ended", self.portstr)


def open_rfc2217(url: str, baudrate: int, timeout: float) -> FastRfc2217:
    """Open ``rfc2217://host:port[?options]`` the way serial_for_url does (pyserial reads the options)."""
    check_url(url)
    s = FastRfc2217(None, baudrate=baudrate, timeout=timeout)
    s.port = url
    s.open()
    return s
