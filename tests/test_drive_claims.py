"""What the drive says about its own power (issue 38, first tranche): one decoder per structure
(powerrig.dut.claims) against byte fixtures built here from the field tables of libnvme's
nvme-types-base.h (struct nvme_power_meas_log, struct nvme_power_histogram_desc, struct nvme_timestamp,
struct nvme_id_ctrl, struct nvme_smart_log, enum nvme_feat / NVME_FEAT_POWER_*) and OCP's
ocp-smart-extended-log.h; the gateway (Set Features 23h/25h only through the guarded door); the virtual
drive's honesty knobs (sim/ssd/power_claims.py); and, as the issue's item 2 asks, the virtual drive's raw
log 25h read by an independent decoder written in this file from the header (not powerrig's).
"""
from __future__ import annotations

import math
import struct
import subprocess
import time

import numpy as np
import pytest

from powerrig.core.errors import ToolError
from powerrig.core.timeline import NOTE, NVME, Timeline
from powerrig.dut import claims
from powerrig.dut.commands import UnsafeArgument, nvme_action, nvme_argv
from powerrig.dut.guard import GuardRefused, HostView
from powerrig.dut.nvme import NvmeCli
from powerrig.sim.ssd.power_claims import PowerClaims
from powerrig.sim.ssd.profile import load
from powerrig.sim.rig import tool_launcher
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.server import SsdServer

SERIAL = "VPHA5336000001"


# -- fixtures from the field tables ------------------------------------------------------------------
def ts(ms: int, origin: int = 1, synch: int = 0) -> bytes:
    """struct nvme_timestamp: __u8 timestamp[6]; __u8 attr (bit 0 synch, bits 3:1 origin); __u8 rsvd."""
    return ms.to_bytes(6, "little") + bytes([(origin << 1) | synch, 0])


def meas_log(*, ver=0, pmgn=3, pma=0x0009, pmc=40, smtr=0, smts=b"\0" * 8, phds=8, phbs=250, nphds=4, vss=0,
             phdoc=0, aipwr=0, mipwr=0, mipwrt=b"\0" * 8, ipwrpe=5, descs=()) -> bytes:
    """struct nvme_power_meas_log, field by field in the header's order (offsets in the comments)."""
    b = struct.pack("<B", ver)                 # 0  ver
    b += struct.pack("<B", pmgn)               # 1  pmgn
    b += struct.pack("<H", pma)                # 2  pma
    b += struct.pack("<I", 64 + 8 * len(descs) + vss)   # 4 sze
    b += struct.pack("<I", pmc)                # 8  pmc
    b += struct.pack("<H", len(descs))         # 12 nphd
    b += struct.pack("<H", smtr)               # 14 smtr
    b += smts                                  # 16 smts
    b += struct.pack("<H", phds)               # 24 phds
    b += struct.pack("<H", phbs)               # 26 phbs
    b += struct.pack("<H", nphds)              # 28 nphds
    b += struct.pack("<H", vss)                # 30 vss
    b += struct.pack("<I", phdoc)              # 32 phdoc
    b += bytes(4)                              # 36 rsvd36[4]
    b += struct.pack("<I", aipwr)              # 40 aipwr
    b += struct.pack("<I", mipwr)              # 44 mipwr
    b += mipwrt                                # 48 mipwrt
    b += struct.pack("<B", ipwrpe)             # 56 ipwrpe
    b += bytes(7)                              # 57 rsvd57[7]
    assert len(b) == 64
    for phbc, phblt in descs:                  # 64 struct nvme_power_histogram_desc {phbc, phblt}
        b += struct.pack("<II", phbc, phblt)
    return b


def pw(value: int, scale: int) -> int:
    """PWRV bits 15:0, PWRS bits 17:16 (enum nvme_psd_ps)."""
    return value | (scale << 16)


# -- log 25h ---------------------------------------------------------------------------------------------
def test_power_measurement_log_decodes_every_field_from_the_header():
    descs = [(10, pw(0, 2)), (20, pw(25, 2)), (7, pw(5000, 1)), (3, pw(75, 2))]
    buf = meas_log(pmgn=7, pma=0x0009 | (0 << 12), pmc=40, smtr=12, smts=ts(1_700_000_000_123), nphds=60,
                   phdoc=2, aipwr=pw(53700, 1), mipwr=pw(1234, 2), mipwrt=ts(1_700_000_000_456), ipwrpe=5,
                   descs=descs)
    log = claims.decode_power_meas_log(buf)
    assert (log.ver, log.pmgn, log.sze, log.pmc, log.nphd, log.smtr_min) == (0, 7, 96, 40, 4, 12)
    assert (log.phds, log.phbs_mw, log.nphds, log.vss, log.phdoc) == (8, 250, 60, 0, 2)
    assert log.aipwr_w == pytest.approx(5.37) and log.mipwr_w == pytest.approx(12.34)
    assert log.smts.ms == 1_700_000_000_123 and log.smts.utc == pytest.approx(1_700_000_000.123)
    assert log.mipwrt.utc == pytest.approx(1_700_000_000.456) and log.ipwrpe_pct == 5
    assert log.enabled and log.mipwrt_supported and not log.estimated and not log.non_contiguous
    assert not log.histogram_overflow and log.measurement_type == 0
    assert [(b.count, b.lower_w) for b in log.bins] == [(10, 0.0), (20, 0.25), (7, 0.5), (3, 0.75)]
    assert "40 intervals, average 5.370 W, maximum 12.340 W, +-5 %" in log.line()


@pytest.mark.parametrize("bit,attr", [(0, "enabled"), (1, "non_contiguous"), (2, "estimated"),
                                      (3, "mipwrt_supported"), (4, "histogram_overflow")])
def test_power_measurement_attribute_bits_one_at_a_time(bit, attr):
    log = claims.decode_power_meas_log(meas_log(pma=1 << bit))
    flags = {a: getattr(log, a) for a in ("enabled", "non_contiguous", "estimated", "mipwrt_supported",
                                          "histogram_overflow")}
    assert flags == {a: a == attr for a in flags}
    assert claims.decode_power_meas_log(meas_log(pma=0xA000)).measurement_type == 0xA
    if attr == "estimated":
        assert log.line().endswith("estimated, not measured")


def test_power_measurement_log_edges_not_reported_values_and_timestamps():
    log = claims.decode_power_meas_log(meas_log(pmc=0, aipwr=0, mipwr=0, ipwrpe=255, smts=ts(5000, origin=0)))
    assert log.aipwr_w is None and log.mipwr_w is None and log.ipwrpe_pct is None
    assert log.smts.ms == 5000 and log.smts.utc is None        # origin 0: since reset, not the host's clock
    assert claims.decode_power_meas_log(meas_log(smts=ts(5000, synch=1))).smts.utc is None
    assert claims.decode_power_meas_log(meas_log(aipwr=pw(100, 3))).aipwr_w is None     # scale 3 reserved
    # a log read shorter than its SZE keeps the descriptors that fit
    full = meas_log(descs=[(k, pw(25 * k, 2)) for k in range(60)])
    assert claims.decode_power_meas_log(full[:512]).nphd == 60
    assert len(claims.decode_power_meas_log(full[:512]).bins) == (512 - 64) // 8


def test_power_measurement_log_refuses_what_is_not_the_spec_layout_in_one_line():
    """The layout powerrig read before (version 1, entries, interval ms, end time, mW per interval)
    is refused, and a spec log (version 0) is read: the old parser did the opposite."""
    invented = bytes([1, 0]) + (3).to_bytes(2, "little") + (1000).to_bytes(4, "little") + \
        (1_700_000_000_000).to_bytes(8, "little") + b"".join((5000).to_bytes(4, "little") for _ in range(3))
    with pytest.raises(claims.ClaimError, match="VER is 1, the spec's layout has 0") as e:
        claims.decode_power_meas_log(invented + bytes(64))
    assert "\n" not in str(e.value)
    with pytest.raises(claims.ClaimError, match="the header alone is 64"):
        claims.decode_power_meas_log(meas_log()[:40])
    with pytest.raises(claims.ClaimError, match="PHDS 4"):
        claims.decode_power_meas_log(meas_log(phds=4, descs=[(1, 0)]))
    assert claims.decode_power_meas_log(meas_log()).ver == 0


# -- identify, SMART, features, OCP -------------------------------------------------------------------------
def id_ctrl(ctratt=0, mup=0, ipmsr=0, msmt=0) -> bytes:
    """struct nvme_id_ctrl: ctratt __le32 at 96; cdpa 388, mup 390, ipmsr 392, msmt 394 (__le16 each),
    after tmpthha 384, rsvd385, cqt 386; sqes at 512."""
    b = bytearray(4096)
    struct.pack_into("<I", b, 96, ctratt)
    struct.pack_into("<HHHH", b, 388, 0, mup, ipmsr, msmt)
    b[512] = 0x66
    return bytes(b)


def test_identify_power_fields():
    ident = claims.decode_id_ctrl_power(id_ctrl(ctratt=(1 << 20) | (1 << 21) | (1 << 19), mup=2500,
                                                ipmsr=100 | (4 << 8), msmt=1440))
    assert ident.power_limit_supported and ident.power_measurement_supported and not ident.voltage_measurement_supported
    assert (ident.mup_raw, ident.msmt_min) == (2500, 1440) and ident.sample_interval_s == pytest.approx(0.1)
    for scale, unit in ((1, 1e-6), (2, 1e-5), (3, 1e-4), (4, 1e-3), (5, 1e-2)):
        assert claims.decode_id_ctrl_power(id_ctrl(ipmsr=7 | (scale << 8))).sample_interval_s == pytest.approx(7 * unit)
    assert claims.decode_id_ctrl_power(id_ctrl(ipmsr=7)).sample_interval_s is None        # scale 0: not reported
    only_vms = claims.decode_id_ctrl_power(id_ctrl(ctratt=1 << 22))
    assert only_vms.voltage_measurement_supported and not only_vms.power_measurement_supported
    assert "power measurement no" in claims.decode_id_ctrl_power(id_ctrl()).line()
    with pytest.raises(claims.ClaimError, match="expected 4096"):
        claims.decode_id_ctrl_power(bytes(100))


def psd(mp=0, flags=0, enlat=0, exlat=0, rrt=0, rrl=0, rwt=0, rwl=0, idlp=0, ips=0, actp=0, apws=0) -> bytes:
    """struct nvme_id_psd, 32 bytes, field by field: mp __le16 0, rsvd2 2, flags 3, enlat __le32 4,
    exlat __le32 8, rrt 12, rrl 13, rwt 14, rwl 15, idlp __le16 16, ips 18, rsvd19, actp __le16 20,
    apws 22, rsvd23[9]."""
    b = bytearray(32)
    b[0:2], b[3] = mp.to_bytes(2, "little"), flags
    b[4:8], b[8:12] = enlat.to_bytes(4, "little"), exlat.to_bytes(4, "little")
    b[12], b[13], b[14], b[15] = rrt, rrl, rwt, rwl
    b[16:18], b[18] = idlp.to_bytes(2, "little"), ips
    b[20:22], b[22] = actp.to_bytes(2, "little"), apws
    return bytes(b)


def test_power_state_descriptors_decode_from_identify_bytes_with_their_scales():
    b = bytearray(id_ctrl())
    b[263] = 2                                                     # NPSS: three descriptors
    b[2048:2080] = psd(mp=2500, enlat=60000, exlat=61000, idlp=550, ips=2 << 6, actp=2450, apws=(2 << 6) | 2)
    b[2080:2112] = psd(mp=35000, flags=1, rrt=1, rwt=1, idlp=31000, ips=1 << 6, actp=0xFFFF, apws=(1 << 6) | 1)
    b[2112:2144] = psd(mp=5, flags=2, idlp=5, ips=0, actp=7, apws=3 << 6)       # NOPS; scales 0 and 3: not reported
    b[2144:2176] = psd(mp=999)                                      # beyond NPSS: not a power state
    ps = claims.decode_id_ctrl_power(bytes(b)).states
    assert [s.ps for s in ps] == [0, 1, 2]
    assert (ps[0].max_power_w, ps[0].idle_power_w, ps[0].active_power_w, ps[0].active_workload) == (25.0, 5.5, 24.5, 2)
    assert (ps[0].entry_latency_us, ps[0].exit_latency_us, ps[0].non_operational) == (60000, 61000, False)
    assert ps[1].max_power_w == pytest.approx(3.5) and ps[1].idle_power_w == pytest.approx(3.1)     # MXPS: 0.0001 W
    assert ps[1].active_power_w == pytest.approx(6.5535) and ps[1].active_workload == 1
    assert (ps[1].relative_read_throughput, ps[1].relative_write_throughput) == (1, 1)
    assert ps[2].non_operational and ps[2].idle_power_w is None and ps[2].active_power_w is None
    assert claims.decode_id_ctrl_power(bytes(b)).state(1) == ps[1] and claims.decode_id_ctrl_power(bytes(b)).state(5) is None
    b[263] = 40
    with pytest.raises(claims.ClaimError, match="NPSS 40"):
        claims.decode_power_states(bytes(b))


def smart(olec=0, ipm=0) -> bytes:
    """struct nvme_smart_log: ... thm_temp2_total_time __le32 at 228, op_lifetime_energy_consumed __le64
    at 232, interval_power_measurement __le32 at 240, rsvd244[268]."""
    b = bytearray(512)
    struct.pack_into("<I", b, 228, 77)
    struct.pack_into("<Q", b, 232, olec)
    struct.pack_into("<I", b, 240, ipm)
    return bytes(b)


def test_smart_olec_and_ipm():
    s = claims.decode_smart_power(smart(olec=7201, ipm=pw(1875, 2) | (0 << 20)))
    assert s.olec_wh == 7201 and s.ipm_w == pytest.approx(18.75) and s.ipm_type == 0
    none = claims.decode_smart_power(smart())
    assert none.olec_wh is None and none.ipm_w is None and "not reported" in none.line()
    assert claims.decode_smart_power(smart(ipm=pw(53700, 1))).ipm_w == pytest.approx(5.37)


def test_feature_dwords_decode_and_encode():
    # 25h: ACT 3:0, PMTS 7:4, SMT 31:16 (NVME_FEAT_POWER_MEAS_*)
    assert claims.START.dword == 0x1 and claims.STOP.dword == 0x0
    assert claims.PowerMeasurementFeature(1, 0, 30).dword == 0x001E0001
    assert claims.decode_power_measurement_feature(0x001E0021) == claims.PowerMeasurementFeature(1, 2, 30)
    with pytest.raises(ToolError, match="do not fit"):
        claims.PowerMeasurementFeature(1, 0, 70000).dword
    # 23h: PLV 15:0, PLS 17:16
    lim = claims.PowerLimit.from_watts(12.5, scale=2)
    assert lim.dword == 1250 | (2 << 16) and claims.decode_power_limit(lim.dword).watts == pytest.approx(12.5)
    assert claims.PowerLimit.from_watts(5.0).dword == 50000 | (1 << 16)      # 0.0001 W while it fits
    assert claims.PowerLimit.from_watts(25.0).dword == 2500 | (2 << 16)
    assert claims.decode_power_limit(0).watts is None and claims.PowerLimit.from_watts(None).dword == 0
    # 24h: PTV 15:0, PTS 17:16, PMTS 23:20, EPT 31
    th = claims.decode_power_threshold((1 << 31) | (3 << 20) | (2 << 16) | 900)
    assert (th.watts, th.measurement_type, th.enabled) == (pytest.approx(9.0), 3, True)
    assert th.dword == (1 << 31) | (3 << 20) | (2 << 16) | 900
    assert claims.power_w(pw(7, 0)) is None and claims.encode_power(0.0001) == pw(1, 1)
    with pytest.raises(ToolError, match="does not fit"):
        claims.encode_power(700.0, scale=1)


def ocp_c0(peak=35, avg=23, lifetime=8, version=5, guid=claims.OCP_C0_GUID) -> bytes:
    """ocp_smart_extended_log: max_peak_power_capability [261:260], current_max_avg_power [263:262],
    lifetime_power_consumed [269:264], log_page_version [495:494], log_page_guid [511:496]."""
    b = bytearray(512)
    struct.pack_into("<HH", b, 260, peak, avg)
    b[264:270] = lifetime.to_bytes(6, "little")
    struct.pack_into("<H", b, 494, version)
    b[496:512] = guid
    return bytes(b)


def test_ocp_c0_power_fields_with_units_unconfirmed():
    o = claims.decode_ocp_c0_power(ocp_c0(lifetime=2**40 + 5))
    assert (o.max_peak_power_capability, o.current_max_avg_power, o.lifetime_power_consumed) == (35, 23, 2**40 + 5)
    assert o.log_page_version == 5 and o.guid_ok and "units unconfirmed" in o.line()
    assert not claims.decode_ocp_c0_power(ocp_c0(guid=bytes(16))).guid_ok


# -- the gateway ---------------------------------------------------------------------------------------
def test_set_feature_25h_and_23h_only_through_the_guarded_door():
    """Starting a measurement or setting a power limit is a write to the drive's state: no permit, no
    command line, whichever spelling getopt_long would take for --feature-id; other features stay volatile."""
    for opts in (["--feature-id=0x25", "--value=1"], ["--feature-id=37", "--value=1"], ["--feature=0x25", "--value=0"],
                 ["--f=0x23", "--value=1250"], ["--feature-id=0X23"], ["--feature-id=0x25", "--save"]):
        with pytest.raises(UnsafeArgument, match="runs only through powerrig.dut.destructive"):
            nvme_argv(["nvme"], "set-feature", "/dev/nvme0", opts)
    assert nvme_action("set-feature", ["--feature-id=0x25"]) == "set-feature power-measurement"
    assert nvme_action("set-feature", ["--feature-id=35"]) == "set-feature power-limit"
    with pytest.raises(UnsafeArgument, match="decimal or 0x-prefixed"):
        nvme_argv(["nvme"], "set-feature", "/dev/nvme0", ["--feature-id=045"])     # strtoul: octal 37
    assert nvme_argv(["nvme"], "set-feature", "/dev/nvme0", ["--feature-id=2", "--value=0"])[1] == "set-feature"
    assert nvme_argv(["nvme"], "get-feature", "/dev/nvme0", ["--feature-id=0x25"])[1] == "get-feature"


@pytest.fixture
def vrig(tmp_path):
    ssds = [VirtualSSD("d5-p5336"), VirtualSSD("micron-fdp")]
    sock = str(tmp_path / "ssd.sock")
    with SsdServer(ssds, sock) as server:
        tl = Timeline()
        nvme = NvmeCli(tool_launcher("nvme", sock, tmp_path), tl, host=HostView(**server.host))
        yield server, nvme, tl, sock, tool_launcher("nvme", sock, tmp_path)


def test_claims_read_through_the_gateway_and_missing_ones_are_one_line(vrig):
    server, nvme, tl, _, _ = vrig
    lines = claims.report(nvme, "/dev/nvme0")
    assert lines[0].startswith("identify: power limit yes, power measurement yes") and "every 100 ms" in lines[0]
    assert lines[1:4] == ["power limit (23h): none set", "power threshold (24h): no value, disabled",
                          "power measurement (25h): stopped"]
    assert lines[4].startswith("power measurement (log 25h): generation 0, stopped, 0 intervals")
    assert lines[5].startswith("SMART: lifetime energy (OLEC) 7201 Wh")
    ssd = server.ssds["/dev/nvme0"]
    t = time.time()
    ipm = claims.read_smart_power(nvme, "/dev/nvme0").ipm_w          # the intervals of the last second
    assert ipm == pytest.approx(1.04 * float(ssd.power_at(np.linspace(t - 1.0, t, 400)).mean()) - 0.35, abs=0.005)
    assert lines[6].startswith("OCP C0h (v5, units unconfirmed): peak power capability 35")
    other = claims.report(nvme, "/dev/nvme1")      # the FDP profile makes no power claims
    assert other[0] == "identify: power limit no, power measurement no, voltage measurement no"
    assert other[1] == ("/dev/nvme1: power limit feature (23h) not supported (the drive answers Invalid Field in "
                        "Command: A reserved coded value or an unsupported value in a defined field(0x2))")
    assert other[4].startswith("/dev/nvme1: power measurement log (25h) not supported (the drive answers Invalid Log Page")
    assert other[5] == "SMART: lifetime energy (OLEC) not reported, power over the last second (IPM) not reported"
    assert other[6].startswith("/dev/nvme1: OCP extended SMART log (C0h) not supported")
    assert all("\n" not in s and "Traceback" not in s for s in lines + other)
    with pytest.raises(claims.NotSupported, match="power measurement feature"):
        claims.set_measurement(nvme, "/dev/nvme1", server.ssds["/dev/nvme1"].sn)
    gets = [e for e in tl.events(kind=NVME) if e.name == "get-log power-measurement" and e.ok]
    assert gets and gets[0].argv[-3:] == ["/dev/nvme0", "--log-id=0x25", "--log-len=512"]


def test_virtual_drive_s_descriptors_read_from_id_ctrl_bytes_match_nvme_cli_s_json(vrig):
    """`nvme id-ctrl -b` decoded in powerrig and nvme-cli's own JSON of the same drive say the same power states."""
    server, nvme, _, _, _ = vrig
    raw = claims.read_id_ctrl_power(nvme, "/dev/nvme0").states
    assert raw == nvme.id_ctrl("/dev/nvme0").power_states
    assert [(s.max_power_w, s.idle_power_w, s.active_power_w, s.active_workload) for s in raw] == \
        [(25.0, 5.5, 25.0, 2), (15.0, 5.5, 15.0, 2), (10.0, 5.5, 10.0, 2)]


def test_measurement_start_is_guarded_and_the_log_follows_the_model(vrig):
    server, nvme, tl, _, _ = vrig
    with pytest.raises(GuardRefused, match="the caller names 'WRONGSERIAL'"):
        claims.set_measurement(nvme, "/dev/nvme0", "WRONGSERIAL")
    assert not [e for e in tl.events(kind=NVME) if e.name == "set-feature"]       # nothing was sent
    t0 = time.time()
    claims.set_measurement(nvme, "/dev/nvme0", SERIAL)
    ev = [e for e in tl.events(kind=NVME) if e.name == "set-feature"][-1]
    assert ev.ok and ev.argv[-2:] == ["--feature-id=0x25", "--value=1"]
    assert [e.ok for e in tl.events(kind=NOTE) if e.name == "guard"] == [False, True]
    assert claims.read_feature(nvme, "/dev/nvme0", claims.FID_POWER_MEASUREMENT).action == 1
    time.sleep(1.2)
    claims.set_measurement(nvme, "/dev/nvme0", SERIAL, start=False)
    t1 = time.time()
    log = claims.read_power_measurement(nvme, "/dev/nvme0")
    assert log.pmgn == 1 and not log.enabled and log.pmc >= 10 and log.phbs_mw == 250
    assert len(log.bins) == log.nphd == log.nphds > 56           # read again with SZE bytes: all descriptors
    assert sum(b.count for b in log.bins) + log.phdoc == log.pmc
    start, end = claims.interval_span(log, 0.1, t0, t1)
    assert end == pytest.approx(log.smts.utc) and end - start == pytest.approx(log.pmc * 0.1)
    ssd = server.ssds["/dev/nvme0"]
    true_w = float(ssd.power_at(np.linspace(start, end, 4000, endpoint=False)).mean())
    assert log.aipwr_w == pytest.approx(1.04 * true_w - 0.35, abs=0.005)
    assert claims.read_feature(nvme, "/dev/nvme0", claims.FID_POWER_MEASUREMENT).action == 0
    # a power limit goes through the same door; one that forbids every state is the drive's 3Eh
    claims.set_power_limit(nvme, "/dev/nvme0", SERIAL, 12.5)
    assert claims.read_feature(nvme, "/dev/nvme0", claims.FID_POWER_LIMIT).watts == pytest.approx(12.5)
    with pytest.raises(ToolError, match=r"0x13e"):
        claims.set_power_limit(nvme, "/dev/nvme0", SERIAL, 1.0)
    claims.set_power_limit(nvme, "/dev/nvme0", SERIAL, None)
    assert claims.read_feature(nvme, "/dev/nvme0", claims.FID_POWER_LIMIT).watts is None


# -- the item 2: the raw bytes, read by a decoder written here from the header ---------------------
def independent_power_meas_log(raw: bytes) -> dict:
    """struct nvme_power_meas_log as nvme-types-base.h declares it, read with struct.unpack in its field
    order: __u8 ver; __u8 pmgn; __le16 pma; __le32 sze; __le32 pmc; __le16 nphd; __le16 smtr;
    struct nvme_timestamp smts (__u8 timestamp[6]; __u8 attr; __u8 rsvd); __le16 phds; __le16 phbs;
    __le16 nphds; __le16 vss; __le32 phdoc; __u8 rsvd36[4]; __le32 aipwr; __le32 mipwr;
    struct nvme_timestamp mipwrt; __u8 ipwrpe; __u8 rsvd57[7]; struct nvme_power_histogram_desc descs[]
    (__le32 phbc; __le32 phblt). Power fields: bits 15:0 value, 17:16 scale (1 = 0.0001 W, 2 = 0.01 W)."""
    fmt = "<BBHIIHH6sBBHHHHI4sII6sBBB7s"
    assert struct.calcsize(fmt) == 64
    (ver, pmgn, pma, sze, pmc, nphd, smtr, smts, smts_attr, _, phds, phbs, nphds, vss, phdoc, rsvd36, aipwr, mipwr,
     mipwrt, mipwrt_attr, _, ipwrpe, rsvd57) = struct.unpack_from(fmt, raw, 0)

    def watts(d):
        return (d & 0xFFFF) * {1: 1e-4, 2: 1e-2}[(d >> 16) & 3]
    descs = [struct.unpack_from("<II", raw, 64 + k * phds) for k in range(nphd) if 64 + (k + 1) * phds <= len(raw)]
    return {"ver": ver, "pmgn": pmgn, "pma": pma, "sze": sze, "pmc": pmc, "nphd": nphd, "smtr": smtr,
            "smts_ms": int.from_bytes(smts, "little"), "phds": phds, "phbs": phbs, "nphds": nphds, "vss": vss,
            "phdoc": phdoc, "rsvd": rsvd36 + rsvd57, "aipwr_w": watts(aipwr), "mipwr_w": watts(mipwr),
            "mipwrt_ms": int.from_bytes(mipwrt, "little"), "mipwrt_attr": mipwrt_attr, "ipwrpe": ipwrpe,
            "descs": [(c, watts(t)) for c, t in descs]}


def test_virtual_drive_raw_log_25h_is_the_spec_layout_byte_for_byte(vrig):
    """`nvme set-feature /dev/nvme0 --feature-id=0x25 --value=1`, a few seconds, then `nvme get-log
    /dev/nvme0 --log-id=0x25 --log-len=512 -b` through the virtual rig's nvme-cli: version 0, 250 mW
    bins, an average and a maximum the drive model bears out (the D5-P5336 reports +4 % -0.35 W)."""
    server, _, _, _, nvme = vrig
    t_set = time.time()
    p = subprocess.run(nvme + ["set-feature", "/dev/nvme0", "--feature-id=0x25", "--value=1"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.startswith("set-feature:0x25"), p.stderr
    time.sleep(3.0)
    raw = subprocess.run(nvme + ["get-log", "/dev/nvme0", "--log-id=0x25", "--log-len=512", "-b"],
                         capture_output=True, timeout=30).stdout
    t_read = time.time()
    assert len(raw) == 512
    log = independent_power_meas_log(raw)
    assert log["ver"] == 0 and log["pmgn"] == 1 and log["rsvd"] == bytes(11)
    assert log["pma"] & 1 and not log["pma"] & 4 and log["pma"] >> 12 == 0       # running, measured, total power
    assert log["phbs"] == 250 and log["phds"] == 8 and log["vss"] == 0 and log["ipwrpe"] == 5
    assert log["sze"] == 64 + 8 * log["nphd"] and log["nphd"] == log["nphds"]
    assert [t for _, t in log["descs"]] == pytest.approx([0.25 * k for k in range(len(log["descs"]))])
    assert len(log["descs"]) == (512 - 64) // 8          # the rest lies beyond the 512 bytes asked for
    assert 27 <= log["pmc"] <= 10 * (t_read - t_set) + 1   # one interval per 100 ms since the start
    ssd = server.ssds["/dev/nvme0"]
    t = np.linspace(t_set, t_read, 6000)
    true_w = float(ssd.power_at(t).mean())
    assert log["aipwr_w"] == pytest.approx(1.04 * true_w - 0.35, rel=0.01)
    assert log["aipwr_w"] <= log["mipwr_w"] <= 1.04 * float(ssd.power_at(t).max()) - 0.35 + 0.01
    assert t_set - 0.2 <= log["mipwrt_ms"] / 1000 <= t_read and log["mipwrt_attr"] == 0x02   # origin: host
    k = int(log["aipwr_w"] // 0.25)
    assert log["descs"][k][0] > 0 and sum(c for c, _ in log["descs"]) == log["pmc"] - log["phdoc"]


# -- the virtual drive's honesty knobs ---------------------------------------------------------------------
class StepDrive:
    """A stand-in for VirtualSSD's power: 5.1 W, then 15.1 W from t = 100 s, with a 10 Hz ripple of 0.5 W
    (one period per 100 ms interval); its settled level (what an estimating drive reports): 6 W, 14 W."""
    profile = load("d5-p5336")

    @staticmethod
    def _power_eval(t):
        return np.where(np.asarray(t) >= 100.0, 15.1, 5.1) + 0.5 * np.cos(2 * np.pi * 10 * np.asarray(t))

    @staticmethod
    def _power_target(t):
        return np.where(np.asarray(t) >= 100.0, 14.0, 6.0)


def meter(**cfg) -> PowerClaims:
    return PowerClaims(StepDrive(), {"interval_ms": 100, "samples_per_interval": 20, **cfg}, 90.0)


def test_honest_meter_counts_intervals_histogram_ipm_olec_and_stop_timestamp():
    m = meter(lifetime_wh=10.0)
    m.set_measurement(1, 0, 0, 95.04)           # counts intervals from 95.1
    log = m.log(99.0)
    assert log["pmc"] == 39 and log["aipwr_w"] == pytest.approx(5.1, abs=0.01) and log["enabled"]
    m.set_measurement(0, 0, 0, 105.06)          # stops: 99 intervals (95.1 .. 105.0), 49 at 5.1 W and 50 at 15.1 W
    log = m.log(110.0)
    assert log["pmc"] == 99 and not log["enabled"] and log["smts_ms"] == 105000
    assert log["aipwr_w"] == pytest.approx((49 * 5.1 + 50 * 15.1) / 99, abs=0.01)
    assert log["mipwr_w"] == pytest.approx(15.1, abs=0.01) and 100.0 < log["mipwrt_ms"] / 1000 <= 105.0
    assert log["counts"][20] == 49 and log["counts"][60] == 50 and sum(log["counts"]) == 99
    assert m.ipm_w(110.0) == pytest.approx(15.1, abs=0.01)
    assert m.olec_wh(110.0) == math.ceil(10.0 + (10 * 5.1 + 10 * 15.1) / 3600)
    m.set_measurement(1, 0, 1, 110.0)           # SMT 1 min: stops by itself
    log = m.log(200.0)
    assert log["pmgn"] == 2 and not log["enabled"] and log["pmc"] == 600 and log["smts_ms"] == 170000
    with pytest.raises(ValueError, match="reserved"):
        m.set_measurement(2, 0, 0, 200.0)
    with pytest.raises(ValueError, match="MSMT"):
        m.set_measurement(1, 0, 99999, 200.0)


@pytest.mark.parametrize("cfg,want_avg,estimated", [
    ({"bias_pct": 8.0}, 15.1 * 1.08, False),
    ({"offset_w": -0.5}, 14.6, False),
    ({"estimated": True}, 14.0, True),                       # the model's settled level, flagged
    ({"lag_s": 5.0}, 10.1, False),                           # 100..110 s reported as 95..105 s: half 5.1 W
])
def test_dishonest_meters_report_what_their_knob_says(cfg, want_avg, estimated):
    m = meter(**cfg)
    m.set_measurement(1, 0, 0, 100.0)
    m.set_measurement(0, 0, 0, 110.0)
    log = m.log(111.0)
    assert log["pmc"] == 100 and log["aipwr_w"] == pytest.approx(want_avg, abs=0.05)
    assert log["estimated"] is estimated


def test_coarse_sampling_aliases_the_ripple():
    """One point per interval, always at the same phase of the ripple (mid-interval: its trough): the
    average is off by the ripple's amplitude, where 20 points per interval average it out."""
    fine, coarse = meter(), meter(samples_per_interval=1)
    for m in (fine, coarse):
        m.set_measurement(1, 0, 0, 100.0)
        m.set_measurement(0, 0, 0, 102.0)
    assert fine.log(103)["aipwr_w"] == pytest.approx(15.1, abs=0.001)
    assert coarse.log(103)["aipwr_w"] == pytest.approx(15.1 - 0.5, abs=0.001)


def test_profile_knobs_reach_the_virtual_drive(tmp_path):
    """The honesty knobs are profile options: a copy of the D5-P5336 that estimates (+8 %) says so in its log."""
    import tomllib

    src = load("d5-p5336").path
    text = open(src).read().replace("bias_pct = 4.0", "bias_pct = 8.0").replace("offset_w = -0.35", "offset_w = 0.0") \
        .replace("estimated = false", "estimated = true")
    assert tomllib.loads(text)["power"]["self_report"]["estimated"] is True
    (tmp_path / "estimating.toml").write_text(text)
    ssd = VirtualSSD(load(tmp_path / "estimating.toml"))
    ssd.set_power_measurement(1)
    time.sleep(0.35)
    log = ssd.power_measurement()
    assert log["estimated"] and log["pmc"] >= 2
    assert log["aipwr_w"] == pytest.approx(1.08 * float(ssd._power_target(np.array([time.time()]))[0]), rel=1e-6)
    assert VirtualSSD("micron-fdp").claims is None
    (tmp_path / "12v.toml").write_text(text.replace("estimated = true", 'estimated = true\nrails = "12V"'))
    only_12v = VirtualSSD(load(tmp_path / "12v.toml"))           # a wrong rail split: the 3.3 V rail's 0.1 W left out
    assert only_12v.claims.rails == "12V" and only_12v.claims.left_out_w == pytest.approx(0.10)
    only_12v.set_power_measurement(1)
    time.sleep(0.35)
    log = only_12v.power_measurement()
    assert log["aipwr_w"] == pytest.approx(1.08 * (float(only_12v._power_target(np.array([time.time()]))[0]) - 0.10),
                                           rel=1e-6)


def test_sweep_check_skips_a_drive_that_claims_nothing_with_one_note(vrig):
    """[checks] self_reported_power on a drive whose Identify says it has no power measurement: one note
    for the sweep, no set-feature sent."""
    from types import SimpleNamespace

    from powerrig.sweep.engine import Sweep

    server, nvme, tl, _, _ = vrig
    notes = []
    fake = SimpleNamespace(_rig=SimpleNamespace(controller="/dev/nvme1"),
                           plan=SimpleNamespace(drive=SimpleNamespace(serial=server.ssds["/dev/nvme1"].sn)),
                           _emit=lambda kind, **kw: notes.append(kw["text"]))
    assert Sweep._self_report_start(fake, nvme) is None and Sweep._self_report_start(fake, nvme) is None
    assert notes == ["self-reported power: the drive gives none (Identify Controller CTRATT bit 21, power "
                     "measurement, is clear)"]
    assert not [e for e in tl.events(kind=NVME) if e.name == "set-feature"]


def test_nvme_cli_3_json_is_read_where_it_exists_and_says_the_same_as_the_bytes(vrig, monkeypatch):
    """nvme-cli 3.0 prints log 25h itself (`nvme log power-measurement DEV -o json`, raw fields by the
    header's names): powerrig reads that there, and it decodes to what the bytes decode to."""
    server, nvme, tl, sock, prog = vrig
    claims.set_measurement(nvme, "/dev/nvme0", SERIAL)
    time.sleep(0.4)
    claims.set_measurement(nvme, "/dev/nvme0", SERIAL, start=False)
    from_bytes = claims.read_power_measurement(nvme, "/dev/nvme0")           # nvme-cli 2.3: get-log
    monkeypatch.setenv("POWERRIG_SIM_NVME_VERSION", "3.0")
    nvme3 = NvmeCli(prog, tl, host=nvme.host)
    from_json = claims.read_power_measurement(nvme3, "/dev/nvme0")
    assert from_json == from_bytes and from_json.smts.utc is not None and len(from_json.bins) == from_json.nphd
    ev = [e for e in tl.events(kind=NVME) if e.name == "log power-measurement"][-1]
    assert ev.ok and ev.argv[-3:] == ["power-measurement", "/dev/nvme0", "--output-format=json"]
    with pytest.raises(claims.NotSupported, match="power measurement log .25h. not supported"):
        claims.read_power_measurement(nvme3, "/dev/nvme1")
    with pytest.raises(claims.ClaimError, match="VER is 1"):
        claims.parse_power_meas_json('{"ver": 1}')
