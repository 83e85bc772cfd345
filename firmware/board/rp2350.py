"""The RP2350 interposer board: USB CDC for the host link, the ADC chain, flash for calibration."""
import select
import sys
import time

import machine

from board.adc import Adc, BLOCK
from board import kernels
from board.reducer import BoardReducer

CAL_PATH = "/calibration.json"


class Board:
    name = "rp2350-interposer"

    def __init__(self):
        self.serial = "".join("%02X" % b for b in machine.unique_id())
        self.cal_path = CAL_PATH
        self.crc_into = kernels.crc32_into
        self.usb_in = sys.stdin.buffer
        self.usb_out = sys.stdout.buffer
        self.poller = select.poll()
        self.poller.register(self.usb_in, select.POLLIN)
        self.rxbuf = bytearray(512)
        self.adc = Adc()
        # the hot path: viper + Thumb-2, reading the DMA layout in place (docs/firmware-budget.md)
        self.reducer = BoardReducer(3)
        self.layout = self.adc.layout()          # the self-test and bursts read blocks through it too
        self.reducer.layout(*self.layout)
        burst = kernels.BurstKernels(self.layout)
        self.burst_copy = burst.copy              # an armed burst: machine code per sample, no bytecode
        self.scan_trigger = burst.scan
        self.t0 = time.ticks_us()
        self.index = 0          # sample index of the next block the reducer gets
        self.last_block = 0
        self.adc.start(0)

    def vref_v(self):
        """The ADCs' reference as the RP2350's own ADC sees it (self-test; +-1 % of 3.3 V supply)."""
        adc = machine.ADC(26)
        total = 0
        for _ in range(16):
            total += adc.read_u16()
        return total * 3.3 / (16 * 65535)

    def read(self):
        if not self.poller.poll(0):
            return None
        n = self.usb_in.readinto(self.rxbuf)
        return bytes(self.rxbuf[:n]) if n else None

    def write(self, buf):
        self.usb_out.write(buf)

    def adc_read(self):
        blk = self.adc.read()
        if blk is None:
            return None
        raw, n, dropped = blk
        self.index += dropped
        self.last_block = self.index
        self.index += n
        return raw, n, dropped

    def adc_restart(self):
        return self.index

    def block_index(self):
        return self.last_block

    def sample_index(self):
        # the ADC is clocked from the same crystal as ticks_us: 4 us per sample since start
        return self.adc.blocks_done * BLOCK
