"""The board's USB CDC transmit side as MicroPython's rp2 port drives TinyUSB, at the stream boundary
the firmware's UsbLink sees (shared/tinyusb/mp_usbd_cdc.c of the vendored MicroPython).

- ``write(buf, off, n)`` (mp_usbd_cdc_tx_strn) copies what fits into the 256-byte FIFO and, while
  bytes are left, waits for the host to take some: up to MICROPY_HW_USB_CDC_TX_TIMEOUT (500 ms on
  the rp2 port), restarted at each byte that went. A main loop must never get there: every write of
  more bytes than the FIFO has room for is counted in ``waits`` (the test fails on one), and its
  whole timeout in ``wait_ms`` as the host here is away, as it would be on the board.
- poll's POLLOUT (mp_usbd_cdc_poll_interfaces): stock MicroPython says writable when the FIFO has
  one byte free (``packet_poll=False``); the powerrig image says so only when a whole 64-byte packet
  fits (scripts/build_rp2_mp.py, USB_POLL_WRITABLE_PACKET), so a write of at most 64 bytes never waits.
- The USB takes the FIFO a 64-byte packet at a time, as fast as the board fills it (full speed moves
  ~19 packets a millisecond), into the host's buffer, which ``readinto`` (the host's read) empties;
  ``away`` (the host stopped reading: its buffer and the bus stand still) stops both.
"""
import io

_POLL = 3                 # MP_STREAM_POLL
_POLLOUT = 4
FIFO = 256
PACKET = 64
TIMEOUT_MS = 500


class TinyUsbCdc(io.IOBase):
    def __init__(self, packet_poll=True, host_bytes=16384):
        self.packet_poll = packet_poll
        self.away = False
        self.fifo = bytearray(FIFO)
        self.used = 0
        self.head = 0
        self.host = bytearray(host_bytes)   # what the host's driver holds for its next read
        self.held = 0
        self.waits = 0            # writes that would have waited for the host (up to 500 ms each)
        self.wait_ms = 0
        self.writes = 0

    def _bus(self):
        """The packets the USB moves to the host meanwhile (none while it is away)."""
        while self.used and not self.away and self.held + PACKET <= len(self.host):
            p = min(PACKET, self.used)
            for j in range(p):
                self.host[self.held + j] = self.fifo[(self.head + j) % FIFO]
            self.head = (self.head + p) % FIFO
            self.used -= p
            self.held += p

    def ioctl(self, req, arg):
        if req == _POLL:
            self._bus()
            free = FIFO - self.used
            ok = free >= PACKET if self.packet_poll else free > 0
            return arg & _POLLOUT if ok else 0
        return 0

    def write(self, buf, off=0, n=-1):
        if n < 0:
            n = len(buf) - off
        self.writes += 1
        self._bus()
        k = min(n, FIFO - self.used)
        for j in range(k):
            self.fifo[(self.head + self.used + j) % FIFO] = buf[off + j]
        self.used += k
        self._bus()
        if k < n:
            self.waits += 1
            self.wait_ms += TIMEOUT_MS
        return k

    def readinto(self, out):
        """The host's read: what its driver holds (at most len(out) bytes)."""
        if self.away:
            return 0
        self._bus()
        k = min(self.held, len(out))
        out[:k] = self.host[:k]
        self.host[:self.held - k] = self.host[k:self.held]
        self.held -= k
        self._bus()
        return k
