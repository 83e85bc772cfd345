"""What the drive says about its own power, read through the command gateway and decoded here.

NVMe 2.3/2.4 and OCP 2.6 let a drive report its own power: the Power Measurement feature and log
(25h), the SMART log's interval power (IPM) and lifetime energy (OLEC), Identify Controller's
capability bits and sample interval (CTRATT bits 20-22, MUP, IPMSR, MSMT), the Power Limit (23h) and
Power Threshold (24h) features, and OCP's extended SMART log C0h (peak power capability, current
maximum average power, lifetime power consumed). Debian's nvme-cli 2.3 decodes none of it, so the
bytes come from its generic commands (``get-log --log-id=N --log-len=L``: a hex dump; ``get-feature``:
dword 0; ``id-ctrl -b``: the 4096 bytes) and one decoder per structure below decodes them, each with
its source beside it: libnvme's ``src/nvme/nvme-types-base.h`` as carried in linux-nvme/nvme-cli
(``libnvme/src/nvme/nvme-types-base.h``), and for OCP ``plugins/ocp/ocp-smart-extended-log.h``.
Tests: tests/test_drive_claims.py, byte fixtures built from those field tables.

A drive that lacks a feature answers Invalid Field or Invalid Log Page: :class:`NotSupported`, one line.
Starting or stopping a measurement and setting a power limit write the drive's state: they go through
the guarded door (destructive.power_feature), never as a volatile set-feature.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass

from powerrig.core.errors import ToolError
from powerrig.core.nvme_fields import Keys, PowerStateDescriptor, load_json, to_int
from powerrig.dut import destructive
from powerrig.dut.nvme import parse_feature, parse_hexdump

FID_POWER_LIMIT = 0x23          # enum nvme_features_id NVME_FEAT_FID_POWER_LIMIT
FID_POWER_THRESHOLD = 0x24      # NVME_FEAT_FID_POWER_THRESH
FID_POWER_MEASUREMENT = 0x25    # NVME_FEAT_FID_POWER_MEASUREMENT
LID_SMART = 0x02
LID_POWER_MEASUREMENT = 0x25    # NVME_LOG_LID_POWER_MEASUREMENT
LID_OCP_C0 = 0xC0               # OCP_LID_SMART (SCAO)
LOG_LEN = 512
POWER_MEAS_MAX_LEN = 65536      # a log whose SZE is larger is read up to here
OCP_C0_GUID = bytes.fromhex("C5AF1028EABFF2A49C4F6F7CC914D5AF")    # ocp-smart-extended-log.c scao_guid

# enum nvme_psd_ps: the power scale of every PWRV/PWRS pair (PSD IPS/APS, AIPWR, MIPWR, PHBLT, IPM, 23h, 24h)
POWER_SCALE_W = {1: 0.0001, 2: 0.01}     # 0: not reported; 3: reserved


class NotSupported(ToolError):
    """The drive does not have this feature or log (or reports nothing in it): one line, no traceback."""


class ClaimError(ToolError):
    """The drive answered bytes that are not the structure the spec defines (one line naming the field)."""


# -- shared encodings -----------------------------------------------------------------------------
def power_w(dword: int) -> float | None:
    """PWRV bits 15:0 x PWRS bits 17:16 (enum nvme_psd_ps: 1 = 0.0001 W, 2 = 0.01 W); None when the
    scale is 0 (not reported) or 3 (reserved)."""
    scale = POWER_SCALE_W.get((dword >> 16) & 0x3)
    return None if scale is None else (dword & 0xFFFF) * scale


def encode_power(watts: float, scale: int | None = None) -> int:
    """PWRV | PWRS << 16: 0.0001 W while it fits in 16 bits (or as ``scale`` asks), else 0.01 W."""
    if watts < 0:
        raise ToolError(f"power {watts} W is negative")
    if scale is None:
        scale = 1 if round(watts / POWER_SCALE_W[1]) <= 0xFFFF else 2
    v = round(watts / POWER_SCALE_W[scale])
    if v > 0xFFFF:
        raise ToolError(f"power {watts} W does not fit a 16-bit value in units of {POWER_SCALE_W[scale]} W")
    return v | (scale << 16)


@dataclass(frozen=True)
class Timestamp:
    """struct nvme_timestamp (8 bytes): timestamp[6] in milliseconds, attr (bit 0 synch: 1 = the clock
    may have stopped; bits 3:1 origin: 0 reset, 1 set by a host's Set Features Timestamp), rsvd."""
    ms: int
    origin: int
    synch: int

    @classmethod
    def decode(cls, b: bytes) -> "Timestamp":
        return cls(int.from_bytes(b[0:6], "little"), (b[6] >> 1) & 0x7, b[6] & 1)

    @property
    def utc(self) -> float | None:
        """Seconds since the Unix epoch when the host set the drive's clock (Linux sets it from its own at
        controller init) and it did not stop since; None otherwise (or when the field is 0)."""
        return self.ms / 1000.0 if self.ms and self.origin == 1 and not self.synch else None


# -- log 25h --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HistogramBin:
    """struct nvme_power_histogram_desc: PHBC (u32 count), PHBLT (u32: PWRV 15:0, PWRS 17:16)."""
    count: int
    lower_w: float | None


@dataclass(frozen=True)
class PowerMeasurementLog:
    """struct nvme_power_meas_log (Log Page 25h), nvme-types-base.h; PMA bits from enum nvme_pma."""
    ver: int                        # 0   VER, shall be 0
    pmgn: int                       # 1   PMGN, +1 at each start
    pma: int                        # 2   PMA
    sze: int                        # 4   SZE, log size in bytes
    pmc: int                        # 8   PMC, count of interval power measurements
    nphd: int                       # 12  NPHD, descriptors in this log
    smtr_min: int                   # 14  SMTR, minutes until the measurement stops (0: not specified)
    smts: Timestamp                 # 16  SMTS, when it stopped
    phds: int                       # 24  PHDS, descriptor size
    phbs_mw: int                    # 26  PHBS, bin size (shall be 250 mW)
    nphds: int                      # 28  NPHDS, descriptors supported
    vss: int                        # 30  VSS, vendor specific size
    phdoc: int                      # 32  PHDOC, measurements above the last bin
    aipwr_w: float | None           # 40  AIPWR, average interval power
    mipwr_w: float | None           # 44  MIPWR, maximum interval power
    mipwrt: Timestamp               # 48  MIPWRT, when the maximum was collected
    ipwrpe_pct: int | None          # 56  IPWRPE, the drive's maximum percent error (255: not reported)
    bins: tuple[HistogramBin, ...]  # 64  descriptors (those the bytes read hold)

    @property
    def enabled(self) -> bool:          # NVME_PMA_PME, bit 0
        return bool(self.pma & 1)

    @property
    def non_contiguous(self) -> bool:   # NVME_PMA_NCPDF, bit 1
        return bool(self.pma >> 1 & 1)

    @property
    def estimated(self) -> bool:        # NVME_PMA_EPF, bit 2: estimated, not measured
        return bool(self.pma >> 2 & 1)

    @property
    def mipwrt_supported(self) -> bool:  # NVME_PMA_MIPWRTS, bit 3
        return bool(self.pma >> 3 & 1)

    @property
    def histogram_overflow(self) -> bool:  # NVME_PMA_PHDO, bit 4
        return bool(self.pma >> 4 & 1)

    @property
    def measurement_type(self) -> int:  # NVME_PMA_PMT, bits 15:12 (0: NVM subsystem total power)
        return self.pma >> 12 & 0xF

    def line(self) -> str:
        avg = f"{self.aipwr_w:.3f} W" if self.aipwr_w is not None else "not reported"
        mx = f"{self.mipwr_w:.3f} W" if self.mipwr_w is not None else "not reported"
        err = f"+-{self.ipwrpe_pct} %" if self.ipwrpe_pct is not None else "error not stated"
        return (f"power measurement (log 25h): generation {self.pmgn}, {'running' if self.enabled else 'stopped'}, "
                f"{self.pmc} intervals, average {avg}, maximum {mx}, {err}"
                + (", estimated, not measured" if self.estimated else ""))


def decode_power_meas_log(buf: bytes) -> PowerMeasurementLog:
    """Log 25h from its bytes (struct nvme_power_meas_log). The header is 64 bytes; descriptors follow,
    PHDS bytes each, as many as the bytes hold (a log read shorter than SZE keeps the first ones)."""
    if len(buf) < 64:
        raise ClaimError(f"power measurement log: {len(buf)} bytes, the header alone is 64")
    ver, pmgn, pma, sze, pmc, nphd, smtr = struct.unpack_from("<BBHIIHH", buf, 0)
    if ver != 0:
        raise ClaimError(f"power measurement log: VER is {ver}, the spec's layout has 0 (nvme-types-base.h "
                         "struct nvme_power_meas_log): not a log this version reads")
    phds, phbs, nphds, vss, phdoc = struct.unpack_from("<HHHHI", buf, 24)
    aipwr, mipwr = struct.unpack_from("<II", buf, 40)
    ipwrpe = buf[56]
    bins = []
    step = phds or 8
    if nphd and phds < 8:
        raise ClaimError(f"power measurement log: PHDS {phds} bytes is smaller than a descriptor (8)")
    for k in range(nphd):
        off = 64 + k * step
        if off + 8 > len(buf):
            break
        phbc, phblt = struct.unpack_from("<II", buf, off)
        bins.append(HistogramBin(phbc, power_w(phblt)))
    return PowerMeasurementLog(ver, pmgn, pma, sze, pmc, nphd, smtr, Timestamp.decode(buf[16:24]), phds, phbs, nphds,
                               vss, phdoc, power_w(aipwr) if aipwr else None, power_w(mipwr) if mipwr else None,
                               Timestamp.decode(buf[48:56]), None if ipwrpe == 255 else ipwrpe, tuple(bins))


JSON_FROM = (3, 0)          # nvme-cli 3.0 prints log 25h itself: `nvme log power-measurement DEV -o json`


def _json_timestamp(obj, what: str) -> Timestamp:
    """nvme-cli 3.0's json_timestamp: "timestamp" (ms), "timestamp origin" and "synch" as sentences
    (nvme-print.c nvme_format_timestamp_origin / _sync)."""
    if not isinstance(obj, dict):
        raise ClaimError(f"nvme-cli log power-measurement: {what} is not an object")
    k = Keys(obj, f"log power-measurement {what}")
    origin_text = str(k.get("timestamp origin", default="")).lower()
    origin = 1 if "set features" in origin_text else 0 if "reset" in origin_text else 7
    synch = 1 if "may have stopped" in str(k.get("synch", default="")).lower() else 0
    return Timestamp(to_int(k.need("timestamp"), f"{what}.timestamp"), origin, synch)


def parse_power_meas_json(text: str) -> PowerMeasurementLog:
    """Log 25h as nvme-cli 3.0 prints it (nvme-print-json.c json_power_meas_log: the raw fields by their
    header names, PMA and the power dwords undecoded, descs [{phbc, phblt}]), decoded as the bytes are."""
    k = Keys(load_json(text, "log power-measurement"), "log power-measurement")
    n = lambda name: to_int(k.need(name), name)  # noqa: E731
    if n("ver") != 0:
        raise ClaimError(f"power measurement log: VER is {n('ver')}, the spec's layout has 0")
    descs = k.get("descs", default=[]) or []
    bins = tuple(HistogramBin(to_int(Keys(d, "descs").need("phbc"), "phbc"), power_w(to_int(Keys(d, "descs").need("phblt"), "phblt")))
                 for d in descs)
    aipwr, mipwr, ipwrpe = n("aipwr"), n("mipwr"), n("ipwrpe")
    return PowerMeasurementLog(0, n("pmgn"), n("pma"), n("sze"), n("pmc"), n("nphd"), n("smtr"),
                               _json_timestamp(k.need("smts"), "smts"), n("phds"), n("phbs"), n("nphds"), n("vss"),
                               n("phdoc"), power_w(aipwr) if aipwr else None, power_w(mipwr) if mipwr else None,
                               _json_timestamp(k.need("mipwrt"), "mipwrt"), None if ipwrpe == 255 else ipwrpe, bins)


# -- Identify Controller ----------------------------------------------------------------------------
IPMSR_SCALE_S = {1: 1e-6, 2: 1e-5, 3: 1e-4, 4: 1e-3, 5: 1e-2}     # nvme_ipmsr_srs_to_string (nvme-print.c)


PSD_OFFSET, PSD_SIZE, NPSS_OFFSET = 2048, 32, 263     # struct nvme_id_ctrl: psd[32] at 2048, npss at 263
PSD_WORKLOADS = {0: "not provided", 1: "workload 1: 5 min idle, 32 random 1 MiB writes, 30 s idle",
                 2: "workload 2: 80,000 sequential 128 KiB writes, multiple commands pending"}   # enum nvme_psd_workload


def decode_power_states(buf: bytes) -> tuple[PowerStateDescriptor, ...]:
    """The power state descriptors of Identify Controller's bytes: NPSS (263, zero-based) + 1 entries of
    struct nvme_id_psd (nvme-types-base.h; NVMe base spec figure "Power State Descriptor Data Structure")
    at 2048 + 32 i: MP (0, le16; flags bit 0 MXPS: 0.0001 W when set, else 0.01 W), flags (3: bit 0 MXPS,
    bit 1 NOPS, enum nvme_psd_flags), ENLAT (4, le32 us), EXLAT (8, le32 us), RRT/RRL/RWT/RWL (12..15),
    IDLP (16, le16) with IPS (18, bits 7:6), ACTP (20, le16) with APWS (22: APS bits 7:6, APW bits 2:0);
    IPS / APS as enum nvme_psd_ps (1 = 0.0001 W, 2 = 0.01 W, 0 = not reported)."""
    if len(buf) < PSD_OFFSET + PSD_SIZE:
        raise ClaimError(f"identify controller: {len(buf)} bytes, the power state descriptors start at {PSD_OFFSET}")
    npss = buf[NPSS_OFFSET]
    if PSD_OFFSET + (npss + 1) * PSD_SIZE > len(buf) or npss > 31:
        raise ClaimError(f"identify controller: NPSS {npss} descriptors do not fit its {len(buf)} bytes")
    out = []
    for i in range(npss + 1):
        mp, flags, enlat, exlat, rrt, rrl, rwt, rwl, idlp, ips, actp, apws = struct.unpack_from(
            "<HxBIIBBBBHBxHB", buf, PSD_OFFSET + PSD_SIZE * i)
        idle_scale, act_scale = POWER_SCALE_W.get(ips >> 6 & 3), POWER_SCALE_W.get(apws >> 6 & 3)
        out.append(PowerStateDescriptor(
            ps=i, max_power_w=round(mp * (0.0001 if flags & 1 else 0.01), 6), non_operational=bool(flags >> 1 & 1),
            entry_latency_us=enlat, exit_latency_us=exlat,
            idle_power_w=round(idlp * idle_scale, 6) if idle_scale and idlp else None,
            active_power_w=round(actp * act_scale, 6) if act_scale and actp else None,
            active_workload=apws & 7, relative_read_throughput=rrt, relative_write_throughput=rwt))
    return tuple(out)


@dataclass(frozen=True)
class IdCtrlPower:
    """struct nvme_id_ctrl: CTRATT (offset 96; enum nvme_id_ctrl_ctratt PLS bit 20, PMS 21, VMS 22),
    MUP (390), IPMSR (392: SRV bits 7:0, SRS bits 15:8, enum nvme_id_ctrl_ipmsr), MSMT (394).
    From nvme-cli's JSON only CTRATT (no released nvme-cli prints the others): they are None then.
    ``states``: the power state descriptors (decode_power_states), from the same bytes."""
    ctratt: int
    mup_raw: int | None = None      # PS0's maximum power without a limit; the header names no unit
    ipmsr: int | None = None
    msmt_min: int | None = None     # the largest stop measurement time 25h accepts (SMT units: minutes)
    states: tuple = ()

    def state(self, ps: int) -> PowerStateDescriptor | None:
        return next((s for s in self.states if s.ps == ps), None)

    @property
    def power_limit_supported(self) -> bool:
        return bool(self.ctratt >> 20 & 1)

    @property
    def power_measurement_supported(self) -> bool:
        return bool(self.ctratt >> 21 & 1)

    @property
    def voltage_measurement_supported(self) -> bool:
        return bool(self.ctratt >> 22 & 1)

    @property
    def sample_interval_s(self) -> float | None:
        """IPMSR: the longest interval between the drive's power samples; None when not reported."""
        if not self.ipmsr:
            return None
        scale = IPMSR_SCALE_S.get(self.ipmsr >> 8 & 0xFF)
        return None if scale is None else (self.ipmsr & 0xFF) * scale

    def line(self) -> str:
        yes = lambda b: "yes" if b else "no"  # noqa: E731
        s = (f"identify: power limit {yes(self.power_limit_supported)}, power measurement "
             f"{yes(self.power_measurement_supported)}, voltage measurement {yes(self.voltage_measurement_supported)}")
        if self.sample_interval_s is not None:
            s += f", samples at least every {self.sample_interval_s * 1e3:g} ms (IPMSR)"
        if self.msmt_min:
            s += f", stop time up to {self.msmt_min} min (MSMT)"
        return s


def decode_id_ctrl_power(buf: bytes) -> IdCtrlPower:
    """The power fields of Identify Controller's 4096 bytes (``nvme id-ctrl -b``)."""
    if len(buf) < 512:
        raise ClaimError(f"identify controller: {len(buf)} bytes, expected 4096")
    (ctratt,) = struct.unpack_from("<I", buf, 96)
    mup, ipmsr, msmt = struct.unpack_from("<HHH", buf, 390)
    return IdCtrlPower(ctratt, mup, ipmsr, msmt, decode_power_states(buf) if len(buf) >= 4096 else ())


# -- SMART / Health log -------------------------------------------------------------------------------
@dataclass(frozen=True)
class SmartPower:
    """struct nvme_smart_log: op_lifetime_energy_consumed (OLEC, 232, u64 Wh rounded up; 0 = not
    reported) and interval_power_measurement (IPM, 240, u32: value 15:0, scale 17:16, the mean over
    the last second when the log is read; 0 = not reported; bits 25:20 the measurement type as
    nvme-cli prints it)."""
    olec_wh: int | None
    ipm_w: float | None
    ipm_type: int = 0

    def line(self) -> str:
        olec = f"{self.olec_wh} Wh" if self.olec_wh is not None else "not reported"
        ipm = f"{self.ipm_w:.3f} W" if self.ipm_w is not None else "not reported"
        return f"SMART: lifetime energy (OLEC) {olec}, power over the last second (IPM) {ipm}"


def decode_smart_power(buf: bytes) -> SmartPower:
    if len(buf) < 244:
        raise ClaimError(f"SMART log: {len(buf)} bytes, OLEC and IPM end at byte 244 (512 expected)")
    olec, ipm = struct.unpack_from("<QI", buf, 232)
    return SmartPower(olec or None, power_w(ipm) if ipm else None, ipm >> 20 & 0x3F)


# -- features 23h, 24h, 25h (dword 11 set, dword 0 get) -------------------------------------------------
@dataclass(frozen=True)
class PowerLimit:
    """Feature 23h: PLV bits 15:0, PLS bits 17:16 (NVME_FEAT_POWER_LIMIT_*). 0: no limit."""
    value: int
    scale: int

    @property
    def watts(self) -> float | None:
        return power_w(self.value | self.scale << 16) if self.value else None

    @property
    def dword(self) -> int:
        return (self.value & 0xFFFF) | (self.scale & 3) << 16

    @classmethod
    def from_watts(cls, watts: float | None, scale: int | None = None) -> "PowerLimit":
        if not watts:
            return cls(0, 0)
        d = encode_power(watts, scale)
        return cls(d & 0xFFFF, d >> 16 & 3)

    def line(self) -> str:
        return f"power limit (23h): {self.watts:.4g} W" if self.watts is not None else "power limit (23h): none set"


def decode_power_limit(dword: int) -> PowerLimit:
    return PowerLimit(dword & 0xFFFF, dword >> 16 & 3)


@dataclass(frozen=True)
class PowerThreshold:
    """Feature 24h: PTV bits 15:0, PTS 17:16, PMTS 23:20, EPT bit 31 (NVME_FEAT_POWER_THRESH_*)."""
    value: int
    scale: int
    measurement_type: int
    enabled: bool

    @property
    def watts(self) -> float | None:
        return power_w(self.value | self.scale << 16)

    @property
    def dword(self) -> int:
        return (self.value & 0xFFFF) | (self.scale & 3) << 16 | (self.measurement_type & 0xF) << 20 | \
            int(self.enabled) << 31

    def line(self) -> str:
        w = f"{self.watts:.4g} W" if self.watts is not None else "no value"
        return f"power threshold (24h): {w}, {'enabled' if self.enabled else 'disabled'}"


def decode_power_threshold(dword: int) -> PowerThreshold:
    return PowerThreshold(dword & 0xFFFF, dword >> 16 & 3, dword >> 20 & 0xF, bool(dword >> 31 & 1))


@dataclass(frozen=True)
class PowerMeasurementFeature:
    """Feature 25h: ACT bits 3:0 (0 stop, 1 start), PMTS bits 7:4 (0: NVM subsystem total power), SMT
    bits 31:16 (stop after this many minutes; 0 = not specified) (NVME_FEAT_POWER_MEAS_*)."""
    action: int
    measurement_type: int = 0
    smt_min: int = 0

    @property
    def dword(self) -> int:
        if not 0 <= self.action <= 0xF or not 0 <= self.measurement_type <= 0xF or not 0 <= self.smt_min <= 0xFFFF:
            raise ToolError(f"power measurement feature: action {self.action}, type {self.measurement_type}, "
                            f"SMT {self.smt_min} min do not fit 4, 4 and 16 bits")
        return self.action | self.measurement_type << 4 | self.smt_min << 16

    def line(self) -> str:
        what = {0: "stopped", 1: "started"}.get(self.action, f"action {self.action}")
        return f"power measurement (25h): {what}" + (f", stops after {self.smt_min} min" if self.smt_min else "")


def decode_power_measurement_feature(dword: int) -> PowerMeasurementFeature:
    return PowerMeasurementFeature(dword & 0xF, dword >> 4 & 0xF, dword >> 16 & 0xFFFF)


START = PowerMeasurementFeature(1)
STOP = PowerMeasurementFeature(0)


# -- OCP C0h ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OcpPower:
    """OCP extended SMART log C0h (ocp-smart-extended-log.h, struct ocp_smart_extended_log):
    max_peak_power_capability [261:260] u16, current_max_avg_power [263:262] u16,
    lifetime_power_consumed [269:264] u48, log_page_version [495:494], log_page_guid [511:496].
    UNITS UNCONFIRMED: the header names none; a third-party dashboard shows W, W and kWh. Raw integers."""
    max_peak_power_capability: int
    current_max_avg_power: int
    lifetime_power_consumed: int
    log_page_version: int
    guid_ok: bool

    def line(self) -> str:
        return (f"OCP C0h (v{self.log_page_version}, units unconfirmed): peak power capability "
                f"{self.max_peak_power_capability} (W?), current maximum average power {self.current_max_avg_power} "
                f"(W?), lifetime power consumed {self.lifetime_power_consumed} (kWh?)")


def decode_ocp_c0_power(buf: bytes) -> OcpPower:
    if len(buf) < 512:
        raise ClaimError(f"OCP C0h: {len(buf)} bytes, expected 512")
    peak, avg = struct.unpack_from("<HH", buf, 260)
    (ver,) = struct.unpack_from("<H", buf, 494)
    return OcpPower(peak, avg, int.from_bytes(buf[264:270], "little"), ver, buf[496:512] == OCP_C0_GUID)


# -- reading through the gateway ------------------------------------------------------------------------
_UNSUPPORTED = re.compile(r"NVMe status:\s*([^\[]*?\((?:0x)?[0-9a-fA-F]+\))|Invalid (?:Field|Log Page)[^\[]*")


def _unsupported(e: ToolError, dev: str, what: str) -> ToolError:
    """nvme-cli's NVMe status for a missing feature or log (Invalid Field, Invalid Log Page): NotSupported
    in one line; anything else (the tool missing, a device that is not there) as it came."""
    msg = str(e)
    if "Invalid Field" in msg or "Invalid Log Page" in msg or "(0x4002)" in msg or "(0x4109)" in msg:
        m = _UNSUPPORTED.search(msg)
        status = (m.group(1) or m.group(0)).strip() if m else "Invalid Field"
        return NotSupported(f"{dev}: {what} not supported (the drive answers {status})")
    return e


def _get_log(nvme, dev: str, lid: int, length: int, name: str, what: str, decode):
    """``nvme get-log dev --log-id=lid --log-len=length``: nvme-cli's hex dump, decoded (the event holds
    the decoded structure)."""
    try:
        return nvme._call("get-log", dev, [f"--log-id={lid:#04x}", f"--log-len={length}"], name,
                          lambda text: decode(parse_hexdump(text)), {"device": dev, "log_id": lid, "log_len": length})
    except ToolError as e:
        raise _unsupported(e, dev, what) from None


def read_power_measurement(nvme, dev: str) -> PowerMeasurementLog:
    """Log 25h: nvme-cli's own JSON from 3.0 (``nvme log power-measurement DEV -o json``, which reads
    SZE bytes itself), else ``nvme get-log --log-id=0x25 --log-len=512`` (again with SZE bytes when larger)."""
    what = "power measurement log (25h)"
    if nvme.version().tuple >= JSON_FROM + (0,):
        try:
            return nvme._call("log power-measurement", dev, ["--output-format=json"], "log power-measurement",
                              parse_power_meas_json, {"device": dev, "log_id": LID_POWER_MEASUREMENT})
        except ToolError as e:
            raise _unsupported(e, dev, what) from None
    log = _get_log(nvme, dev, LID_POWER_MEASUREMENT, LOG_LEN, "get-log power-measurement", what,
                   decode_power_meas_log)
    if log.sze > LOG_LEN and len(log.bins) < log.nphd:
        log = _get_log(nvme, dev, LID_POWER_MEASUREMENT, min(log.sze, POWER_MEAS_MAX_LEN), "get-log power-measurement",
                       what, decode_power_meas_log)
    return log


def read_smart_power(nvme, dev: str) -> SmartPower:
    """SMART log bytes (``get-log --log-id=0x02 --log-len=512``: nvme-cli 2.3's smart-log prints no OLEC/IPM)."""
    return _get_log(nvme, dev, LID_SMART, LOG_LEN, "get-log smart", "SMART log", decode_smart_power)


def read_ocp_power(nvme, dev: str) -> OcpPower:
    """OCP C0h (``get-log --log-id=0xc0 --log-len=512``); a log without the OCP GUID is NotSupported."""
    ocp = _get_log(nvme, dev, LID_OCP_C0, LOG_LEN, "get-log ocp-c0", "OCP extended SMART log (C0h)", decode_ocp_c0_power)
    if not ocp.guid_ok:
        raise NotSupported(f"{dev}: log C0h is not OCP's extended SMART log (its GUID is not C5AF1028...)")
    return ocp


def read_id_ctrl_power(nvme, dev: str) -> IdCtrlPower:
    """CTRATT, MUP, IPMSR, MSMT and the power state descriptors from ``nvme id-ctrl -b`` (this host);
    through a drive host, CTRATT and the descriptors from nvme-cli's JSON (MUP, IPMSR, MSMT then None)."""
    if nvme.remote is None:
        try:
            return nvme._call("id-ctrl", dev, ["--raw-binary"], "id-ctrl binary", decode_id_ctrl_power,
                              {"device": dev}, binary=True)
        except ToolError:
            pass                # an nvme-cli without -b, or not 4096 bytes: the JSON below
    ident = nvme.id_ctrl(dev)
    return IdCtrlPower(ident.ctratt, states=tuple(ident.power_states))


def read_feature(nvme, dev: str, fid: int):
    """Get Features 23h / 24h / 25h, dword 0 decoded (PowerLimit, PowerThreshold, PowerMeasurementFeature)."""
    decode = {FID_POWER_LIMIT: decode_power_limit, FID_POWER_THRESHOLD: decode_power_threshold,
              FID_POWER_MEASUREMENT: decode_power_measurement_feature}[fid]
    names = {FID_POWER_LIMIT: "power limit", FID_POWER_THRESHOLD: "power threshold",
             FID_POWER_MEASUREMENT: "power measurement"}
    try:
        return nvme._call("get-feature", dev, [f"--feature-id={fid:#04x}"], f"get-feature {names[fid]}",
                          lambda text: decode(parse_feature(text)[1]), {"device": dev, "fid": fid})
    except ToolError as e:
        raise _unsupported(e, dev, f"{names[fid]} feature ({fid:02X}h)") from None


def set_measurement(nvme, controller: str, serial: str | None, start: bool = True, smt_min: int = 0,
                    allow_unguarded: bool = False) -> None:
    """Start (or stop) the drive's power measurement: Set Features 25h through the guarded door."""
    f = PowerMeasurementFeature(1 if start else 0, 0, smt_min if start else 0)
    try:
        destructive.power_feature(nvme, controller, serial, FID_POWER_MEASUREMENT, f.dword, allow_unguarded)
    except ToolError as e:
        raise _unsupported(e, controller, "power measurement feature (25h)") from None


def set_power_limit(nvme, controller: str, serial: str | None, watts: float | None, scale: int | None = None,
                    allow_unguarded: bool = False) -> PowerLimit:
    """Set Features 23h (None or 0: no limit) through the guarded door."""
    lim = PowerLimit.from_watts(watts, scale)
    try:
        destructive.power_feature(nvme, controller, serial, FID_POWER_LIMIT, lim.dword, allow_unguarded)
    except ToolError as e:
        raise _unsupported(e, controller, "power limit feature (23h)") from None
    return lim


def report(nvme, dev: str) -> list[str]:
    """One line per claim the drive makes (or a line saying it makes none): identify, features 23h-25h,
    log 25h, SMART OLEC/IPM, OCP C0h. Reads only; nothing raised for a missing feature."""
    lines = []
    reads = [lambda: read_id_ctrl_power(nvme, dev)] + \
        [lambda f=f: read_feature(nvme, dev, f) for f in (FID_POWER_LIMIT, FID_POWER_THRESHOLD, FID_POWER_MEASUREMENT)] + \
        [lambda: read_power_measurement(nvme, dev), lambda: read_smart_power(nvme, dev),
         lambda: read_ocp_power(nvme, dev)]
    for read in reads:
        try:
            lines.append(read().line())
        except ToolError as e:
            lines.append(str(e).splitlines()[0] if str(e) else type(e).__name__)
    return lines


def interval_span(log: PowerMeasurementLog, interval_s: float | None, t_start: float, t_end: float) -> tuple[float, float]:
    """The span of host time a log's average covers, as well as the host can tell: up to SMTS when the
    drive stopped and stamped it on the host's clock (within the commands' span), else ``t_end``; back
    PMC x the drive's sample interval (IPMSR) when it reports one, else to ``t_start``."""
    end = t_end
    if log.smts.utc is not None and t_start - 1.0 <= log.smts.utc <= t_end + 1.0:
        end = log.smts.utc
    start = t_start
    if interval_s and log.pmc and not math.isnan(interval_s):
        start = max(t_start - interval_s, end - log.pmc * interval_s)
    return start, end
