"""Prepare a cut JLS file (a temporary copy, never the user's) for pyjls's own repair.

Each JLS chunk header holds a pointer to the next chunk of its list (a signal's data, a summary
level, the user data), filled in once that next chunk is written; the header sits earlier in the file
than the chunk it points to. A file cut after the fact (an interrupted copy, ``head -c``) keeps
such pointers to chunks that are now past its end, and pyjls 0.17's repair then reports that signal
with as many samples as it had chunks (2, 3, 4 ... instead of thousands). Clearing those pointers
(0 = end of list, as JLS writes it) lets pyjls repair every signal up to its last whole chunk.

Chunk header (jls/format.h, struct jls_chunk_header_s, 32 bytes little-endian): item_next u64,
item_prev u64, tag u8, rsv0 u8, chunk_meta u16, payload_length u32, payload_prev_length u32,
crc32 u32 (CRC-32C of the 28 bytes before it). A payload is followed by its CRC and padded to 8 bytes.
"""
from __future__ import annotations

import mmap
import struct
from pathlib import Path

FILE_HEADER_SIZE = 32
CHUNK_HEADER = struct.Struct("<QQBBHIII")


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as JLS uses for chunk headers (only ever run on 28 bytes here)."""
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def payload_on_disk(n: int) -> int:
    """Bytes a chunk's payload of ``n`` bytes takes on disk: the payload, its CRC, padding to 8."""
    if not n:
        return 0
    pad = (n + 4) & 7
    return n + 4 + ((8 - pad) if pad else 0)


def whole_chunks_end(buf) -> tuple[int, list[int]]:
    """(offset just past the last whole chunk, offsets of the whole chunks' headers)."""
    size = len(buf)
    off, heads = FILE_HEADER_SIZE, []
    while off + CHUNK_HEADER.size <= size:
        fields = CHUNK_HEADER.unpack_from(buf, off)
        nxt = off + CHUNK_HEADER.size + payload_on_disk(fields[5])
        if nxt > size or crc32c(buf[off:off + 28]) != fields[-1]:
            break
        heads.append(off)
        off = nxt
    return off, heads


def clear_dangling_pointers(path: Path) -> int:
    """Set to 0 every next-chunk pointer that points at or past the last whole chunk; returns how many.

    Only for a temporary copy: it writes into the file."""
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as buf:
        end, heads = whole_chunks_end(buf)
        cleared = 0
        for off in heads:
            fields = CHUNK_HEADER.unpack_from(buf, off)
            if fields[0] < end:
                continue
            raw = CHUNK_HEADER.pack(0, *fields[1:-1], 0)[:28]
            buf[off:off + CHUNK_HEADER.size] = raw + struct.pack("<I", crc32c(raw))
            cleared += 1
        buf.flush()
    return cleared


def cut_after_last_whole_chunk(path: Path, limit: int | None = None) -> int:
    """After a write failed mid-capture (disk full): cut the user's file after its last whole chunk and
    mark its header "never closed" (length 0, CRC-32C of the header's first 28 bytes), so every reader
    recovers it as it recovers a killed capture, up to the data written before the failure. Truncating
    needs no free space. ``limit``: the file's size when the failure was seen (what the library wrote
    after it, its closing index included, describes data that never reached the disk). Returns the
    bytes cut off."""
    with open(path, "r+b") as f:
        size = f.seek(0, 2)
        if size <= FILE_HEADER_SIZE:
            return 0
        with mmap.mmap(f.fileno(), 0) as buf:
            end, _heads = whole_chunks_end(buf if limit is None else buf[:limit])
        f.truncate(end)
        f.seek(0)
        head = bytearray(f.read(FILE_HEADER_SIZE))
        head[16:24] = bytes(8)
        head[28:32] = struct.pack("<I", crc32c(bytes(head[:28])))
        f.seek(0)
        f.write(head)
    return size - end
