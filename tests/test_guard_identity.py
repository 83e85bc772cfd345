"""Issue 36 items 1 and 5: the guard judges the device a path really opens and every namespace an NVMe
command touches, never a name. Each test reproduces one hole (it failed before the fix): a link named
like the drive, '//', '/./' and '..' forms, device nodes anywhere (mknod, a real loop device), an nsid
the device's own namespace does not stand for, the broadcast nsid, a shared namespace mounted through
the other controller (multipath off), kernel 6.1's native multipath layout (no multipath/ folder), a
plan's namespace on a running virtual rig, and the agent's by-hand door."""
from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
import socketserver
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import run_cli
from test_guard import FakeHost
from powerrig.core.timeline import NOTE, Timeline
from powerrig.dut import destructive, guard
from powerrig.dut.guard import DriveGuard, GuardRefused, HostView, is_drive, resolve
from powerrig.dut.nvme import NvmeCli
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.server import SsdServer

BROADCAST = 0xFFFFFFFF


def judge(dev, host=None, nsid=None):
    """guard.judge, looked up when called (this file also runs against the code before the fix)."""
    return guard.judge(dev, host, nsid)


@pytest.fixture
def host(tmp_path):
    return FakeHost(tmp_path / "host")


@dataclass
class _Ident:
    sn: str


@dataclass
class _Version:
    major: int = 2
    tuple: tuple = (2, 8, 0)


class FakeNvme:
    """nvme-cli over a FakeHost: id-ctrl answers the tree's serial, destructive commands are recorded
    (argv as the door built it), nothing runs."""

    def __init__(self, host: FakeHost):
        self.fake, self.host, self.timeline, self.ran = host, host.view, Timeline(), []

    def id_ctrl(self, dev: str) -> _Ident:
        return _Ident((self.fake.sys / "class" / "nvme" / Path(dev).name / "serial").read_text().strip())

    def version(self) -> _Version:
        return _Version()

    def _call(self, command, dev, options, name, parse, meta=None, extra=None, permit=None, timeout=None):
        from powerrig.dut.commands import nvme_argv
        self.ran.append(nvme_argv(["nvme"], command, dev, options, permit))


def _guard_event(nvme):
    return [e for e in nvme.timeline.events(NOTE) if e.name == "guard"][-1]


# -- 1. device identity, not names ------------------------------------------------------------------------
def two_drives(host: FakeHost):
    a, b = host.controller("nvme0", "SNA"), host.controller("nvme1", "SNB")
    host.block(a, "nvme0n1", 1)
    host.block(b, "nvme1n1", 1)
    return a, b


def test_a_link_named_like_the_drive_is_judged_as_the_drive_it_opens(host, tmp_path):
    """Before: x/nvme0n1 -> /dev/nvme1n1 was checked by its name as nvme0n1 (serial SNA matched) while
    nvme-cli opened nvme1n1, the other drive."""
    two_drives(host)
    lnk = tmp_path / "x" / "nvme0n1"
    lnk.parent.mkdir()
    lnk.symlink_to("/dev/nvme1n1")
    t = resolve(str(lnk), host.view)
    assert (t.namespace, t.controllers) == ("nvme1n1", ("nvme1",))
    assert t.path == "/dev/nvme1n1"
    nvme = FakeNvme(host)
    with pytest.raises(GuardRefused, match="its serial is 'SNB', the caller names 'SNA'") as e:
        destructive.format(nvme, str(lnk), "SNA", ses=1)
    assert "\n" not in str(e.value) and not nvme.ran
    destructive.format(nvme, str(lnk), "SNB", ses=1)
    assert nvme.ran[-1][:3] == ["nvme", "format", "/dev/nvme1n1"]      # what was judged is what is opened
    assert is_drive(str(lnk), host.view)


@pytest.mark.parametrize("form", ["//dev/disk/by-id/nvme-B", "/./dev/disk/by-id/nvme-B",
                                  "/tmp/../dev/disk/by-id/nvme-B", "/dev/disk/../disk/by-id/nvme-B",
                                  "/dev/../dev/disk/by-id/./nvme-B", "/dev/disk/by-id//nvme-B"])
def test_every_path_form_of_a_link_resolves_to_its_device(host, form):
    """Before: only a path starting with exactly '/dev/' had its links followed; '//dev/...', '/./dev'
    and '/tmp/../dev' were judged by their last name, a drive nobody has (the forms that start with
    '/dev/' passed before too)."""
    two_drives(host)
    by_id = host.root / "dev" / "disk" / "by-id"
    by_id.mkdir(parents=True)
    (by_id / "nvme-B").symlink_to("../../nvme1n1")
    t = resolve(form, host.view)
    assert (t.namespace, t.controllers) == ("nvme1n1", ("nvme1",))
    assert t.path == "/dev/nvme1n1"


def test_a_device_node_anywhere_is_the_device_of_its_major_minor(host, tmp_path):
    """Before: a block node in any folder was judged by its file name. Here nodes made with mknod
    carry the numbers of the tree's devices: nvme0n1 (259:0) named 'nvme1n1', a partition, the
    generic char device ng1n1, and loop0 (7:0) named 'nvme0n1'."""
    two_drives(host)
    host.generic(host.sys / "class" / "nvme" / "nvme1", "ng1n1")
    loop = host.block(host.sys / "devices" / "virtual" / "block", "loop0")
    (loop / "dev").unlink()
    (host.sys / "dev" / "block" / host.devno["loop0"]).unlink()
    host.number(loop, "block", 7, 0)
    nodes = tmp_path / "nodes"
    t = resolve(str(host.node(nodes / "nvme1n1", "nvme0n1")), host.view)
    assert (t.namespace, t.controllers) == ("nvme0n1", ("nvme0",))
    assert t.devno == "259:0"
    t = resolve(str(host.node(nodes / "sub" / "..." / "nvme0n1", "ng1n1", "char")), host.view)
    assert (t.namespace, t.controllers) == ("nvme1n1", ("nvme1",))
    bad = host.node(nodes / "nvme0n1", "loop0")
    for form in (str(bad), f"{nodes}/sub/../nvme0n1", f"/{nodes}/./nvme0n1"):
        with pytest.raises(GuardRefused, match=r"nvme0n1 \(7:0\): loop0 is not an NVMe namespace") as e:
            resolve(form, host.view)
        assert "\n" not in str(e.value)
        assert is_drive(form, host.view)


def _losetup(img: Path) -> str | None:
    if shutil.which("losetup") is None:
        return None
    img.write_bytes(b"\0" * (1 << 20))
    r = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def test_a_real_loop_device_behind_an_nvme_name_is_refused_in_one_line(tmp_path):
    """On this machine's own /dev and /sys: a link named nvme0n1 to a real loop device, in every
    path form, is that loop device, refused by its major:minor; a write to it must pass the guard."""
    loop = _losetup(tmp_path / "img")
    if loop is None:
        pytest.skip("losetup cannot attach a loop device in this sandbox")
    try:
        mm = f"{os.major(os.stat(loop).st_rdev)}:{os.minor(os.stat(loop).st_rdev)}"
        lnk = tmp_path / "x" / "nvme0n1"
        lnk.parent.mkdir()
        lnk.symlink_to(loop)
        for form in (str(lnk), f"/{lnk}", f"{tmp_path}/x/../x/./nvme0n1", "/" + loop, loop.replace("/dev/", "/dev/./")):
            with pytest.raises(GuardRefused, match=rf"is {loop} \({mm}\): {Path(loop).name} is not an NVMe") as e:
                resolve(form, HostView())
            assert "\n" not in str(e.value)
            assert is_drive(form, HostView())
        assert not is_drive(str(tmp_path / "img"), HostView()) and not is_drive("/dev/null", HostView())
    finally:
        subprocess.run(["losetup", "-d", loop], capture_output=True)


# -- 2. every namespace an NVMe command touches ----------------------------------------------------------
def shared_subsystem(host: FakeHost):
    """Subsystem 0 with controllers nvme0 and nvme1 (one serial), multipath off: nsid 1 private to
    nvme0, nsid 2 and 4 shared (nvme0n2 and nvme1n2 are one namespace), nsid 3 private to nvme1."""
    c0, c1 = host.controller("nvme0", "SNS", subsys=0), host.controller("nvme1", "SNS", subsys=0)
    host.block(c0, "nvme0n1", 1)
    for c in (c0, c1):
        host.block(c, f"{c.name}n2", 2)
        host.block(c, f"{c.name}n4", 4)
    host.block(c1, "nvme1n3", 3)
    other = host.controller("nvme2", "OTHER", subsys=1)
    host.block(other, "nvme2n1", 1)
    return c0, c1


def test_format_with_an_nsid_judges_that_namespace_not_the_devices_own(host):
    """Before: format(nvme0n1, nsid=N) checked nsid 1 and formatted N, whatever N was."""
    shared_subsystem(host)
    nvme = FakeNvme(host)
    with pytest.raises(GuardRefused, match=r"namespace 3 is not a namespace of nvme0 .*its namespaces: 1 \(nvme0n1\), "
                                           r"2 \(nvme0n2\), 4 \(nvme0n4\)") as e:
        destructive.format(nvme, "/dev/nvme0n1", "SNS", ses=1, nsid=3)
    assert "\n" not in str(e.value) and not nvme.ran
    destructive.format(nvme, "/dev/nvme0n1", "SNS", ses=1, nsid=2)
    ev = _guard_event(nvme)
    assert ev.result["nsids"] == [2] and ev.result["controllers"] == ["nvme0", "nvme1"]
    assert "--namespace-id=2" in nvme.ran[-1]
    t = judge("/dev/nvme0n1", host.view, nsid=2)
    assert (t.nsid, t.nsids, t.subsystem) == (1, (2,), "nvme-subsys0")


def test_a_shared_namespace_mounted_through_the_other_controller_is_in_use(host):
    """Before (multipath off): nvme1n2 mounted, format of nvme0n2 (the same namespace) passed: the
    guard looked at nvme0's block devices only."""
    shared_subsystem(host)
    host.mount("/dev/nvme1n2 /srv/shared ext4 rw 0 0")
    nvme = FakeNvme(host)
    with pytest.raises(GuardRefused, match="in use .*/dev/nvme1n2 on /srv/shared"):
        destructive.format(nvme, "/dev/nvme0n2", "SNS", ses=1)
    with pytest.raises(GuardRefused, match="in use .*/dev/nvme1n2 on /srv/shared"):
        destructive.format(nvme, "/dev/nvme0n1", "SNS", ses=1, nsid=2)
    assert not nvme.ran
    assert judge("/dev/nvme0n2", host.view).controllers == ("nvme0", "nvme1")


def test_the_broadcast_nsid_judges_every_namespace_of_the_controller(host):
    """Before: nsid=0xffffffff on the nsid-1 device formatted namespaces 1, 2 and the shared 4 while
    the guard judged nsid 1 only; here nvme1n4 (nsid 4 through the other controller) is mounted."""
    shared_subsystem(host)
    t = judge("/dev/nvme0n1", host.view, nsid=BROADCAST)
    assert t.nsids == (1, 2, 4) and t.controllers == ("nvme0", "nvme1")
    host.mount("/dev/nvme1n4 /srv/four xfs rw 0 0")
    nvme = FakeNvme(host)
    with pytest.raises(GuardRefused, match="in use .*/dev/nvme1n4 on /srv/four"):
        destructive.format(nvme, "/dev/nvme0n1", "SNS", ses=1, nsid=BROADCAST)
    assert not nvme.ran


@pytest.mark.parametrize("multipath", [True, False], ids=["multipath-on", "multipath-off"])
def test_sanitize_judges_every_namespace_of_the_subsystem_and_takes_no_force(host, multipath):
    """The QEMU tier's hole 3: a Sanitize alters all user data in the NVM subsystem (NVMe 1.4 section
    8.15), but the guard judged the device's own namespace only (nsid 1 through nvme0); nsid 3
    (nvme1's alone) mounted did not refuse it. And --force, which no nvme-cli has for sanitize (2.3
    answers "unrecognized option"), was added from 2.3.0 on."""
    qemu_guest(host, multipath)
    own = "/dev/nvme1n1" if multipath else "/dev/nvme0n1"            # nsid 1, private to nvme0
    nvme = FakeNvme(host)
    destructive.sanitize(nvme, own, "QEMUSUBSYS01", action=2)
    ev = _guard_event(nvme)
    assert ev.ok and ev.result["nsids"] == [1, 2, 3, 4] and ev.result["controllers"] == ["nvme0", "nvme1"]
    assert "--force" not in nvme.ran[-1] and "--sanact=2" in nvme.ran[-1]
    t = judge("/dev/nvme2n1", host.view)
    assert t.nsids == (7,)                                              # the other drive: not this subsystem
    host.mount("/dev/nvme1n2 /srv/three ext4 rw 0 0")            # nsid 3, nvme1's alone, either way
    with pytest.raises(GuardRefused, match="in use .*/srv/three"):
        destructive.sanitize(nvme, own, "QEMUSUBSYS01", action=2)
    assert len(nvme.ran) == 1


def test_fios_removal_watch_is_on_the_controllers_the_guard_judged(host):
    """The QEMU tier's hole 2: fio's removal watcher took its controller from the file's NAME
    (/dev/nvme9n3 -> nvme2n1 watched the absent nvme9: a false "drive removed" and a 15 s wait; a link
    /dev/nvme1n1 -> nvme0n1 watched nvme1; a link outside /dev watched nothing). It watches the
    controllers the guard judged: the permit's for a write, the guard's resolution for a read."""
    from powerrig.dut.fio import Fio, FioJob, FioPlan

    qemu_guest(host, multipath=False)
    dev = host.root / "dev"
    (dev / "nvme9n3").symlink_to("nvme2n1")
    (dev / "nvme1n1").symlink_to("nvme0n1")
    (host.root / "x").mkdir()
    (host.root / "x" / "disk").symlink_to(dev / "nvme1n4")          # maps to /dev/nvme1n4: nsid 4, shared
    nvme = FakeNvme(host)
    fio = Fio(["fio"], nvme.timeline, nvme=nvme, remote=object())    # a drive host (never reached here)

    def plan(f, rw="read"):
        return FioPlan([FioJob("j", rw=rw, bs="64k", size="256k", filename=f)])

    for f, want in (("/dev/nvme9n3", ("nvme2",)), ("/dev/nvme1n1", ("nvme0",)),
                    (str(host.root / "x" / "disk"), ("nvme0", "nvme1"))):
        watch = fio._presence(plan(f), None)
        assert watch is not None and watch.controller == ", ".join(want), f
        p = destructive.fio_write(fio, plan(f, "write"), "QEMUOTHER002" if "nvme2" in want else "QEMUSUBSYS01")
        assert p.controllers == want
        assert fio._presence(plan(f, "write"), p).controller == ", ".join(want)
    assert fio._presence(plan(str(host.root / "plain.img")), None) is None     # a file: no drive to watch


@pytest.mark.skipif(not shutil.which("unshare") or os.geteuid() != 0, reason="needs unshare -m (root)")
@pytest.mark.parametrize("multipath", [True, False], ids=["multipath-on", "multipath-off"])
def test_the_mirror_of_the_qemu_subsystem_reads_as_the_guard_reads_the_tree(host, multipath):
    """sysfs_mirror.SCRIPT run against the QEMU guest's layout (the FakeHost tree bound over /sys and
    /dev in a mount namespace of its own, device nodes made for its numbers): the guard's reading of
    the copy is its reading of the tree, for every device and nsid form (a dir reached twice, as a
    class link and as a controller's child, is read once: "1\n1" is no nsid)."""
    from powerrig.dut import sysfs, sysfs_mirror

    qemu_guest(host, multipath)
    for name, num in host.devno.items():
        kind = "block" if (host.sys / "dev" / "block" / num).exists() else "char"
        host.node(host.root / "dev" / name, name, kind)

    class Namespace:
        def run(self, argv, timeout=None):
            argv = list(argv)
            bind = 'mount --bind "$0/sys" /sys && mount --bind "$0/dev" /dev && exec sh "$@"'
            return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", bind, str(host.root),
                                   *argv[1:]], capture_output=True, check=True, timeout=60).stdout

    fields = ("path", "devno", "namespace", "nsid", "nsids", "controllers", "subsystem", "blocks")
    devs = sorted(f"/dev/{n}" for n in host.devno)
    assert len(devs) >= 9
    for dev in devs:
        for nsid in (None, BROADCAST):
            got = sysfs_mirror.probe(Namespace(), dev, nsid)
            want = sysfs.probe(dev, host.view, nsid)
            assert got.get("refused") == want.get("refused") and got["drive"] == want["drive"], (dev, nsid)
            if "target" in want:
                assert {k: got["target"][k] for k in fields} == {k: want["target"][k] for k in fields}, (dev, nsid)
    got = sysfs_mirror.probe(Namespace(), devs[1], None, "subsystem")["target"]
    assert list(got["nsids"]) == ([7] if devs[1] == "/dev/ng2n1" else [1, 2, 3, 4])


@pytest.mark.skipif(not shutil.which("nvme"), reason="no nvme-cli here")
def test_the_real_nvme_clis_sanitize_has_no_force_option():
    """What the door builds, against this host's nvme-cli: its sanitize --help lists no --force (none
    has, up to nvme-cli's master in 2026; format has one since 2.0)."""
    r = subprocess.run(["nvme", "sanitize", "--help"], capture_output=True, text=True, timeout=30)
    text = r.stdout + r.stderr
    assert "--sanact" in text and "--force" not in text


@pytest.mark.parametrize("newer", [False, True], ids=["linux-6.1", "multipath-folder"])
def test_native_multipath_heads_resolve_to_both_controllers(host, newer, tmp_path):
    """Before: kernel 6.1 has no multipath/ folder under the head, so every namespace of a
    two-controller subsystem was refused, the right serial included ("sysfs lists no controller ...
    is the drive still there?"). The head's controllers come from the subsystem's controller links
    and the hidden path devices under each controller; a shared head mounted is in use."""
    c0, c1 = host.controller("nvme0", "SNMP"), host.controller("nvme1", "SNMP")
    host.multipath(0, 1, 1, [c0], newer=newer)              # private to nvme0
    host.multipath(0, 2, 2, [c0, c1], newer=newer)          # shared
    assert not (host.sys / "class" / "block" / "nvme0n2" / "multipath").exists() or newer
    nvme = FakeNvme(host)
    t = DriveGuard(nvme, host.view).check("/dev/nvme0n2", "SNMP", "format")
    assert (t.namespace, t.controllers, t.nsid) == ("nvme0n2", ("nvme0", "nvme1"), 2)
    assert t.subsystem == "nvme-subsys0"
    assert {"nvme0n1", "nvme0n2", "nvme0c0n2", "nvme0c1n2"} <= t.blocks
    assert judge("/dev/nvme0n1", host.view).controllers == ("nvme0",)
    assert judge("/dev/nvme0c1n2", host.view).namespace == "nvme0n2"
    assert judge("/dev/nvme0", host.view).nsids == (1, 2)
    with pytest.raises(GuardRefused, match="its serial is 'SNMP', the caller names 'X'"):
        DriveGuard(nvme, host.view).check("/dev/nvme0n2", "X", "format")
    node = host.node(tmp_path / "n" / "data", "nvme0n2")           # the head's own dev_t
    assert judge(str(node), host.view).controllers == ("nvme0", "nvme1")
    host.mount("/dev/nvme0n2 /data ext4 rw 0 0")
    with pytest.raises(GuardRefused, match="in use .*/data"):
        destructive.format(nvme, "/dev/nvme0n1", "SNMP", ses=1)


def qemu_guest(host: FakeHost, multipath: bool) -> None:
    """The QEMU tier's subsystem guest as its kernel 6.1 laid it out (dumped from the running guest,
    names and NSIDs as they were): subsystem nvme-subsys1 with controllers nvme0 and nvme1 (one
    serial), nsid 1 and 2 private to nvme0, 3 private to nvme1, 4 shared; the other drive nvme2
    (nsid 7) in its own nvme-subsys2. Kernel names are not NSIDs."""
    c0, c1 = host.controller("nvme0", "QEMUSUBSYS01", subsys=1), host.controller("nvme1", "QEMUSUBSYS01", subsys=1)
    other = host.controller("nvme2", "QEMUOTHER002", subsys=2)
    host.block(other, "nvme2n1", 7)
    host.generic(other, "ng2n1")
    if multipath:                # heads under the subsystem, hidden paths nvme1c{C}n{K}, no multipath/ folder
        for k, nsid, ctrls in ((1, 1, [c0]), (2, 3, [c1]), (3, 4, [c0, c1]), (4, 2, [c0])):
            host.multipath(1, k, nsid, ctrls)
            host.generic(host.subsystem(1), f"ng1n{k}")
    else:                        # a block device per controller and namespace, the shared one twice
        for c, name, nsid in ((c0, "nvme0n1", 1), (c0, "nvme0n3", 2), (c0, "nvme0n4", 4),
                              (c1, "nvme1n2", 3), (c1, "nvme1n4", 4)):
            host.block(c, name, nsid)
            host.generic(c, "ng" + name[4:])


@pytest.mark.parametrize("multipath", [True, False], ids=["multipath-on", "multipath-off"])
def test_the_qemu_guests_kernel_6_1_layout(host, multipath):
    qemu_guest(host, multipath)
    own = "/dev/nvme1n1" if multipath else "/dev/nvme0n1"            # nsid 1, private to nvme0
    shared = "/dev/nvme1n3" if multipath else "/dev/nvme1n4"         # nsid 4, through nvme1's device when off
    t = judge(own, host.view)
    assert (t.nsid, t.nsids, t.controllers, t.subsystem) == (1, (1,), ("nvme0",), "nvme-subsys1")
    t = judge(own, host.view, nsid=BROADCAST)
    assert t.nsids == (1, 2, 4) and t.controllers == ("nvme0", "nvme1")
    with pytest.raises(GuardRefused, match="namespace 3 is not a namespace of nvme0"):
        judge(own, host.view, nsid=3)
    t = judge(shared, host.view)
    assert (t.nsid, t.controllers) == (4, ("nvme0", "nvme1"))
    assert judge("/dev/ng1n3" if multipath else "/dev/ng0n4", host.view).nsid == 4
    t = judge("/dev/nvme2n1", host.view)
    assert (t.controllers, t.subsystem, t.nsids) == (("nvme2",), "nvme-subsys2", (7,))
    assert "nvme2n1" not in judge(own, host.view).blocks
    host.mount(f"{shared} /srv/shared ext4 rw 0 0")
    nvme = FakeNvme(host)
    with pytest.raises(GuardRefused, match="in use .*/srv/shared"):
        destructive.format(nvme, own, "QEMUSUBSYS01", ses=1, nsid=BROADCAST)
    destructive.format(nvme, "/dev/nvme2n1", "QEMUOTHER002", ses=1)     # the other drive is not in use
    assert nvme.ran[-1][:3] == ["nvme", "format", "/dev/nvme2n1"]


def test_the_probe_resolves_where_it_runs_in_a_bare_interpreter(host, tmp_path):
    """A remote drive host runs sysfs.py alone: the link is resolved THERE (here: this machine, with
    the tree as its host view) and the canonical path, dev_t and nsids come back."""
    from powerrig.dut import sysfs
    shared_subsystem(host)
    lnk = tmp_path / "l" / "nvme0n1"
    lnk.parent.mkdir()
    lnk.symlink_to("/dev/nvme1n3")
    args = {"dev": str(lnk), "nsid": None, "host": {k: getattr(host.view, k) for k in
                                                     ("sys_root", "mounts", "swaps", "dev_root")}}
    r = subprocess.run([sys.executable, "-I", "-S", sysfs.__file__, json.dumps(args)], capture_output=True,
                       text=True, timeout=60)
    got = json.loads(r.stdout)["target"]
    assert (got["namespace"], got["controllers"]) == ("nvme1n3", ["nvme1"])
    assert (got["path"], got["nsids"]) == ("/dev/nvme1n3", [3])


# -- the faces: NvmeCli.format (the pytest plugin's dut.nvme), a plan on a running rig ------------------------
@pytest.fixture
def virtual_pair(tmp_path):
    a, b = VirtualSSD("d5-p5336"), VirtualSSD("client-apst")
    with SsdServer({"/dev/nvme0": a, "/dev/nvme1": b}, str(tmp_path / "ssd.sock")) as server:
        yield server, a, b


def test_the_pytest_face_format_of_a_link_judges_its_target(virtual_pair, tmp_path):
    """dut.nvme.format(link, serial) (pytest_plugin's Dut.nvme is this NvmeCli): before, a link
    named nvme0n1 to the other drive passed with nvme0's serial."""
    server, a, b = virtual_pair
    from powerrig.sim.rig import tool_launcher        # a prefix is one program (commands.check_program)
    nvme = NvmeCli(tool_launcher("nvme", server.socket_path, tmp_path), Timeline(), host=HostView(**server.host))
    lnk = tmp_path / "x" / "nvme0n1"
    lnk.parent.mkdir()
    lnk.symlink_to("/dev/nvme1n1")
    with pytest.raises(GuardRefused, match=f"its serial is '{b.sn}', the caller names '{a.sn}'"):
        nvme.format(str(lnk), a.sn, ses=1)
    assert not a.erases and not b.erases
    assert judge(str(lnk), nvme.host).controllers == ("nvme1",)


PLAN = """name = "p"
power_states = [0]
[rig]
port = "rig:{rig}"
[drive]
{drive}
[[workload]]
name = "r"
rw = "read"
"""


def test_a_plans_namespace_on_a_running_rig_is_honoured_or_refused(tmp_path, monkeypatch):
    """Before: `rig:ID` ignored drive.namespace and used the rig's first (a format of nsid 1 for a
    plan naming nsid 3)."""
    from powerrig.sweep.plan import PlanError, parse
    from powerrig.sweep.plan_rig import bring_up

    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path / "rigs"))
    r = run_cli("sim", "start", "--json", "--profile", "micron-fdp")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    try:
        rig = bring_up(parse(PLAN.format(rig=st["id"], drive='namespace = "/dev/nvme0n3"')))
        assert rig.namespaces[0] == "/dev/nvme0n3" and set(rig.namespaces) == set(st["namespaces"])
        for drive, key in (('namespace = "/dev/nvme0n9"', "drive.namespace"),
                           ('controller = "/dev/nvme3"', "drive.controller")):
            with pytest.raises(PlanError, match=f"{key} .* is not .*this rig's: the rig .* has controller "
                                                "/dev/nvme0 and namespaces /dev/nvme0n1, ") as e:
                bring_up(parse(PLAN.format(rig=st["id"], drive=drive)))
            assert "\n" not in str(e.value)
        rig = bring_up(parse(PLAN.format(rig=st["id"], drive="")))
        assert (rig.controller, rig.namespaces) == (st["controller"], st["namespaces"])
    finally:
        run_cli("sim", "stop", "--all")


# -- the agent's by-hand door ------------------------------------------------------------------------------
class FakeRelay:
    """An agent relay on a unix socket whose 'guest' is this machine, for the read-only commands the
    door may let through (cat, the sysfs mirror script); anything else is recorded and refused."""

    def __init__(self, path: str):
        self.path, self.scripts = path, []
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                req = json.loads(self.rfile.readline())
                outer.scripts.append(req.get("script"))
                words = shlex.split(req.get("script") or "")
                if req.get("op") == "run" and words[:2] in (["cat", "/proc/version"], ["sh", "-c"]):
                    p = subprocess.run(words, capture_output=True, timeout=60)
                    rc, out, err = p.returncode, p.stdout, p.stderr
                else:
                    rc, out, err = 126, b"", b"refused by the test relay\n"
                self.wfile.write(json.dumps({"ok": True, "rc": rc, "stdout": base64.b64encode(out).decode(),
                                             "stderr": base64.b64encode(err).decode(), "t_guest_start": 0.0,
                                             "t_guest_end": 0.0}).encode() + b"\n")

        self.server = socketserver.UnixStreamServer(path, Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def relay(tmp_path):
    r = FakeRelay(str(tmp_path / "relay.sock"))
    yield r
    r.close()


def _door(args, capsys, monkeypatch):
    from powerrig.dut.door import main
    monkeypatch.setattr(sys, "stdin", None)          # nothing to pass on to the command
    rc = main(args)
    err = capsys.readouterr().err.strip()
    return rc, err


@pytest.mark.parametrize("cmd", [["nvme", "format", "/dev/nvme0n1", "--ses=1", "--force"],
                                 ["nvme", "sanitize", "/dev/nvme0", "--sanact=2"],
                                 ["nvme", "set-feature", "/dev/nvme0", "--feature-id=2", "--value=1", "-s"],
                                 ["nvme", "vendor-thing", "/dev/nvme0"],
                                 ["sh", "-c", "nvme format /dev/nvme0n1"]])
def test_the_by_hand_door_refuses_destructive_commands_without_a_serial(relay, capsys, monkeypatch, cmd):
    """Before: `python -m powerrig.dut.agent SOCK -- nvme format ...` ran whatever it was given."""
    rc, err = _door([relay.path, "--", *cmd], capsys, monkeypatch)
    assert rc == 2 and "\n" not in err and ("serial" in err or "by hand" in err), err
    assert "Traceback" not in err and not relay.scripts


def test_the_agents_command_line_is_the_door(relay, tmp_path):
    """`python -m powerrig.dut.agent SOCK -- nvme format ...` itself, as a user types it."""
    r = subprocess.run([sys.executable, "-m", "powerrig.dut.agent", relay.path, "--", "nvme", "format",
                        "/dev/nvme0n1", "--ses=1"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "name the drive's serial" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not relay.scripts


def test_the_by_hand_door_runs_reads_and_judges_a_write_with_the_guard(relay, capsys, monkeypatch, tmp_path):
    rc, err = _door([relay.path, "--", "cat", "/proc/version"], capsys, monkeypatch)
    assert rc == 0, err
    loop = _losetup(tmp_path / "img")
    target = loop or "/dev/null"
    try:
        rc, err = _door([relay.path, "--", "fio", "--name=w", "--rw=write", f"--filename={target}"], capsys,
                        monkeypatch)
        if loop:        # a real block device on the 'guest': a write needs the serial, then the guard says no
            assert rc == 2 and "name the drive's serial" in err and "\n" not in err, err
            rc, err = _door([relay.path, "--serial", "SN", "--", "nvme", "format", target, "--ses=1"], capsys,
                            monkeypatch)
            assert rc == 2 and f"{loop} (7:" in err and "not an NVMe namespace" in err and "\n" not in err, err
        rc, err = _door([relay.path, "--", "fio", "--name=w", "--rw=write", "--exec_prerun=touch x",
                         f"--filename={target}"], capsys, monkeypatch)
        assert rc == 2 and "exec_prerun" in err and "\n" not in err, err
    finally:
        if loop:
            subprocess.run(["losetup", "-d", loop], capture_output=True)
    assert not any(s and s.startswith(("nvme", "fio")) for s in relay.scripts)


# -- what fio opens is what the guard judged (a link re-pointed between the check and fio's open) ------------
def _loop_drive(host: FakeHost, loop: str, serial: str = "SNL"):
    """A FakeHost whose namespace nvme0n1 carries the real loop device's major:minor, read through a view
    with this machine's own /dev: a link to the loop device is judged as that NVMe namespace."""
    ctrl = host.controller("nvme0", serial)
    ns = ctrl / "nvme0n1"
    (ns / "holders").mkdir(parents=True)
    (ns / "nsid").write_text("1\n")
    from test_guard import link as sys_link
    sys_link(host.sys / "class" / "block" / "nvme0n1", ns)
    st = os.stat(loop).st_rdev
    host.number(ns, "block", os.major(st), os.minor(st))
    view = HostView(host.view.sys_root, host.view.mounts, host.view.swaps, "/dev")
    nvme = FakeNvme(host)
    nvme.host = view
    return nvme


def _repoint_after_permit(monkeypatch, lnk: Path, new_target: Path):
    """Re-point ``lnk`` the moment the guarded door has issued fio's permit, before fio opens anything."""
    real = destructive.fio_write

    def fio_write(*a, **kw):
        p = real(*a, **kw)
        lnk.unlink()
        lnk.symlink_to(new_target)
        return p
    monkeypatch.setattr(destructive, "fio_write", fio_write)


def _write_plan(target: str):
    from powerrig.dut.fio import FioJob, FioPlan
    return FioPlan([FioJob("w", rw="write", bs=4096, size=65536, filename=target, ioengine="psync")])


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_fio_writes_the_device_the_guard_judged_not_a_link_re_pointed_after(tmp_path, monkeypatch):
    """Before: fio opened the link as given, so x/nvme0n1 re-pointed between the guard's check (the
    drive, serial SNL) and fio's open wrote the new target (here a file standing for another disk)."""
    from powerrig.dut.fio import Fio

    img = tmp_path / "img"
    loop = _losetup(img)
    if loop is None:
        pytest.skip("losetup cannot attach a loop device in this sandbox")
    try:
        nvme = _loop_drive(FakeHost(tmp_path / "host"), loop)
        lnk = tmp_path / "x" / "nvme0n1"
        lnk.parent.mkdir()
        lnk.symlink_to(loop)
        victim = tmp_path / "victim"
        victim.write_bytes(b"\1" * 65536)
        _repoint_after_permit(monkeypatch, lnk, victim)
        fio = Fio(["fio"], nvme.timeline, nvme=nvme)
        res = fio.run(_write_plan(str(lnk)), tmp_path / "out", serial="SNL")
        assert res.jobs[0].name == "w"
        assert victim.read_bytes() == b"\1" * 65536, "fio wrote the link's new target"
        subprocess.run(["sync"], check=False)
        with open(loop, "rb") as f:
            assert f.read(65536) != b"\0" * 65536, "fio did not write the device the guard judged"
        job = (tmp_path / "out" / "fio.fio").read_text()
        assert f"filename={loop}" in job and str(lnk) not in job
        ev = _guard_event(nvme)
        assert ev.meta["device"] == str(lnk) and ev.result["path"] == loop
    finally:
        subprocess.run(["losetup", "-d", loop], capture_output=True)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio not installed")
def test_a_link_to_a_regular_file_is_written_where_it_pointed_when_judged(tmp_path, monkeypatch):
    """A link to a regular file passes as a file (fio lays it out); re-pointed after the check (here to
    another file, standing for a device the guard never judged), fio still writes the file it was."""
    from powerrig.dut.fio import Fio

    judged, other = tmp_path / "judged.img", tmp_path / "other.img"
    judged.write_bytes(b"\0" * 65536)
    other.write_bytes(b"\1" * 65536)
    lnk = tmp_path / "x" / "data.img"
    lnk.parent.mkdir()
    lnk.symlink_to(judged)
    _repoint_after_permit(monkeypatch, lnk, other)
    nvme = FakeNvme(FakeHost(tmp_path / "host"))
    nvme.host = HostView(nvme.host.sys_root, nvme.host.mounts, nvme.host.swaps, "/dev")
    Fio(["fio"], nvme.timeline, nvme=nvme).run(_write_plan(str(lnk)), tmp_path / "out")
    assert other.read_bytes() == b"\1" * 65536
    assert judged.read_bytes() != b"\0" * 65536


def test_the_job_file_names_the_canonical_path_and_the_plan_keeps_the_users(host, tmp_path):
    """The permit carries, per target, the path the guard judged; the job file writes that one for a
    drive, the plan (and so reports, phases, block traces) keeps the name the user gave."""
    from powerrig.dut import commands
    two_drives(host)
    lnk = tmp_path / "x" / "nvme0n1"
    lnk.parent.mkdir()
    lnk.symlink_to("/dev/nvme1n1")
    nvme = FakeNvme(host)
    fio = type("F", (), {"nvme": nvme, "remote": None})()
    plan = _write_plan(str(lnk))
    p = destructive.fio_write(fio, plan, "SNB")
    assert p.opened(str(lnk)) == "/dev/nvme1n1"
    text = commands.fio_job_file(plan, None, p)
    assert "filename=/dev/nvme1n1" in text and str(lnk) not in text
    assert plan.job_filename(0) == str(lnk)


# -- namespace management judges its nsid ------------------------------------------------------------------
def test_delete_and_detach_judge_their_nsid(host):
    """Before: delete-ns and detach-ns checked the controller as a whole (every namespace), so a nsid
    that is no namespace there was deleted unjudged and the guard's event named every namespace."""
    shared_subsystem(host)
    nvme = FakeNvme(host)
    with pytest.raises(GuardRefused, match=r"namespace 3 is not a namespace of nvme0 .*its namespaces: 1 \(nvme0n1\)") as e:
        destructive.delete_namespace(nvme, "/dev/nvme0", "SNS", 3)
    assert "\n" not in str(e.value) and not nvme.ran
    with pytest.raises(GuardRefused, match="namespace 7 is not a namespace of nvme0") as e:
        destructive.attach_namespace(nvme, "/dev/nvme0", "SNS", 7, [0], detach=True)
    assert "\n" not in str(e.value) and not nvme.ran
    destructive.delete_namespace(nvme, "/dev/nvme0", "SNS", 2)
    ev = _guard_event(nvme)
    assert ev.result["nsids"] == [2] and ev.result["controllers"] == ["nvme0", "nvme1"]
    assert nvme.ran[-1][:3] == ["nvme", "delete-ns", "/dev/nvme0"] and "--namespace-id=2" in nvme.ran[-1]
    destructive.attach_namespace(nvme, "/dev/nvme0", "SNS", 4, [1], detach=True)
    assert _guard_event(nvme).result["nsids"] == [4]
    destructive.attach_namespace(nvme, "/dev/nvme0", "SNS", 9, [0])      # attach: a namespace no controller has yet
    assert nvme.ran[-1][:2] == ["nvme", "attach-ns"]


def test_a_namespace_mounted_through_any_controller_refuses_delete_and_detach(host):
    shared_subsystem(host)
    host.mount("/dev/nvme1n2 /srv/shared ext4 rw 0 0")
    nvme = FakeNvme(host)
    for call in (lambda: destructive.delete_namespace(nvme, "/dev/nvme0", "SNS", 2),
                 lambda: destructive.attach_namespace(nvme, "/dev/nvme0", "SNS", 2, [0, 1], detach=True)):
        with pytest.raises(GuardRefused, match="in use .*/dev/nvme1n2 on /srv/shared") as e:
            call()
        assert "\n" not in str(e.value)
    assert not nvme.ran
