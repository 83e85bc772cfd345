"""ADC capture: three AD7380s clocked by PIO, samples moved by DMA into ping-pong buffers.

Division of labour (docs/firmware-budget.md): the CPU never touches a bit. Each AD7380 runs in
1-wire mode: both results leave on SDOA, channel A (the current-sense amplifier) then channel B (the
voltage divider), 32 SCLKs per conversion. One state machine per ADC shifts them left into one
32-bit word, (I << 16) | V, which DMA stores little-endian: the halfwords V, I in the order
board.reducer's kernel reads them. Each DMA channel writes its own region of one buffer:

    [ADC0: V I V I ... (2 x BLOCK)] [ADC1: ...] [ADC2: ...] [digital: one halfword per sample (BLOCK)]

so BoardReducer.layout((0, 2B, 4B), 2, 6B, 1, 13) describes a block: the digital inputs land in bits
15..13 of their halfword (SM3 shifts them in first, then 13 zeros, leftwards) and are read there.
PIO0 SM0 drives CS and SCLK for all converters (one conversion every 4 us, simultaneous on every
channel) and reads ADC0; SM1 and SM2 follow SM0's SCLK for ADC1 and ADC2; SM3 samples the digital
inputs at each CS edge into a halfword. Pairs of chained DMA channels fill the blocks of a ring
(board.blocks: even blocks through one channel, odd through the other, re-armed by the end-of-block
interrupt), so the CPU may fall several blocks behind without losing a sample; acquisition needs no
CPU, so the second core stays free. If the CPU is later than the ring allows, the lost samples are
counted and reported, never hidden.

Before capture the converters are set up over SDI (board.ad7380: 1-wire output, external reference).
SM0 runs at 37.5 MHz on both chips (on the RP2040's 125 MHz clk_sys through the fractional divider,
3 + 85/256: 4 us a sample within 0.03 %, which the host's clock fit absorbs); the followers run at the
chip's clk_sys (150 or 125 MHz, 8 of their cycles per SCLK period at least).
"""
import sys

import rp2
from machine import Pin
from micropython import const

from board import ad7380, pins
from board.blocks import BlockRing

# samples per DMA block: 1 ms on the RP2350; 2 ms on the RP2040, whose Python between blocks (a
# command, an armed burst's per-block calls) costs 30-50 us a call: half as many blocks halve that
# cost per second, and the ring's 7 blocks of slack become 14 ms, more than its 10 ms collection
# (docs/emulator.md)
BLOCK = 500 if "RP2040" in sys.implementation._machine else 250
N_RAILS = const(3)
SAMPLE_HZ = const(250_000)
NBUF = const(8)              # blocks in the DMA ring: the main loop may be 7 blocks (7 ms) late
# (16 on the RP2040 to absorb its 10 ms automatic collection was tried: more overruns, not understood;
# docs/emulator.md)
# SM0 spends 150 cycles per sample (2 per SCLK x 32 bits, conversion and CS time): at 37.5 MHz one
# conversion every 4 us (SCLK 18.75 MHz, well under the AD7380's 80 MHz)
SM_FREQ = 37_500_000
FOLLOW_FREQ = 125_000_000 if "RP2040" in sys.implementation._machine else 150_000_000
REGION = 2 * BLOCK          # halfwords per ADC region
DIG_AT = 6 * BLOCK          # halfword where the digital region starts
HALFWORDS = 7 * BLOCK


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


def _follower(sclk):
    """The follower program for SCLK on GPIO ``sclk``. rp2.asm_pio runs the decorated function with its
    module's globals swapped for the assembler's names, where ``pins`` is the assembler's, not
    board.pins (``pins.ADC_SCLK`` raised AttributeError at import on the rp2 port, tests/test_rp2_emulator.py):
    the pin comes in as a closure variable."""
    @rp2.asm_pio(in_shiftdir=rp2.PIO.SHIFT_LEFT, autopush=True, push_thresh=32)
    def adc_follower():
        # read this ADC's SDOA on every rising SCLK edge of the master, 32 times per sample
        wrap_target()
        wait(0, gpio, sclk)
        wait(1, gpio, sclk)
        in_(pins, 1)
        wrap()
    return adc_follower


adc_follower = _follower(pins.ADC_SCLK)


@rp2.asm_pio(in_shiftdir=rp2.PIO.SHIFT_LEFT, autopush=True, push_thresh=16)
def digital_sampler():
    # one halfword per sample: the 3 digital inputs land in bits 15..13 (GPIO 10 in bit 13), DMA moves 16 bits
    wait(1, irq, 4)
    in_(pins, 3)
    in_(null, 13)


DIG_SHIFT = const(13)        # where the digital inputs land in their halfword (digital_sampler)


class Adc:
    """The capture chain: AD7380 set-up over SDI, four state machines, eight DMA channels into a BlockRing."""

    def __init__(self, nbuf=NBUF):
        self.sclk = Pin(pins.ADC_SCLK, Pin.OUT, value=1)
        self.cs = Pin(pins.ADC_CS, Pin.OUT, value=1)
        self.sdi = Pin(pins.ADC_SDI, Pin.OUT, value=0)
        ad7380.set_up(self.cs, self.sclk, self.sdi)
        sdo = [Pin(pins.ADC_SDO_BASE + k, Pin.IN) for k in range(pins.ADC_SDO_COUNT)]
        dig = [Pin(pins.DIG_BASE + k, Pin.IN) for k in range(pins.DIG_COUNT)]
        self.sms = [
            rp2.StateMachine(0, adc_master, freq=SM_FREQ, sideset_base=self.sclk, set_base=self.cs, in_base=sdo[0]),
            rp2.StateMachine(1, adc_follower, freq=FOLLOW_FREQ, in_base=sdo[1]),
            rp2.StateMachine(2, adc_follower, freq=FOLLOW_FREQ, in_base=sdo[2]),
            rp2.StateMachine(3, digital_sampler, freq=FOLLOW_FREQ, in_base=dig[0]),
        ]
        # one DMA pair per stream: the three ADCs (32-bit (I << 16) | V words), then the digital halfwords
        self.dmas = [(rp2.DMA(), rp2.DMA()) for _ in range(N_RAILS + 1)]
        offsets = [2 * k * REGION for k in range(N_RAILS)] + [2 * DIG_AT]
        self.ring = BlockRing(BLOCK, HALFWORDS, offsets, [(a.channel, b.channel) for a, b in self.dmas], nbuf)

    def layout(self):
        """(pair_bases, step, dig_base, dig_step, dig_shift) of a block, for BoardReducer.layout."""
        return [k * REGION for k in range(N_RAILS)], 2, DIG_AT, 1, DIG_SHIFT

    def _configure(self, stream, size):
        """Stream ``stream``'s two channels: block 0 (even) and block 1 (odd) of the ring, each chained
        to the other, paced by its state machine's RX FIFO, with the end-of-block interrupt armed
        (rp2's pack_ctrl defaults to IRQ_QUIET, which would silence it)."""
        a, b = self.dmas[stream]
        for block, me, other in ((0, a, b), (1, b, a)):
            ctrl = me.pack_ctrl(size=size, inc_read=False, inc_write=True, treq_sel=4 + stream,
                                chain_to=other.channel, irq_quiet=0)
            me.config(read=self.sms[stream], write=self.ring.address(block, stream), count=BLOCK, ctrl=ctrl)

    def start(self):
        self.ring.reset()
        for k in range(N_RAILS):
            self._configure(k, 2)
        self._configure(N_RAILS, 1)
        # the digital stream's word of a sample comes first; the handler waits for the ADC words
        for ch in self.dmas[N_RAILS]:
            ch.irq(handler=self.ring.on_block, hard=True)
        for a, _b in self.dmas:
            a.active(1)
        # followers and the digital sampler wait for the master's SCLK/IRQ, so start them first
        for sm in self.sms[1:]:
            sm.active(1)
        self.sms[0].active(1)

    def stop(self):
        for sm in self.sms:
            sm.active(0)
        for pair in self.dmas:
            for d in pair:
                d.active(0)
