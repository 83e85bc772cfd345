"""viper kernels for the RP2350: the per-sample work the CPU must never do in bytecode.

The board's version of powerrig_fw.crc.crc32_into: Thumb-1 (board.crc_thumb) on the MCU, this viper
loop elsewhere. Nothing here allocates. (There is no unpacking of PIO words any more: PIO and DMA
deliver (V, I) halfword pairs, board/adc.py.)
"""
import array

import micropython
from powerrig_fw.crc import TABLE_LO, TABLE_HI

from board import arch

# T0 (the byte table), then on the MCU T1..T3 for board.crc_thumb's four bytes a step:
# Tk[n] = (Tk-1[n] >> 8) ^ T0[Tk-1[n] & 0xFF], kept as 16-bit halves while built (no big ints)
_TABLE = bytearray(4096 if arch.THUMB else 1024)
_lo = list(TABLE_LO)
_hi = list(TABLE_HI)
for _k in range(len(_TABLE) // 1024):
    for _n in range(256):
        _TABLE[1024 * _k + 4 * _n] = _lo[_n] & 0xFF
        _TABLE[1024 * _k + 4 * _n + 1] = _lo[_n] >> 8
        _TABLE[1024 * _k + 4 * _n + 2] = _hi[_n] & 0xFF
        _TABLE[1024 * _k + 4 * _n + 3] = _hi[_n] >> 8
    for _n in range(256):
        _b = _lo[_n] & 0xFF
        _l = ((_lo[_n] >> 8) | ((_hi[_n] & 0xFF) << 8)) ^ TABLE_LO[_b]
        _hi[_n] = (_hi[_n] >> 8) ^ TABLE_HI[_b]
        _lo[_n] = _l
del _lo, _hi


@micropython.viper
def _crc32(buf: ptr8, start: int, end: int, table: ptr32) -> int:
    c = uint(0xFFFFFFFF)
    k = start
    while k < end:
        c = uint(table[(c ^ uint(buf[k])) & 0xFF]) ^ (c >> 8)
        k += 1
    c = c ^ uint(0xFFFFFFFF)
    buf[end] = c & 0xFF
    buf[end + 1] = (c >> 8) & 0xFF
    buf[end + 2] = (c >> 16) & 0xFF
    buf[end + 3] = (c >> 24) & 0xFF
    return 0


if arch.THUMB:   # Thumb-1 instructions only: the RP2350 and the RP2040 (board.arch); viper elsewhere
    from board.crc_thumb import crc32_run as _crc32_thumb
else:
    _crc32_thumb = None


def crc32_into(buf, start, end):
    """CRC-32 of buf[start:end] stored at buf[end:end + 4] (powerrig_fw.crc's signature)."""
    if _crc32_thumb is not None:
        _crc32_thumb(buf, start, end, _TABLE)
    else:
        _crc32(buf, start, end, _TABLE)


# ---- raw bursts: the board's DMA layout in place, samples interleaved into the burst ring ----------
# parameter words (one preallocated array: viper calls stay within four arguments and allocate nothing)
_P_NR = 0       # rails in the layout
_P_STEP = 1     # halfwords per sample within a rail's region
_P_DBASE = 2    # halfword of the first digital word
_P_DSTEP = 3
_P_HEAD = 4     # ring sample the copy starts at
_P_C = 5        # threshold: the rail's voltage halfword; edge: the bit mask
_P_OV = 6       # threshold: 0x8000 + offsets (ptr32 loads zero-extend on 64-bit ports); edge: previous bit, rising
_P_OI = 7
_P_THR = 8      # threshold: code product to exceed
_P_DSH = 9      # where the digital inputs are in their word (the ring gets them at bit 0)
_P_BASES = 10   # the rails' region bases follow


@micropython.viper
def _copy_samples(dst: ptr16, src: ptr16, p: ptr32, span: int) -> int:
    """Samples span >> 16 .. (span >> 16) + (span & 0xFFFF) - 1 of src into dst, interleaved from p[_P_HEAD]."""
    nr = p[0]
    step = p[1]
    stride = 2 * nr + 1
    first = span >> 16
    n = span & 0xFFFF
    r = 0
    while r < nr:
        s = p[10 + r] + first * step
        d = p[4] * stride + 2 * r
        k = 0
        while k < n:
            dst[d] = src[s]
            dst[d + 1] = src[s + 1]
            s += step
            d += stride
            k += 1
        r += 1
    s = p[2] + first * p[3]
    d = p[4] * stride + stride - 1
    sh = p[9]
    k = 0
    while k < n:
        dst[d] = int(src[s]) >> sh
        s += p[3]
        d += stride
        k += 1
    return 0


@micropython.viper
def _scan_threshold(src: ptr16, p: ptr32, start: int, n: int) -> int:
    """First sample k in start..n-1 where (v - ov) * (i - oi) > thr, or -1 (codes sign-extended)."""
    step = p[1]
    j = p[5] + start * step
    ov = p[6] - 0x8000
    oi = p[7] - 0x8000
    thr = p[8]
    k = start
    while k < n:
        v = int(src[j])
        if v > 32767:
            v -= 65536
        c = int(src[j + 1])
        if c > 32767:
            c -= 65536
        if (v - ov) * (c - oi) > thr:
            return k
        j += step
        k += 1
    return -1


@micropython.viper
def _scan_edge(src: ptr16, p: ptr32, start: int, n: int) -> int:
    """First sample k in start..n-1 where the masked digital bit rises (or falls), or -1."""
    mask = p[5]
    prev = p[6]
    rising = p[7]
    j = p[2] + start * p[3]
    k = start
    while k < n:
        d = 0
        if int(src[j]) & mask:
            d = 1
        if rising:
            if d > prev:
                return k
        elif d < prev:
            return k
        prev = d
        j += p[3]
        k += 1
    return -1


@micropython.viper
def put_dec(buf: ptr8, at: int, hi: int, lo: int) -> int:
    """powerrig_fw.wire.put_dec in machine code: the decimal digits of hi * 2**24 + lo at buf[at:],
    the offset after them. The clock ping's three numbers took 1.4 ms of the RP2040's main loop as
    bytecode, and pings come up to 100 times a second while the host settles its clock model."""
    k = at
    while True:
        r = hi % 10
        hi = hi // 10
        x = (r << 24) + lo
        lo = x // 10
        buf[k] = 48 + x - 10 * lo
        k += 1
        if hi == 0 and lo == 0:
            break
    i = at
    j = k - 1
    while i < j:                 # the digits came least significant first
        c = buf[i]
        buf[i] = buf[j]
        buf[j] = c
        i += 1
        j -= 1
    return k


if arch.THUMB:   # Thumb-1 copy and scans on both RP2s; viper elsewhere
    from board.burst_thumb import copy_block as _copy_block
    from board.burst_thumb import scan_threshold as _scan_threshold_asm, scan_edge as _scan_edge_asm
else:
    _copy_block = None


@micropython.viper
def _address(buf) -> int:
    return int(ptr8(buf))


class BurstKernels:
    """The board's ``burst_copy`` and ``scan_trigger`` (powerrig_fw.burst) for a block layout."""

    def __init__(self, layout, use_asm=None):
        bases, step, dbase, dstep = layout[:4]
        dshift = layout[4] if len(layout) > 4 else 0
        self.p = array.array("i", [0] * (_P_BASES + len(bases)))
        p = self.p
        p[_P_NR] = len(bases)
        p[_P_STEP] = step
        p[_P_DBASE] = dbase
        p[_P_DSTEP] = dstep
        p[_P_DSH] = dshift
        for k, b in enumerate(bases):
            p[_P_BASES + k] = b
        self.use_asm = _copy_block is not None if use_asm is None else use_asm
        self.stride = 2 * len(bases) + 1
        # machine-code copy job (board.burst_thumb.copy_block): the segments are fixed by the layout
        self.copy_job = array.array("i", [0] * (6 + 4 * (len(bases) + 1)))
        job = self.copy_job
        job[4] = 2 * self.stride
        job[5] = len(bases) + 1
        for k, b in enumerate(bases):
            job[6 + 4 * k:10 + 4 * k] = array.array("i", [4 * k, 2 * b, 2 * step, 2])
        k = len(bases)
        job[6 + 4 * k:10 + 4 * k] = array.array("i", [2 * (self.stride - 1), 2 * dbase, 2 * dstep, 1 + dshift])
        # machine-code scan job: address, samples, step, then the trigger's words (set when it changes)
        self.job = array.array("i", [0] * 6)
        self.spec = None
        self.edge = False       # every attribute exists from the start: a new one would allocate in a pass
        self.invert = 0
        self.scan_off = 0
        self.scan_step = 0

    def copy(self, ring, head, raw, start, run):
        if not self.use_asm:
            self.p[_P_HEAD] = head
            _copy_samples(ring, raw, self.p, (start << 16) | run)
            return
        job = self.copy_job
        job[0] = _address(ring) + 2 * head * self.stride
        job[1] = _address(raw)
        job[2] = start
        job[3] = run
        _copy_block(job)

    def scan(self, raw, start, n, spec):
        """The first triggering sample in start..n-1 of the block, or -1 (one bytecode call: an armed
        burst runs it every block)."""
        p = self.p
        if self.use_asm:
            job = self.job
            if spec is not self.spec:            # a new burst: its trigger's words, once
                self._prepare(spec)
            job[0] = _address(raw) + self.scan_off + start * self.scan_step
            job[1] = n - start
            if self.edge:
                job[4] = spec["prev"] ^ self.invert
                k = _scan_edge_asm(job)
            else:
                k = _scan_threshold_asm(job)
            return start + k if k < n - start else -1
        if spec["trigger"] == "threshold":
            p[_P_C] = p[_P_BASES + spec["rail_index"]]
            p[_P_OV] = 0x8000 + spec["v_offset"]
            p[_P_OI] = 0x8000 + spec["i_offset"]
            p[_P_THR] = spec["code_product"]
            return _scan_threshold(raw, p, start, n)
        p[_P_C] = 1 << (spec["bit"] + p[_P_DSH])
        p[_P_OV] = spec["prev"]
        p[_P_OI] = 1 if spec["rising"] else 0
        return _scan_edge(raw, p, start, n)

    def _prepare(self, spec):
        p = self.p
        job = self.job
        self.spec = spec
        self.edge = spec["trigger"] == "edge"
        if self.edge:
            self.scan_off = 2 * p[_P_DBASE]
            self.scan_step = 2 * p[_P_DSTEP]
            job[3] = 1 << (spec["bit"] + p[_P_DSH])
            self.invert = 0 if spec["rising"] else 1      # a falling edge is a rising one of the inverse
            job[5] = 0 if spec["rising"] else job[3]
        else:
            self.scan_off = 2 * p[_P_BASES + spec["rail_index"]]
            self.scan_step = 2 * p[_P_STEP]
            job[3] = spec["v_offset"]
            job[4] = spec["i_offset"]
            job[5] = spec["code_product"]
        job[2] = self.scan_step
