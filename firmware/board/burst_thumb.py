"""The burst ring's copy and trigger scans in Thumb-1 (asm_thumb: the RP2350 and the RP2040 run it): a dozen instructions per channel where viper takes ~40.

An armed burst copies every block from the DMA layout into its interleaved ring while the interval
stream goes on, so this copy is paid on top of the hot path for as long as a burst waits for its
trigger (docs/firmware-budget.md). viper keeps its locals on the stack here; this loop keeps them in
registers. Only on ARM ports (board.arch); board.kernels uses its viper loop elsewhere.
"""
import micropython


@micropython.asm_thumb
def copy_block(r0):
    # r0: job words: destination base, source base, first sample, samples, destination step (bytes),
    # segment count, then per segment: destination offset, source offset, source step (bytes) and
    # width (2: a (V, I) pair; 1 + s: a halfword shifted down by s bits, the digital inputs from
    # where the PIO put them; s is never 1). One call copies every rail and the digital inputs.
    ldr(r7, [r0, 20])
    mov(r6, r0)
    add(r6, 24)
    label(SEG)
    ldr(r1, [r6, 0])
    ldr(r2, [r0, 0])
    add(r1, r1, r2)
    ldr(r2, [r6, 8])
    ldr(r3, [r0, 8])
    mul(r3, r2)
    ldr(r2, [r6, 4])
    add(r3, r3, r2)
    ldr(r2, [r0, 4])
    add(r2, r2, r3)
    ldr(r3, [r0, 12])
    cmp(r3, 0)
    beq(NEXT)
    ldr(r4, [r6, 12])
    cmp(r4, 2)
    bne(HALF0)
    label(PAIR)
    ldrh(r4, [r2, 0])
    ldrh(r5, [r2, 2])
    strh(r4, [r1, 0])
    strh(r5, [r1, 2])
    ldr(r4, [r6, 8])
    add(r2, r2, r4)
    ldr(r4, [r0, 16])
    add(r1, r1, r4)
    sub(r3, 1)
    bne(PAIR)
    b(NEXT)
    label(HALF0)
    sub(r5, r4, 1)                          # a halfword shifted down by width - 1 bits
    label(HALF)
    ldrh(r4, [r2, 0])
    lsr(r4, r5)
    strh(r4, [r1, 0])
    ldr(r4, [r6, 8])
    add(r2, r2, r4)
    ldr(r4, [r0, 16])
    add(r1, r1, r4)
    sub(r3, 1)
    bne(HALF)
    label(NEXT)
    add(r6, 16)
    sub(r7, 1)
    bne(SEG)
    mov(r0, 0)


# The trigger scans return the offset of the first triggering sample, or the sample count when
# none fires. Job words (4 bytes each): address of the first sample's channel, samples, step (bytes),
# then per scan: threshold -> voltage offset, current offset, code product; edge -> bit mask, previous
# bit, and what to XOR the digital words with.

@micropython.asm_thumb
def scan_threshold(r0):
    # (v - v_offset) * (i - i_offset) > product, codes sign-extended from the halfwords
    ldr(r1, [r0, 0])
    ldr(r2, [r0, 4])
    ldr(r3, [r0, 8])
    mov(r7, 0)
    cmp(r2, 0)
    beq(END)
    label(LOOP)
    ldrh(r4, [r1, 0])
    lsl(r4, r4, 16)
    asr(r4, r4, 16)
    ldr(r5, [r0, 12])
    sub(r4, r4, r5)
    ldrh(r5, [r1, 2])
    lsl(r5, r5, 16)
    asr(r5, r5, 16)
    ldr(r6, [r0, 16])
    sub(r5, r5, r6)
    mul(r4, r5)
    ldr(r6, [r0, 20])
    cmp(r4, r6)
    bgt(END)
    add(r1, r1, r3)
    add(r7, 1)
    cmp(r7, r2)
    blt(LOOP)
    label(END)
    mov(r0, r7)


@micropython.asm_thumb
def scan_edge(r0):
    # the masked bit set where the sample before had it clear; job word 5 is XORed into every digital
    # word first (the mask for a falling edge, with the previous bit inverted to match: one loop for both)
    ldr(r1, [r0, 0])
    ldr(r2, [r0, 4])
    ldr(r3, [r0, 8])
    ldr(r5, [r0, 12])
    ldr(r6, [r0, 16])
    ldr(r0, [r0, 20])
    mov(r7, 0)
    cmp(r2, 0)
    beq(END)
    label(LOOP)
    ldrh(r4, [r1, 0])
    eor(r4, r0)
    and_(r4, r5)
    cmp(r4, 0)
    beq(NEXT)
    cmp(r6, 0)
    beq(END)
    label(NEXT)
    mov(r6, r4)
    add(r1, r1, r3)
    add(r7, 1)
    cmp(r7, r2)
    blt(LOOP)
    label(END)
    mov(r0, r7)
