"""Where an admin command's time goes between the guest kernel's stamps, on this host's clock: boots a
QEMU drive host with two more of QEMU's trace events (the submission doorbell's MMIO write, stamped in
the vCPU thread, and the MSI-X it raises), runs nvme-cli admin commands through the agent with the
guest kernel's nvme tracepoints on, and prints one JSON object: per stage min / p50 / p99 / max (ms)
and the widest commands.

    .venv/bin/python benchmarks/qemu_admin_stages.py [--admin 100]

Stages: ``setup_to_doorbell`` (the guest's nvme_setup_cmd -> QEMU's doorbell stamp: a few guest
instructions, so its minimum is the guest->host clock map's error, and its tail the vCPU held off
the CPU), ``doorbell_to_take`` (QEMU's main loop waking for the submission queue's timer),
``run`` (the emulated command), ``done_to_msix`` and ``msix_to_complete_rq`` (the vCPU woken for the
interrupt, the driver's completion path; its minimum: the map's error the other way).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from hostinfo import machine  # noqa: E402
from qemu_split import matches  # noqa: E402

from powerrig.core.timeline import Timeline  # noqa: E402
from powerrig.dut import nvmetrace, runners  # noqa: E402
from powerrig.dut.remote import drive_host  # noqa: E402
from powerrig.sim.qemu.drive import QemuDrive  # noqa: E402
from powerrig.sim.qemu.trace import read_all  # noqa: E402

EXTRA = ("pci_nvme_mmio_doorbell_sq", "pci_nvme_irq_msix")
_LINE = re.compile(r"^\d+@(\d+\.\d+):(pci_nvme_mmio_doorbell_sq|pci_nvme_irq_msix) (.*)$")
STAGES = ("setup_to_doorbell", "doorbell_to_take", "run", "done_to_msix", "msix_to_complete_rq")


def stamps(path) -> tuple[np.ndarray, np.ndarray]:
    """QEMU's admin-queue doorbell writes and vector-0 MSI-X (the admin queue's), host UTC."""
    db, msix = [], []
    with open(path, errors="replace") as f:
        for line in f:
            m = _LINE.match(line)
            if not m:
                continue
            if m.group(2) == "pci_nvme_mmio_doorbell_sq" and re.search(r"\bsqid 0\b", m.group(3)):
                db.append(float(m.group(1)))
            elif m.group(2) == "pci_nvme_irq_msix" and re.search(r"\bvector 0\b", m.group(3)):
                msix.append(float(m.group(1)))
    return np.array(db), np.array(msix)


def split(traced, qemu, db, msix, t0: float) -> list[dict]:
    """Each traced admin command with QEMU's (qemu_split.matches), the doorbell just before QEMU took
    it and the first MSI-X after its completion: the stages in ms."""
    out = []
    for k, c in matches(traced, qemu):
        i = int(np.searchsorted(db, c.t_submit, side="right")) - 1
        j = int(np.searchsorted(msix, c.t_complete))
        if i < 0 or j >= len(msix):
            continue
        out.append({"at_s": round(k.t_submit - t0, 2), "op": k.opcode.replace("nvme_admin_", ""),
                    "setup_to_doorbell": (db[i] - k.t_submit) * 1e3, "doorbell_to_take": (c.t_submit - db[i]) * 1e3,
                    "run": (c.t_complete - c.t_submit) * 1e3, "done_to_msix": (msix[j] - c.t_complete) * 1e3,
                    "msix_to_complete_rq": (k.t_complete - msix[j]) * 1e3})
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--admin", type=int, default=100)
    a = ap.parse_args()
    load0 = os.getloadavg()
    d = QemuDrive(tempfile.mkdtemp(prefix="qemu-stages-"), "QSTAGES", extra_trace=EXTRA).start()
    try:
        st = d.state()
        remote = drive_host(st["drive_host"])
        nvme, _ = runners({"nvme": st["nvme"], "fio": st["fio"], "drive_host": st["drive_host"]}, Timeline())
        kt = nvmetrace.KernelTrace(remote, "/dev/nvme0", "stages", queues="admin").start()
        t0 = time.time()
        for k in range(a.admin):
            nvme.smart_log("/dev/nvme0") if k % 2 == 0 else nvme.id_ctrl("/dev/nvme0")
        traced, note = nvmetrace.load(kt)
        clock = remote.clock()
        time.sleep(0.3)
    finally:
        d.stop()
    if traced is None:
        raise SystemExit(f"no guest kernel trace: {note}")
    rows = split(traced.admin(), read_all(d.guest.trace_log), *stamps(d.guest.trace_log), t0)
    if not rows:
        raise SystemExit("no traced admin command matched QEMU's trace")
    width = [sum(r[s] for s in STAGES) for r in rows]
    print(json.dumps({"host": machine(), "load_average": [round(x, 2) for x in load0 + os.getloadavg()],
                      "commands": len(rows), "guest_clock_uncertainty_ms": round(clock.uncertainty_s * 1e3, 3),
                      "marker_bound_ms": round(traced.bound_s * 1e3, 3),
                      **{s: [round(float(np.percentile([r[s] for r in rows], q)), 3) for q in (0, 50, 99, 100)]
                         for s in STAGES},
                      "widest": [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in rows[i].items()}
                                 for i in np.argsort(width)[::-1][:6]]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
