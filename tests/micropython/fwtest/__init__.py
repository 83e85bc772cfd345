"""Stand-ins for the board's hardware on the emulated Cortex-M: the DMA engine and the USB streams.

Only what cannot exist in QEMU's mps2-an385 is replaced, at the register and stream boundary: the
board's own code (board.blocks, board.usb, board.rp2350.Board, the kernels) runs unchanged on top.
"""
