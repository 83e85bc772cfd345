"""ADC capture: three AD7380s clocked by PIO, samples moved by DMA into ping-pong buffers.

Division of labour (docs/firmware-budget.md): the CPU never touches a bit. Each AD7380 runs in
1-wire mode: both results leave on SDOA, channel A (the current-sense amplifier) then channel B (the
voltage divider), 32 SCLKs per conversion. One state machine per ADC shifts them left into one
32-bit word, (I << 16) | V, which DMA stores little-endian: the halfwords V, I in the order
board.reducer's kernel reads them. Each DMA channel writes its own region of one buffer:

    [ADC0: V I V I ... (2 x BLOCK)] [ADC1: ...] [ADC2: ...] [digital: one halfword per sample (BLOCK)]

so BoardReducer.layout((0, 2B, 4B), 2, 6B, 1) describes a block. PIO0 SM0 drives CS and SCLK for all
converters (one conversion every 4 us, simultaneous on every channel) and reads ADC0; SM1 and SM2
follow SM0's SCLK for ADC1 and ADC2; SM3 samples the digital inputs at each CS edge into a halfword.
Pairs of DMA channels chained to each other fill buffer A then B, so the CPU reduces one while DMA
fills the other; acquisition needs no CPU, so the second core stays free. If the CPU is late by more
than a block, the DMA has lapped it: the lost samples are counted and reported, never hidden.
"""
import array

import rp2
from machine import Pin
from micropython import const

from board import pins

BLOCK = const(250)           # samples per DMA block: 1 ms
N_RAILS = const(3)
SAMPLE_HZ = const(250_000)
# SM0 spends 2 cycles per SCLK x 32 bits + conversion and CS time per sample: 150 cycles per
# sample at 37.5 MHz = one conversion every 4 us (SCLK 18.75 MHz, well under the AD7380's 80 MHz)
SM_FREQ = const(37_500_000)
REGION = const(2 * BLOCK)    # halfwords per ADC region
DIG_AT = const(6 * BLOCK)    # halfword where the digital region starts
HALFWORDS = const(7 * BLOCK)


@rp2.asm_pio(sideset_init=rp2.PIO.OUT_HIGH, set_init=rp2.PIO.OUT_HIGH, in_shiftdir=rp2.PIO.SHIFT_LEFT,
             autopush=True, push_thresh=32)
def adc_master():
    # CS low starts a conversion on all three ADCs (simultaneous sampling) and tells SM3 to latch
    set(pins, 0)            .side(1)
    irq(4)                  .side(1)
    set(x, 31)              .side(1)  [7]       # conversion time (190 ns on the AD7380)
    label("bit")
    nop()                   .side(0)
    in_(pins, 1)            .side(1)
    jmp(x_dec, "bit")       .side(1)
    set(pins, 1)            .side(1)  [15]      # delays are at most 15 with one side-set pin
    nop()                   .side(1)  [15]
    nop()                   .side(1)  [11]      # 1 + 1 + 8 + 96 + 16 + 16 + 12 = 150 cycles per sample


@rp2.asm_pio(in_shiftdir=rp2.PIO.SHIFT_LEFT, autopush=True, push_thresh=32)
def adc_follower():
    # read this ADC's SDOA on every rising SCLK edge of the master, 32 times per sample
    wrap_target()
    wait(0, gpio, pins.ADC_SCLK)
    wait(1, gpio, pins.ADC_SCLK)
    in_(pins, 1)
    wrap()


@rp2.asm_pio(in_shiftdir=rp2.PIO.SHIFT_LEFT, autopush=True, push_thresh=16)
def digital_sampler():
    # one halfword per sample: the 3 digital inputs in bits 2..0 (DMA moves 16 bits)
    wait(1, irq, 4)
    in_(pins, 3)
    in_(null, 13)


class Adc:
    def __init__(self):
        sclk = Pin(pins.ADC_SCLK, Pin.OUT)
        cs = Pin(pins.ADC_CS, Pin.OUT)
        sdo = [Pin(pins.ADC_SDO_BASE + k, Pin.IN) for k in range(pins.ADC_SDO_COUNT)]
        dig = Pin(pins.DIG_BASE, Pin.IN)
        self.sms = [
            rp2.StateMachine(0, adc_master, freq=SM_FREQ, sideset_base=sclk, set_base=cs, in_base=sdo[0]),
            rp2.StateMachine(1, adc_follower, freq=SM_FREQ * 4, in_base=sdo[1]),
            rp2.StateMachine(2, adc_follower, freq=SM_FREQ * 4, in_base=sdo[2]),
            rp2.StateMachine(3, digital_sampler, freq=SM_FREQ * 4, in_base=dig),
        ]
        # ping-pong: two buffers, each with one region per ADC and one for the digital inputs
        self.bufs = [array.array("h", bytes(2 * HALFWORDS)) for _ in range(2)]
        self.dmas = []
        self.blocks_done = 0      # incremented from the DMA IRQ
        self.blocks_read = 0
        self.first_index = 0

    def _chain(self, sm_index, at, size):
        """Two DMA channels writing region ``at`` (halfwords) of buffer A, then of B, then A ...
        from one SM's RX FIFO; size 2 = 32-bit words (a V, I pair), 1 = halfwords."""
        a, b = rp2.DMA(), rp2.DMA()
        dreq = 4 + sm_index                     # PIO0 RX FIFO n
        for me, other, buf in ((a, b, self.bufs[0]), (b, a, self.bufs[1])):
            ctrl = me.pack_ctrl(size=size, inc_read=False, inc_write=True, treq_sel=dreq, chain_to=other.channel)
            me.config(read=self.sms[sm_index], write=memoryview(buf)[at:], count=BLOCK, ctrl=ctrl)
        return a, b

    def layout(self):
        """(pair_bases, step, dig_base, dig_step) of a block, for BoardReducer.layout."""
        return [k * REGION for k in range(N_RAILS)], 2, DIG_AT, 1

    def start(self, first_index):
        for k in range(N_RAILS):
            self.dmas += self._chain(k, k * REGION, 2)
        self.dmas += self._chain(3, DIG_AT, 1)
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
        """(block, n, dropped) for the oldest unread block (layout()), or None. Allocation-free."""
        behind = self.blocks_done - self.blocks_read
        if behind <= 0:
            return None
        dropped = 0
        if behind > 1:                        # DMA lapped us: those blocks are gone
            dropped = (behind - 1) * BLOCK
            self.blocks_read = self.blocks_done - 1
        half = self.blocks_read & 1
        self.blocks_read += 1
        return self.bufs[half], BLOCK, dropped
