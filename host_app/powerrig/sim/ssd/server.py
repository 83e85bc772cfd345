"""The endpoint the impersonated nvme and fio talk to: JSON lines over a unix socket.

The virtual SSDs live in one long-running process (next to the virtual interposer that measures
their rails); ``powerrig sim nvme`` and ``powerrig sim fio`` are short-lived processes that send
one request per connection and print what the real tools would print.

Request: {"op": ..., "dev": "/dev/nvme0" | "/dev/nvme0n1", ...}. Reply: {"ok": true, ...} or
{"ok": false, "error": "...", "status": "NO_DEVICE" | "INVALID_FIELD" | ...}.
"""
from __future__ import annotations

import json
import os
import re
import socketserver
import threading
import time
from pathlib import Path

import numpy as np

from powerrig.sim.ssd.drive_trace import DriveTrace, common
from powerrig.sim.ssd.model import JobLoad
from powerrig.sim.ssd.power_io import PowerLossIO
from powerrig.sim.ssd.drive import SsdError, VirtualSSD

from powerrig.sim.ssd.client import ENDPOINT_ENV, EndpointError, endpoint_from, request  # noqa: F401 (re-exported)

_DEV = re.compile(r"^/dev/(nvme\d+)(?:n(\d+))?$")
LINK = ("16.0 GT/s PCIe", 4)      # what the virtual drives train to (PCIe 4.0 x4, as the D5-P5336)
# the tool's bookkeeping of I/O it already started, and the simulator's truth: answered while the
# controller is away (a cut run must still end and report, as fio does after its I/O errors)
WHILE_AWAY = ("run_status", "stop_io", "power_truth", "trace_start", "trace_stop")
SUBSTEPS = 20           # power_model: instants averaged per step


class SsdServer:
    """Serve one or more virtual SSDs on a unix socket, from a background thread.

    ``ssds``: one VirtualSSD (becomes /dev/nvme0), a list (/dev/nvme0, /dev/nvme1, ...) or a dict
    {"/dev/nvme0": ssd}. Namespaces are /dev/nvmeXnY, Y = 1..profile namespaces.
    """

    def __init__(self, ssds, socket_path: str | os.PathLike):
        if isinstance(ssds, VirtualSSD):
            ssds = [ssds]
        if isinstance(ssds, (list, tuple)):
            ssds = {f"/dev/nvme{i}": s for i, s in enumerate(ssds)}
        self.ssds: dict[str, VirtualSSD] = dict(ssds)
        # per drive: its data as fio's verify sees it, and its power side once the rig attaches one
        self.io: dict[str, PowerLossIO] = {k: PowerLossIO(s) for k, s in self.ssds.items()}
        # per drive: the virtual drive host's nvme tracepoints (sim/ssd/drive_trace.py)
        self.traces: dict[str, DriveTrace] = {k: DriveTrace(s, int(re.sub(r"\D", "", k) or 0))
                                              for k, s in self.ssds.items()}
        self.socket_path = str(socket_path)
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        # the host as a real machine would show these drives to the destructive-operation guard
        self.host: dict = {}
        self._thread: threading.Thread | None = None

    def start(self) -> "SsdServer":
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                line = self.rfile.readline()
                try:
                    reply = outer.handle(json.loads(line))
                except (ValueError, TypeError) as e:
                    reply = {"ok": False, "error": f"bad request: {e}", "status": "BAD_REQUEST"}
                self.wfile.write((json.dumps(reply) + "\n").encode())

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True

        self.host = write_host_view(Path(self.socket_path).with_name(Path(self.socket_path).stem + "-host"), self.ssds)
        self._server = Server(self.socket_path, Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="ssd-endpoint", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- requests -------------------------------------------------------------------------------
    def resolve(self, dev: str) -> tuple[VirtualSSD, int | None]:
        m = _DEV.match(dev or "")
        ssd = self.ssds.get(f"/dev/{m.group(1)}") if m else None
        if ssd is None:
            raise SsdError(f"{dev}: No such file or directory", status="NO_DEVICE")
        nsid = int(m.group(2)) if m.group(2) else None
        if nsid is not None and not 1 <= nsid <= ssd.profile.namespaces:
            raise SsdError(f"{dev}: No such file or directory", status="NO_DEVICE")
        return ssd, nsid

    def handle(self, req: dict) -> dict:
        op = req.get("op")
        try:
            if op == "list":
                return {"ok": True, "devices": {k: {"profile": s.profile.name, "sn": s.sn,
                                                    "namespaces": s.profile.namespaces} for k, s in self.ssds.items()}}
            ssd, nsid = self.resolve(req.get("dev", ""))
            if op not in WHILE_AWAY and not self._io(ssd).ready():
                raise SsdError(f"{req.get('dev')}: No such device (the controller is not ready: powered off, "
                               "held in reset or still enumerating)", status="NO_DEVICE")
            fn = getattr(self, f"_op_{op}", None)
            if fn is None:
                return {"ok": False, "error": f"unknown request {op!r}", "status": "BAD_REQUEST"}
            trace = self._trace(ssd)
            t0 = ssd.clock()
            try:
                out = {"ok": True, **fn(ssd, nsid, req)}
            except SsdError:
                trace.admin(op, req, nsid, t0, ssd.clock(), False)
                raise
            trace.admin(op, req, nsid, t0, ssd.clock(), True)
            return out
        except SsdError as e:
            return {"ok": False, "error": str(e), "status": e.status}

    def _op_identify(self, ssd, nsid, req):
        p = ssd.profile
        return {"profile": p.name, "mn": p.mn, "sn": ssd.sn, "fr": p.fr, "vid": p.vid, "npss": p.npss,
                "apsta": int(p.apst), "capacity_bytes": p.capacity_bytes, "namespaces": p.namespaces,
                "fdp": p.fdp, "wctemp_k": int(round(p.thermal["warning_c"] + 273.15)),
                "cctemp_k": int(round(p.thermal["critical_c"] + 273.15)),
                "idle_w": p.power["idle_w"], "power_claims": ssd.power_claims_identify(),
                "states": [{"ps": s.ps, "mp_w": s.mp_w, "enlat_us": s.enlat_us, "exlat_us": s.exlat_us,
                            "nops": s.nops, "idle_w": s.idle_w, "write_MiBps": s.write_MiBps,
                            "read_MiBps": s.read_MiBps} for s in p.states]}

    def _op_get_power_state(self, ssd, nsid, req):
        ps, wh = ssd.get_power_state()
        return {"ps": ps, "workload_hint": wh}

    def _op_set_power_state(self, ssd, nsid, req):
        t = ssd.set_power_state(int(req["ps"]), int(req.get("workload_hint", 0)))
        return {"effective_at": t}

    def _op_get_apst(self, ssd, nsid, req):
        if not ssd.profile.apst:
            raise SsdError("APST not supported (APSTA=0)")
        ssd.advance()
        return {"enabled": ssd.apst_enabled, "table": ssd.apst_table}

    def _op_set_apst(self, ssd, nsid, req):
        table = [tuple(e) for e in req["table"]] if req.get("table") is not None else None
        ssd.set_apst(bool(req["enabled"]), table)
        return {}

    def _op_smart_log(self, ssd, nsid, req):
        return {"log": ssd.smart_log()}

    def _op_power_measurement(self, ssd, nsid, req):
        return {"log": ssd.power_measurement()}

    def _op_set_power_measurement(self, ssd, nsid, req):
        ssd.set_power_measurement(int(req["action"]), int(req.get("pmts", 0)), int(req.get("smt_min", 0)))
        return {}

    def _op_get_power_feature(self, ssd, nsid, req):
        return {"value": ssd.get_power_feature(int(req["fid"]))}

    def _op_set_power_feature(self, ssd, nsid, req):
        ssd.set_power_feature(int(req["fid"]), int(req["value"]))
        return {}

    def _op_power_smart(self, ssd, nsid, req):
        return ssd.power_smart_fields()

    def _op_ocp_power(self, ssd, nsid, req):
        return {"log": ssd.ocp_power()}

    def _op_fdp_stats(self, ssd, nsid, req):
        return {"log": ssd.fdp_stats()}

    def _op_ocp_smart(self, ssd, nsid, req):
        return {"log": ssd.ocp_smart()}

    def _io(self, ssd) -> PowerLossIO:
        return next(self.io[k] for k, s in self.ssds.items() if s is ssd)

    def _op_start_io(self, ssd, nsid, req):
        specs = [dict(j) for j in req["jobs"]]
        verify = {k: j.pop("verify") for k, j in enumerate(specs) if j.get("verify")}
        jobs = [JobLoad(**j) for j in specs]
        run_id = ssd.start_io(jobs, float(req["runtime_s"]))
        if verify:
            self._io(ssd).started(run_id, verify, jobs)
        return {"run_id": run_id}

    def _op_run_status(self, ssd, nsid, req):
        return ssd.run_status(int(req["run_id"]))

    def _op_stop_io(self, ssd, nsid, req):
        res = ssd.stop_io(int(req["run_id"]))
        self._io(ssd).ended(int(req["run_id"]), res["write_bytes"])
        return res

    def _op_verify(self, ssd, nsid, req):
        """fio --verify_only: the offsets of the blocks that do not hold the pattern (randseed) asked for."""
        if nsid is None:
            raise SsdError(f"{req.get('dev')}: not a namespace", status="INVALID_FIELD")
        return {"bad": self._io(ssd).verify(nsid, int(req["offset"]), int(req["size"]), int(req["bs"]),
                                            str(req["pattern"]))}

    def _op_power_truth(self, ssd, nsid, req):
        """The simulator's truth of every cut: acknowledged writes and the ones lost (for tests and benchmarks)."""
        io = self._io(ssd)
        return {"cuts": io.truth, "edges": io.drive.truth if io.drive else []}

    def _op_power_model(self, ssd, nsid, req):
        """The model's true drive power from t0 to t1 (host UTC), every ``step_s`` (at most 20000 points; the
        model keeps the last HISTORY_S): what the referee's benchmark holds powerrig's own measurement to."""
        t0, t1, step = float(req["t0"]), float(req["t1"]), max(1e-4, float(req.get("step_s", 0.001)))
        n = max(1, min(20000, int((t1 - t0) / step)))
        sub = (np.arange(SUBSTEPS) + 0.5) / SUBSTEPS * step        # each step's mean, not one instant of it
        t = (t0 + np.arange(n)[:, None] * step + sub[None, :]).ravel()   # (the 1 kHz ripple aliases at 1 ms)
        ssd.advance(min(t1, time.time()))
        w = ssd._power_eval(t).reshape(n, SUBSTEPS).mean(axis=1)
        return {"t0": t0, "step_s": step, "watts": [round(float(x), 6) for x in w]}

    def _op_format(self, ssd, nsid, req):
        sig = ssd.erase("format", nsid or req.get("nsid"))
        time.sleep(sig.duration_s)          # Format NVM completes once the format is done
        return {"nsid": nsid or req.get("nsid") or 0xFFFFFFFF}

    def _op_sanitize(self, ssd, nsid, req):
        if nsid is not None:        # nvme-cli sends sanitize to the controller only
            raise SsdError(f"{req.get('dev')}: not a controller device", status="INVALID_FIELD")
        ssd.erase("sanitize")       # completes at once; the sanitize runs on (the sanitize log's progress)
        return {}

    def _op_flush(self, ssd, nsid, req):
        if nsid is None:
            raise SsdError(f"{req.get('dev')}: not a namespace", status="INVALID_FIELD")
        time.sleep(ssd.admin_busy("flush").duration_s)       # completes once the cache is on the NAND
        return {}

    def _op_fw_commit(self, ssd, nsid, req):
        slot, action = int(req.get("slot", 0)), int(req.get("action", 0))
        if not 0 <= slot <= 7 or not 0 <= action <= 7:
            raise SsdError(f"firmware slot {slot} / commit action {action} out of range", status="INVALID_FIELD")
        time.sleep(ssd.admin_busy("fw_commit").duration_s)
        return {"slot": slot, "action": action}

    def _op_reset(self, ssd, nsid, req):
        """Controller reset (NVME_IOCTL_RESET): no command of its own reaches the trace. What Linux's
        drivers/nvme/host/pci.c sends around it is traced: nvme_reset_work -> nvme_dev_disable ->
        nvme_disable_io_queues (Delete I/O SQ, then Delete I/O CQ, per queue), then CC.EN = 0 (a register
        write, untraced) and, once the controller is ready again, nvme_init_ctrl_finish's Identify
        Controller, nvme_set_queue_count's Set Features 07h, nvme_create_io_queues' Create I/O CQ and SQ,
        and an Asynchronous Event Request left outstanding. The dip starts when the queues are gone."""
        if nsid is not None:
            raise SsdError(f"{req.get('dev')}: not a controller device", status="INVALID_FIELD")
        trace = self._trace(ssd)
        t0 = ssd.clock()
        trace.queue_commands([("nvme_admin_delete_sq", 0, "sqid=1", t0, t0 + 2e-5),
                              ("nvme_admin_delete_cq", 0, "cqid=1", t0 + 3e-5, t0 + 5e-5)])
        sig = ssd.admin_busy("reset", t0 + 6e-5)
        time.sleep(sig.duration_s + 6e-5)
        t = ssd.clock()
        trace.queue_commands([("nvme_admin_identify", 0, "cns=1, ctrlid=0", t, t + 4e-5),
                              ("nvme_admin_set_features", 0, "fid=0x7, sv=0x0, cdw11=0x0", t + 5e-5, t + 7e-5),
                              ("nvme_admin_create_cq", 0, "cqid=1, qsize=1023, cq_flags=0x3, irq_vector=1",
                               t + 8e-5, t + 1e-4),
                              ("nvme_admin_create_sq", 0, "sqid=1, qsize=1023, sq_flags=0x1, cqid=1", t + 1.1e-4,
                               t + 1.3e-4),
                              ("nvme_admin_async_event", 0, common(0), t + 1.4e-4, None)])
        return {}

    def _op_admin_truth(self, ssd, nsid, req):
        """The simulator's truth of every admin command's busy interval (sim/ssd/admin_power.py)."""
        ssd.advance()
        return {"commands": list(ssd.admin_truth)}

    def _op_apst_truth(self, ssd, nsid, req):
        """The simulator's truth of every APST move (t_due, t_switch, from_ps, to_ps; sim/ssd/drive.py)."""
        ssd.advance()
        return {"transitions": list(ssd.apst_truth)}

    def _trace(self, ssd) -> DriveTrace:
        return next(self.traces[k] for k, s in self.ssds.items() if s is ssd)

    def _op_trace_start(self, ssd, nsid, req):
        """A tracefs instance on the virtual drive host (sim/ssd/drive_trace.py): its disks' block sizes."""
        try:
            return self._trace(ssd).start(str(req["instance"]), str(req.get("queues", "all")))
        except ValueError as e:
            raise SsdError(str(e)) from None

    def _op_trace_stop(self, ssd, nsid, req):
        """The instance's trace text, as the kernel writes it; the instance is removed. With ``path`` (a
        file on this machine the caller names, as ``cat trace > path``) the text goes there instead of
        into the answer: a fast drive's step is ~200 MB that JSON would escape, copy and parse."""
        try:
            text = self._trace(ssd).stop(str(req["instance"]))
        except ValueError as e:
            raise SsdError(str(e)) from None
        if not req.get("path"):
            return {"text": text.decode()}
        try:
            with open(str(req["path"]), "xb") as f:
                f.write(text)
        except OSError as e:
            raise SsdError(f"cannot write the trace to {req['path']}: {e.strerror or e}") from None
        return {"path": str(req["path"]), "bytes": len(text)}

    def _op_inject_fault(self, ssd, nsid, req):
        ssd.inject_fault(float(req["after_s"]))
        return {}


def write_host_view(root: Path, ssds: dict[str, VirtualSSD]) -> dict:
    """A sysfs tree, mount table, swaps and /dev for the virtual drives, laid out as Linux lays them out
    (non-multipath: /sys/class/nvme/nvmeX -> the controller directory holding its nvmeXnY namespaces,
    /sys/class/block/nvmeXnY -> that namespace, ``serial``/``model`` files, ``nsid``). Nothing is
    mounted on a virtual drive; the host's own mounts are not the virtual rig's. Returns the paths,
    keyword arguments of powerrig.dut.guard.HostView."""
    sys_root = root / "sys"
    dev = root / "dev"
    for d in (sys_root / "class" / "nvme", sys_root / "class" / "block", dev):
        d.mkdir(parents=True, exist_ok=True)
    for path, ssd in ssds.items():
        ctrl = os.path.basename(path)
        cdir = sys_root / "devices" / "virtual" / "powerrig" / ctrl
        cdir.mkdir(parents=True, exist_ok=True)
        (cdir / "serial").write_text(ssd.sn.ljust(20) + "\n")
        (cdir / "model").write_text(ssd.profile.mn.ljust(40) + "\n")
        pci = cdir / "device"            # on Linux a link to the PCI function; its link attributes
        pci.mkdir(exist_ok=True)
        for k in ("current", "max"):
            (pci / f"{k}_link_speed").write_text(f"{LINK[0]}\n")
            (pci / f"{k}_link_width").write_text(f"{LINK[1]}\n")
        _link(sys_root / "class" / "nvme" / ctrl, cdir)
        for k in range(1, ssd.profile.namespaces + 1):
            ns = cdir / f"{ctrl}n{k}"
            (ns / "holders").mkdir(parents=True, exist_ok=True)
            (ns / "nsid").write_text(f"{k}\n")
            _link(sys_root / "class" / "block" / ns.name, ns)
    (root / "mounts").write_text("")
    (root / "swaps").write_text("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
    return {"sys_root": str(sys_root), "mounts": str(root / "mounts"), "swaps": str(root / "swaps"),
            "dev_root": str(dev)}


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(os.path.relpath(target, link.parent))
