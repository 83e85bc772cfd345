"""CRC-32 of a frame in Thumb-1 (asm_thumb: the RP2350 and the RP2040 run it), four bytes a step.

Slicing by 4: after ``crc ^= word`` one step looks up each byte of the crc in its own table (T3 for
the lowest ... T0 for the highest; board.kernels builds them, 4 KB) and XORs the four: about 7
instructions a byte where the byte-table loop took 12 and viper 44. Bytes before the first aligned
word and after the last go through T0 one at a time (ARMv6-M faults on unaligned word loads).
Same result as powerrig_fw.crc.crc32_into (the zlib CRC), stored little-endian after the data.
"""
import micropython


@micropython.asm_thumb
def crc32_run(r0, r1, r2, r3):
    # r0: buffer, r1: start, r2: end, r3: tables T0, T1, T2, T3 of 256 little-endian words each
    mov(r4, r8)
    push({r4})
    add(r0, r0, r1)
    sub(r1, r2, r1)             # bytes
    mov(r2, r3)                 # T0
    mov(r7, 1)
    lsl(r7, r7, 10)
    add(r4, r2, r7)             # T1
    add(r5, r4, r7)             # T2
    add(r6, r5, r7)
    mov(r8, r6)                 # T3
    mov(r3, 0)
    mvn(r3, r3)                 # crc = 0xFFFFFFFF
    label(BYTES)                # one byte at a time: before the first aligned word and after the last
    cmp(r1, 0)
    beq(END)
    mov(r7, 3)
    and_(r7, r0)
    bne(BYTE)
    cmp(r1, 4)
    bge(WORDS)
    label(BYTE)
    ldrb(r7, [r0, 0])
    eor(r7, r3)
    lsl(r7, r7, 24)
    lsr(r7, r7, 22)
    add(r7, r7, r2)
    ldr(r7, [r7, 0])
    lsr(r3, r3, 8)
    eor(r3, r7)
    add(r0, 1)
    sub(r1, 1)
    b(BYTES)
    label(WORDS)
    cmp(r1, 4)
    blt(BYTES)
    ldr(r7, [r0, 0])
    eor(r3, r7)
    lsl(r7, r3, 24)
    lsr(r7, r7, 22)
    data(2, 0x4447)             # add r7, r8   (T3 + 4 * byte 0)
    ldr(r6, [r7, 0])
    lsl(r7, r3, 16)
    lsr(r7, r7, 24)
    lsl(r7, r7, 2)
    add(r7, r7, r5)
    ldr(r7, [r7, 0])
    eor(r6, r7)
    lsl(r7, r3, 8)
    lsr(r7, r7, 24)
    lsl(r7, r7, 2)
    add(r7, r7, r4)
    ldr(r7, [r7, 0])
    eor(r6, r7)
    lsr(r7, r3, 24)
    lsl(r7, r7, 2)
    add(r7, r7, r2)
    ldr(r7, [r7, 0])
    eor(r6, r7)
    mov(r3, r6)
    add(r0, 4)
    sub(r1, 4)
    b(WORDS)
    label(END)
    mvn(r3, r3)
    strb(r3, [r0, 0])
    lsr(r3, r3, 8)
    strb(r3, [r0, 1])
    lsr(r3, r3, 8)
    strb(r3, [r0, 2])
    lsr(r3, r3, 8)
    strb(r3, [r0, 3])
    pop({r4})
    mov(r8, r4)
    mov(r0, 0)
