"""One reading of a fio file name (issue 36, items 2 and 8): fio 3.33 cuts every job-file value at
the first '#' or ';' and drops the blanks around it (parse.c strip_blank_end, run on each line and
again on filename= in options.c str_filename_cb, the command line's --filename too), and reads
'\\:' in a file name as a ':' of the name. The guard judged the literal string: ``a.img#x`` was "not
an existing /dev path, so a regular file" while fio wrote ``a.img`` (a link to a drive). So the
door refuses what fio reads otherwise, and invisible Unicode (format and bidi controls) that makes
the name shown differ from the name used. The property test at the end runs real fio on many path
forms and checks that every accepted write target is the file fio really wrote."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from powerrig.core.timeline import FIO, Timeline
from powerrig.dut import commands
from powerrig.dut.commands import UnsafeArgument, check_value, fio_job_file, fio_value, fio_verify_argv
from powerrig.dut.fio import Fio, FioJob, FioPlan
from powerrig.sweep.plan import PlanError, parse

needs_fio = pytest.mark.skipif(shutil.which("fio") is None and os.environ.get("CI") != "true",
                               reason="fio not installed (scripts/setup.sh installs it)")

# (form, what fio 3.33 opens instead): the forms fio reads otherwise than they are written
FIO_READS_OTHERWISE = [("a.img#x", "a.img"), ("a.img;x", "a.img"), (" a.img", "a.img"), ("a.img ", "a.img"),
                       ("a.img # note", "a.img"), ("a.img;", "a.img"), ("a\\:b", "a:b")]


def _raw_fio(tmp: Path, filename: str) -> set[str]:
    """Real fio on a hand-written job file (not through the door): the files it created in ``tmp``."""
    (tmp / "j.fio").write_text(f"[j]\nrw=write\nbs=4k\nsize=8k\nioengine=psync\nfilename={filename}\n")
    before = set(os.listdir(tmp))
    subprocess.run(["fio", "--output-format=terse", "j.fio"], cwd=tmp, capture_output=True, timeout=60)
    return set(os.listdir(tmp)) - before


@needs_fio
@pytest.mark.parametrize("form,opened", FIO_READS_OTHERWISE)
def test_real_fio_opens_another_name_and_the_door_refuses_the_form(tmp_path, form, opened):
    """Real fio writes ``opened`` for ``form``; the door refuses ``form`` in one line naming the key."""
    assert _raw_fio(tmp_path, form) == {opened}                    # fio's own reading, as it is today
    with pytest.raises(UnsafeArgument) as e:
        fio_value("filename", form)
    msg = str(e.value)
    assert "\n" not in msg and "filename=" in msg and ("remove" in msg or "rename" in msg), msg


@needs_fio
@pytest.mark.parametrize("form", ["victim#x", "victim;x", " victim", "victim ", "victim\t"])
def test_a_write_through_a_comment_form_is_refused_before_fio_starts(tmp_path, monkeypatch, form):
    """The reproduction: ``victim`` is a link to another file (to a drive, on a rig); the guard judged
    ``victim#x`` (nothing there: a regular file) and fio wrote through ``victim``. Now: refused, the
    target untouched, fio never started."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "target").write_bytes(b"keep" * 1024)
    (tmp_path / "victim").symlink_to("target")
    tl = Timeline()
    plan = FioPlan([FioJob("w", rw="write", bs="4k", size="64k", ioengine="psync", filename=form)])
    with pytest.raises(UnsafeArgument) as e:
        Fio(["fio"], tl).run(plan, tmp_path / "run")
    assert "\n" not in str(e.value)
    assert (tmp_path / "target").read_bytes() == b"keep" * 1024
    assert not tl.events(FIO)


@pytest.mark.parametrize("key,value", [("bs", "4k#x"), ("bs", "4k;x"), ("size", " 1m"), ("size", "1m "),
                                       ("verify", "crc32c#"), ("rw", "read ;x"), ("runtime", "1;"),
                                       ("iodepth", "4 #"), ("offset", "0#1m"), ("ioengine", "psync;x"),
                                       ("verify_pattern", "0xff#"), ("cpus_allowed", "0;1"),
                                       ("percentile_list", "50 ")])
def test_every_fio_value_kind_is_refused_with_a_comment_or_blank(key, value):
    """fio cuts every value of a job file alike (the whole line passes strip_blank_end), not only
    filename=: one reading for each key, in the job and in [global]."""
    with pytest.raises(UnsafeArgument, match=rf"fio option {key}=.*: (remove|rename)"):
        fio_job_file(FioPlan([FioJob("r", rw="read", filename="x.img", extra={key: value})]), None)
    with pytest.raises(UnsafeArgument, match=rf"fio option {key}="):
        fio_job_file(FioPlan([FioJob("r", rw="read", filename="x.img")], global_options={key: value}), None)


def test_the_log_folder_and_the_verify_device_are_read_alike(tmp_path):
    """fio's own logs (write_bw_log= in the run's folder) and the verify pass's --filename= (fio strips
    that on the command line too) hold no '#', ';' or edge blank either."""
    plan = FioPlan([FioJob("r", rw="read", filename="x.img")])
    with pytest.raises(UnsafeArgument, match="write_bw_log="):
        fio_job_file(plan, str(tmp_path / "out#1" / "logs"))
    for dev in ("/dev/nvme0n1#x", "/dev/nvme0n1 ", "/dev/nvme0n1;"):
        with pytest.raises(UnsafeArgument, match="fio verify device .*fio cuts|fio drops"):
            fio_verify_argv(["fio"], "v", dev, 4096, 1, 8192)


@needs_fio
def test_real_fio_cuts_the_command_lines_filename_too(tmp_path):
    """Why the verify pass's device is checked as a fio value: --filename=a.img#x opens a.img."""
    subprocess.run(["fio", "--name=j", "--rw=write", "--bs=4k", "--size=8k", "--ioengine=psync",
                    "--filename=a.img#x", "--output-format=terse"], cwd=tmp_path, capture_output=True, timeout=60)
    assert os.listdir(tmp_path) == ["a.img"]


PAD = " " * (8191 - len("size=64k"))         # fio reads a job file line in pieces of 8191 bytes


@needs_fio
def test_a_value_longer_than_fios_line_buffer_is_refused(tmp_path, monkeypatch):
    """fio 3.33 reads a job file with fgets(OPT_LEN_MAX = 8192): the rest of a longer line is read as a
    line of its own, an option. Real fio: ``size=64k<blanks>rw=write`` in a read job wrote the file.
    So a value is at most 4096 bytes (no path is longer: PATH_MAX), and a job name at most 200
    characters (fio keeps 255 of a section name, then drops its last)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.img").write_bytes(b"\0" * 65536)
    (tmp_path / "j.fio").write_text(f"[r]\nrw=read\nbs=4k\nioengine=psync\nfilename=x.img\nsize=64k{PAD}rw=write\n")
    subprocess.run(["fio", "--output-format=terse", "j.fio"], capture_output=True, timeout=60)
    assert (tmp_path / "x.img").read_bytes() != b"\0" * 65536           # fio's reading: a write
    (tmp_path / "x.img").write_bytes(b"\0" * 65536)
    read = dict(rw="read", bs="4k", ioengine="psync", size="64k")
    for job in (FioJob("r", filename="x.img", extra={"verify_pattern": "0x" + "f" * 5000}, **read),
                FioJob("r", filename="x.img" + PAD + "rw=write", **read),
                FioJob("r" * 201, filename="x.img", **read)):
        tl = Timeline()
        with pytest.raises(UnsafeArgument) as e:
            Fio(["fio"], tl).run(FioPlan([job]), tmp_path / "run")
        assert "\n" not in str(e.value) and ("bytes" in str(e.value) or "characters" in str(e.value)), str(e.value)
        assert not tl.events(FIO)
    assert (tmp_path / "x.img").read_bytes() == b"\0" * 65536
    with pytest.raises(PlanError, match=r"drive.namespace \(line 8\): .*bytes"):
        parse(PLAN.replace('namespace = "/dev/nvme0n1"', f'namespace = "/dev/nvme0n1{PAD}rw=write"')
              .replace('rw = "write"', 'rw = "read"'))


PLAN = """name = "p"
power_states = [0]
idle_steps = false
[rig]
port = "/dev/ttyACM0"
[drive]
controller = "/dev/nvme0"
namespace = "/dev/nvme0n1"
serial = ""
[[workload]]
name = "w"
rw = "write"
runtime_s = 1.0
"""


@pytest.mark.parametrize("namespace", ["//dev/loop0#x", "/dev/nvme0n1;x", "/dev/nvme0n1 ", " /dev/nvme0n1",
                                       "x/link ", "/dev/nvme0n1\\"])
def test_the_plan_namespace_fio_reads_otherwise_is_refused_at_check(tmp_path, namespace):
    """``namespace = "//dev/loop0#x"`` passed --check and fio wrote /dev/loop0: now drive.namespace is
    refused in one line, by parse and by `powerrig sweep --check`."""
    text = PLAN.replace('namespace = "/dev/nvme0n1"', f"namespace = {json.dumps(namespace)}")
    with pytest.raises(PlanError, match=r"drive.namespace \(line 8\): .*fio") as e:
        parse(text)
    assert "\n" not in str(e.value)
    if namespace == "//dev/loop0#x":
        p = tmp_path / "p.toml"
        p.write_text(text)
        r = run_cli("sweep", "--check", str(p))
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stdout + r.stderr
        assert "drive.namespace (line 8)" in r.stderr and "Traceback" not in r.stderr


# -- invisible Unicode (issue 36 item 8) --------------------------------------------------------------------
INVISIBLE = ["\u200b", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\ufeff", "\u200e", "\u200f", "\u061c",
             "\u00ad", "\u2060", "\u00a0", "\u3000", "\u2007", "\u3164", "\u115f", "\u034f", "\ufe0f",
             "\U000e0041", "\U000e0001", "\ue000"]


@pytest.mark.parametrize("ch", INVISIBLE, ids=lambda c: f"U+{ord(c):04X}")
def test_invisible_and_bidi_characters_are_refused_in_every_value(ch):
    """A name with U+202E (right-to-left override) or U+200B (zero width space) shows as another
    name, or as the drive's: refused, the code point named so it can be found."""
    with pytest.raises(UnsafeArgument, match=rf"U\+{ord(ch):04X}.*remove it") as e:
        check_value("drive namespace", f"/dev/nvme0n1{ch}")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("key,line", [("controller", 'controller = "/dev/nvme0"'),
                                      ("namespace", 'namespace = "/dev/nvme0n1"')])
@pytest.mark.parametrize("ch", ["\u200b", "\u202e", "\u2066", "\ufeff"], ids=lambda c: f"U+{ord(c):04X}")
def test_invisible_characters_in_controller_namespace_and_prefix_fail_check(key, line, ch):
    old = line.split('"')[1]
    with pytest.raises(PlanError, match=rf"drive.{key} \(line \d+\): .*U\+{ord(ch):04X}"):
        parse(PLAN.replace(line, line.replace(old, old[:5] + ch + old[5:])))
    with pytest.raises(PlanError, match=rf"rig.fio \(line 6\): .*U\+{ord(ch):04X}"):
        parse(PLAN.replace('port = "/dev/ttyACM0"', f'port = "/dev/ttyACM0"\nfio = ["f{ch}io"]'))


@pytest.mark.parametrize("name", ["/dev/disk/by-id/nvme-Samsung_SSD_990_PRO_2TB_S7", "/tmp/é/ü.img",
                                  "/tmp/日本/ファイル", "/tmp/a b/c.img"])
def test_visible_text_still_passes(name):
    assert check_value("x", name) == name and fio_value("filename", name) == name


# -- the property: every accepted write target is the file real fio wrote ----------------------------------
PIECES = ["a", "b", "t.img", "lnk", "lnk2", "dir", "dir/", "//", "/./", "/../", "..", ".", "#x", ";x", " ", "\t",
          "\u200b", "\u202e", "\ufeff", "/", "\\:", ":", "-", "$x", "é"]


def _form(rng: random.Random, root: Path, loop: str | None) -> str:
    """A path form in ``root``: absolute or relative, built from links, dots, slashes, fio's comment
    and blank forms, invisible characters; mostly around the names that exist."""
    bases = ["t.img", "lnk", "lnk2", "dir/f.img", "dir/../t.img", "dir/./f.img", "dlnk/f.img", "new.img",
             "dir/new.img", "lnk/", "t.img/"]
    if loop:
        bases += ["dev", "dev2", "dir/../dev", "/" + loop, loop.replace("/dev/", "/dev/./"), "dev/"]
    s = base = rng.choice(bases)
    for _ in range(rng.randint(0, 2)):
        p = rng.choice(PIECES)
        k = rng.randint(0, len(s))
        s = s[:k] + p + s[k:] if rng.random() < 0.5 else (p + s if rng.random() < 0.5 else s + p)
    if base.startswith("/"):                       # the device's own absolute forms
        return s if s.startswith("/dev/") or s.startswith("//dev/") else "/dev/" + s.lstrip("/")
    pre = rng.choice(["", str(root) + "/", str(root) + "//", str(root) + "/./", str(root) + "/dir/../"])
    return (pre or str(root)) + s if s.startswith("/") else pre + s     # never outside root


def _snapshot(root: Path) -> dict:
    """Every regular file under root, by inode: (path, size, content hash)."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for f in fns:
            p = os.path.join(dp, f)
            if os.path.islink(p):
                continue
            st = os.stat(p)
            out[st.st_ino] = (p, st.st_size, hash(Path(p).read_bytes()))
    return out


@pytest.fixture(scope="module")
def loop_device(tmp_path_factory):
    """A loop device standing in for a drive, when this host lets us make one (root, loop support);
    detached afterwards. None otherwise (the property then runs on regular files only)."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        yield None
        return
    backing = tmp_path_factory.mktemp("loop") / "disk.img"
    backing.write_bytes(b"\0" * (1 << 20))
    p = subprocess.run(["losetup", "-f", "--show", str(backing)], capture_output=True, text=True)
    dev = p.stdout.strip()
    if p.returncode != 0 or not dev.startswith("/dev/loop"):
        yield None
        return
    try:
        yield dev, backing
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


@needs_fio
def test_property_every_accepted_write_target_is_the_file_real_fio_wrote(tmp_path, monkeypatch, loop_device):
    """Seeded forms (links to files, links to links, '//', '/./', '..', trailing '/', fio's '#' ';'
    and blank forms, U+200B/U+202E/U+FEFF; a link to a loop device when one can be made): each is
    refused in one line, or real fio writes exactly the files the door was given, resolved (realpath,
    inode), and nothing else; a form fio fails on writes nothing; nothing reaches the device without
    a serial."""
    from powerrig.core.errors import PowerrigError

    loop, backing = loop_device or (None, None)
    disk = backing.read_bytes() if backing else None
    top = tmp_path / "w"                       # watched: '..' climbs at most two folders out of root
    root = top / "x" / "y" / "t"
    run = tmp_path / "run"
    monkeypatch.chdir(tmp_path)
    rng = random.Random(36)
    accepted = refused = failed = on_device = 0
    for i in range(int(os.environ.get("POWERRIG_FIO_NAMES", "80"))):
        if top.exists():
            shutil.rmtree(top)
        (root / "dir").mkdir(parents=True)
        (root / "t.img").write_bytes(b"\0" * 65536)
        (root / "dir" / "f.img").write_bytes(b"\0" * 65536)
        (root / "lnk").symlink_to("t.img")                 # a link to a file
        (root / "lnk2").symlink_to("lnk")                  # a link to a link
        (root / "dlnk").symlink_to("dir")                  # a link to a folder
        if loop:
            (root / "dev").symlink_to(loop)                # a link to the device
            (root / "dev2").symlink_to("dev")              # and a link to that link
        os.chdir(root)                                     # relative forms are read from here, by both
        form = _form(rng, root, loop)
        before = _snapshot(top)
        plan = FioPlan([FioJob("w", rw="write", bs="4k", size="16k", ioengine="psync", filename=form)])
        try:
            targets = commands.fio_write_targets(plan)
            fio_job_file(plan, None, commands.Permit(commands.FIO_WRITE, frozenset(targets)))
        except UnsafeArgument as e:
            assert "\n" not in str(e), (form, str(e))
            refused += 1
            continue
        try:
            Fio(["fio"], Timeline()).run(plan, run / str(i))
        except PowerrigError as e:                         # the guard refused a device; fio refused a name
            assert "\n" not in str(e).strip(), (form, str(e))
            failed += 1
            on_device += any(loop and os.path.realpath(t) == loop for t in targets)
            assert _snapshot(top) == before, (form, "refused or failed, yet a file changed")
            continue
        finally:
            if disk is not None:
                assert backing.read_bytes() == disk, (form, "the device was written without a serial")
        accepted += 1
        judged = {os.stat(t).st_ino for t in targets if os.path.exists(t)}
        changed = {ino: v[0] for ino, v in _snapshot(top).items() if before.get(ino) != v}
        assert changed and set(changed) <= judged, (form, targets, changed)
    print(f"fio names: {accepted} accepted and written where judged, {refused} refused by the door, "
          f"{failed} refused by the guard or failed in fio ({on_device} on the device)")
    assert accepted >= 10 and refused >= 10, (accepted, refused, failed)
    assert on_device or not loop, "no form reached the device's guard: widen the generator"


# -- nvme-cli's own reading of a device name ----------------------------------------------------------------
@pytest.mark.skipif(shutil.which("nvme") is None and os.environ.get("CI") != "true", reason="nvme-cli not installed")
def test_nvme_cli_reads_mctp_names_as_a_management_endpoint_so_they_are_refused(tmp_path):
    """nvme-cli 2.x (nvme.c get_dev) opens a device argument that starts with ``mctp:`` as an NVMe-MI
    endpoint on the MCTP bus, not as a path: the guard would judge a file and nvme-cli reach another
    drive. Real nvme-cli: a regular file ``./x`` is "not a block or character device", a file named
    ``mctp:1,1`` is never opened. Refused; ``./mctp:1,1`` is a path and passes the door."""
    (tmp_path / "x").touch()
    (tmp_path / "mctp:1,1").touch()
    said = {d: subprocess.run(["nvme", "id-ctrl", d], cwd=tmp_path, capture_output=True, text=True).stderr
            for d in ("./x", "mctp:1,1", "./mctp:1,1")}
    assert "not a block or character device" in said["./x"] and "not a block or character device" in said["./mctp:1,1"]
    assert "not a block or character device" not in said["mctp:1,1"]
    with pytest.raises(UnsafeArgument, match=r"nvme-cli id-ctrl device 'mctp:1,1' .*NVMe-MI.*: give") as e:
        commands.nvme_argv(["nvme"], "id-ctrl", "mctp:1,1")
    assert "\n" not in str(e.value)
    assert commands.nvme_argv(["nvme"], "id-ctrl", "./mctp:1,1")[-1] == "./mctp:1,1"


@pytest.mark.parametrize("drive", ["/dev/nvme0#x", "/dev/nvme0;x", "/dev/nvme0 ", " /dev/nvme0", "/dev/nvme0\u200b"])
def test_the_pytest_and_labgrid_faces_refuse_a_drive_fio_would_read_otherwise(drive):
    """``--powerrig-dut`` and a labgrid PowerrigSlot's controller become nvme-cli's device and, with
    ``n1``, fio's filename: checked by check_device, which reads them as fio does (a usage error
    before any test runs, one line)."""
    from powerrig.pytest_plugin import RigSlot, _checked

    with pytest.raises(UnsafeArgument, match="remove|rename"):
        commands.check_device("PowerrigSlot.controller", drive)
    with pytest.raises(pytest.UsageError) as e:
        _checked(RigSlot("r", "/dev/ttyACM0", drive), "powerrig pytest options")
    assert "\n" not in str(e.value) and "--powerrig-dut" in str(e.value)
