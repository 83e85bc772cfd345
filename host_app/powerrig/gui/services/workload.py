"""The workload: fio presets run on the drive's namespace, with fio's own live MiB/s and IOPS while
they run, then the phase's mean power and energy beside them. Writes are guarded by ``Fio.run`` itself
(dut's write-mode set and the drive guard: serial named, nothing mounted): this service only passes
the drive's serial, it decides nothing about which jobs write."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

logger = logging.getLogger(__name__)

PRESETS = {
    "seq 128k read": {"rw": "read", "bs": "128k", "iodepth": 32, "numjobs": 1, "runtime": 10},
    "seq 128k write": {"rw": "write", "bs": "128k", "iodepth": 32, "numjobs": 1, "runtime": 10},
    "rand 4k read": {"rw": "randread", "bs": "4k", "iodepth": 32, "numjobs": 4, "runtime": 10},
    "rand 4k write": {"rw": "randwrite", "bs": "4k", "iodepth": 32, "numjobs": 4, "runtime": 10},
    "rand 4k 70/30": {"rw": "randrw", "bs": "4k", "iodepth": 32, "numjobs": 4, "runtime": 10, "rwmixread": 70},
}


def preset_writes(name: str) -> bool:
    """Does this preset write to the drive (by dut's own rule, the one the guard applies)?"""
    from powerrig.dut.commands import job_writes
    return job_writes(PRESETS[name])


class Workload(QObject):
    updated = Signal(dict)            # {"state": "running"|"live"|"done"|"failed", "name", ...}

    FIO_STATUS_S = 1.0                # fio's status interval: the panel's live MiB/s and IOPS

    def __init__(self, core, drive, recording, captures, capture_dir: Path, parent=None):
        super().__init__(parent)
        self.core, self.drive, self.recording, self.captures = core, drive, recording, captures
        self.capture_dir = Path(capture_dir)
        core.on_shutdown(self.stop)

    def run(self, name: str, options: dict) -> None:
        """Run one fio job on the drive's namespace; a job that writes passes the drive guard first
        (in Fio.run, with the drive's serial)."""
        from powerrig.dut.fio import FioJob, FioPlan

        opts = dict(options)
        job_name = "".join(c if c.isalnum() or c in "_.-" else "-" for c in name).strip("-") or "job"
        drive = self.drive

        def go():
            drive.need()
            job = FioJob(job_name, rw=opts["rw"], bs=opts["bs"], iodepth=int(opts["iodepth"]),
                         numjobs=int(opts["numjobs"]), runtime=float(opts["runtime"]), time_based=True,
                         filename=drive.namespace, rwmixread=opts.get("rwmixread"), ioengine="libaio", direct=True,
                         size=opts.get("size", "1g"))
            out = self.capture_dir / "fio" / time.strftime("%Y%m%d-%H%M%S")
            plan = FioPlan([job], group_reporting=int(opts["numjobs"]) > 1, status_interval=self.FIO_STATUS_S)

            def live(st):                          # fio's periodic status, while it runs (another thread)
                self.updated.emit({"state": "live", "name": name, "mib_s": st["mib_s"], "iops": st["iops"]})
            res = drive.fio.run(plan, out, name=job_name, serial=drive.serial, on_status=live)
            bw = sum(d.bw_bytes for j in res.jobs for d in j.directions.values())
            iops = sum(d.iops for j in res.jobs for d in j.directions.values())
            return {"state": "done", "name": name, "mib_s": bw / 2**20, "iops": iops}

        self.updated.emit({"state": "running", "name": name, "runtime": float(opts["runtime"])})

        def failed(msg):
            self.updated.emit({"state": "failed", "name": name, "error": msg})
            self.core.error.emit(msg)
        self.core.run(go, done=lambda d: self._with_power(d, job_name), failed=failed)

    def _with_power(self, d: dict, job_name: str) -> None:
        """The finished phase's MiB/s and IOPS, then its mean power and energy beside them (the markers'
        code over the phase's span, once the capture holds its end)."""
        from powerrig.analysis.selection import range_figures
        self.updated.emit(d)
        live = self.recording.live
        phase = next((e for e in reversed(self.captures.events_s(live)) if e["kind"] == "phase"
                      and job_name in e["name"] and e["t1"] is not None), None) if live is not None else None
        if phase is None:
            return
        src, t0, t1 = live, phase["t0"], phase["t1"]
        asrc = src.analysis_source() if hasattr(src, "analysis_source") else src

        def power():
            deadline = time.monotonic() + 10.0
            while src.duration_s < t1 and time.monotonic() < deadline:
                time.sleep(0.05)                  # the stream reaches the phase's end (USB and block latency)
            return range_figures(asrc, t0, t1)

        def done(fig):
            w = fig.mean_w.get("total")
            self.updated.emit(dict(d, mean_w=w, energy_j=fig.energy_j.get("total"), t0=t0, t1=t1,
                                   mib_s_per_w=d["mib_s"] / w if w else None))
        self.core.run(power, done=done, failed=lambda m: logger.info("phase power of %s: %s", job_name, m))

    def stop(self) -> int:
        """End the fio this app started (by pid); its phase ends as failed ("stopped")."""
        from powerrig.dut.processes import stop_children
        if self.drive.fio is None:
            return 0
        return stop_children(self.drive.fio.program)
