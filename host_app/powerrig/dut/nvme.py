"""nvme-cli runner and version-tolerant parsers.

Every call is an NVME event on the timeline (argv, host UTC at call and return, parsed result).
Parsers accept what nvme-cli 1.x to 2.16 print (see REFERENCE.md, docs/drive-control.md): key
spacing, flags vs max_power_scale/non-operational_state, active_work_scale vs active_power_work,
128-bit counters as ints, floats, numeric strings or comma-grouped strings, critical_warning as an
int or an object, key case. Unknown fields are ignored; a missing required field is a ToolError
that names it.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import asdict, dataclass

from powerrig.dut import commands, destructive
from powerrig.dut._run import fail, run_tool
from powerrig.dut.guard import HostView, host_view
from powerrig.core.errors import ToolError
from powerrig.core.timeline import NVME, POWER_STATE, Timeline
from powerrig.core.nvme_fields import (SCALE_W, Keys, PowerStateDescriptor, celsius, celsius_nvme_cli, load_json,  # noqa: F401
                                  parse_psd, to_int)

FID_POWER_MGMT = 0x02
FID_APST = 0x0C
NOT_CHANGEABLE = "(0x410e)"     # NVMe status Feature Not Changeable, as nvme-cli prints it


# the field parsers are shared with the analysis and the impersonation (powerrig.core.nvme_fields)
_Keys = Keys
_power_scale = SCALE_W.get


@dataclass(frozen=True)
class ControllerId:
    mn: str
    sn: str
    fr: str
    npss: int
    apsta: bool
    power_states: tuple[PowerStateDescriptor, ...]
    wctemp_k: int | None = None
    cctemp_k: int | None = None
    tnvmcap: int | None = None
    ctratt: int = 0

    @property
    def fdp_supported(self) -> bool:
        return bool(self.ctratt & (1 << 19))

    def state(self, ps: int) -> PowerStateDescriptor:
        for s in self.power_states:
            if s.ps == ps:
                return s
        raise ToolError(f"power state {ps} does not exist on {self.mn.strip()} (it has PS0..PS{self.npss})")


def parse_id_ctrl(text: str) -> ControllerId:
    d = load_json(text, "id-ctrl")
    k = _Keys(d, "id-ctrl")
    psds = k.need("psds")
    if not isinstance(psds, list) or not psds:
        raise ToolError("nvme-cli id-ctrl: 'psds' is not a list of power state descriptors")
    npss = to_int(k.need("npss"), "npss")
    if len(psds) < npss + 1:
        raise ToolError(f"nvme-cli id-ctrl: npss={npss} but only {len(psds)} power state descriptors printed")
    states = tuple(parse_psd(i, p) for i, p in enumerate(psds[:npss + 1]))
    opt = lambda name: to_int(k.get(name), name) if k.get(name) is not None else None  # noqa: E731
    return ControllerId(mn=str(k.need("mn")), sn=str(k.need("sn")), fr=str(k.need("fr")), npss=npss,
                        apsta=bool(to_int(k.get("apsta", default=0), "apsta")), power_states=states,
                        wctemp_k=opt("wctemp"), cctemp_k=opt("cctemp"), tnvmcap=opt("tnvmcap"),
                        ctratt=opt("ctratt") or 0)


@dataclass(frozen=True)
class NamespaceId:
    """Identify Namespace: size, capacity and use in logical blocks, and the LBA format in use."""
    nsze: int
    ncap: int
    nuse: int
    lba_bytes: int

    @property
    def size_bytes(self) -> int:
        return self.nsze * self.lba_bytes


def parse_id_ns(text: str) -> NamespaceId:
    k = _Keys(load_json(text, "id-ns"), "id-ns")
    flbas = to_int(k.need("flbas"), "flbas") & 0xF
    lbafs = k.need("lbafs")
    if not isinstance(lbafs, list) or flbas >= len(lbafs):
        raise ToolError(f"nvme-cli id-ns: flbas {flbas} names no LBA format of the {len(lbafs)} printed")
    ds = to_int(_Keys(lbafs[flbas], "id-ns lbaf").need("ds"), "ds")
    return NamespaceId(to_int(k.need("nsze"), "nsze"), to_int(k.need("ncap"), "ncap"), to_int(k.need("nuse"), "nuse"),
                       1 << ds)


# -- features -----------------------------------------------------------------------------------
_FEATURE_LINE = re.compile(r"get-feature:\s*(?:0x)?([0-9a-fA-F]+)\s*\(([^)]*)\),\s*Current value:\s*(?:0x)?([0-9a-fA-F]+)")
_HEX_ROW = re.compile(r"^\s*([0-9a-fA-F]{4}):((?:\s[0-9a-fA-F]{2})+)")


def parse_feature(text: str) -> tuple[int, int, bytes]:
    """(fid, dword0 value, data buffer) from get-feature text, or its JSON form (value as hex string)."""
    m = _FEATURE_LINE.search(text)
    if m:
        buf = bytearray()
        for line in text.splitlines():
            r = _HEX_ROW.match(line)
            if r:
                buf += bytes(int(b, 16) for b in r.group(2).split())
        return int(m.group(1), 16), int(m.group(3), 16), bytes(buf)
    if "{" in text:
        k = _Keys(load_json(text, "get-feature"), "get-feature")
        v = k.need("value", "current value", "cdw0")
        fid = k.get("feature", "fid", default=0)
        try:
            value = int(v.strip(), 16) if isinstance(v, str) else to_int(v, "value")   # JSON keeps it as hex
        except ValueError:
            raise ToolError(f"nvme-cli get-feature: value {v!r} is not hex") from None
        return (int(fid, 16) if isinstance(fid, str) else to_int(fid, "feature")), value, b""
    raise ToolError(f"nvme-cli get-feature: no 'Current value' in its output ({text.strip()[:80]!r})")


@dataclass(frozen=True)
class PowerManagement:
    power_state: int
    workload_hint: int

    @classmethod
    def from_value(cls, value: int) -> "PowerManagement":
        return cls(value & 0x1F, (value >> 5) & 0x7)

    @property
    def value(self) -> int:
        return (self.power_state & 0x1F) | ((self.workload_hint & 7) << 5)


@dataclass(frozen=True)
class ApstEntry:
    idle_transition_ps: int      # ITPS, bits 7:3
    idle_time_ms: int            # ITPT, bits 31:8

    def encode(self) -> bytes:
        return (((self.idle_time_ms & 0xFFFFFF) << 8) | ((self.idle_transition_ps & 0x1F) << 3)).to_bytes(8, "little")


@dataclass(frozen=True)
class ApstSetting:
    enabled: bool
    entries: tuple[ApstEntry, ...]     # indexed by the power state the entry applies from


def decode_apst(value: int, buf: bytes) -> ApstSetting:
    """Get Features FID 0Ch: APSTE is bit 0 of Dword 0, the data buffer 32 little-endian 64-bit entries,
    ITPS bits 07:03, ITPT (ms) bits 31:08 (NVMe base spec 2.0, 5.27.1.5 and its APST data structure
    figure; Linux builds the same table in drivers/nvme/host/core.c nvme_configure_apst)."""
    entries = []
    for i in range(0, len(buf) - 7, 8):
        q = int.from_bytes(buf[i:i + 8], "little")
        entries.append(ApstEntry((q >> 3) & 0x1F, (q >> 8) & 0xFFFFFF))
    return ApstSetting(bool(value & 1), tuple(entries))


# -- logs ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SmartLog:
    critical_warning: int
    temperature_k: int
    data_units_written: int
    data_units_read: int
    host_write_commands: int
    host_read_commands: int
    power_on_hours: int
    thermal_transitions: tuple[int, int]     # thm_temp1/2_trans_count
    thermal_time_s: tuple[int, int]
    percent_used: int = 0
    media_errors: int = 0

    @property
    def temperature_c(self) -> float:
        """Celsius as powerrig reports it: K - 273.15 (docs/drive-control.md)."""
        return celsius(self.temperature_k)

    @property
    def temperature_c_nvme_cli(self) -> int:
        """Celsius as nvme-cli's own text prints it (K - 273), to compare with ``nvme smart-log``."""
        return celsius_nvme_cli(self.temperature_k)

    @property
    def bytes_written(self) -> int:
        """Lower bound of host bytes written: units are 1000 x 512 bytes, rounded up by the drive."""
        return self.data_units_written * 512000


def parse_smart_log(text: str) -> SmartLog:
    k = _Keys(load_json(text, "smart-log"), "smart-log")
    cw = k.need("critical_warning")
    if isinstance(cw, dict):
        cw = _Keys(cw, "smart-log critical_warning").need("value")
    temp = k.need("temperature")
    if isinstance(temp, str) and not re.fullmatch(r"\s*\d+\s*", temp):   # e.g. "311 K" / "38 C" from -H
        num = float(re.match(r"\s*([\d.]+)", temp).group(1))
        temp = num if "K" in temp.upper() else num + 273.15
    n = lambda name: to_int(k.need(name), name)  # noqa: E731
    o = lambda name: to_int(k.get(name, default=0), name)  # noqa: E731
    return SmartLog(critical_warning=to_int(cw, "critical_warning"), temperature_k=to_int(temp, "temperature"),
                    data_units_written=n("data_units_written"), data_units_read=n("data_units_read"),
                    host_write_commands=n("host_write_commands"), host_read_commands=n("host_read_commands"),
                    power_on_hours=n("power_on_hours"),
                    thermal_transitions=(o("thm_temp1_trans_count"), o("thm_temp2_trans_count")),
                    thermal_time_s=(o("thm_temp1_total_time"), o("thm_temp2_total_time")),
                    percent_used=o("percent_used"), media_errors=o("media_errors"))


@dataclass(frozen=True)
class FdpStats:
    host_bytes_written: int     # HBMW
    media_bytes_written: int    # MBMW
    media_bytes_erased: int     # MBE

    @property
    def waf(self) -> float:
        return self.media_bytes_written / self.host_bytes_written if self.host_bytes_written else float("nan")


def parse_hexdump(text: str) -> bytes:
    """The bytes of nvme-cli's hex dump (``0000: 01 00 ... "..."`` rows; the header line and ASCII column skipped)."""
    out = bytearray()
    for line in text.splitlines():
        m = re.match(r"^\s*[0-9a-fA-F]{4,}:((?:\s[0-9a-fA-F]{2})+)", line)
        if m:
            out += bytes(int(b, 16) for b in m.group(1).split())
    return bytes(out)


def parse_fdp_stats(text: str) -> FdpStats:
    k = _Keys(load_json(text, "fdp stats"), "fdp stats")
    return FdpStats(to_int(k.need("hbmw"), "hbmw"), to_int(k.need("mbmw"), "mbmw"),
                    to_int(k.get("mbe", default=0), "mbe"))


def parse_ocp_smart_add_log(text: str) -> dict:
    """{'physical_media_units_written': bytes, 'physical_media_units_read': bytes|None} from v1 or v2 output."""
    d = load_json(text, "ocp smart-add-log")
    for v in d.values():       # some versions wrap the log one level down
        if isinstance(v, dict) and any("media units" in str(x).lower() or "media_units" in str(x).lower() for x in v):
            d = v
            break
    k = _Keys(d, "ocp smart-add-log")

    def field_(base: str):
        spaced = base.replace("_", " ")
        v = k.get(base, spaced, spaced.capitalize())
        if isinstance(v, dict):
            kk = _Keys(v, "ocp smart-add-log " + base)
            return (to_int(kk.need("hi"), base + ".hi") << 64) + to_int(kk.need("lo"), base + ".lo")
        if v is not None:
            return to_int(v, base)
        hi, lo = k.get(spaced.capitalize() + "_hi", base + "_hi"), k.get(spaced.capitalize() + "_lo", base + "_lo")
        if lo is not None:
            return (to_int(hi or 0, base + "_hi") << 64) + to_int(lo, base + "_lo")
        return None

    w = field_("physical_media_units_written")
    if w is None:
        raise ToolError("nvme-cli ocp smart-add-log: required field 'physical_media_units_written' missing")
    return {"physical_media_units_written": w, "physical_media_units_read": field_("physical_media_units_read")}


@dataclass(frozen=True)
class NvmeVersion:
    major: int
    minor: int
    patch: int = 0
    text: str = ""

    @property
    def tuple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)


def parse_version(text: str) -> NvmeVersion:
    m = re.search(r"nvme version (\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise ToolError(f"cannot tell the nvme-cli version from {text.strip()[:60]!r} (is this nvme-cli?)")
    return NvmeVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), text.strip().splitlines()[0])


# -- the runner ---------------------------------------------------------------------------------
# Linux fails a command with Host Pathing Error (NVMe Base 2.0 section 4.2.3.4, Path Related Status,
# SCT 3h SC 70h; the kernel's NVME_SC_HOST_PATH_ERROR) without sending it while the controller is not
# live: resetting, or probed again after a removal (drivers/nvme/host/core.c, nvme_fail_nonready_command)
NOT_LIVE = "Host Pathing Error"


class NvmeCli:
    """nvme-cli on one host. ``program`` is the argv prefix: ["nvme"], ["sudo", "nvme"] or the simulator."""

    def __init__(self, program: list[str] | None = None, timeline: Timeline | None = None, timeout: float = 30.0,
                 env: dict | None = None, host: HostView | None = None, remote=None):
        """``host``: where the destructive-operation guard reads sysfs, mounts and swaps (the real host
        by default; the virtual rig publishes its own). ``remote``: an SshHost the commands run on."""
        self.program = list(program or ["nvme"])
        self.remote = remote
        self.host = host_view(host, remote)     # a drive host's sysfs, mounts and swaps are read there
        self.timeline = timeline if timeline is not None else Timeline()
        self.timeout = timeout
        self.env = env
        self._version: NvmeVersion | None = None
        self._id: dict[str, ControllerId] = {}

    def _call(self, command: str, dev: str | None, options: list[str], name: str, parse, meta: dict | None = None,
              extra=None, permit=None, timeout: float | None = None, binary: bool = False):
        """Run ``nvme command dev options`` (built by the door, commands.nvme_argv: a destructive
        command needs the destructive door's ``permit``), record it, parse its output (bytes with
        ``binary``: ``-b`` output, read on this host only)."""
        argv = commands.nvme_argv(self.program, command, dev, options, permit)
        try:
            done = run_tool(argv, self.timeline, NVME, name, "nvme-cli", timeout or self.timeout, self.env,
                            meta=meta, remote=self.remote, binary=binary)
        except ToolError as e:
            if NOT_LIVE not in str(e) or not dev:
                raise
            raise ToolError(f"{e}; the controller of {dev} is not live (resetting, or coming back after a "
                            f"removal): wait until `nvme list` shows {dev} again and run it again") from None
        try:
            parsed = parse(done.stdout)
        except ToolError as e:
            raise fail(self.timeline, done.event, str(e)) from None
        result = asdict(parsed) if hasattr(parsed, "__dataclass_fields__") else parsed
        if extra is not None:
            result = {**result, **extra(parsed)}
        self.timeline.end(done.event, ok=True, parsed=result)
        return parsed

    def version(self) -> NvmeVersion:
        if self._version is None:
            self._version = self._call("version", None, [], "version", parse_version)
        return self._version

    def id_ctrl(self, dev: str) -> ControllerId:
        ident = self._call("id-ctrl", dev, ["--output-format=json"], "id-ctrl", parse_id_ctrl, {"device": dev})
        self._id[dev] = ident
        return ident

    def id_ns(self, dev: str) -> NamespaceId:
        return self._call("id-ns", dev, ["--output-format=json"], "id-ns", parse_id_ns, {"device": dev})

    def get_power_state(self, dev: str) -> PowerManagement:
        def parse(text):
            return PowerManagement.from_value(parse_feature(text)[1])
        return self._call("get-feature", dev, [f"--feature-id={FID_POWER_MGMT}"], "get-feature power", parse,
                          {"device": dev, "fid": FID_POWER_MGMT})

    def set_power_state(self, dev: str, ps: int, workload_hint: int = 0, confirm: bool = True) -> PowerManagement:
        """Request a power state; a POWER_STATE event holds the request and whether it was confirmed.

        The state must exist in the drive's id-ctrl (checked first, so nothing is sent for a bad one).
        NOPS states are allowed: I/O then wakes the drive (and admin commands may disturb the
        measurement, see docs/drive-control.md).
        """
        ident = self._id.get(dev) or self.id_ctrl(dev)
        ev = self.timeline.begin(POWER_STATE, f"PS{ps}", meta={"device": dev, "requested_ps": ps,
                                                                 "workload_hint": workload_hint})
        if not 0 <= ps <= ident.npss:
            raise fail(self.timeline, ev, f"{dev} has no power state {ps}: {ident.mn.strip()} supports "
                                          f"PS0..PS{ident.npss} (see `nvme id-ctrl {dev}`)")
        if not 0 <= workload_hint <= 7:
            raise fail(self.timeline, ev, f"workload hint {workload_hint} out of range 0..7")
        st = ident.state(ps)
        ev.meta.update({"max_power_w": st.max_power_w, "entry_latency_us": st.entry_latency_us,
                        "exit_latency_us": st.exit_latency_us, "non_operational": st.non_operational})
        value = PowerManagement(ps, workload_hint).value
        try:
            self._call("set-feature", dev, [f"--feature-id={FID_POWER_MGMT}", f"--value={value}"],
                       "set-feature power", lambda text: {"stdout": text.strip()}, {"device": dev, "value": value})
        except ToolError as e:
            if NOT_CHANGEABLE in str(e):
                # the controller does not let the host choose (QEMU's has one state): fine when the
                # drive already is where the step wants it, said so on the event; a one-line error otherwise
                got = self.get_power_state(dev)
                if got.power_state == ps:
                    self.timeline.end(ev, ok=True, confirmed=got.power_state, workload_hint=got.workload_hint,
                                      not_changeable=True, note=f"the controller refused set-feature 0x02 "
                                      f"(Feature Not Changeable, 0x410e); {dev} already is in PS{ps}")
                    return got
                raise fail(self.timeline, ev, f"{dev} cannot be put in PS{ps}: the controller answers Feature "
                                              f"Not Changeable (0x410e) to set-feature 0x02 and stays in "
                                              f"PS{got.power_state}") from None
            raise fail(self.timeline, ev, str(e)) from None
        if not confirm:
            self.timeline.end(ev, ok=True, confirmed=None)
            return PowerManagement(ps, workload_hint)
        got = self.get_power_state(dev)
        if got.power_state != ps and not st.non_operational:
            raise fail(self.timeline, ev, f"{dev} reports PS{got.power_state} after PS{ps} was set "
                                          "(APST or thermal management may have moved it; disable APST first)")
        self.timeline.end(ev, ok=True, confirmed=got.power_state, workload_hint=got.workload_hint)
        return got

    def get_apst(self, dev: str) -> ApstSetting:
        def parse(text):
            fid, value, buf = parse_feature(text)
            return decode_apst(value, buf)
        return self._call("get-feature", dev, [f"--feature-id={FID_APST}"], "get-feature apst", parse,
                          {"device": dev, "fid": FID_APST})

    def set_apst(self, dev: str, enabled: bool, entries: list[ApstEntry] | None = None) -> None:
        """Program APST (FID 0x0C). The 256-byte table goes through a temporary file, never stdin."""
        table = list(entries or [])
        if len(table) > 32:
            raise ToolError("an APST table holds at most 32 entries")
        buf = b"".join(e.encode() for e in table) + bytes(8 * (32 - len(table)))
        if self.remote is not None:         # the file nvme-cli reads must be on the drive host
            rdir = self.remote.mkdtemp()
            path = f"{rdir}/apst.bin"
            self.remote.put_bytes(buf, path)
            try:
                self._set_apst_from(dev, enabled, table, path)
            finally:
                self.remote.remove(rdir)
            return
        with tempfile.NamedTemporaryFile(prefix="powerrig-apst-", suffix=".bin", delete=False) as f:
            f.write(buf)
            path = f.name
        try:
            self._set_apst_from(dev, enabled, table, path)
        finally:
            os.unlink(path)

    def _set_apst_from(self, dev: str, enabled: bool, table: list, path: str) -> None:
        self._call("set-feature", dev, [f"--feature-id={FID_APST}", f"--value={int(bool(enabled))}",
                                        "--data-len=256", f"--data={path}"], "set-feature apst",
                   lambda t: {"stdout": t.strip()[:200]},
                   {"device": dev, "enabled": enabled, "entries": [(e.idle_transition_ps, e.idle_time_ms) for e in table]})

    def disable_apst(self, dev: str) -> None:
        self.set_apst(dev, False, [])

    def smart_log(self, dev: str) -> SmartLog:
        """SMART / health log. The event holds the kelvin value and both Celsius readings (powerrig's
        K - 273.15 and nvme-cli's K - 273), so it can be compared with `nvme smart-log` text."""
        return self._call("smart-log", dev, ["--output-format=json"], "smart-log", parse_smart_log, {"device": dev},
                          extra=lambda s: {"temperature_c": round(s.temperature_c, 2),
                                           "temperature_c_nvme_cli": s.temperature_c_nvme_cli})

    def fdp_stats(self, dev: str, endgrp: int = 1) -> FdpStats:
        return self._call("fdp stats", dev, [f"--endgrp-id={endgrp}", "--output-format=json"], "fdp stats",
                          parse_fdp_stats, {"device": dev, "endgrp": endgrp})

    def ocp_smart_add_log(self, dev: str) -> dict:
        return self._call("ocp smart-add-log", dev, ["--output-format=json"], "ocp smart-add-log",
                          parse_ocp_smart_add_log, {"device": dev})

    def flush(self, ns: str) -> None:
        """NVMe Flush of the namespace ``ns`` (``nvme flush``): the volatile write cache onto the media;
        nothing a read sees changes, so no guard (it is an I/O queue command, traced on one)."""
        self._call("flush", ns, [], "flush", lambda text: {"stdout": text.strip()[:200]}, {"device": ns})

    # -- destructive commands: only through the guarded door (destructive.py) ---------------------------
    def format(self, dev: str, serial: str | None, ses: int = 0, lbaf: int | None = None,
               nsid: int | None = None, allow_unguarded: bool = False, timeout: float = 600.0) -> None:
        """Format NVM (``nvme format``): erases the namespace (SES 0 none, 1 user data, 2 crypto).
        Only on the drive whose ``serial`` is named and with nothing on it in use (GuardRefused otherwise)."""
        destructive.format(self, dev, serial, ses, lbaf, nsid, allow_unguarded=allow_unguarded, timeout=timeout)

    def sanitize(self, dev: str, serial: str | None, action: int = 2, allow_unguarded: bool = False,
                 timeout: float = 60.0) -> None:
        """Sanitize every namespace of the controller; guarded like :meth:`format` (destructive.sanitize)."""
        destructive.sanitize(self, dev, serial, action, allow_unguarded, timeout)

    def reset(self, dev: str, serial: str | None, allow_unguarded: bool = False, timeout: float = 60.0) -> None:
        """Controller reset: every queue torn down and rebuilt, I/O in flight aborted (the namespaces
        stay); guarded like :meth:`format` (destructive.reset)."""
        destructive.reset(self, dev, serial, allow_unguarded, timeout)
