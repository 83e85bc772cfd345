"""AD7380 register set-up over SDI, before the capture starts: 1-wire output and the external reference.

Why: out of reset an AD7380 sends channel A on SDOA and channel B on SDOB (2-wire) and converts
against its internal reference; the board reads both results from SDOA alone (board/adc.py) and
feeds the converters a common external 2.5 V reference (hw/README.md). The three converters share CS,
SCLK and SDI, so one write sets all three.

A register write is one 16-bit frame inside CS low, MSB first: bit 15 = 1 (write), bits 14..12 the
register address, bits 11..0 the value. SDI is set while SCLK is high and the converter latches it
on SCLK's falling edge (SCLK idles high, as the capture program drives it). The frames go out slowly
by toggling pins from Python: a handful, once, at start-up.
"""
from micropython import const

WRITE = const(0x8000)
CONFIG1 = const(1)
CONFIG2 = const(2)
CONFIG1_REFSEL_EXTERNAL = const(0x002)   # bit 1; 16-bit results, no oversampling, normal power
CONFIG2_SDO_1WIRE = const(0x100)         # bit 8: both channels on SDOA
SETUP = ((CONFIG1, CONFIG1_REFSEL_EXTERNAL), (CONFIG2, CONFIG2_SDO_1WIRE))


def frame(register, value):
    """The 16-bit write frame of one register."""
    return WRITE | (register << 12) | (value & 0xFFF)


def write_frame(cs, sclk, sdi, word):
    """One frame, MSB first; the pins are machine.Pin outputs (or anything with value())."""
    sclk.value(1)
    cs.value(0)
    for bit in range(15, -1, -1):
        sdi.value((word >> bit) & 1)
        sclk.value(0)          # the converter latches SDI here
        sclk.value(1)
    cs.value(1)
    sdi.value(0)


def set_up(cs, sclk, sdi, registers=SETUP):
    """Write each (register, value) of ``registers`` to all three converters."""
    for register, value in registers:
        write_frame(cs, sclk, sdi, frame(register, value))
