"""Copying bytes in Thumb-1 (asm_thumb: the RP2350 and the RP2040): a frame into the USB queue.

Why: a slice assignment copies in C but allocates its slice object (a pass must not allocate), and a
viper byte loop takes about 37 instructions a byte; this takes 5 a byte, about 1.5 when both ends are
word-aligned, or always where unaligned word access is allowed (ARMv7-M and later: the last argument
is then given inverted, ~x, a negative small int; ARMv6-M faults on unaligned word loads).
"""
import micropython


@micropython.asm_thumb
def copy_run(r0, r1, r2, r3):
    # r0: destination buffer, r1: destination offset, r2: source buffer,
    # r3: (source offset << 16) | count, or ~that when unaligned word access is allowed
    add(r0, r0, r1)
    mov(r6, r3)
    cmp(r3, 0)
    bge(POS)
    mvn(r3, r3)
    label(POS)
    lsr(r1, r3, 16)
    add(r2, r2, r1)
    lsl(r3, r3, 16)
    lsr(r3, r3, 16)             # count
    cmp(r6, 0)
    blt(WORDS)
    mov(r4, r0)
    orr(r4, r2)
    mov(r5, 3)
    and_(r4, r5)
    bne(BYTES)                  # either end unaligned: byte by byte
    label(WORDS)
    cmp(r3, 4)
    blt(BYTES)
    ldr(r4, [r2, 0])
    str(r4, [r0, 0])
    add(r0, 4)
    add(r2, 4)
    sub(r3, 4)
    b(WORDS)
    label(BYTES)
    cmp(r3, 0)
    beq(END)
    label(BLOOP)
    ldrb(r4, [r2, 0])
    strb(r4, [r0, 0])
    add(r0, 1)
    add(r2, 1)
    sub(r3, 1)
    bne(BLOOP)
    label(END)
    mov(r0, 0)
