"""The destructive-operation guard is part of the path: every fio write workload and every format or
sanitize goes through it. The host it reads (sysfs, mount table, swaps) is a tree in tmp, laid out as
Linux lays it out, including native NVMe multipath; the virtual rig publishes one of its own."""
from __future__ import annotations

import json
import logging
import re
import os
import stat
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from powerrig.dut.fio import Fio, FioJob, FioPlan
from powerrig.dut.guard import GuardRefused, HostView, check_destructive, in_use, resolve
from powerrig.dut.nvme import NvmeCli
from powerrig.core.timeline import FIO, NOTE, NVME, Timeline
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.server import SsdServer


def link(link_path: Path, target: Path) -> None:
    link_path.parent.mkdir(parents=True, exist_ok=True)
    link_path.symlink_to(os.path.relpath(target, link_path.parent))


class FakeHost:
    """A sysfs tree, /proc/self/mounts, /proc/self/mountinfo and /proc/swaps in tmp, laid out as Linux lays them out: every
    device with a dev_t has its ``dev`` file and its /sys/dev/{block,char}/MAJ:MIN link
    (drivers/base/core.c); a subsystem directory links its controllers (drivers/nvme/host/core.c
    nvme_init_subsystem); a native multipath head sits under its subsystem with its hidden path
    devices nvme{S}c{C}n{N} under each controller (multipath.c nvme_set_disk_name), as in kernel 6.1;
    ``newer=True`` also lists them in the head's multipath/ folder (sysfs.c nvme_ns_mpath_attr_group,
    kernels from 6.14)."""

    BLOCK_MAJOR, CTRL_MAJOR, GENERIC_MAJOR = 259, 241, 240       # BLOCK_EXT_MAJOR; nvme and nvme-generic are dynamic

    def __init__(self, root: Path):
        self.root = root
        self.sys = root / "sys"
        self.pci = self.sys / "devices" / "pci0000:00"
        (root / "dev").mkdir(parents=True)
        (root / "mounts").write_text("")
        (root / "mountinfo").write_text("")
        (root / "swaps").write_text("Filename Type Size Used Priority\n")
        self.view = HostView(str(self.sys), str(root / "mounts"), str(root / "swaps"), str(root / "dev"),
                             mountinfo=str(root / "mountinfo"))
        self.minors = {self.BLOCK_MAJOR: 0, self.CTRL_MAJOR: 0, self.GENERIC_MAJOR: 0}
        self.devno: dict[str, str] = {}

    def number(self, d: Path, kind: str, major: int, minor: int | None = None) -> str:
        """Give d a dev_t: its ``dev`` file and the /sys/dev/<kind>/MAJ:MIN link."""
        if minor is None:
            minor = self.minors[major]
            self.minors[major] += 1
        (d / "dev").write_text(f"{major}:{minor}\n")
        link(self.sys / "dev" / kind / f"{major}:{minor}", d)
        self.devno[d.name] = f"{major}:{minor}"
        return f"{major}:{minor}"

    def controller(self, name: str, serial: str, subsys: int | None = None) -> Path:
        d = self.pci / f"0000:0{name[-1]}:00.0" / "nvme" / name
        d.mkdir(parents=True)
        (d / "serial").write_text(serial + "\n")
        link(self.sys / "class" / "nvme" / name, d)
        self.number(d, "char", self.CTRL_MAJOR)
        if subsys is not None:
            self.join(subsys, d)
        return d

    def subsystem(self, n: int) -> Path:
        sd = self.sys / "devices" / "virtual" / "nvme-subsystem" / f"nvme-subsys{n}"
        if not sd.is_dir():
            sd.mkdir(parents=True)
            (sd / "subsysnqn").write_text(f"nqn.2019-08.org.qemu:subsys{n}\n")
            link(self.sys / "class" / "nvme-subsystem" / sd.name, sd)
        return sd

    def join(self, n: int, ctrl: Path) -> None:
        """Controller ctrl is one of subsystem n's: the subsystem's link to it, its subsysnqn."""
        sd = self.subsystem(n)
        if not (sd / ctrl.name).is_symlink():
            link(sd / ctrl.name, ctrl)
        (ctrl / "subsysnqn").write_text((sd / "subsysnqn").read_text())

    def block(self, parent: Path, name: str, nsid: int | None = None, parts: int = 0, hidden: bool = False) -> Path:
        """A disk (and its partitions); ``hidden``: a multipath path device, which has no dev_t link
        in /sys/dev/block (block/genhd.c GENHD_FL_HIDDEN; so a real 6.1 guest)."""
        d = parent / name
        (d / "holders").mkdir(parents=True)
        if nsid is not None:
            (d / "nsid").write_text(f"{nsid}\n")
        link(self.sys / "class" / "block" / name, d)
        if not hidden:
            self.number(d, "block", self.BLOCK_MAJOR)
        for p in range(1, parts + 1):
            pd = d / f"{name}p{p}"
            (pd / "holders").mkdir(parents=True)
            (pd / "partition").write_text(f"{p}\n")
            link(self.sys / "class" / "block" / pd.name, pd)
            self.number(pd, "block", self.BLOCK_MAJOR)
        return d

    def generic(self, parent: Path, name: str) -> Path:
        """The NVMe generic char device ngXnY beside its namespace (core.c nvme_add_ns_cdev)."""
        d = parent / name
        d.mkdir(parents=True)
        link(self.sys / "class" / "nvme-generic" / name, d)
        self.number(d, "char", self.GENERIC_MAJOR)
        return d

    def multipath(self, subsys: int, ns_index: int, nsid: int, ctrls: list[Path], newer: bool = False) -> Path:
        """nvme<subsys>n<ns_index> under nvme-subsys<subsys>, one hidden path device per controller."""
        sd = self.subsystem(subsys)
        head = self.block(sd, f"nvme{subsys}n{ns_index}", nsid)
        for c in ctrls:
            self.join(subsys, c)
            path = self.block(c, f"nvme{subsys}c{c.name[4:]}n{ns_index}", nsid, hidden=True)
            if newer:
                link(head / "multipath" / path.name, path)
        return head

    def node(self, path: Path, name: str, kind: str = "block") -> Path:
        """A real device node at ``path`` with the dev_t this tree gave ``name`` (mknod: we are root)."""
        major, minor = map(int, self.devno[name].split(":"))
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mknod(path, (stat.S_IFBLK if kind == "block" else stat.S_IFCHR) | 0o600, os.makedev(major, minor))
        return path

    def mount(self, line: str, devno: str | None = None) -> None:
        """A mounts line ("source mountpoint fstype options 0 0") and its mountinfo line, whose
        MAJ:MIN is ``devno`` or the device the source names in this tree (0:99, a tmpfs's, if none)."""
        with open(self.root / "mounts", "a") as f:
            f.write(line + "\n")
        source, point, fstype, opts = (line.split() + ["", "", "", ""])[:4]
        if devno is None:
            devno = self.devno.get(self.view.dev_name(source), "0:99")
        with open(self.root / "mountinfo", "a") as f:
            n = sum(1 for _ in open(self.root / "mountinfo")) + 30
            f.write(f"{n} 1 {devno} / {point} {opts} shared:{n} - {fstype} {source} {opts}\n")


@pytest.fixture
def host(tmp_path):
    return FakeHost(tmp_path / "host")


def test_plain_namespace_and_partition_resolve_to_their_controller(host):
    c = host.controller("nvme0", "SN0")
    host.block(c, "nvme0n1", 1, parts=2)
    t = resolve("/dev/nvme0n1p2", host.view)
    assert (t.namespace, t.controllers, t.nsid) == ("nvme0n1", ("nvme0",), 1)
    assert {"nvme0n1", "nvme0n1p1", "nvme0n1p2"} <= t.blocks


def test_native_multipath_names_resolve_through_sysfs_not_by_name(host):
    """nvme0n1 belongs to subsystem 0, reached through controllers nvme1 and nvme2; nvme0 is another drive."""
    other = host.controller("nvme0", "OTHER")
    host.block(other, "nvme3n1", 1)
    c1, c2 = host.controller("nvme1", "SNMP"), host.controller("nvme2", "SNMP")
    host.multipath(0, 1, 7, [c1, c2])               # namespace number 7, not 1
    t = resolve("/dev/nvme0n1", host.view)
    assert t.controllers == ("nvme1", "nvme2") and t.nsid == 7 and "nvme0n1" in t.blocks
    assert resolve("/dev/nvme0c2n1", host.view).namespace == "nvme0n1"   # a path device -> its head
    assert "nvme3n1" not in t.blocks
    host.mount("/dev/nvme0n1 /data ext4 rw 0 0")
    with pytest.raises(GuardRefused, match="in use .*/data"):
        check_destructive("/dev/nvme0n1", "SNMP", "SNMP", host.view)
    check_destructive("/dev/nvme3n1", "OTHER", "OTHER", host.view)     # by name it would have been nvme0's


def test_serial_mounts_swap_holders_and_boot_device(host):
    c = host.controller("nvme0", "SN0")
    host.block(c, "nvme0n1", 1, parts=2)
    v = host.view
    with pytest.raises(GuardRefused, match="no drive serial number named"):
        check_destructive("/dev/nvme0n1", None, "SN0", v)
    with pytest.raises(GuardRefused, match="wrong drive"):
        check_destructive("/dev/nvme0n1", "SN1", "SN0  ", v)
    check_destructive("/dev/nvme0n1", "SN0", "SN0  ", v)
    (host.root / "swaps").write_text("Filename Type\n/dev/nvme0n1p1 partition 100 0 -2\n")
    assert in_use(resolve("/dev/nvme0", v), v) == [("/dev/nvme0n1p1", "swap")]
    (host.root / "swaps").write_text("Filename Type\n")
    dm = host.block(host.sys / "devices" / "virtual" / "block", "dm-0")
    (dm / "dm").mkdir()
    (dm / "dm" / "name").write_text("vg-data\n")
    link(host.sys / "class" / "block" / "nvme0n1p2" / "holders" / "dm-0", dm)
    host.mount("/dev/mapper/vg-data /srv\\040x xfs rw 0 0")
    with pytest.raises(GuardRefused, match="/srv x"):
        check_destructive("/dev/nvme0n1", "SN0", "SN0", v)
    host.mount("/dev/nvme0n1p1 / ext4 rw 0 0")
    with pytest.raises(GuardRefused, match="boot device"):
        check_destructive("/dev/nvme0", "SN0", "SN0", v)


def test_a_mount_or_swap_through_a_node_outside_dev_is_in_use(host, tmp_path):
    """Issue 36, the QEMU tier's hole 1: a namespace mounted through a device node outside /dev (mknod
    in /tmp; the mount table names that path) was not in use, and a format erased the mounted
    filesystem. Mounts are matched by mountinfo's MAJ:MIN, swaps by the number of their node."""
    c = host.controller("nvme0", "SN0")
    host.block(c, "nvme0n1", 1)
    host.block(host.controller("nvme1", "SN1"), "nvme1n1", 1)
    host.mount("/tmp/x/disk /mnt/shared ext2 ro 0 0", devno=host.devno["nvme0n1"])
    with pytest.raises(GuardRefused, match="in use .*/tmp/x/disk on /mnt/shared"):
        check_destructive("/dev/nvme0n1", "SN0", "SN0", host.view)
    check_destructive("/dev/nvme1n1", "SN1", "SN1", host.view)             # another drive's number
    (host.root / "mounts").write_text("")
    (host.root / "mountinfo").write_text("")
    node = host.node(tmp_path / "y" / "swapdisk", "nvme0n1")
    (host.root / "swaps").write_text(f"Filename Type Size Used Priority\n{node} partition 100 0 -2\n")
    assert in_use(resolve("/dev/nvme0n1", host.view), host.view) == [(str(node), "swap")]
    assert in_use(resolve("/dev/nvme1n1", host.view), host.view) == []


def test_the_mirror_of_a_drive_host_without_python3_forks_a_few_times_and_reads_the_same(tmp_path):
    """sysfs_mirror.SCRIPT (a drive host without python3, the QEMU guest): a handful of processes, not
    one readlink and one base64|tr per entry (~16 ms each on a loaded TCG guest); run here by the
    shell, the copy reads as this host does: each block device's judgement, mounts and swaps."""
    import shutil
    import subprocess

    from powerrig.dut import sysfs, sysfs_mirror
    from powerrig.dut.sysfs import Target

    shells = [s for s in ("/bin/busybox", "/bin/sh") if os.path.exists(s)]
    strace = shutil.which("strace")
    trace = tmp_path / "forks"

    class Here:
        """The drive host is this one, its shell run under strace to count the processes it makes."""
        def __init__(self, sh):
            self.sh = [sh, "sh"] if sh.endswith("busybox") else [sh]

        def run(self, argv, timeout=None):
            argv = list(argv)
            count = [strace, "-f", "-qq", "-e", "trace=fork,vfork,clone,clone3", "-o", str(trace)] if strace else []
            return subprocess.run(count + self.sh + argv[1:], capture_output=True, check=True, timeout=60).stdout

    mine = HostView()
    blocks = sorted(p.name for p in Path("/sys/class/block").iterdir()) if Path("/sys/class/block").is_dir() else []
    for sh in shells:
        view, ident = sysfs_mirror.mirror(Here(sh), tmp_path / f"copy-{Path(sh).name}", "/dev/null")
        if strace:
            forks = [ln for ln in trace.read_text().splitlines() if re.search(r"\b(clone3?|v?fork)\(", ln)]
            assert len(forks) <= 8, f"{sh}: {len(forks)} processes made"
        assert ident["kind"] == "char" and not sysfs.is_drive("/dev/null", view, ident)
        for b in blocks:
            t = Target(b, None, (), blocks=frozenset({b}))
            assert sysfs.in_use(t, view) == sysfs.in_use(t, mine), b
            assert (view.sys("class", "block", b, "dev").read_text().strip()
                    == Path("/sys/class/block", b, "dev").read_text().strip())


def test_paths_that_are_not_nvme_block_devices_are_refused(host):
    with pytest.raises(GuardRefused, match="not a block device on this host"):
        resolve("/dev/nvme9n1", host.view)
    host.block(host.sys / "devices" / "pci0000:00" / "ata1" / "block", "sda")
    with pytest.raises(GuardRefused, match="not an NVMe namespace"):
        resolve("/dev/sda", host.view)


# -- in the path: the runners on virtual SSDs ---------------------------------------------------------
@pytest.fixture
def virtual(tmp_path):
    ssd = VirtualSSD("d5-p5336")
    with SsdServer([ssd], str(tmp_path / "ssd.sock")) as server:
        tl = Timeline()
        sock = server.socket_path
        from powerrig.sim.rig import tool_launcher        # a prefix is one program (commands.check_program)
        nvme = NvmeCli(tool_launcher("nvme", sock, tmp_path), tl, host=HostView(**server.host))
        fio = Fio(tool_launcher("fio", sock, tmp_path), tl, nvme=nvme)
        yield server, ssd, nvme, fio, tl


def write_plan(ns="/dev/nvme0n1", **over):
    return FioPlan([FioJob("w", rw=over.pop("rw", "write"), bs="128k", runtime=0.3, time_based=True,
                           filename=ns, **over)])


@pytest.mark.parametrize("rw,extra", [("write", {}), ("randrw", {}), ("trim", {}), ("read", {"verify": "crc32c"})])
def test_write_workloads_without_the_serial_never_start_fio(virtual, tmp_path, rw, extra):
    _, ssd, _, fio, tl = virtual
    with pytest.raises(GuardRefused, match="no drive serial number named"):
        fio.run(write_plan(rw=rw, extra=extra), tmp_path / "run")
    assert not tl.events(FIO) and not (tmp_path / "run").exists()
    with pytest.raises(GuardRefused, match="wrong drive"):
        fio.run(write_plan(rw=rw, extra=extra), tmp_path / "run", serial="NOT" + ssd.sn)
    assert not tl.events(FIO)
    (ev,) = [e for e in tl.events(NOTE) if e.name == "guard" and e.meta["serial"]]
    assert not ev.ok and "wrong drive" in ev.error


def test_reads_need_no_serial_and_the_named_drive_writes(virtual, tmp_path):
    _, ssd, _, fio, tl = virtual
    fio.run(write_plan(rw="read"), tmp_path / "r")
    res = fio.run(write_plan(), tmp_path / "w", serial=ssd.sn)
    assert res.jobs[0].directions["write"].io_bytes > 0
    assert any(e.name == "id-ctrl" and e.meta["device"] == "/dev/nvme0" for e in tl.events(NVME))


def test_a_mounted_virtual_namespace_is_refused(virtual, tmp_path):
    server, ssd, _, fio, _ = virtual
    Path(server.host["mounts"]).write_text("/dev/nvme0n1 /mnt/bench ext4 rw 0 0\n")
    with pytest.raises(GuardRefused, match="/mnt/bench"):
        fio.run(write_plan(), tmp_path / "w", serial=ssd.sn)


def test_override_is_explicit_and_logged(virtual, tmp_path, caplog):
    _, _, _, fio, tl = virtual
    with caplog.at_level(logging.WARNING, logger="powerrig.dut.guard"):
        fio.run(write_plan(), tmp_path / "w", allow_unguarded=True)
    assert "allow_unguarded=True" in caplog.text
    (ev,) = [e for e in tl.events(NOTE) if e.name == "guard"]
    assert ev.ok and ev.result["overridden"]


def test_format_and_sanitize_are_guarded(virtual):
    _, ssd, nvme, _, tl = virtual
    for call in (lambda: nvme.format("/dev/nvme0n1", None), lambda: nvme.sanitize("/dev/nvme0", "X")):
        with pytest.raises(GuardRefused):
            call()
    assert not [e for e in tl.events(NVME) if e.name in ("format", "sanitize")]
    nvme.format("/dev/nvme0n1", ssd.sn, ses=1)
    nvme.sanitize("/dev/nvme0", ssd.sn, action=2)
    argv = [e.argv for e in tl.events(NVME) if e.name in ("format", "sanitize")]
    assert [a[a.index("format") if "format" in a else a.index("sanitize"):][:3] for a in argv] == \
        [["format", "/dev/nvme0n1", "--ses=1"], ["sanitize", "/dev/nvme0", "--sanact=2"]]


def test_virtual_rig_refuses_a_write_on_an_unnamed_drive_before_fio_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path / "rigs"))
    r = run_cli("sim", "start", "--json", "--profile", "client-apst")
    assert r.returncode == 0, r.stderr
    state = json.loads(r.stdout)
    try:
        tl = Timeline()
        nvme = NvmeCli(state["nvme"], tl, host=HostView(**state["host"]))
        fio = Fio(state["fio"], tl, nvme=nvme)
        with pytest.raises(GuardRefused, match="no drive serial number named"):
            fio.run(write_plan(state["namespaces"][0]), tmp_path / "w")
        assert not tl.events(FIO)
        res = fio.run(write_plan(state["namespaces"][0]), tmp_path / "w", serial=state["serial"])
        assert res.jobs[0].directions["write"].io_bytes > 0
    finally:
        run_cli("sim", "stop", "--all")


def test_the_sysfs_probe_runs_alone_in_a_bare_interpreter(host):
    """On a remote drive host the guard runs dut/sysfs.py with that host's python3 and nothing else
    installed: run by path in an isolated interpreter (-I -S: no site-packages, no powerrig), it
    gives what the in-process guard reads (a multipath namespace, its controllers and its mount)."""
    import json
    import subprocess
    import sys

    from powerrig.dut import sysfs

    c0, c1 = host.controller("nvme0", "SN0"), host.controller("nvme1", "SN0")
    host.multipath(0, 1, 1, [c0, c1])
    host.mount("/dev/nvme0n1 /srv/data xfs rw 0 0")
    args = {"dev": "/dev/nvme0n1", "host": {"sys_root": host.view.sys_root, "mounts": host.view.mounts,
                                             "swaps": host.view.swaps, "dev_root": host.view.dev_root}}
    r = subprocess.run([sys.executable, "-I", "-S", sysfs.__file__, json.dumps(args)], capture_output=True,
                       text=True, timeout=60, cwd=host.root)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    t = resolve("/dev/nvme0n1", host.view)
    assert got["target"]["controllers"] == list(t.controllers) == ["nvme0", "nvme1"]
    assert set(got["target"]["blocks"]) == set(t.blocks)
    assert [tuple(u) for u in got["uses"]] == in_use(t, host.view) == [("/dev/nvme0n1", "/srv/data")]
    args["dev"] = "/dev/sda"
    r = subprocess.run([sys.executable, "-I", "-S", sysfs.__file__, json.dumps(args)], capture_output=True,
                       text=True, timeout=60)
    assert "is not a block device on this host" in json.loads(r.stdout)["refused"]
