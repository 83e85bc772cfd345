"""Host side of wire format v1 (docs/protocol.md): frame decoding with resync and CRC, and the
conversion of interval records to SI units with numpy.

The constants come from the firmware's own module so the two sides cannot disagree.
"""
from __future__ import annotations

import functools
import json
import struct
import time
import zlib
from dataclasses import dataclass

import numpy as np
from powerrig_fw import wire as fw  # the firmware's wire module is the spec (installed beside powerrig)
from powerrig_fw import calibration as fw_cal  # gains at temperature: one rule for device and host
from powerrig_fw.reduce import CODE_MAX  # the device clamps every code to +-CODE_MAX before it sums

from powerrig.core.blocks import CLIP_I, CLIP_V
from powerrig.core.json_values import plain
from powerrig.core.names import RAIL_FIELDS

SYNC = bytes((fw.SYNC0, fw.SYNC1))
HEADER = struct.Struct("<2sBBBBHHQ")
assert HEADER.size == fw.HEADER_SIZE
_CRC = struct.Struct("<I")      # a frame's CRC trailer, read in place (no slice, no int.from_bytes)

T_DATA, T_COMMAND, T_REPLY, T_BURST, T_NOTICE = fw.T_DATA, fw.T_COMMAND, fw.T_REPLY, fw.T_BURST, fw.T_NOTICE
F_OVERRUN, F_LAST, F_RESTART = fw.F_OVERRUN, fw.F_LAST, fw.F_RESTART


@dataclass(slots=True)
class Frame:
    type: int
    flags: int
    count: int
    seq: int
    index: int          # first sample index (u64)
    payload: bytes
    t_host: float = 0.0  # host UTC when the bytes holding the frame's end were read
    # ... and its first byte: the tightest receive stamp a clock ping can have (the device stamped
    # its index before sending any byte; a reply often arrives in two reads, the first of one byte)
    t_first: float = 0.0


def encode(ftype: int, payload: bytes, seq: int = 0, flags: int = 0, count: int = 0, index: int = 0) -> bytes:
    """One frame (host -> device commands; also the golden-vector generator)."""
    body = HEADER.pack(SYNC, fw.VERSION, ftype, flags, count, len(payload), seq & 0xFFFF, index) + payload
    return body + struct.pack("<I", zlib.crc32(body[2:]))


def encode_command(doc: dict, seq: int = 0) -> bytes:
    payload = json.dumps(doc, separators=(",", ":"), default=plain).encode()
    if len(payload) > fw.MAX_PAYLOAD:
        raise ValueError(f"command of {len(payload)} bytes exceeds the {fw.MAX_PAYLOAD}-byte frame limit")
    return encode(T_COMMAND, payload, seq)


class FrameDecoder:
    """Bytes in, whole frames out. Garbage and corrupt frames cost bytes, never the stream.

    Counters, each for what it is: ``crc_errors`` (a well-formed candidate whose CRC failed),
    ``bad_version`` (a header of another protocol version), ``oversize`` (a header claiming more
    than the largest payload), ``stale_headers`` (a header whose frame did not complete within
    ``max_wait_s``), ``bad_bytes`` (bytes skipped while resynchronising), ``frames``.

    A header is only a claim: a corrupt or fake one that announces up to 2 KB would hold back every
    real frame behind it until that many more bytes arrive, so the wait is bounded in bytes
    (``max_payload``) and in time (``max_wait_s`` of quiet: no byte at all for that long while the
    frame is incomplete; 1 s stays well under the 3 s stall limit). The time is the link's quiet, not
    the frame's age: a host starved under load reads a frame's bytes in pieces seconds apart, and a
    frame whose bytes keep coming is not given up (issue 43: such frames were dropped as stale
    although the board had lost nothing); bytes that keep coming end a false claim within 2 KB anyway.
    """

    def __init__(self, max_payload: int = fw.MAX_PAYLOAD, max_wait_s: float = 1.0):
        self.max_payload = max_payload
        self.max_wait_s = max_wait_s
        self._buf = bytearray()
        self._waiting_since: float | None = None   # when the incomplete frame at the buffer's start was seen
        self._last_data: float | None = None       # when the last bytes came (the link's quiet starts there)
        self._arrivals: list[list] = []     # [end offset in the buffer, read time] of the bytes held
        self.crc_errors = 0
        self.bad_version = 0
        self.oversize = 0
        self.stale_headers = 0
        self.bad_bytes = 0
        self.frames = 0

    @property
    def buffered(self) -> int:
        """Bytes held while waiting for the rest of a frame."""
        return len(self._buf)

    def feed(self, data: bytes, t_host: float | None = None,
             reads: list[tuple[int, float]] | None = None) -> list[Frame]:
        """Frames completed by ``data``. ``t_host``: host time the bytes were read (time.time() if
        None); it also times the wait for an incomplete frame, so feed(b"") lets a stale one go.
        ``reads``: ``data`` was read in pieces, (end offset in ``data``, read time) each, the last
        ending at len(data) at ``t_host``: one pass over them all, a reply or notice still stamped
        (``t_first``) by the read that brought its first byte."""
        now = time.time() if t_host is None else t_host
        buf = self._buf
        held = len(buf)
        buf += data
        arrivals = self._arrivals
        if reads:
            for end, t in reads[:-1]:
                arrivals.append([held + end, t])
            held += reads[-2][0] if len(reads) > 1 else 0       # the last read starts here
        if data:
            arrivals.append([len(buf), now])
            self._last_data = now
        out: list[Frame] = []
        pos = 0
        n = len(buf)
        unpack = HEADER.unpack_from
        crc = zlib.crc32
        crc_at = _CRC.unpack_from
        hsize, version, max_payload, find = fw.HEADER_SIZE, fw.VERSION, self.max_payload, buf.find
        skipped = 0     # bad bytes before the frames of this call (counted once, at the end)
        waiting = False
        mv = memoryview(buf)        # one view per read: slices of it copy once (released before the del)
        while True:
            i = find(SYNC, pos)
            if i < 0:
                keep = n - 1 if n and buf[-1] == fw.SYNC0 else n
                skipped += max(0, keep - pos)
                pos = max(pos, keep)
                break
            skipped += i - pos
            pos = i
            if n - pos < hsize:
                break
            _s, ver, ftype, flags, count, length, seq, index = unpack(buf, pos)
            if ver != version or length > max_payload:
                if ver != version:
                    self.bad_version += 1
                else:
                    self.oversize += 1
                self.bad_bytes += 1
                pos += 1
                continue
            end = pos + hsize + length
            if n < end + 4:
                if (pos == 0 and self._waiting_since is not None and not data
                        and now - max(self._waiting_since, self._last_data or 0.0) > self.max_wait_s):
                    # the link went quiet before this frame's end: its header was a false claim; resync after it
                    self.stale_headers += 1
                    self.bad_bytes += 1
                    self._waiting_since = None
                    pos += 1
                    continue
                if pos != 0 or self._waiting_since is None:
                    self._waiting_since = now       # a new incomplete frame: start timing its wait
                waiting = True
                break
            if crc(mv[pos + 2:end]) != crc_at(buf, end)[0]:
                self.crc_errors += 1
                self.bad_bytes += 1
                pos += 1
                continue
            t_first = now
            if pos < held and (ftype != T_DATA or not reads):   # began in an earlier read: its time
                t_first = next(t for e, t in arrivals if e > pos)
            out.append(Frame(ftype, flags, count, seq, index, bytes(mv[pos + hsize:end]), now, t_first))
            pos = end + 4
        mv.release()
        self.bad_bytes += skipped
        if not waiting:
            self._waiting_since = None
        del buf[:pos]
        if pos:
            for a in arrivals:
                a[0] -= pos
            while arrivals and arrivals[0][0] <= 0:
                del arrivals[0]
        self.frames += len(out)
        return out


@functools.lru_cache(maxsize=None)
def record_dtype(n_rails: int) -> np.dtype:
    """numpy dtype of one interval record with n_rails rails (packed, little-endian); built once per
    rail count (a structured dtype takes longer to build than to apply to a block)."""
    fields = [("dig_or", "u1"), ("dig_and", "u1")]
    for k in range(n_rails):
        fields += [(f"sum_v{k}", "<i4"), (f"sum_i{k}", "<i4"), (f"sum_p_hi{k}", "<i4"), (f"sum_p_lo{k}", "<u2"),
                   (f"p_min{k}", "<i2"), (f"p_max{k}", "<i2"), (f"peak{k}", "<i4")]
    dt = np.dtype(fields)
    assert dt.itemsize == fw.record_size(n_rails)
    return dt


@dataclass(frozen=True)
class RailScale:
    """Codes -> SI for one rail: lsb from the device description times calibration gain."""
    name: str
    v_per_code: float
    i_per_code: float

    @property
    def w_per_product(self) -> float:
        return self.v_per_code * self.i_per_code


def rail_scales(description: dict, rails: list[str]) -> list[RailScale]:
    """Volts/amps per code of each rail: the calibration's gains at the board temperature the device
    reported (temperature coefficients, powerrig_fw.calibration.gain_at)."""
    by_name = {r["name"]: r for r in description["rails"]}
    calibration = description.get("calibration", {})
    cal = calibration.get("rails", {})
    temp, t_ref = description.get("board_temp_c"), calibration.get("t_ref_c", 25.0)
    out = []
    for name in rails:
        r = by_name[name]
        c = cal.get(name, {})
        out.append(RailScale(name, r["v_lsb"] * fw_cal.gain_at(c, "v", temp, t_ref),
                             r["i_lsb"] * fw_cal.gain_at(c, "i", temp, t_ref)))
    return out


# Range saturation, from the record's codes (docs/protocol.md "DATA records"; codes clamped to +-CODE_MAX):
# - sustained: the mean code sum/n of an interval whose every sample sits at the clamp is CODE_MAX (noise
#   only pulls clamped samples down); CLIP_MARGIN = 1 % of full scale (327 codes) below it allows for
#   that, while a signal at 95 % of full scale with a few % of ripple (mean 31129 codes) stays far below.
# - one sample at the current clamp: p_max = floor(max(v*i) / 2**15), and such a sample with voltage
#   v_s makes max(v*i) >= v_s * CODE_MAX; the sample's v_s is unknown, the interval's mean voltage code
#   v_bar is known and v_s >= v_bar * (1 - 1 %) on a rail whose voltage holds within 1 % over 1 ms. So
#   clipped when the largest product p_max allows, (p_max + 1) * 2**15, reaches v_bar * (CODE_MAX -
#   CLIP_MARGIN) (p_min likewise at the negative clamp). Only with v_bar >= CODE_MAX / 32: on a rail that
#   is off, the ceiling is near 0 and noise would reach it. And only where the voltage is steady: v_bar
#   within V_STEADY (2 %) of its neighbouring records' (those in the same decoded run). A power-on or a
#   cut inside the interval (a step of size d at any point leaves v_bar at least d/2 from one neighbour)
#   puts samples far above v_bar, where an inrush at 60 % of full scale would pass the ceiling; such an
#   interval is judged by its mean alone.
# - voltage: the sustained test only; one voltage sample at the clamp cannot be told from a current
#   spike by p_max (the product does not say which factor was large).
CLIP_MARGIN = CODE_MAX // 100
CLIP_MIN_V_CODE = CODE_MAX // 32
V_STEADY = 0.02


def clipped(rec: np.ndarray, k: int, interval_samples: int) -> np.ndarray:
    """CLIP_I | CLIP_V per record of rail ``k`` (u8): where the codes reached the clamp (see above).

    The common record is far from every clamp: a screen in integers (a few passes) says so, and the
    full test runs only for records that pass it (a second of records at 100 us: 0.9 -> ~0.2 ms)."""
    if not _near_clamp(rec, k, interval_samples):
        return np.zeros(len(rec), np.uint8)
    return _clipped(rec, k, interval_samples)


def _near_clamp(rec: np.ndarray, k: int, n: int) -> bool:
    """False only where no record of rail ``k`` can pass ``_clipped``'s tests: each test in integers,
    widened by one unit for the float rounding there (sums are below 2**31, products below 2**47)."""
    lim = (CODE_MAX - CLIP_MARGIN) * n
    if not len(rec):
        return False
    # first the block's extremes (one reduction per field, no int64 temporaries): they settle a calm,
    # powered rail; a rail near off or a record near a clamp goes on to the test record by record
    v, i, p_max, p_min = rec[f"sum_v{k}"], rec[f"sum_i{k}"], rec[f"p_max{k}"], rec[f"p_min{k}"]
    v_lo = int(v.min())
    if (max(int(v.max()), -v_lo, int(i.max()), -int(i.min())) < lim - 1
            and max(int(p_max.max()) + 1, -int(p_min.min())) * ((1 << fw.P_SHIFT) * n)
            < v_lo * (CODE_MAX - CLIP_MARGIN) - 1):
        return False
    sv = v.astype(np.int64)
    if np.abs(sv).max(initial=0) >= lim - 1 or np.abs(i.astype(np.int64)).max(initial=0) >= lim - 1:
        return True
    # (p_max + 1) * 2**P_SHIFT >= v_bar * near, or -p_min * 2**P_SHIFT >= v_bar * near, with v_bar = sum_v / n
    worst = np.maximum(p_max.astype(np.int64) + 1, -p_min.astype(np.int64))
    return bool(np.any(worst * ((1 << fw.P_SHIFT) * n) >= sv * (CODE_MAX - CLIP_MARGIN) - 1))


def _clipped(rec: np.ndarray, k: int, interval_samples: int) -> np.ndarray:
    near = CODE_MAX - CLIP_MARGIN
    v_bar = rec[f"sum_v{k}"].astype(np.float64) / interval_samples
    i_bar = rec[f"sum_i{k}"].astype(np.float64) / interval_samples
    step = np.maximum(np.abs(np.diff(v_bar, prepend=v_bar[:1])), np.abs(np.diff(v_bar, append=v_bar[-1:])))
    ceiling = np.where((v_bar >= CLIP_MIN_V_CODE) & (step <= V_STEADY * v_bar), v_bar * near, np.inf)
    scale = float(1 << fw.P_SHIFT)
    at_i = ((np.abs(i_bar) >= near) | ((rec[f"p_max{k}"] + 1.0) * scale >= ceiling)
            | (-rec[f"p_min{k}"].astype(np.float64) * scale >= ceiling))
    at_v = np.abs(v_bar) >= near
    return np.where(at_i, CLIP_I, 0).astype(np.uint8) | np.where(at_v, CLIP_V, 0).astype(np.uint8)


def records_clipped(payload: bytes | np.ndarray, n_rails: int, interval_samples: int) -> np.ndarray:
    """CLIP_I | CLIP_V of concatenated records (rows x rails, u8): where each rail's range saturated."""
    rec = np.frombuffer(payload, dtype=record_dtype(n_rails)) if not isinstance(payload, np.ndarray) else payload
    out = np.zeros((len(rec), n_rails), np.uint8)
    for k in range(n_rails):
        out[:, k] = clipped(rec, k, interval_samples)
    return out


def records_to_si(payload: bytes | np.ndarray, scales: list[RailScale], interval_samples: int, window_samples: int):
    """Decode concatenated records into SI arrays: dict of (rows x rails) float arrays + digital.

    Each (rows x rails) array is the transpose of a (rails x rows) one (column-major), so a rail's
    column, which the writer and every per-rail figure take, is contiguous; each field is converted in
    one ufunc pass straight into it (no temporaries; the same values as the arithmetic in int64/float64
    written out step by step)."""
    rec = np.frombuffer(payload, dtype=record_dtype(len(scales))) if not isinstance(payload, np.ndarray) else payload
    n, r = len(rec), len(scales)
    cols = {f: np.empty((r, n)) for f in RAIL_FIELDS}
    half = 0.5  # min/max/peak are floor(x / 2**15) on the device: the bin centre is unbiased
    shift = float(1 << fw.P_SHIFT)
    for k, s in enumerate(scales):
        np.multiply(rec[f"sum_v{k}"], s.v_per_code / interval_samples, out=cols["v"][k])
        np.multiply(rec[f"sum_i{k}"], s.i_per_code / interval_samples, out=cols["i"][k])
        p = cols["p"][k]
        np.multiply(rec[f"sum_p_hi{k}"], shift, out=p)      # exact: |sum_p| < 2**47
        p += rec[f"sum_p_lo{k}"]
        p *= s.w_per_product / interval_samples
        for field, out in (("p_min", cols["p_min"][k]), ("p_max", cols["p_max"][k])):
            np.add(rec[f"{field}{k}"], half, out=out)
            out *= shift * s.w_per_product
        pk = cols["p_peak"][k]
        peak = rec[f"peak{k}"]
        np.add(peak, half, out=pk)
        pk *= shift * s.w_per_product / window_samples
        none = peak == fw.PEAK_NONE
        if none.any():
            pk[none] = np.nan
    out = {f: c.T for f, c in cols.items()}
    out["dig_or"] = rec["dig_or"].copy()
    out["dig_and"] = rec["dig_and"].copy()
    return out
