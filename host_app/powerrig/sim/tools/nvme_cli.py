"""``powerrig sim nvme``: nvme-cli at its command line, acting on a virtual SSD.

The subset the drive-control runners use, with the output of a chosen nvme-cli version
($POWERRIG_SIM_NVME_VERSION, default 2.3): version, id-ctrl (JSON, or the 4096 bytes with -b),
get-feature, set-feature (FID 0x02 power management, 0x0C APST, 0x23 power limit, 0x24 power threshold,
0x25 power measurement), smart-log, get-log (25h power measurement, 02h SMART, C0h OCP extended SMART:
a hex dump, or the bytes with -b), fdp stats, ocp smart-add-log. Errors are printed the way nvme-cli
prints them (device path: No such file or directory; NVMe status ...), exit status 1.

The byte layouts of the power claims are written here from the libnvme headers (nvme-types-base.h:
struct nvme_power_meas_log, struct nvme_smart_log, struct nvme_id_ctrl; ocp-smart-extended-log.h),
independently of the host's decoders (powerrig.dut.claims).
"""
from __future__ import annotations

import json
import math
import os
import re
import struct
import sys

if __name__ == "__main__" and not __package__:      # run by path (sim/rig.py: tool_command): find powerrig
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from powerrig.core.nvme_numbers import KELVIN_OFFSET_NVME_CLI, encode_power, parse_int
from powerrig.sim.ssd.client import EndpointError, endpoint_from, request

VERSION_ENV = "POWERRIG_SIM_NVME_VERSION"
FEATURE_NAMES = {0x02: "Power Management", 0x0C: "Autonomous Power State Transition",
                 0x23: "Unknown", 0x24: "Unknown", 0x25: "Unknown"}     # nvme-cli 2.3 names none of 23h-25h
POWER_FIDS = (0x23, 0x24, 0x25)
STATUS_TEXT = {
    "INVALID_FIELD": "NVMe status: Invalid Field in Command: A reserved coded value or an unsupported value "
                     "in a defined field(0x2)",
    "INVALID_LOG_PAGE": "NVMe status: Invalid Log Page: The log page indicated is invalid(0x109)",
    "INVALID_POWER_LIMIT": "NVMe status: Unknown(0x13e)",
}


def _version() -> tuple[int, int]:
    v = os.environ.get(VERSION_ENV, "2.3")
    major, _, minor = v.partition(".")
    return int(major), int(minor.split(".")[0] or 0)


class Usage(Exception):
    pass


def _parse(args: list[str], spec: dict[str, str]) -> tuple[list[str], dict]:
    """Parse nvme-cli style options: spec maps every spelling (-f, --feature-id) to a key; flags end in '!'."""
    pos, opts, i = [], {}, 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and "=" in a:
            name, val = a.split("=", 1)
            if name not in spec:
                raise Usage(f"unrecognized option '{name}'")
            opts[spec[name].rstrip("!")] = val
        elif a in spec:
            key = spec[a]
            if key.endswith("!"):
                opts[key[:-1]] = True
            else:
                if i + 1 >= len(args):
                    raise Usage(f"option '{a}' requires an argument")
                opts[key] = args[i + 1]
                i += 1
        elif a.startswith("-") and len(a) > 2 and a[:2] in spec and not spec[a[:2]].endswith("!"):
            opts[spec[a[:2]]] = a[2:]
        elif a.startswith("-"):
            raise Usage(f"unrecognized option '{a}'")
        else:
            pos.append(a)
        i += 1
    return pos, opts


def _num(s) -> int:
    try:
        return parse_int(s)
    except ValueError:
        raise Usage(f"{s!r} is not a number") from None


class _LongDouble(float):
    """A 128-bit counter that nvme-cli before 2.2 printed as a long double ("%Lf": N.000000)."""


_LD = re.compile(r'"\x00LD(\d+)"')


def _dumps(obj) -> str:
    major, _ = _version()

    def mark(o):
        if isinstance(o, _LongDouble):
            return f"\x00LD{int(o)}"
        if isinstance(o, dict):
            return {k: mark(v) for k, v in o.items()}
        if isinstance(o, list):
            return [mark(v) for v in o]
        return o
    text = json.dumps(mark(obj), indent=2, separators=(",", " : ") if major < 2 else (",", ":"))
    return _LD.sub(lambda m: f"{m.group(1)}.000000" if major < 2 else f"{m.group(1)}.0", text.replace("\\u0000", "\x00"))


def _u128(n: int):
    """128-bit counters as this nvme-cli version prints them."""
    major, minor = _version()
    if major < 2 or (major == 2 and minor <= 1):
        return _LongDouble(n)
    if major == 2 and minor <= 3:
        return str(n)
    return int(n)


def _hexdump(buf: bytes) -> str:
    lines = ["     " + "".join(f"{i:3x}" for i in range(16))]
    for off in range(0, len(buf), 16):
        row = buf[off:off + 16]
        asc = "".join(chr(b) if 0x21 <= b <= 0x7E else "." for b in row)
        lines.append(f"{off:04x}:" + "".join(f" {b:02x}" for b in row) + f' "{asc}"')
    return "\n".join(lines)


def _hexval(v: int) -> str:
    return f"{v:#010x}" if v else "00000000"


# -- commands -----------------------------------------------------------------------------------
def cmd_version(ep, args):
    major, minor = _version()
    print(f"nvme version {major}.{minor} (git {major}.{minor})")
    if major >= 2:
        print("libnvme version 1.3 (git 1.3)")
    return 0


def _psd(st, major, minor, idle_default):
    """One power state descriptor as this nvme-cli version prints it. 1.x prints ``idle_scale`` and
    ``active_work_scale`` as the raw descriptor bytes (scale in bits 7:6); 2.x decodes them."""
    mp, mxps = encode_power(st["mp_w"])
    nops = int(st["nops"])
    idle = st["idle_w"] if st["idle_w"] is not None else min(idle_default, st["mp_w"])
    d = {"max_power": mp}
    if (major, minor) >= (2, 6):
        d.update({"max_power_scale": mxps, "non-operational_state": nops})
    else:
        d["flags"] = mxps | (nops << 1)
    ips, aps, apw = 2, (0 if nops else 2), (0 if nops else 2)       # 0.01 W units
    d.update({"entry_lat": st["enlat_us"], "exit_lat": st["exlat_us"], "read_tput": st["ps"], "read_lat": st["ps"],
              "write_tput": st["ps"], "write_lat": st["ps"], "idle_power": int(round(idle * 100)),
              "idle_scale": (ips << 6) if major < 2 else ips,
              "active_power": 0 if nops else int(round(st["mp_w"] * 100))})
    if major < 2:
        d["active_work_scale"] = (aps << 6) | apw
    else:
        d.update({"active_power_work": apw, "active_scale": aps})
    return d


def _ctratt(r) -> int:
    """CTRATT: bit 19 FDP; bits 20 PLS (power limit) and 21 PMS (power measurement) with power claims."""
    c = 0x80280 if r["fdp"] else 0x280
    return c | (0x300000 if r.get("power_claims") else 0)


def _ipmsr(interval_s: float) -> int:
    """IPMSR: value bits 7:0, scale bits 15:8 (1 = 1 us, 2 = 10 us, 3 = 100 us, 4 = 1 ms, 5 = 10 ms)."""
    us = interval_s * 1e6
    for scale in range(1, 6):
        v = us / 10 ** (scale - 1)
        if v <= 255 and abs(v - round(v)) < 1e-6:
            return int(round(v)) | (scale << 8)
    return min(255, int(math.ceil(us / 1e4))) | (5 << 8)


def id_ctrl_bytes(r) -> bytes:
    """Identify Controller, 4096 bytes (struct nvme_id_ctrl): identity, CTRATT, NPSS, APSTA, temperatures,
    TNVMCAP, MUP / IPMSR / MSMT (390 / 392 / 394), SQES / CQES, NN, SUBNQN and the power state
    descriptors (struct nvme_id_psd at 2048 + 32 i). MUP in 0.01 W (the header names no unit)."""
    b = bytearray(4096)
    struct.pack_into("<HH20s40s8s", b, 0, r["vid"], r["vid"], r["sn"].ljust(20).encode(), r["mn"].ljust(40).encode(),
                     r["fr"].ljust(8).encode())
    struct.pack_into("<I", b, 96, _ctratt(r))
    b[263], b[265] = r["npss"], r["apsta"]
    struct.pack_into("<HH", b, 266, r["wctemp_k"], r["cctemp_k"])
    b[280:296] = int(r["capacity_bytes"]).to_bytes(16, "little")
    pc = r.get("power_claims")
    if pc:
        struct.pack_into("<HHH", b, 390, int(round(pc["mup_w"] * 100)), _ipmsr(pc["interval_s"]), pc["msmt_min"])
    b[512], b[513] = 0x66, 0x44
    struct.pack_into("<I", b, 516, r["namespaces"])
    subnqn = f"nqn.2024-01.io.powerrig:virtual:{r['sn']}".encode()
    b[768:768 + len(subnqn)] = subnqn
    for i, st in enumerate(r["states"]):
        mp, mxps = encode_power(st["mp_w"])
        idle = st["idle_w"] if st["idle_w"] is not None else min(r["idle_w"], st["mp_w"])
        nops = int(st["nops"])
        struct.pack_into("<HxBIIBBBBHBxHB", b, 2048 + 32 * i, mp, mxps | (nops << 1), st["enlat_us"], st["exlat_us"],
                         st["ps"], st["ps"], st["ps"], st["ps"], int(round(idle * 100)), 2 << 6,
                         0 if nops else int(round(st["mp_w"] * 100)), 0 if nops else (2 | (2 << 6)))
    return bytes(b)


def cmd_id_ctrl(ep, args):
    pos, o = _parse(args, {"-o": "fmt", "--output-format": "fmt", "-H": "human!", "--human-readable": "human!",
                           "-v": "vs!", "--vendor-specific": "vs!", "-b": "raw!", "--raw-binary": "raw!"})
    dev = _need_dev(pos, "id-ctrl")
    r = _call(ep, {"op": "identify", "dev": dev})
    if o.get("raw"):
        sys.stdout.buffer.write(id_ctrl_bytes(r))
        return 0
    major, minor = _version()
    client = bool(r["apsta"])          # client drives: volatile write cache, no sanitize overwrite
    ctrl = {"vid": r["vid"], "ssvid": r["vid"], "sn": r["sn"].ljust(20), "mn": r["mn"].ljust(40),
            "fr": r["fr"].ljust(8), "rab": 0 if client else 2, "ieee": 0x5cd2e4, "cmic": 0, "mdts": 5 if client else 9,
            "cntlid": 0 if client else 1, "ver": 0x10400 if client else 0x20000, "rtd3r": 10000000, "rtd3e": 9000000,
            "oaes": 0x300, "ctratt": _ctratt(r), "rrls": 0, "cntrltype": 1,
            "fguid": "00000000-0000-0000-0000-000000000000", "crdt1": 0, "crdt2": 0, "crdt3": 0, "nvmsr": 0,
            "vwci": 0, "mec": 0, "oacs": 0x5e, "acl": 3, "aerl": 3, "frmw": 0x18, "lpa": 0x3e, "elpe": 255,
            "npss": r["npss"], "avscc": 1, "apsta": r["apsta"], "wctemp": r["wctemp_k"], "cctemp": r["cctemp_k"],
            "mtfa": 0, "hmpre": 0, "hmmin": 0, "tnvmcap": _u128(r["capacity_bytes"]), "unvmcap": _u128(0),
            "rpmbs": 0, "edstt": 35, "dsto": 1, "fwug": 0, "kas": 0, "hctma": 1, "mntmt": 273, "mxtmt": 358,
            "sanicap": 0x60000002 if client else 0x60000003, "hmminds": 0, "hmmaxd": 0, "nsetidmax": 0,
            "endgidmax": 1, "anatt": 0, "anacap": 0, "anagrpmax": 0, "nanagrpid": 0, "pels": 1, "domainid": 0,
            "megcap": _u128(0), "sqes": 0x66, "cqes": 0x44, "maxcmd": 0, "nn": r["namespaces"], "oncs": 0x5e,
            "fuses": 0, "fna": 0x4 if client else 0, "vwc": 0x7 if client else 0x6, "awun": 0, "awupf": 0,
            "icsvscc": 1, "nwpc": 0, "acwu": 0, "ocfs": 0, "sgls": 0 if client else 0xf0002, "mnan": 0, "maxdna": 0,
            "maxcna": 0, "subnqn": f"nqn.2024-01.io.powerrig:virtual:{r['sn']}", "ioccsz": 0, "iorcsz": 0,
            "icdoff": 0, "fcatt": 0, "msdbd": 0, "ofcs": 0,
            "psds": [_psd(s, major, minor, r["idle_w"]) for s in r["states"]]}
    if major < 2:                      # fields 1.x did not print yet
        for k in ("fguid", "crdt1", "crdt2", "crdt3", "nvmsr", "vwci", "mec", "domainid", "megcap", "maxdna",
                  "maxcna", "ofcs", "nwpc", "icsvscc", "rrls"):
            ctrl.pop(k, None)
    if o.get("fmt") == "json":
        print(_dumps(ctrl))
    else:
        print("NVME Identify Controller:")
        for k, v in ctrl.items():
            if k != "psds":
                print(f"{k:<10}: {v}")
        for i, p in enumerate(ctrl["psds"]):
            print(f"ps {i:4d} : mp:{p['max_power'] / 100:.2f}W operational enlat:{p['entry_lat']} "
                  f"exlat:{p['exit_lat']} rrt:{i} rrl:{i}")
    return 0


def cmd_get_feature(ep, args):
    major, minor = _version()
    spec = {"-f": "fid", "--feature-id": "fid", "-n": "nsid", "--namespace-id": "nsid", "-s": "sel", "--sel": "sel",
            "-l": "len", "--data-len": "len", "-H": "human!", "--human-readable": "human!", "-c": "cdw11",
            "--cdw11": "cdw11"}
    if (major, minor) >= (2, 9):
        spec.update({"-o": "fmt", "--output-format": "fmt"})
    pos, o = _parse(args, spec)
    dev = _need_dev(pos, "get-feature")
    if "fid" not in o:
        raise Usage("feature-id required param")
    fid = _num(o["fid"])
    if fid == 0x02:
        r = _call(ep, {"op": "get_power_state", "dev": dev})
        value, buf = r["ps"] | (r["workload_hint"] << 5), b""
    elif fid == 0x0C:
        r = _call(ep, {"op": "get_apst", "dev": dev})
        value = int(r["enabled"])
        buf = b"".join(((itpt << 8) | (itps << 3)).to_bytes(8, "little") for itps, itpt in r["table"])
    elif fid in POWER_FIDS:
        value, buf = _call(ep, {"op": "get_power_feature", "dev": dev, "fid": fid})["value"], b""
    else:
        _status("INVALID_FIELD")
        return 1
    name = FEATURE_NAMES[fid]
    if o.get("fmt") == "json":
        print(_dumps({"feature": f"{fid:#04x}", "name": name, "value": f"{value:#010x}"}))
        return 0
    print(f"get-feature:{fid:#04x} ({name}), Current value:{_hexval(value)}")
    if o.get("human") and fid == 0x02:
        print(f"\tWorkload Hint (WH): {value >> 5} - ")
        print(f"\tPower State   (PS): {value & 0x1f}")
    elif o.get("human") and fid == 0x0C:
        print(f"\tAutonomous Power State Transition Enable (APSTE): {'Enabled' if value & 1 else 'Disabled'}")
    elif buf:
        print(_hexdump(buf))
    return 0


def cmd_set_feature(ep, args):
    major, minor = _version()
    spec = {"-f": "fid", "--feature-id": "fid", "-n": "nsid", "--namespace-id": "nsid", "--value": "value",
            "-c": "cdw12", "--cdw12": "cdw12", "-l": "len", "--data-len": "len", "-d": "data", "--data": "data",
            "-s": "save!", "--save": "save!", "-U": "uuid", "--uuid-index": "uuid"}
    spec["-V" if (major, minor) >= (2, 7) else "-v"] = "value"
    pos, o = _parse(args, spec)
    dev = _need_dev(pos, "set-feature")
    if "fid" not in o:
        raise Usage("feature-id required param")
    fid = _num(o["fid"])
    value = _num(o.get("value", 0))
    buf = b""
    if fid == 0x02:
        _call(ep, {"op": "set_power_state", "dev": dev, "ps": value & 0x1F, "workload_hint": (value >> 5) & 7})
    elif fid == 0x0C:
        if "data" not in o:
            print("set-feature: APST needs its table: --data=FILE (256 bytes)", file=sys.stderr)
            return 1
        try:
            with open(o["data"], "rb") as f:
                buf = f.read(256)
        except OSError as e:
            print(f"Failed to open data file {o['data']}: {e.strerror}", file=sys.stderr)
            return 1
        table = [(((int.from_bytes(buf[i:i + 8], "little") >> 3) & 0x1F), (int.from_bytes(buf[i:i + 8], "little") >> 8) & 0xFFFFFF)
                 for i in range(0, len(buf) - 7, 8)]
        _call(ep, {"op": "set_apst", "dev": dev, "enabled": bool(value & 1), "table": table})
    elif fid == 0x25:       # ACT bits 3:0, PMTS bits 7:4, SMT (minutes) bits 31:16
        _call(ep, {"op": "set_power_measurement", "dev": dev, "action": value & 0xF, "pmts": (value >> 4) & 0xF,
                   "smt_min": (value >> 16) & 0xFFFF})
    elif fid in (0x23, 0x24):
        _call(ep, {"op": "set_power_feature", "dev": dev, "fid": fid, "value": value})
    else:
        _status("INVALID_FIELD")
        return 1
    cdw12 = _num(o.get("cdw12", 0))
    print(f"set-feature:{fid:#04x} ({FEATURE_NAMES[fid]}), value:{_hexval(value)}, cdw12:{_hexval(cdw12)}, "
          f"save:{int(bool(o.get('save')))}")
    if buf:
        print(_hexdump(buf))
    return 0


def cmd_smart_log(ep, args):
    pos, o = _parse(args, {"-o": "fmt", "--output-format": "fmt", "-n": "nsid", "--namespace-id": "nsid",
                           "-H": "human!", "--human-readable": "human!", "-b": "raw!", "--raw-binary": "raw!"})
    dev = _need_dev(pos, "smart-log")
    log = _call(ep, {"op": "smart_log", "dev": dev})["log"]
    major, minor = _version()
    cw = log["critical_warning"]
    if (major, minor) >= (2, 11):
        cw = {"value": cw, "available_spare": cw & 1, "temp_threshold": (cw >> 1) & 1,
              "reliability_degraded": (cw >> 2) & 1, "ro": (cw >> 3) & 1, "vmbu_failed": (cw >> 4) & 1,
              "pmr_ro": (cw >> 5) & 1}
    out = {"critical_warning": cw, "temperature": log["temperature_k"], "avail_spare": log["avail_spare"],
           "spare_thresh": log["spare_thresh"], "percent_used": log["percent_used"],
           "endurance_grp_critical_warning_summary": 0}
    for k in ("data_units_read", "data_units_written", "host_read_commands", "host_write_commands",
              "controller_busy_time", "power_cycles", "power_on_hours", "unsafe_shutdowns", "media_errors",
              "num_err_log_entries"):
        out[k] = _u128(log[k])
    for k in ("warning_temp_time", "critical_comp_time"):
        out[k] = log[k]
    for i, t in enumerate(log.get("temperature_sensors") or [], 1):     # printed only when reported (non-zero)
        if t:
            out[f"temperature_sensor_{i}"] = t
    for k in ("thm_temp1_trans_count", "thm_temp2_trans_count", "thm_temp1_total_time", "thm_temp2_total_time"):
        out[k] = log[k]
    if o.get("fmt") == "json":
        print(_dumps(out))
    else:
        print(f"Smart Log for NVME device:{os.path.basename(dev)} namespace-id:ffffffff")
        for k, v in out.items():
            if isinstance(v, dict):
                v = v["value"]
            elif isinstance(v, _LongDouble):
                v = int(v)
            if k == "temperature" or k.startswith("temperature_sensor"):
                c = int(v) - KELVIN_OFFSET_NVME_CLI      # nvme-cli: K - 273
                v = f"{c} C ({int(v)} Kelvin)" if major >= 2 else f"{c} C"
            print(f"{k:<40}: {v}")
    return 0


def _plugin_sub(args, sub: str, plugin: str) -> bool:
    """Is ``args`` the plugin's sub-command ``sub``? Otherwise nvme-cli's own refusal, said on stderr."""
    if args and args[0] == sub:
        return True
    print(f"ERROR: Invalid sub-command '{args[0] if args else ''}' for plugin {plugin}", file=sys.stderr)
    return False


def cmd_fdp(ep, args):
    if not _plugin_sub(args, "stats", "fdp"):
        return 1
    pos, o = _parse(args[1:], {"-o": "fmt", "--output-format": "fmt", "-e": "endgid", "--endgrp-id": "endgid",
                               "-b": "raw!", "--raw-binary": "raw!"})
    dev = _need_dev(pos, "fdp stats")
    log = _call(ep, {"op": "fdp_stats", "dev": dev})["log"]
    out = {k: _u128(log[k]) for k in ("hbmw", "mbmw", "mbe")}
    if o.get("fmt") == "json":
        print(_dumps(out))
    else:
        print(f"Host Bytes with Metadata Written (HBMW): {log['hbmw']}")
        print(f"Media Bytes with Metadata Written (MBMW): {log['mbmw']}")
        print(f"Media Bytes Erased (MBE): {log['mbe']}")
    return 0


POWER_MEASUREMENT_LID = 0x25


SMART_LID = 0x02
OCP_C0_LID = 0xC0
OCP_C0_GUID = bytes([0xC5, 0xAF, 0x10, 0x28, 0xEA, 0xBF, 0xF2, 0xA4, 0x9C, 0x4F, 0x6F, 0x7C, 0xC9, 0x14, 0xD5, 0xAF])
TIMESTAMP_ATTR = 1 << 1     # struct nvme_timestamp attr: origin (bits 3:1) 1 = set by the host's Set Features


def _power_dword(w: float) -> int:
    """PWRV bits 15:0 with PWRS bits 17:16: 0.0001 W (1) while it fits, else 0.01 W (2)."""
    w = max(0.0, float(w))
    if w * 1e4 < 65535.5:
        return int(round(w * 1e4)) | (1 << 16)
    return min(0xFFFF, int(round(w * 100))) | (2 << 16)


def _timestamp(ms: int) -> bytes:
    """struct nvme_timestamp: a 6-byte millisecond value, the attribute byte, a reserved byte."""
    if not ms:
        return bytes(8)
    return int(ms).to_bytes(6, "little") + bytes([TIMESTAMP_ATTR, 0])


def power_measurement_bytes(log: dict) -> bytes:
    """Log 25h, struct nvme_power_meas_log (nvme-types-base.h), little endian: VER 0, PMGN, PMA (bit 0
    enabled, 2 estimated, 3 MIPWRT supported, 4 histogram overflow; type 0 in bits 15:12), SZE, PMC,
    NPHD, SMTR, SMTS, PHDS 8, PHBS 250 mW, NPHDS, VSS 0, PHDOC, 4 reserved, AIPWR, MIPWR, MIPWRT, IPWRPE,
    7 reserved, then NPHD descriptors {PHBC u32, PHBLT u32} of 250 mW bins from 0 W."""
    counts = log["counts"]
    n = len(counts)
    pma = (1 if log["enabled"] else 0) | (4 if log["estimated"] else 0) | 8 | (16 if log["phdoc"] else 0)
    head = struct.pack("<BBHIIHH", 0, log["pmgn"], pma, 64 + 8 * n, log["pmc"], n, log["smtr_min"])
    head += _timestamp(log["smts_ms"])
    head += struct.pack("<HHHHI4xII", 8, int(round(log["bin_w"] * 1000)), log["nphds"], 0, log["phdoc"],
                        _power_dword(log["aipwr_w"]) if log["pmc"] else 0,
                        _power_dword(log["mipwr_w"]) if log["pmc"] else 0)
    head += _timestamp(log["mipwrt_ms"]) + struct.pack("<B7x", log["ipwrpe"])
    assert len(head) == 64
    bin_cw = int(round(log["bin_w"] * 100))      # thresholds in 0.01 W: exact for 250 mW bins
    return head + b"".join(struct.pack("<II", c, (k * bin_cw) | (2 << 16)) for k, c in enumerate(counts))


def _le128(n: int) -> bytes:
    return int(n).to_bytes(16, "little")


def smart_bytes(log: dict, power: dict) -> bytes:
    """Log 02h, struct nvme_smart_log (512 bytes): the counters smart-log prints, and OLEC (232, u64 Wh)
    and IPM (240, u32: value 15:0, scale 17:16; 0 = not reported)."""
    b = bytearray(512)
    b[0] = log["critical_warning"]
    struct.pack_into("<HBBB", b, 1, log["temperature_k"], log["avail_spare"], log["spare_thresh"], log["percent_used"])
    for k, name in enumerate(("data_units_read", "data_units_written", "host_read_commands", "host_write_commands",
                              "controller_busy_time", "power_cycles", "power_on_hours", "unsafe_shutdowns",
                              "media_errors", "num_err_log_entries")):
        b[32 + 16 * k:48 + 16 * k] = _le128(log[name])
    struct.pack_into("<II", b, 192, log["warning_temp_time"], log["critical_comp_time"])
    for k, t in enumerate((log.get("temperature_sensors") or [])[:8]):
        struct.pack_into("<H", b, 200 + 2 * k, t)
    struct.pack_into("<IIII", b, 216, log["thm_temp1_trans_count"], log["thm_temp2_trans_count"],
                     log["thm_temp1_total_time"], log["thm_temp2_total_time"])
    struct.pack_into("<QI", b, 232, power["olec_wh"], _power_dword(power["ipm_w"]) if power["ipm_w"] > 0 else 0)
    return bytes(b)


def ocp_c0_bytes(media: dict, power: dict) -> bytes:
    """OCP C0h (ocp-smart-extended-log.h, 512 bytes): physical media units written/read (0, 16), maximum
    peak power capability (260, u16), current maximum average power (262, u16), lifetime power consumed
    (264, u48), log page version 5 (494), the GUID (496)."""
    b = bytearray(512)
    b[0:16] = _le128(media["physical_media_units_written"])
    b[16:32] = _le128(media["physical_media_units_read"])
    struct.pack_into("<HH", b, 260, power["max_peak_power_capability"], power["current_max_avg_power"])
    b[264:270] = int(power["lifetime_power_consumed"]).to_bytes(6, "little")
    struct.pack_into("<H", b, 494, 5)
    b[496:512] = OCP_C0_GUID
    return bytes(b)


def cmd_get_log(ep, args):
    """`nvme get-log DEV --log-id=N --log-len=L [-b]`: the generic log command (nvme-cli has no named
    command for the Power Measurement log): a hex dump, or the bytes with --raw-binary."""
    pos, o = _parse(args, {"-i": "lid", "--log-id": "lid", "-l": "len", "--log-len": "len", "-n": "nsid",
                           "--namespace-id": "nsid", "-b": "raw!", "--raw-binary": "raw!", "-o": "lpo",
                           "--lpo": "lpo", "-s": "lsp", "--lsp": "lsp"})
    dev = _need_dev(pos, "get-log")
    if "lid" not in o:
        raise Usage("log-id required param")
    if "len" not in o:
        raise Usage("non-zero log-len is required param")
    lid, length = _num(o["lid"]), _num(o["len"])
    if length <= 0:
        raise Usage("non-zero log-len is required param")
    if lid == POWER_MEASUREMENT_LID:
        buf = power_measurement_bytes(_call(ep, {"op": "power_measurement", "dev": dev})["log"])
    elif lid == SMART_LID:
        buf = smart_bytes(_call(ep, {"op": "smart_log", "dev": dev})["log"], _call(ep, {"op": "power_smart", "dev": dev}))
    elif lid == OCP_C0_LID:
        power = _call(ep, {"op": "ocp_power", "dev": dev})["log"]
        buf = ocp_c0_bytes(_call(ep, {"op": "ocp_smart", "dev": dev})["log"], power)
    else:
        _status("INVALID_LOG_PAGE")
        return 1
    buf = (buf + bytes(max(0, length - len(buf))))[:length]
    if o.get("raw"):
        sys.stdout.buffer.write(buf)
        return 0
    nsid = _num(o.get("nsid", 0xFFFFFFFF))
    print(f"Device:{os.path.basename(dev)} log_id:{lid:#04x} namespace_id:{nsid:#x}")
    print(_hexdump(buf))
    return 0


TS_ORIGIN = "The Timestamp field was initialized with a Timestamp value using a Set Features command."
TS_SYNCH = "The controller counted time in milliseconds continuously since the Timestamp value was initialized."


def _json_ts(ms: int) -> dict:
    """nvme-cli 3.0's json_timestamp (nvme-print-json.c), for a timestamp written with origin 1."""
    attr = TIMESTAMP_ATTR if ms else 0
    return {"timestamp": int(ms), "timestamp string": "", "timestamp origin": TS_ORIGIN if attr else
            "The Timestamp field was initialized to 0h by a Controller Level Reset.", "synch": TS_SYNCH}


def cmd_log(ep, args):
    """nvme-cli 3.0's log plugin: `nvme log power-measurement DEV [-o json] [-b]` (log-plugin.c reads
    64 bytes, then SZE): JSON as nvme-print-json.c json_power_meas_log prints it; 2.x has no `log`."""
    if _version() < (3, 0):
        print("ERROR: Invalid sub-command 'log'", file=sys.stderr)
        return 1
    if not _plugin_sub(args, "power-measurement", "log"):
        return 1
    pos, o = _parse(args[1:], {"-o": "fmt", "--output-format": "fmt", "-b": "raw!", "--raw-binary": "raw!",
                               "-v": "verbose!", "--verbose": "verbose!"})
    dev = _need_dev(pos, "log power-measurement")
    log = _call(ep, {"op": "power_measurement", "dev": dev})["log"]
    buf = power_measurement_bytes(log)
    if o.get("raw"):
        sys.stdout.buffer.write(buf)
        return 0
    if o.get("fmt") != "json":
        print("Power Measurement Log")          # the normal output is not what powerrig reads
        return 0
    pma, sze, pmc, nphd, smtr = struct.unpack_from("<HIIHH", buf, 2)
    phds, phbs, nphds, vss, phdoc = struct.unpack_from("<HHHHI", buf, 24)
    aipwr, mipwr = struct.unpack_from("<II", buf, 40)
    out = {"ver": buf[0], "pmgn": buf[1], "pma": pma, "pme": pma & 1, "ncpdf": pma >> 1 & 1, "epf": pma >> 2 & 1,
           "mipwrts": pma >> 3 & 1, "phdo": pma >> 4 & 1, "pmt": pma >> 12, "pmt_str": "NVM subsystem total power",
           "sze": sze, "pmc": pmc, "nphd": nphd, "smtr": smtr, "smts": _json_ts(log["smts_ms"]), "phds": phds,
           "phbs": phbs, "nphds": nphds, "vss": vss, "phdoc": phdoc, "aipwr": aipwr, "mipwr": mipwr,
           "mipwrt": _json_ts(log["mipwrt_ms"]), "ipwrpe": buf[56],
           "descs": [{"phbc": c, "phblt": t} for c, t in struct.iter_unpack("<II", buf[64:64 + 8 * nphd])]}
    print(_dumps(out))
    return 0


def cmd_ocp(ep, args):
    if not _plugin_sub(args, "smart-add-log", "ocp"):
        return 1
    pos, o = _parse(args[1:], {"-o": "fmt", "--output-format": "fmt"})
    dev = _need_dev(pos, "ocp smart-add-log")
    log = _call(ep, {"op": "ocp_smart", "dev": dev})["log"]
    major, minor = _version()
    pmuw, pmur = log["physical_media_units_written"], log["physical_media_units_read"]
    if (major, minor) >= (2, 10):
        out = {"physical_media_units_written": pmuw, "physical_media_units_read": pmur}
    else:
        out = {"Physical media units written": {"hi": pmuw >> 64, "lo": pmuw & (2**64 - 1)},
               "Physical media units read": {"hi": pmur >> 64, "lo": pmur & (2**64 - 1)}}
    print(_dumps(out))
    return 0


def cmd_format(ep, args):
    pos, o = _parse(args, {"-n": "nsid", "--namespace-id": "nsid", "-l": "lbaf", "--lbaf": "lbaf", "-s": "ses",
                           "--ses": "ses", "-i": "pi", "--pi": "pi", "-r": "reset!", "--reset": "reset!",
                           "--force": "force!", "-t": "timeout", "--timeout": "timeout"})
    dev = _need_dev(pos, "format")
    r = _call(ep, {"op": "format", "dev": dev, "nsid": _num(o["nsid"]) if "nsid" in o else None,
                   "ses": _num(o.get("ses", "0")), "lbaf": _num(o.get("lbaf", "0"))})
    print(f"Success formatting namespace:{r['nsid']:x}")
    return 0


def cmd_sanitize(ep, args):
    pos, o = _parse(args, {"-a": "sanact", "--sanact": "sanact", "-d": "nodealloc!", "--no-dealloc": "nodealloc!",
                           "-n": "owpass", "--owpass": "owpass", "-p": "ovrpat", "--ovrpat": "ovrpat",
                           "--force": "force!", "-u": "ause!", "--ause": "ause!"})
    dev = _need_dev(pos, "sanitize")
    if _num(o.get("sanact", 0)) not in (1, 2, 3, 4):
        print("sanitize: Invalid Sanitize Action", file=sys.stderr)
        return 1
    _call(ep, {"op": "sanitize", "dev": dev, "action": _num(o["sanact"])})
    return 0


def cmd_flush(ep, args):
    pos, o = _parse(args, {"-n": "nsid", "--namespace-id": "nsid"})
    dev = _need_dev(pos, "flush")
    _call(ep, {"op": "flush", "dev": dev})
    print("NVMe Flush: success")
    return 0


def cmd_fw_commit(ep, args):
    pos, o = _parse(args, {"-s": "slot", "--slot": "slot", "-a": "action", "--action": "action",
                           "-b": "bpid", "--bpid": "bpid"})
    dev = _need_dev(pos, "fw-commit")
    slot, action = _num(o.get("slot", "0")), _num(o.get("action", "0"))
    _call(ep, {"op": "fw_commit", "dev": dev, "slot": slot, "action": action})
    print(f"Success committing firmware action:{action} slot:{slot}")
    return 0


def cmd_reset(ep, args):
    pos, _ = _parse(args, {})
    _call(ep, {"op": "reset", "dev": _need_dev(pos, "reset")})
    return 0


COMMANDS = {"format": cmd_format, "flush": cmd_flush, "fw-commit": cmd_fw_commit, "reset": cmd_reset, "sanitize": cmd_sanitize, "version": cmd_version, "id-ctrl": cmd_id_ctrl, "get-feature": cmd_get_feature,
            "set-feature": cmd_set_feature, "smart-log": cmd_smart_log, "fdp": cmd_fdp, "ocp": cmd_ocp,
            "get-log": cmd_get_log, "log": cmd_log}


class _Fail(Exception):
    pass


def _need_dev(pos, cmd):
    if not pos:
        print("nvme: no device given", file=sys.stderr)
        raise _Fail(cmd)
    return pos[0]


def _status(status: str):
    print(STATUS_TEXT.get(status, f"NVMe status: {status}"), file=sys.stderr)


def _call(ep, req):
    r = request(ep, req)
    if not r.get("ok"):
        if r.get("status") == "NO_DEVICE":
            print(r["error"], file=sys.stderr)
        else:
            _status(r.get("status", "INVALID_FIELD"))
        raise _Fail(req.get("op"))
    return r


def main(argv: list[str]) -> int:
    ep, argv = endpoint_from(list(argv))
    if not argv:
        print("usage: nvme <command> [<device>] [<args>]", file=sys.stderr)
        return 1
    cmd, args = argv[0], argv[1:]
    fn = COMMANDS.get(cmd)
    if fn is None:
        print(f"ERROR: Invalid sub-command '{cmd}'", file=sys.stderr)
        return 1
    try:
        return fn(ep, args)
    except Usage as e:
        print(f"{cmd}: {e}", file=sys.stderr)
        print(f"Usage: nvme {cmd} <device> [OPTIONS]", file=sys.stderr)
        return 1
    except _Fail:
        return 1
    except EndpointError as e:
        print(f"nvme (powerrig sim): {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
