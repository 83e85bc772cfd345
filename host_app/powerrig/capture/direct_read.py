"""A closed capture's float32 signals read straight from a memory map, every CRC checked as pyjls does.

Why: pyjls hands over a signal's samples one 4 KB data chunk at a time, each a seek, two reads into
its own buffer, a CRC-32C and a copy out: ~3x the cost of reading the whole file's bytes, for the 7 of
15 signals an analysis reads (docs/scale.md, issue 42). Here the data chunks are found from the JLS
level-1 index and read in one compiled loop from the page cache: header CRC, tag, signal, first
sample, count and payload CRC checked, then one copy. Anything this module does not expect (a file
not finalised, a format it does not know, an omitted chunk, a CRC that does not match) makes it
decline, and the caller reads through pyjls, which repairs or raises as before.

The layout is the JLS v2 format's own (jetperch/jls ``include/jls/format.h``: ``jls_file_header_s``,
``jls_chunk_header_s``, ``jls_payload_header_s``, ``jls_fsr_index_s``, the tags ``JLS_TAG_TRACK_FSR_*``;
``src/raw.c`` ``payload_size_on_disk``; ``src/crc32c_intel_sse4.c`` for the CRC-32C over the first 28
header bytes and over the payload). x86-64 with SSE 4.2 only (the CRC instruction); elsewhere
``available()`` is False and pyjls reads everything.
"""
from __future__ import annotations

import mmap
import os
import platform
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

FILE_HEADER = 32                 # jls_file_header_s
CHUNK_HEADER = 32                # jls_chunk_header_s
PAYLOAD_HEADER = 16              # jls_payload_header_s
TAG_FSR_HEAD = 0x21              # JLS_TRACK_TAG_PACK(FSR, HEAD)
TAG_FSR_DATA = 0x22              # JLS_TRACK_TAG_PACK(FSR, DATA)
TAG_FSR_INDEX = 0x23             # JLS_TRACK_TAG_PACK(FSR, INDEX)
F32 = 0x2004                     # JLS_DATATYPE_F32
SCAN_LIMIT = 1 << 16             # chunks walked from the file's start to find the track heads
# A chunk read as 64-bit words from its (8-aligned) offset: 0 item_next, 1 item_prev, 2 tag (byte 0),
# chunk_meta (bytes 2-3) and payload_length (high half), 3 payload_prev_length and the header's CRC
# (high half); then the payload: 4 the first sample id, 5 entry_count (low half) and entry_size_bits,
# 6... the entries (samples, or an index's offsets).


def _sse42() -> bool:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " sse4_2" in line for line in f)
    except OSError:
        return False


_HAVE_CRC = _sse42()


def available() -> bool:
    """Whether this host can read directly (x86-64 with the SSE 4.2 CRC-32C instruction)."""
    return _HAVE_CRC


def _crc_intrinsic(name: str, width: int, operand: int):
    @intrinsic
    def crc(typingctx, acc, value):
        sig = types.uint64(types.uint64, types.uint64)

        def codegen(context, builder, signature, args):
            fnty = ir.FunctionType(ir.IntType(width), [ir.IntType(width), ir.IntType(operand)])
            fn = cgutils.get_or_insert_function(builder.module, fnty, name)
            a = builder.trunc(args[0], ir.IntType(width)) if width < 64 else args[0]
            v = builder.trunc(args[1], ir.IntType(operand)) if operand < 64 else args[1]
            r = builder.call(fn, [a, v])
            return builder.zext(r, ir.IntType(64)) if width < 64 else r
        return sig, codegen
    return crc


_crc64 = _crc_intrinsic("llvm.x86.sse42.crc32.64.64", 64, 64)
_crc32 = _crc_intrinsic("llvm.x86.sse42.crc32.32.32", 32, 32)
_crc8 = _crc_intrinsic("llvm.x86.sse42.crc32.32.8", 32, 8)

MASK32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def _header_ok(u64, off):
    """The chunk header at ``off`` (8-aligned) is whole and its CRC-32C (the first 28 bytes) matches."""
    w = off // 8
    if w + 4 > len(u64):
        return False
    c = _crc64(np.uint64(0xFFFFFFFF), u64[w])
    c = _crc64(c, u64[w + 1])
    c = _crc64(c, u64[w + 2])
    c = _crc32(c, u64[w + 3] & MASK32)
    return (c ^ MASK32) == (u64[w + 3] >> np.uint64(32))


@njit(cache=True, nogil=True)
def _payload_ok(u8, u64, off, length):
    """The payload CRC-32C that follows the payload (after padding to 8 bytes) matches. One chain of
    CRC instructions: three interleaved chains measured slower here, as the pass waits on memory."""
    start = off + CHUNK_HEADER
    pad = (length + 4) % 8
    pad = 0 if pad == 0 else 8 - pad
    at = start + length + pad
    if at + 4 > len(u8):
        return False
    c = np.uint64(0xFFFFFFFF)
    w0 = start // 8
    nw = length // 8
    for i in range(nw):
        c = _crc64(c, u64[w0 + i])
    for i in range(start + nw * 8, start + length):
        c = _crc8(c, np.uint64(u8[i]))
    want = np.uint64(u8[at]) | (np.uint64(u8[at + 1]) << np.uint64(8)) | \
        (np.uint64(u8[at + 2]) << np.uint64(16)) | (np.uint64(u8[at + 3]) << np.uint64(24))
    return (c ^ MASK32) == want


@njit(cache=True, nogil=True)
def _on_disk(length):
    """raw.c payload_size_on_disk: payload, padding to 8 bytes, the 4-byte CRC."""
    if length == 0:
        return 0
    pad = (length + 4) % 8
    return length + (0 if pad == 0 else 8 - pad) + 4


@njit(cache=True, nogil=True)
def _find_heads(u64, sids, heads, limit):
    """The FSR track head chunks' first data-level offsets (jls_track_head_s.offset[]), walking the
    chunks from the file's start; ``heads[i, level]``. Returns how many signals were found."""
    off = FILE_HEADER
    found = 0
    for _ in range(limit):
        if off % 8 != 0 or not _header_ok(u64, off):
            return found
        w2 = u64[off // 8 + 2]
        tag = w2 & np.uint64(0xFF)
        meta = (w2 >> np.uint64(16)) & np.uint64(0xFFFF)
        length = np.int64(w2 >> np.uint64(32))
        if tag == TAG_FSR_HEAD and length == 128:
            for i in range(len(sids)):
                if meta == sids[i] and heads[i, 0] < 0:
                    for lv in range(16):
                        heads[i, lv] = np.int64(u64[off // 8 + 4 + lv])
                    found += 1
            if found == len(sids):
                return found
        off = off + CHUNK_HEADER + _on_disk(length)       # the next chunk in the file (not item_next)
    return found


@njit(cache=True, nogil=True)
def _index(u8, u64, first, sid, out):
    """The level-1 index chain from ``first``: every data chunk's offset, in order, into ``out``.
    Returns the count, or -1 where a chunk is not what the index says (the caller then declines)."""
    off = first
    n = 0
    meta_want = np.uint64(sid | (1 << 12))
    while off != 0:
        if off % 8 != 0 or not _header_ok(u64, off):
            return -1
        w2 = u64[off // 8 + 2]
        length = np.int64(w2 >> np.uint64(32))
        if (w2 & np.uint64(0xFF)) != TAG_FSR_INDEX or ((w2 >> np.uint64(16)) & np.uint64(0xFFFF)) != meta_want:
            return -1
        if not _payload_ok(u8, u64, off, length):
            return -1
        ph = u64[off // 8 + 5]
        count = np.int64(ph & MASK32)
        if ((ph >> np.uint64(32)) & np.uint64(0xFFFF)) != 64 or 16 + 8 * count > length:
            return -1
        if n + count > len(out):
            return -1
        for j in range(count):
            out[n + j] = np.int64(u64[off // 8 + 6 + j])
        n += count
        off = np.int64(u64[off // 8])       # item_next: the next index chunk of this level
    return n


@njit(cache=True, nogil=True)
def _copy(u8, u64, f32, offsets, sid, first_id, spd, start, n, out):
    """Samples [start, start + n) (file sample ids) into ``out``, chunk by chunk from ``offsets``
    (chunk k holds ids first_id + k * spd ...). Returns 0, or 1 + the chunk's index where a check
    failed (nothing is trusted past it)."""
    k = (start - first_id) // spd
    got = 0
    while got < n:
        if k < 0 or k >= len(offsets):
            return 1 + k
        off = offsets[k]
        if off <= 0 or off % 8 != 0 or not _header_ok(u64, off):
            return 1 + k
        w2 = u64[off // 8 + 2]
        length = np.int64(w2 >> np.uint64(32))
        if (w2 & np.uint64(0xFF)) != TAG_FSR_DATA or ((w2 >> np.uint64(16)) & np.uint64(0xFFFF)) != sid:
            return 1 + k
        ts = np.int64(u64[off // 8 + 4])
        ph = u64[off // 8 + 5]
        count = np.int64(ph & MASK32)
        if ts != first_id + k * spd or ((ph >> np.uint64(32)) & np.uint64(0xFFFF)) != 32 \
                or length != 16 + 4 * count or count > spd:
            return 1 + k
        if not _payload_ok(u8, u64, off, length):
            return 1 + k
        i0 = start + got - ts
        take = min(count - i0, n - got)
        if take <= 0:
            return 1 + k
        base = (off + CHUNK_HEADER + PAYLOAD_HEADER) // 4 + i0
        out[got:got + take] = f32[base:base + take]
        got += take
        k += 1
    return 0


class DirectRead:
    """The float32 signals of one finalised JLS file, mapped once; ``read`` returns None where it
    declines (the caller then reads through pyjls).

    A mapped file cut short by another program (a copy over it; powerrig's own writer makes a new file) would
    kill the process with SIGBUS at a page past its new end; each read first checks the file's size
    and declines if it shrank. Left: a cut in the milliseconds of one read's copy (SQLite's memory-
    mapped I/O carries the same caveat). Three other ways measured slower: reading the chunks'
    regions with ``pread`` (the whole file, 1.1 against 0.4 CPU s for 10 hours), ``MADV_POPULATE_READ``,
    and three interleaved CRC chains (the pass waits on memory, not on the CRC)."""

    def __init__(self, path: Path, signals: dict[int, tuple[int, int]]):
        """``signals``: {signal id: (sample_id_offset, samples_per_data)} of the float32 signals."""
        self._f = open(path, "rb")
        self._map = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
        size = len(self._map)
        self._u8 = np.frombuffer(self._map, np.uint8)
        self._u64 = np.frombuffer(self._map, np.uint64, count=size // 8)
        self._f32 = np.frombuffer(self._map, np.float32, count=size // 4)
        self._signals = dict(signals)
        sids = np.array(sorted(self._signals), np.int64)
        heads = np.full((len(sids), 16), -1, np.int64)
        _find_heads(self._u64, sids, heads, SCAN_LIMIT)
        self._heads = {int(s): heads[i] for i, s in enumerate(sids) if heads[i, 0] >= 0}
        self._offsets: dict[int, np.ndarray | None] = {}
        self._advised = 0            # the file's bytes below this were handed to the kernel's readahead

    def close(self) -> None:
        """Drop the mapping: it is unmapped once nothing refers to it (not ``mmap.close()``, which
        raises while numba's compiler still holds an argument of a first call)."""
        self._u8 = self._u64 = self._f32 = self._map = None
        self._offsets.clear()
        self._f.close()

    def _chunk_offsets(self, sid: int) -> np.ndarray | None:
        if sid not in self._offsets:
            head = self._heads.get(sid)
            got = None
            if head is not None and head[1] > 0:
                out = np.empty(len(self._u64) // 512 + 16, np.int64)   # at most one data chunk per 4 KB
                n = _index(self._u8, self._u64, int(head[1]), sid, out)
                if n > 0 and int(out[0]) == int(head[0]):
                    got = out[:n].copy()
            self._offsets[sid] = got
        return self._offsets[sid]

    def serves(self, sid: int) -> bool:
        """Whether ``read`` may serve this signal (a float32 signal whose index was found or not yet
        looked at)."""
        return self._map is not None and sid in self._signals and self._offsets.get(sid, True) is not None

    def _read_ahead(self, offsets: np.ndarray, k0: int, k1: int) -> None:
        """Ask for the pages of chunks k0..k1 and what lies between them in one readahead: a file not
        in the page cache is then read in large requests, not one small fault at a time."""
        k0, k1 = max(0, k0), min(len(offsets) - 1, k1)
        if k1 < k0:
            return
        hi = min(len(self._map), int(offsets[k1]) + (1 << 16))
        lo = max(self._advised, int(offsets[k0])) & ~(mmap.PAGESIZE - 1)
        if hi > lo:
            self._map.madvise(mmap.MADV_WILLNEED, lo, hi - lo)
            self._advised = hi

    def read(self, sid: int, start: int, n: int, out: np.ndarray | None = None) -> np.ndarray | None:
        """n float32 samples from ``start`` (the API's sample id), into ``out`` if given (n float32), or
        None: not read here."""
        if self._map is None or sid not in self._signals:
            return None
        if os.fstat(self._f.fileno()).st_size < len(self._map):
            self.close()         # cut short since it was mapped (overwritten in place): its pages past
            return None          # the new end would raise SIGBUS; pyjls reads, or says it is damaged
        offsets = self._chunk_offsets(sid)
        if offsets is None:
            return None
        id_offset, spd = self._signals[sid]
        self._read_ahead(offsets, start // spd, (start + n - 1) // spd)
        out = np.empty(n, np.float32) if out is None else out
        if _copy(self._u8, self._u64, self._f32, offsets, sid, id_offset, spd, start + id_offset, n, out):
            return None
        return out


def compile_all() -> None:
    """Compile the kernels into numba's cache (``make setup``) for the argument types ``DirectRead``
    passes (the map's views are read-only), so no first read waits for the compiler."""
    if not _HAVE_CRC:
        return
    u64 = np.zeros(16, np.uint64)
    u8, f32 = u64.view(np.uint8), u64.view(np.float32)
    for a in (u8, u64, f32):
        a.flags.writeable = False
    _find_heads(u64, np.zeros(1, np.int64), np.full((1, 16), -1, np.int64), 1)
    _index(u8, u64, 32, 1, np.empty(1, np.int64))
    _copy(u8, u64, f32, np.zeros(1, np.int64), 1, 0, 1024, 0, 1, np.empty(1, np.float32))
