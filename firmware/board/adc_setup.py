"""AD7380 register set-up over SDI, at boot, before the PIO takes CS and SCLK.

The AD7380 powers up in 2-wire mode on its internal reference; the board wires SDOB nowhere and
REFIO to the shared ADR4525, so each converter must be told: hard reset, external reference
(CONFIG1.REFSEL), 1-wire output (CONFIG2.SDO: both results on SDOA, what board/adc.py clocks in).
CS and SCLK are shared, so each 16-bit word reaches all three converters at once. Word format
(data sheet, register map): bit 15 write, bits 14..12 address, bits 11..0 data.
tests/test_hw_board.py derives these bits from the netlist and checks this sequence against them.
"""
from micropython import const

WRITE = const(0x8000)
CONFIG1 = const(1)
CONFIG2 = const(2)
REFSEL = const(0x002)          # CONFIG1 bit 1: reference from REFIO (external)
SDO_1WIRE = const(0x100)       # CONFIG2 bits 9..8 = 01: 1-wire, both channels on SDOA
RESET_HARD = const(0xFF)       # CONFIG2 bits 7..0
RESET_WAIT_US = const(5000)    # power-up time after a hard reset


def word(register, data):
    return WRITE | (register << 12) | data


SEQUENCE = (word(CONFIG2, RESET_HARD), word(CONFIG1, REFSEL), word(CONFIG2, SDO_1WIRE))


def write(sequence=SEQUENCE):
    """Bit-bang the words (SCLK idles high, SDI is latched on the falling edge); SDI is left low, so
    the conversions the PIO clocks afterwards see no further writes."""
    import time

    from machine import Pin

    from board import pins

    sclk = Pin(pins.ADC_SCLK, Pin.OUT, value=1)
    cs = Pin(pins.ADC_CS, Pin.OUT, value=1)
    sdi = Pin(pins.ADC_SDI, Pin.OUT, value=0)
    for w in sequence:
        cs(0)
        for b in range(15, -1, -1):
            sdi((w >> b) & 1)
            sclk(0)
            sclk(1)
        cs(1)
        if w == sequence[0]:
            time.sleep_us(RESET_WAIT_US)
    sdi(0)
