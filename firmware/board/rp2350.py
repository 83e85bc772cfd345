"""The interposer board (RP2350, or RP2040 in the emulator): USB CDC for the host link, the ADC chain,
flash for calibration.

Every pass of the main loop goes through here without allocating (tests/micropython/mcu_whole_pass.py
runs thousands of whole passes under micropython.heap_lock()): ``adc_read`` returns the block's
memoryview and leaves its length and the samples lost before it in ``adc_n`` and ``adc_dropped``.
The hardware (the capture chain, the USB streams) comes in through the constructor, so the same Board
runs against RAM stand-ins on the emulated Cortex-M (tests/micropython/fwtest).
"""
import array
import sys

import machine
import micropython

from board import kernels, pins
from board.blocks import now_split
from board.reducer import BoardReducer
from board.usb import UsbLink, copy_bytes
from powerrig_fw.device import USB_QUEUE_BYTES

CAL_PATH = "/calibration.json"
# SIO: a pin set or cleared by one register write (no read-modify-write, nothing in between)
_SIO = 0xD0000000
_OUT_SET, _OUT_CLR = (0x014, 0x018) if "RP2040" in sys.implementation._machine else (0x018, 0x020)


def _sio_outputs():
    """The power action pins (board.pins, all active high at the pin) as SIO set/clear writes, safe levels first."""
    outs = {}
    for name, pin, safe in (("12V", pins.RAIL_12V_EN, 1), ("3V3", pins.RAIL_3V3_EN, 1),
                            ("PERST", pins.PERST_DRIVE, 0), ("PWRDIS", pins.PWRDIS_DRIVE, 0)):
        machine.Pin(pin, machine.Pin.OUT, value=safe)
        mask = 1 << pin
        outs[name] = (lambda m: (lambda level: (_SIO + (_OUT_SET if level else _OUT_CLR), m)))(mask)
    return outs


# samples (33 ms at 4 us, 14 bytes each: 115 kB); the RAM budget in docs/firmware-budget.md. The RP2040
# (the emulator tier, docs/emulator.md) has ~190 kB of heap in all: 115 kB raised MemoryError in Board()
BURST_CAPACITY = 2048 if "RP2040" in sys.implementation._machine else 8192
# the shortest time between the host's clock pings (describe "ping_interval_min_us"): on the RP2040 a
# ping's pass costs ~2 ms (its 46 bytes read one by one through the USB stack, the reply built) and a
# block pass ~0.75 ms of each 1 ms block, so the host's first-seconds rate of 100 pings a second left no
# room and the DMA ring overran (docs/emulator.md); 20 ms keeps pings near 10 % of the loop. The
# RP2350 takes the host's rate.
PING_INTERVAL_MIN_US = 20000 if "RP2040" in sys.implementation._machine else 0


class Board:
    def __init__(self, adc=None, usb_in=None, usb_out=None, console=micropython, outputs=None, clock=None,
                 fire=None, idle=None):
        """outputs: the power actions' pins (name -> level -> (register, value)); clock: the exact
        sample index now and fire: the edges at their samples (default: from the DMA ring); idle: what
        a pass with nothing to do calls (default on the real chain: machine.idle, a WFE that the next
        DMA block or USB interrupt ends, within 1 ms). The tests give stand-ins."""
        # the host's bytes are data, 0x03 included: no KeyboardInterrupt from the USB CDC
        # (Device's "repl" command gives the console back)
        self.console = console
        console.kbd_intr(-1)
        # the burst ring as plain bytes (array("h", bytes(n)) would need twice its size for a moment)
        self.burst_capacity = BURST_CAPACITY
        self.ping_interval_min_us = PING_INTERVAL_MIN_US
        self._burst_ring = bytearray(2 * 7 * BURST_CAPACITY)
        self.name = "rp2040-interposer" if "RP2040" in sys.implementation._machine else "rp2350-interposer"
        uid = machine.unique_id() if hasattr(machine, "unique_id") else b"EMULATED"
        self.serial = "".join("%02X" % b for b in uid)
        self.cal_path = CAL_PATH
        self.crc_into = kernels.crc32_into
        self.put_dec = kernels.put_dec       # the clock ping's digits (powerrig_fw.ping)
        self.usb = UsbLink(usb_in or sys.stdin.buffer, usb_out or sys.stdout.buffer, USB_QUEUE_BYTES)
        real_chain = adc is None
        if real_chain:
            from board.adc import Adc
            adc = Adc()
        self.adc = adc
        self.ring = adc.ring
        self.outputs = outputs if outputs is not None else _sio_outputs()
        self.sample_now = adc.ring.sample_now if clock is None else clock
        self.fire = adc.ring.fire if fire is None else fire
        self.block = adc.ring.block
        self._split = array.array("i", [0, 0])
        # the hot path: viper + machine code, reading the DMA layout in place (docs/firmware-budget.md)
        self.reducer = BoardReducer(3)
        self.layout = adc.layout()          # the self-test and bursts read blocks through it too
        self.reducer.layout(*self.layout)
        burst = kernels.BurstKernels(self.layout)
        self.burst_copy = burst.copy              # an armed burst: machine code per sample, no bytecode
        self.scan_trigger = burst.scan
        # the per-pass calls go straight to their objects (a Python call costs ~1,000 instructions)
        self.read_into = self.usb.read_into
        self.write = self.usb.write
        self.copy = copy_bytes
        self.pump = self.usb.pump
        self.adc_intact = self.ring.intact
        # the blocks: adc_read() with adc_n and adc_dropped beside it are the ring's own
        self.blocks = self.ring
        self.adc_read = self.ring.adc_read
        # while streaming with nothing else to do, a block is one native call (BoardReducer.stream)
        self.reducer.blocks(self.ring.st, self.ring.block)
        self.reducer.link(self.usb)         # a block overwritten while reduced: its frames taken back
        self.stream_block = self.reducer.stream
        if idle is not None:
            self.idle = idle
        elif real_chain:
            self.idle = machine.idle
        adc.start()

    def make_ring(self, n):
        """The burst ring for n halfwords (interleaved samples, 3 rails + digital), as bytes: only the
        machine-code copy writes it, by address."""
        if 2 * n != len(self._burst_ring):
            raise ValueError("the board's burst ring holds %d halfwords, not %d" % (len(self._burst_ring) // 2, n))
        return self._burst_ring

    def vref_v(self):
        """The ADCs' reference as the RP2's own ADC sees it (self-test; +-1 % of 3.3 V supply)."""
        adc = machine.ADC(26)
        total = 0
        for _ in range(16):
            total += adc.read_u16()
        return total * 3.3 / (16 * 65535)

    def temperature_c(self):
        """The TMP117 between the shunts (degrees C; None on a board or emulator without it): the host
        applies the calibration's temperature coefficients at this reading (describe's board_temp_c)."""
        try:
            from board import tmp117
            return tmp117.read_c()
        except (ImportError, AttributeError, ValueError, OSError):
            return None

    def release_console(self):
        """Ctrl-C interrupts again (before the main loop returns to the REPL for mpremote)."""
        self.console.kbd_intr(3)

    # read_into(buf, at, room), write(buf, n) (False when the queue is full: counted, see link_status), pump() (queued
    # bytes to the USB CDC as far as it takes them without waiting) and adc_intact() (False when DMA
    # came round to the block adc_read gave while it was reduced) are the UsbLink's and the ring's own.

    def link_status(self):
        u = self.usb
        return {"queued": u.used, "dropped_frames": u.dropped_frames, "dropped_bytes": u.dropped_bytes,
                "stalled_pumps": u.stalled, "late_rearms": self.ring.late(),
                "overwritten_blocks": self.ring.overwritten}

    @property
    def adc_n(self):
        return self.ring.adc_n

    @property
    def adc_dropped(self):
        return self.ring.adc_dropped

    def adc_restart(self):
        return self.ring.index

    def adc_skip(self):
        """The blocks not read yet are nobody's (a stream starts): the next one read is the newest."""
        self.ring.skip_unread()

    def block_index(self):
        return self.ring.last_block

    def sample_index(self):
        """The sample being converted now: the blocks done and how far the running DMA channel has got
        into the next (the ADC runs from the crystal ticks_us runs from: 4 us a sample). A clock ping's
        stamps come from here, so they fall on the sample, not on a block's start (issue 43)."""
        s = self._split
        now_split(self.ring.st, self.block, s, 0)     # (the ring's sample_now is 32-bit: it wraps at 2**31)
        return (s[0] << 24) + s[1]

    def stamp_rx_with(self, fn):
        """The clock ping's receive stamp, taken as a read finds the host's first byte (board.usb)."""
        self.usb.stamp_first(fn)

    def sample_index_into(self, out, k):
        """sample_index() as out[k] * 2**24 + out[k + 1] with small ints only (board.blocks.now_split)."""
        now_split(self.ring.st, self.block, out, k)
