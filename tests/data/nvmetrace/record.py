# Re-record: powerrig sim start --drive qemu > st.json; .venv/bin/python tests/data/nvmetrace/record.py st.json tests/data/nvmetrace
"""Record tests/data/nvmetrace from a running QEMU rig: powerrig's admin commands and a short fio
run, traced by dut/nvmetrace.KernelTrace in the guest's 6.1 kernel, with QEMU's own trace lines."""
import json, sys, time
from pathlib import Path
from powerrig.core.timeline import Timeline
from powerrig.dut import runners
from powerrig.dut.remote import drive_host
from powerrig.dut import nvmetrace
from powerrig.dut.commands import helper_argv

st = json.loads(Path(sys.argv[1]).read_text())
out = Path(sys.argv[2]); out.mkdir(parents=True, exist_ok=True)
remote = drive_host(st["drive_host"])
tl = Timeline()
nvme, fio = runners({"nvme": st["nvme"], "fio": st["fio"], "drive_host": st["drive_host"]}, tl)
t0 = time.time()
kt = nvmetrace.KernelTrace(remote, "/dev/nvme0", "fixture").start()
assert kt.started, kt.reason
nvme.set_power_state("/dev/nvme0", 0)
nvme.smart_log("/dev/nvme0")
nvme.id_ns("/dev/nvme0n1")
nvme.get_apst("/dev/nvme0") if False else None
remote.run(helper_argv("fio", "--name=r4k", "--filename=/dev/nvme0n1", "--rw=randread", "--bs=4k", "--direct=1",
                       "--size=256k", "--ioengine=libaio", "--iodepth=4"), timeout=120)
remote.run(helper_argv("fio", "--name=w128k", "--filename=/dev/nvme0n1", "--rw=write", "--bs=128k", "--direct=1",
                       "--size=1m", "--ioengine=libaio", "--iodepth=2"), timeout=120)
nvme.smart_log("/dev/nvme0")
text = kt.stop()
t1 = time.time()
(out / "trace.txt").write_text(text)
(out / "lba.json").write_text(json.dumps(kt.lba))
(out / "events.json").write_text(json.dumps([e.to_dict() for e in tl.events()], indent=1, default=str))
(out / "to_host.json").write_text(json.dumps({"offset_s": remote.to_host(1e9) - 1e9}))
lines = [l for l in Path(st["trace"]).read_text().splitlines() if "@" in l[:20]]
keep = [l for l in lines if t0 - 1 <= float(l.split("@", 1)[1].split(":", 1)[0]) <= t1 + 1]
(out / "qemu-trace.log").write_text("\n".join(keep) + "\n")
print(len(text.splitlines()), len(keep), kt.lba)
