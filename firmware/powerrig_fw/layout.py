"""Where each channel of a raw ADC block lives.

A block is described by (pair_bases, step, dig_base, dig_step, dig_shift): rail k's voltage code of
sample s is halfword ``pair_bases[k] + s * step``, its current code the next one; the digital inputs of
sample s are bits ``dig_shift``.. of halfword ``dig_base + s * dig_step`` (bit 0 activity, 1 PERST#,
2 marker after the shift; the board's PIO puts them in bits 15..13). The reference and the simulator interleave samples
(v0 i0 v1 i1 v2 i2 digital); the RP2350 board's DMA writes one region per ADC (board/adc.py) and
says so with a ``layout`` attribute. Everything that reads raw blocks (reducer, burst, self-test)
goes through this one description.
"""


def interleaved(n_rails):
    stride = 2 * n_rails + 1
    return [2 * k for k in range(n_rails)], stride, stride - 1, stride, 0


def of(board, n_rails):
    """The board's block layout, interleaved unless the board says otherwise."""
    lay = getattr(board, "layout", None)
    return lay if lay is not None else interleaved(n_rails)
