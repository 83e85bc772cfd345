"""The board's reducer: raw ADC codes -> interval records in the framer's buffer, in viper.

Same interface and byte-identical output as the reference (powerrig_fw.reduce.Reducer), but the
per-sample work runs as machine code: one viper call reduces a whole DMA block, writes each finished
interval's record straight into the frame buffer and returns to Python only when a frame is full.

Why it is fast enough (docs/firmware-budget.md has the measured counts):
- rail-major loops: for each run of samples inside one interval, one rail at a time, so each rail's
  sums, min/max and window sums stay in locals for the whole run;
- no bit unzipping: PIO shifts SDOA and SDOB of each AD7380 into separate halves of a word, so DMA
  delivers int16 (V, I) pairs in the order this kernel reads them (board/adc.py);
- the input layout is described, not assumed: channel pair k starts at halfword ``base[k]`` and
  advances ``step`` halfwords per sample. The DMA layout (one region per ADC, step 2) and the
  interleaved reference layout (v0 i0 v1 i1 v2 i2 digital, step 7) use the same code.

32/64-bit safe: every value stays within +-2**31 (codes are clamped to +-32767, products split as
hi * 2**15 + lo, as in the reference), so viper's 32-bit MCU ints and 64-bit unix ints agree.
"""
import array

import micropython
from micropython import const

from powerrig_fw import wire
from powerrig_fw.reduce import MAX_RAILS, MAX_WINDOW, check_config

from board import arch
from board.blocks import block_intact, take_block
from board import usb

_LINK_WRITTEN = const(6)      # board.usb's st[WRITTEN] (checked below: one layout)
assert usb.WRITTEN == _LINK_WRITTEN

# global state words
_NR = const(0)        # enabled rails
_SPI = const(1)       # samples per interval
_WIN = const(2)       # peak window, samples
_STEP = const(3)      # halfwords per sample in the input
_DBASE = const(4)     # halfword of the first digital word
_DSTEP = const(5)
_IINT = const(6)      # samples so far in this interval
_IWIN = const(7)      # samples in the window (saturates at _WIN)
_WPOS = const(8)      # window ring position
_DOR = const(9)
_DAND = const(10)
_DISC = const(11)     # samples still to discard (resume on the interval grid after an overrun)
_IHI = const(12)      # sample index of the interval in progress, hi * 2**24 + lo
_ILO = const(13)
_NREC = const(14)     # records in the frame being filled
_PERF = const(15)     # records per frame
_RECSZ = const(16)
_FHI = const(17)      # index of the frame's first record
_FLO = const(18)
_POS = const(19)      # next sample of the block (resume after a full frame)
_ASMF = const(20)     # 1: run each rail's samples with board.rail_thumb (ARMv7-M), 0: the viper loop
_GCNT = const(21)     # the run handed to board.rail_thumb: samples,
_GLIM = const(22)     # peak from the sample where the remaining count is <= this,
_GSTEP = const(23)    # bytes per sample,
_GDPTR = const(24)    # address of the run's first digital word and
_GDSTEP = const(25)   # its bytes per sample
_DSH = const(26)      # the digital inputs' bit position in their word (13 on the board, 0 interleaved)
_BYTES = const(27)    # 1: records written byte by byte (ARMv6-M faults on unaligned word stores)
_GNR = const(28)      # rails the machine-code loop has still to run (one call runs them all)
_RAWA = const(29)     # the block kernel's (board.rail_thumb.block_run) block address,
_NA = const(30)       # its samples,
_OUTA = const(31)     # and the frame buffer's address
_RB = const(32)       # per-rail blocks start here (byte offset 128: within reach of Thumb-1 loads)
# per-rail fields
_BASE = const(0)      # halfword of this rail's voltage code (current follows)
_OV = const(1)        # 0x8000 + voltage offset (sign-extends the unsigned halfword on the way)
_OI = const(2)
_SV = const(3)
_SI = const(4)
_SH = const(5)
_SL = const(6)
_MN = const(7)
_MX = const(8)
_PK = const(9)
_WH = const(10)
_WL = const(11)
# the run handed to board.rail_thumb (byte offsets there are these word indices * 4)
_AOV = const(12)      # voltage offset (plain)
_AOI = const(13)
_APTR = const(14)     # address of the run's first voltage code
_ADIG = const(15)     # 1 on the first rail: it also reduces the digital inputs
_ARING = const(18)    # address of the ring slot of the run's first sample (kept across runs)
_AREND = const(19)
_ARBEG = const(20)
_RS = const(21)       # words per rail block
_BADDR = const(32 + 21 * 4)   # the one-call block pass (BoardReducer.stream): address of the block in progress (0: none)
_BN = const(33 + 21 * 4)      # and its samples
# the mark: the link's bytes queued (its st[WRITTEN]) when a block's reduction began (_run at sample 0),
# so that the frames of a block DMA came round to while it was reduced come back out (BoardReducer.abandon)
_LINKA = const(34 + 21 * 4)   # address of the link's state words (board.usb.UsbLink.st), 0: none
_M_W = const(35 + 21 * 4)
_STATE_WORDS = const(36 + 21 * 4)
_MAXW = const(64)     # MAX_WINDOW
_HEAD = const(18)     # wire.HEADER_SIZE


@micropython.viper
def _run(st: ptr32, sx: ptr16, raw: ptr16, n: int, out: ptr8, ring: ptr16, fn) -> int:
    """Reduce samples st[_POS]..n-1 of raw; 1 when a frame filled up (send it, call again), else 0.

    With the Thumb-2 block kernel (_ASMF 2) the whole loop is machine code (board.rail_thumb.block_run).
    ``sx`` is ``st`` again, read as halfwords: a signed state word is loaded as
    ((high half sign-extended) << 16) | low half, because viper loads ptr32 words zero-extended on
    64-bit ports and sign-less on 32-bit ones. The window ring holds (hi + 0x8000, lo) as halfwords.
    """
    if st[_POS] == 0 and st[_LINKA] != 0:
        st[_M_W] = ptr32(st[_LINKA])[_LINK_WRITTEN]     # the mark, as the block's reduction begins
    if st[_ASMF] == 2:
        # Thumb-2: the block kernel does runs and records; only a discard comes back here
        st[_RAWA] = int(raw)
        st[_NA] = n
        st[_OUTA] = int(out)
        while True:
            res = int(fn(int(st)))
            if res != 2:
                return res
            pos = st[_POS]
            disc = st[_DISC]
            m = n - pos
            if disc < m:
                m = disc
            st[_DISC] = disc - m
            st[_POS] = pos + m
    nr = st[_NR]
    spi = st[_SPI]
    win = st[_WIN]
    step = st[_STEP]
    pos = st[_POS]
    while pos < n:
        disc = st[_DISC]
        if disc > 0:
            m = n - pos
            if disc < m:
                m = disc
            st[_DISC] = disc - m
            pos += m
            continue
        iint = st[_IINT]
        seg = spi - iint
        if n - pos < seg:
            seg = n - pos
        iwin = st[_IWIN]
        wpos = st[_WPOS]
        tpk = win - 1 - iwin          # first sample of the run whose window is complete
        wnext = wpos
        k = 0
        if st[_ASMF]:
            # Thumb-2: one call per rail for the whole run; the first rail also does the digital inputs
            st[_GCNT] = seg
            lim = seg
            if tpk > 0:
                lim = seg - tpk
            st[_GLIM] = lim
            st[_GSTEP] = 2 * step
            dstep = st[_DSTEP]
            st[_GDSTEP] = 2 * dstep
            st[_GDPTR] = int(raw) + 2 * (st[_DBASE] + pos * dstep)
            sa = int(st)
            while k < nr:
                r = _RB + k * _RS
                st[r + _APTR] = int(raw) + 2 * (st[r + _BASE] + pos * step)
                k += 1
            st[_GNR] = nr
            fn(sa + 4 * _RB, sa)
            r = _RB + (nr - 1) * _RS
            wnext = (st[r + _ARING] - st[r + _ARBEG]) >> 2
            k = nr
        while k < nr:
            r = _RB + k * _RS
            j = st[r + _BASE] + pos * step
            bv = st[r + _OV]
            bi = st[r + _OI]
            q = 2 * (r + _SV)
            sv = (((int(sx[q + 1]) ^ 0x8000) - 0x8000) << 16) | int(sx[q])
            q = 2 * (r + _SI)
            si = (((int(sx[q + 1]) ^ 0x8000) - 0x8000) << 16) | int(sx[q])
            q = 2 * (r + _SH)
            sh = (((int(sx[q + 1]) ^ 0x8000) - 0x8000) << 16) | int(sx[q])
            sl = st[r + _SL]
            q = 2 * (r + _MN)
            mn = (((int(sx[q + 1]) ^ 0x8000) - 0x8000) << 16) | int(sx[q])
            q = 2 * (r + _MX)
            mx = (((int(sx[q + 1]) ^ 0x8000) - 0x8000) << 16) | int(sx[q])
            q = 2 * (r + _PK)
            pk = (((int(sx[q + 1]) ^ 0x8000) - 0x8000) << 16) | int(sx[q])
            q = 2 * (r + _WH)
            wh = (((int(sx[q + 1]) ^ 0x8000) - 0x8000) << 16) | int(sx[q])
            wl = st[r + _WL]
            rb = k * (2 * _MAXW)          # halfword index of this rail's ring
            w = rb + 2 * wpos
            wend = rb + 2 * win
            t = 0
            while t < seg:
                v = (int(raw[j]) ^ 0x8000) - bv
                i = (int(raw[j + 1]) ^ 0x8000) - bi
                j += step
                if v > 32767:
                    v = 32767
                elif v < -32767:
                    v = -32767
                if i > 32767:
                    i = 32767
                elif i < -32767:
                    i = -32767
                p = v * i
                hi = p >> 15
                lo = p & 0x7FFF
                sv += v
                si += i
                sh += hi
                sl += lo
                if hi < mn:
                    mn = hi
                if hi > mx:
                    mx = hi
                hb = hi + 0x8000
                wh += hb - int(ring[w])
                wl += lo - int(ring[w + 1])
                ring[w] = hb
                ring[w + 1] = lo
                w += 2
                if w == wend:
                    w = rb
                if t >= tpk:
                    top = wh + (wl >> 15)
                    if top > pk:
                        pk = top
                t += 1
            st[r + _SV] = sv
            st[r + _SI] = si
            st[r + _SH] = sh
            st[r + _SL] = sl
            st[r + _MN] = mn
            st[r + _MX] = mx
            st[r + _PK] = pk
            st[r + _WH] = wh
            st[r + _WL] = wl
            k += 1
            wnext = (w - rb) >> 1
        # digital inputs: OR and AND over the interval (the Thumb-2 path did them with the first rail)
        if not st[_ASMF]:
            dstep = st[_DSTEP]
            dj = st[_DBASE] + pos * dstep
            dor = st[_DOR]
            dand = st[_DAND]
            t = 0
            while t < seg:
                d = int(raw[dj])
                dor |= d
                dand &= d
                dj += dstep
                t += 1
            st[_DOR] = dor
            st[_DAND] = dand
        st[_WPOS] = wnext
        iwin += seg
        if iwin > win:
            iwin = win
        st[_IWIN] = iwin
        pos += seg
        iint += seg
        if iint < spi:
            st[_IINT] = iint
            continue
        # interval complete: its record goes straight into the frame buffer
        st[_IINT] = 0
        nrec = st[_NREC]
        if nrec == 0:
            st[_FHI] = st[_IHI]
            st[_FLO] = st[_ILO]
        o = int(out) + _HEAD + nrec * st[_RECSZ]
        b = ptr8(o)
        dsh = st[_DSH]
        b[0] = (st[_DOR] >> dsh) & 0xFF
        b[1] = (st[_DAND] >> dsh) & 0xFF
        st[_DOR] = 0
        st[_DAND] = 0xFFFF
        o += 2
        k = 0
        while k < nr:
            r = _RB + k * _RS
            sl = st[r + _SL]
            if st[_BYTES]:
                # byte by byte: ARMv6-M faults on unaligned word and halfword stores
                b = ptr8(o)
                x = st[r + _SV]
                b[0] = x
                b[1] = x >> 8
                b[2] = x >> 16
                b[3] = x >> 24
                x = st[r + _SI]
                b[4] = x
                b[5] = x >> 8
                b[6] = x >> 16
                b[7] = x >> 24
                x = st[r + _SH] + (sl >> 15)
                b[8] = x
                b[9] = x >> 8
                b[10] = x >> 16
                b[11] = x >> 24
                x = sl & 0x7FFF
                b[12] = x
                b[13] = x >> 8
                x = st[r + _MN]
                b[14] = x
                b[15] = x >> 8
                x = st[r + _MX]
                b[16] = x
                b[17] = x >> 8
                x = st[r + _PK]
                b[18] = x
                b[19] = x >> 8
                b[20] = x >> 16
                b[21] = x >> 24
            else:
                # unaligned word and halfword stores: ARMv7-M and x86 both allow them; 32 bits of each
                # value are stored, so the 64-bit port's zero-extended loads write the same bytes
                w32 = ptr32(o)
                w32[0] = st[r + _SV]
                w32[1] = st[r + _SI]
                w32[2] = st[r + _SH] + (sl >> 15)
                h16 = ptr16(o + 12)
                h16[0] = sl & 0x7FFF
                h16[1] = st[r + _MN]
                h16[2] = st[r + _MX]
                ptr32(o + 18)[0] = st[r + _PK]
            st[r + _SV] = 0
            st[r + _SI] = 0
            st[r + _SH] = 0
            st[r + _SL] = 0
            st[r + _MN] = 0x3FFFFFFF
            st[r + _MX] = -0x3FFFFFFF
            st[r + _PK] = -0x40000000
            o += 22
            k += 1
        lo = st[_ILO] + spi
        if lo > 0xFFFFFF:
            lo -= 0x1000000
            st[_IHI] = st[_IHI] + 1
        st[_ILO] = lo
        nrec += 1
        st[_NREC] = nrec
        if nrec == st[_PERF]:
            st[_POS] = pos
            return 1
    st[_POS] = pos
    return 0


@micropython.viper
def _block_pass(st, rst, out, ring, fn) -> int:
    """The main loop's whole block while streaming, in one call from bytecode: take the oldest unread
    block of the DMA ring (board.blocks, state ``rst``), reduce it into the frame buffer ``out``,
    check that DMA did not come round to it meanwhile. Returns 0: no block ready; 1: a block reduced;
    2: a frame filled (send it, call again: the block goes on); 3: samples were lost before the
    oldest block (nothing taken: the caller's general path counts them); 4: a block reduced but
    overwritten while it was (counted in the ring's state)."""
    s = ptr32(st)
    a = s[_BADDR]
    if a == 0:
        a = int(take_block(rst, 1))
        if a == 0:
            return 0
        if a < 0:
            return 3
        s[_BADDR] = a
        s[_POS] = 0
    if int(_run(st, st, a, s[_BN], out, ring, fn)):
        return 2
    s[_BADDR] = 0
    if int(block_intact(rst)):
        return 1
    return 4


@micropython.viper
def _fill_pairs(ring: ptr16, n: int, first: int) -> int:
    """ring[0:n] = first, 0, first, 0, ... (the peak window ring emptied)."""
    k = 0
    while k < n:
        ring[k] = first
        ring[k + 1] = 0
        k += 2
    return 0


@micropython.viper
def _address(buf) -> int:
    return int(ptr8(buf))


class BoardReducer:
    """powerrig_fw.reduce.Reducer's interface (configure, restart, skip, feed) on the viper kernel.

    ``layout(bases, step, dig_base, dig_step)`` describes where the codes are in the blocks fed:
    by default the reference's interleaved layout; the RP2350 board sets its DMA layout.
    """

    def __init__(self, n_rails_total, kernel=None):
        """``kernel``: the rail loop ("thumb2", "v6m", "viper"); by default this CPU's (board.arch)."""
        self.stride = 2 * n_rails_total + 1
        self.n_total = n_rails_total
        self.st = array.array("i", bytes(4 * _STATE_WORDS))
        self.ring = array.array("H", bytes(2 * 2 * MAX_RAILS * MAX_WINDOW))
        self.rail_idx = array.array("b", bytes(MAX_RAILS))
        self.rail_run = arch.rail_kernel(kernel)
        self.use_asm = self.rail_run is not None
        self.kernel = kernel or ("viper" if not self.use_asm else "thumb2" if arch.THUMB2 else "v6m")
        self.st[_ASMF] = 2 if self.kernel == "thumb2" else 1 if self.use_asm else 0
        self.st[_BYTES] = 1 if (arch.ALIGNED_ONLY or self.kernel == "v6m") else 0
        self.pair_base = array.array("i", [2 * k for k in range(n_rails_total)])
        self.layout([2 * k for k in range(n_rails_total)], self.stride, self.stride - 1, self.stride)
        self.configure((0,), 25, 25)

    def layout(self, pair_bases, step, dig_base, dig_step, dig_shift=0):
        """Channel pair k's voltage code of sample s is at halfword pair_bases[k] + s * step; the
        digital inputs of sample s are bits dig_shift.. of halfword dig_base + s * dig_step."""
        for k in range(self.n_total):
            self.pair_base[k] = pair_bases[k]
        st = self.st
        st[_STEP] = step
        st[_DBASE] = dig_base
        st[_DSTEP] = dig_step
        st[_DSH] = dig_shift
        for k in range(st[_NR]):
            st[_RB + k * _RS + _BASE] = self.pair_base[self.rail_idx[k]]

    def configure(self, rail_indices, samples_per_interval, window_samples, offsets_v=None, offsets_i=None):
        check_config(rail_indices, samples_per_interval, window_samples)
        st = self.st
        st[_NR] = len(rail_indices)
        st[_SPI] = samples_per_interval
        st[_WIN] = window_samples
        for k in range(len(rail_indices)):
            r = _RB + k * _RS
            self.rail_idx[k] = rail_indices[k]
            st[r + _BASE] = self.pair_base[rail_indices[k]]
            st[r + _AOV] = offsets_v[k] if offsets_v else 0
            st[r + _AOI] = offsets_i[k] if offsets_i else 0
            st[r + _ADIG] = 1 if k == 0 else 0
            st[r + _OV] = 0x8000 + st[r + _AOV]
            st[r + _OI] = 0x8000 + st[r + _AOI]
        self.n_rails = len(rail_indices)
        self.spi = samples_per_interval
        self.window = window_samples
        self.restart(0, 0)

    def restart(self, idx_hi, idx_lo):
        """Begin a fresh interval at this sample index and forget the window (start, overrun)."""
        st = self.st
        st[_IHI] = idx_hi
        st[_ILO] = idx_lo
        st[_IINT] = 0
        st[_IWIN] = 0
        st[_WPOS] = 0
        st[_DOR] = 0
        st[_DAND] = 0xFFFF
        st[_DISC] = 0
        st[_BADDR] = 0          # a block half-reduced by stream() is not resumed into a new interval grid
        for k in range(st[_NR]):
            r = _RB + k * _RS
            for f in (_SV, _SI, _SH, _SL, _WH, _WL):
                st[r + f] = 0
            st[r + _MN] = 0x3FFFFFFF
            st[r + _MX] = -0x3FFFFFFF
            st[r + _PK] = wire.PEAK_NONE
        ring = self.ring
        ring_at = _address(ring)
        for k in range(st[_NR]):
            r = _RB + k * _RS
            st[r + _ARBEG] = ring_at + 2 * k * (2 * _MAXW)
            st[r + _AREND] = st[r + _ARBEG] + 4 * st[_WIN]
            st[r + _ARING] = st[r + _ARBEG]
        # the Thumb loop keeps hi signed, viper biased; in machine code: a loop in bytecode over the
        # 1,024 halfwords took 4 ms of the RP2040's main loop at every overrun, and made the next one
        _fill_pairs(ring, len(ring), 0 if st[_ASMF] else 0x8000)

    def skip(self, n_samples):
        """n samples were lost before the next block: same grid rule as the reference Reducer.skip."""
        st = self.st
        pos = st[_IINT] + n_samples - st[_DISC]
        if pos < 0:
            st[_DISC] = -pos
            return
        spi = st[_SPI]
        discard = (spi - pos % spi) % spi
        lo = st[_ILO] + pos + discard
        hi = st[_IHI]
        while lo > wire.INDEX_LO_MASK:
            lo -= 1 << wire.INDEX_LO_BITS
            hi += 1
        self.restart(hi, lo)
        st[_DISC] = discard

    def blocks(self, ring_state, block_samples):
        """Read the board's DMA ring (board.blocks.BlockRing's state words) in ``stream``."""
        self.ring_state = ring_state
        self.st[_BN] = block_samples
        self.st[_BADDR] = 0

    def stream(self, framer):
        """The main loop's block while streaming with nothing else to do: one native call takes the
        oldest DMA block, reduces it and checks it (_block_pass, whose result this returns), where
        adc_read, feed and intact would cost three bytecode calls and their attribute lookups. Only a
        full frame comes back to bytecode (Framer.send_full); nothing allocates."""
        st = self.st
        st[_NREC] = framer.n                 # the framer may have flushed since the last block
        st[_PERF] = framer.per_frame
        st[_RECSZ] = framer.rec_size
        r = _block_pass(st, self.ring_state, framer.buf, self.ring, self.rail_run)
        if r == 0 or r == 3:
            return r
        while r == 2:
            framer.n = st[_NREC]
            framer.idx_hi = st[_FHI]
            framer.idx_lo = st[_FLO]
            framer.send_full()
            st[_NREC] = 0
            r = _block_pass(st, self.ring_state, framer.buf, self.ring, self.rail_run)
        framer.n = st[_NREC]
        framer.idx_hi = st[_FHI]
        framer.idx_lo = st[_FLO]
        return r

    def link(self, link):
        """The board's link (board.usb.UsbLink): a block DMA overwrote while it was reduced takes
        its frames back out of the link's queue (abandon)."""
        self.usb = link
        self.st[_LINKA] = _address(link.st)

    def abandon(self, framer):
        """The block reduced since the mark was overwritten by DMA while it was reduced: every record
        holding one of its samples is dropped, none is delivered as valid (issue 43). The frames sent
        since the mark come back out of the link's queue (their seq numbers are used again), the
        records held and the interval in progress are dropped, and reduction resumes on the interval
        grid at the next boundary with a fresh peak window; the next frame carries F_OVERRUN, so the
        host sees a gap of whole intervals. Returns the samples of the gap: from the first record
        not delivered to the first the next frame will hold. Not a hot path (it allocates nothing
        but may form a small tuple)."""
        st = self.st
        usb = getattr(self, "usb", None)
        n = usb.take_back(st[_M_W]) if usb is not None else 0
        flags = framer.flags
        if n:
            # full frames only since the mark (send_full); the first taken back is the oldest record
            # not delivered, and its flags are the ones the mark saw (a RESTART is kept)
            back = n // (wire.OVERHEAD + framer.per_frame * framer.rec_size)
            framer.frames_sent -= back
            framer.seq = (framer.seq - back) & 0xFFFF
            q = usb.queue
            h = usb.head
            size = usb.size
            flags = q[(h + 4) % size]
            lo = q[(h + 10) % size] | (q[(h + 11) % size] << 8) | (q[(h + 12) % size] << 16)
            hi = q[(h + 13) % size] | (q[(h + 14) % size] << 8) | (q[(h + 15) % size] << 16) | (q[(h + 16) % size] << 24)
        elif framer.n:
            hi = framer.idx_hi                    # the records held were the first lost
            lo = framer.idx_lo
        else:
            hi = st[_IHI]                         # else the interval in progress
            lo = st[_ILO]
        framer.flags = flags | wire.F_OVERRUN
        framer.n = 0
        st[_NREC] = 0
        self.skip(0)                              # the interval in progress is dropped: the next boundary
        return ((st[_IHI] - hi) << wire.INDEX_LO_BITS) + st[_ILO] - lo

    def feed(self, raw, n_samples, framer):
        """Reduce n_samples from raw (int16 codes in the configured layout) into framer's frames."""
        st = self.st
        st[_NREC] = framer.n                 # the framer may have flushed since the last block
        st[_PERF] = framer.per_frame
        st[_RECSZ] = framer.rec_size
        st[_FHI] = framer.idx_hi
        st[_FLO] = framer.idx_lo
        st[_POS] = 0
        buf = framer.buf
        while _run(st, st, raw, n_samples, buf, self.ring, self.rail_run):
            framer.n = st[_NREC]
            framer.idx_hi = st[_FHI]
            framer.idx_lo = st[_FLO]
            framer.send_full()
            st[_NREC] = 0
        framer.n = st[_NREC]
        framer.idx_hi = st[_FHI]
        framer.idx_lo = st[_FLO]
