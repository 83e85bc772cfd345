"""ADC capture: three AD7380s clocked by PIO, samples moved by DMA into ping-pong buffers.

PIO0 SM0 drives CS and SCLK for all converters (one conversion every 4 us on every channel) and
shifts in SDOA/SDOB of the 12 V converter; SM1 and SM2 follow SM0's clock for the 3.3 V and 5 V
converters; SM3 samples the digital inputs at each CS edge. Each SM feeds one DMA channel; pairs of
channels chained to each other fill buffer A then B, so the CPU reduces one while DMA fills the
other. A block is BLOCK samples (1 ms). If the CPU is late by more than a block, the DMA has lapped
it: the lost samples are counted and reported, never hidden.
"""
import array

import rp2
from machine import Pin
from micropython import const

from board import pins
from board.kernels import unpack_words

BLOCK = const(250)           # samples per DMA block: 1 ms
N_RAILS = const(3)
SAMPLE_HZ = const(250_000)
# PIO runs at 32 cycles per SCLK x 16 bits + conversion time per sample; the program below spends
# 64 cycles per sample, so the SM clock is 64 x 250 kHz = 16 MHz.
SM_FREQ = const(16_000_000)


@rp2.asm_pio(sideset_init=rp2.PIO.OUT_HIGH, set_init=rp2.PIO.OUT_HIGH, in_shiftdir=rp2.PIO.SHIFT_LEFT,
             autopush=True, push_thresh=32)
def adc_master():
    # CS low starts a conversion on all three ADCs (simultaneous sampling) and tells SM3 to latch
    set(pins, 0)            .side(1)
    irq(4)                  .side(1)
    set(x, 15)              .side(1)  [14]      # conversion time
    label("bit")
    nop()                   .side(0)
    in_(pins, 2)            .side(1)
    jmp(x_dec, "bit")       .side(1)
    set(pins, 1)            .side(1)  [12]


@rp2.asm_pio(in_shiftdir=rp2.PIO.SHIFT_LEFT, autopush=True, push_thresh=32)
def adc_follower():
    # read 2 SDO lines on every rising SCLK edge of the master, 16 times per sample
    set(x, 15)
    label("bit")
    wait(0, gpio, pins.ADC_SCLK)
    wait(1, gpio, pins.ADC_SCLK)
    in_(pins, 2)
    jmp(x_dec, "bit")


@rp2.asm_pio(in_shiftdir=rp2.PIO.SHIFT_LEFT, autopush=True, push_thresh=8)
def digital_sampler():
    wait(1, irq, 4)
    in_(pins, 3)
    in_(null, 5)


class Adc:
    def __init__(self):
        sclk = Pin(pins.ADC_SCLK, Pin.OUT)
        cs = Pin(pins.ADC_CS, Pin.OUT)
        sdo = [Pin(pins.ADC_SDO_BASE + k, Pin.IN) for k in range(pins.ADC_SDO_COUNT)]
        dig = Pin(pins.DIG_BASE, Pin.IN)
        self.sms = [
            rp2.StateMachine(0, adc_master, freq=SM_FREQ, sideset_base=sclk, set_base=cs, in_base=sdo[0]),
            rp2.StateMachine(1, adc_follower, freq=SM_FREQ * 2, in_base=sdo[2]),
            rp2.StateMachine(2, adc_follower, freq=SM_FREQ * 2, in_base=sdo[4]),
            rp2.StateMachine(3, digital_sampler, freq=SM_FREQ * 2, in_base=dig),
        ]
        # ping-pong buffers per state machine: words (ADCs) and bytes (digital)
        self.words = [[array.array("I", bytes(4 * BLOCK)) for _ in range(2)] for _ in range(N_RAILS)]
        self.digs = [bytearray(BLOCK) for _ in range(2)]
        self.out = array.array("h", bytes(2 * BLOCK * (2 * N_RAILS + 1)))
        self.dmas = []
        self.blocks_done = 0      # incremented from the DMA IRQ
        self.blocks_read = 0
        self.first_index = 0

    def _chain(self, sm_index, bufs, size):
        """Two DMA channels writing bufs[0] then bufs[1] then bufs[0] ... from one SM's RX FIFO."""
        a, b = rp2.DMA(), rp2.DMA()
        dreq = 4 + sm_index                     # PIO0 RX FIFO n
        for me, other, buf in ((a, b, bufs[0]), (b, a, bufs[1])):
            ctrl = me.pack_ctrl(size=size, inc_read=False, inc_write=True, treq_sel=dreq, chain_to=other.channel)
            me.config(read=self.sms[sm_index], write=buf, count=BLOCK, ctrl=ctrl)
        return a, b

    def start(self, first_index):
        for k in range(N_RAILS):
            self.dmas += self._chain(k, self.words[k], 2)
        self.dmas += self._chain(3, self.digs, 0)
        self.dmas[-2].irq(handler=self._on_block, hard=True)
        self.dmas[-1].irq(handler=self._on_block, hard=True)
        self.first_index = first_index
        for k in range(0, len(self.dmas), 2):
            self.dmas[k].active(1)
        # followers and the digital sampler wait for the master's SCLK/IRQ, so start them first
        for sm in self.sms[1:]:
            sm.active(1)
        self.sms[0].active(1)

    def _on_block(self, dma):
        self.blocks_done += 1

    def stop(self):
        for sm in self.sms:
            sm.active(0)
        for d in self.dmas:
            d.close()
        self.dmas = []

    def read(self):
        """(raw, n, dropped) for the oldest unread block, or None. Allocation-free."""
        behind = self.blocks_done - self.blocks_read
        if behind <= 0:
            return None
        dropped = 0
        if behind > 1:                        # DMA lapped us: those blocks are gone
            dropped = (behind - 1) * BLOCK
            self.blocks_read = self.blocks_done - 1
        half = self.blocks_read & 1
        w = self.words
        unpack_words(w[0][half], w[1][half], w[2][half], self.digs[half], self.out, BLOCK)
        self.blocks_read += 1
        return self.out, BLOCK, dropped
