"""Drive control on a drive host reached over SSH: a real sshd (OpenSSH) on a high port of this
machine, the real ssh client, and the virtual rig's impersonated nvme-cli and fio on the far side."""
from __future__ import annotations

import json
import mmap
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, missing, run_cli
from powerrig.dut import blocktrace, nvmetrace, runners
from powerrig.dut.fio import FioJob, FioPlan
from powerrig.dut.guard import GuardRefused, RemoteHostView
from powerrig.dut.commands import helper_argv
from powerrig.dut.remote import RemoteError, SshHost, drive_host
from powerrig.core.timeline import FIO, NVME, Timeline

SSHD = "/usr/sbin/sshd"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True,
                   capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """sshd -D on 127.0.0.1:<free port> with a generated host key and one authorized client key; the
    drive-host URL that reaches it (known_hosts pre-filled: strict host key checking stays on)."""
    if not (os.path.exists(SSHD) and shutil.which("ssh") and shutil.which("ssh-keygen")):
        missing("OpenSSH is not installed (apt-get install openssh-server openssh-client; scripts/setup.sh does)")
    d = tmp_path_factory.mktemp("sshd")
    os.chmod(d, 0o700)
    _keygen(d / "host_key")
    _keygen(d / "client_key")
    _keygen(d / "other_key")
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    port = _free_port()
    (d / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
        "Subsystem sftp internal-sftp\n"
        # sessions find this checkout's powerrig, as a lab's drive host has it installed; bin/ holds
        # tools a test puts on the drive host's PATH (empty unless a test fills it)
        f"SetEnv PYTHONPATH={REPO / 'host_app'} PATH={d}/bin:/usr/local/bin:/usr/bin:/bin\n")
    (d / "bin").mkdir()
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)      # privilege separation directory sshd needs as root
    log = open(d / "sshd.log", "w")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config"), "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    host_pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    user = os.environ.get("USER") or __import__("pwd").getpwuid(os.getuid()).pw_name
    url = (f"ssh://{user}@127.0.0.1:{port}?IdentityFile={d}/client_key&UserKnownHostsFile={d}/known_hosts"
           "&StrictHostKeyChecking=yes&IdentitiesOnly=yes")
    deadline = time.monotonic() + 60
    err = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            SshHost.parse(url).check()
            err = None
            break
        except RemoteError as e:
            err = e
            time.sleep(0.3)
    if proc.poll() is not None or err is not None:
        proc.kill()
        proc.wait()
        missing(f"sshd could not start here: {(d / 'sshd.log').read_text().strip()[-300:]} {err or ''}")
    yield {"url": url, "dir": d, "port": port, "user": user}
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def virtual(tmp_path_factory):
    """A virtual rig; its nvme/fio run on the 'drive host' through ssh, which does not pass this
    environment on: the rig's launchers name the Python path, as a lab's prefix names its tools."""
    root = tmp_path_factory.mktemp("rigs")
    os.environ["POWERRIG_SIM_DIR"] = str(root)
    r = run_cli("sim", "start", "--json", "--profile", "client-apst")
    assert r.returncode == 0, r.stderr
    state = json.loads(r.stdout)
    # the rig's launchers run its tool files by path (they find powerrig themselves): no environment to
    # pass, and a prefix is one program (no `env VAR=...`: powerrig.dut.commands.check_program)
    state["remote_nvme"] = state["nvme"]
    state["remote_fio"] = state["fio"]
    yield state
    run_cli("sim", "stop", "--all")
    os.environ.pop("POWERRIG_SIM_DIR", None)


def _rig(sshd, virtual, **over) -> dict:
    return {"nvme": virtual["remote_nvme"], "fio": virtual["remote_fio"], "drive_host": sshd["url"], **over}


def read_plan(ns: str) -> FioPlan:
    return FioPlan([FioJob("r", rw="randread", bs="4k", runtime=0.5, time_based=True, filename=ns)])


def write_plan(ns: str) -> FioPlan:
    return FioPlan([FioJob("w", rw="write", bs="128k", runtime=0.3, time_based=True, filename=ns)])


def test_nvme_cli_runs_on_the_drive_host(sshd, virtual):
    tl = Timeline()
    nvme, _ = runners(_rig(sshd, virtual), tl)
    ident = nvme.id_ctrl(virtual["controller"])
    assert ident.sn.strip() == virtual["serial"]
    ev = [e for e in tl.events(NVME) if e.name.startswith("id-ctrl") or "id-ctrl" in e.argv][-1]
    assert ev.meta["drive_host"].startswith("ssh://") and ev.ok
    assert ev.argv[:1] == virtual["nvme"]                              # the argv as it ran there


def test_fio_output_and_logs_come_back_and_the_remote_directory_is_removed(sshd, virtual, tmp_path):
    tl = Timeline()
    _, fio = runners(_rig(sshd, virtual), tl)
    res = fio.run(read_plan(virtual["namespaces"][0]), tmp_path / "run")
    assert res.jobs[0].directions["read"].io_bytes > 0
    assert (tmp_path / "run" / "fio.json").is_file()
    json.loads((tmp_path / "run" / "fio.json").read_text())          # fio's own JSON, fetched whole
    logs = sorted(p.name for p in (tmp_path / "run" / "logs").iterdir())
    assert any(n.startswith("r_bw.") for n in logs) and any(n.startswith("r_iops.") for n in logs), logs
    ev = tl.events(FIO)[-1]
    assert "fio.json" in " ".join(ev.meta["fetched"])
    remote_dir = os.path.dirname([a for a in ev.argv if a.startswith("--output=")][0].split("=", 1)[1])
    assert remote_dir.startswith("/tmp/powerrig-fio.") and not os.path.exists(remote_dir)


def test_a_write_on_a_remote_drive_is_checked_on_the_drive_host(sshd, virtual, tmp_path):
    """The guard runs dut/sysfs.py with the drive host's python3: the serial, the drive's name in that
    host's sysfs, its mounts and swaps are checked there. Without the virtual rig's host view the
    probe reads this machine's real /sys, where the virtual namespace does not exist: refused."""
    tl = Timeline()
    nvme, fio = runners(_rig(sshd, virtual), tl)
    assert isinstance(nvme.host, RemoteHostView)
    with pytest.raises(GuardRefused, match="not a block device on this host .*on drive host ssh://"):
        fio.run(write_plan(virtual["namespaces"][0]), tmp_path / "w", serial=virtual["serial"])
    _, fio = runners(_rig(sshd, virtual, host=virtual["host"]), tl)
    with pytest.raises(GuardRefused, match="wrong drive"):
        fio.run(write_plan(virtual["namespaces"][0]), tmp_path / "w", serial="NOT" + virtual["serial"])
    mounts = tmp_path / "mounts"          # the drive host has a filesystem on the drive
    mounts.write_text(f"{virtual['namespaces'][0]} /srv/data ext4 rw 0 0\n")
    _, fio = runners(_rig(sshd, virtual, host=dict(virtual["host"], mounts=str(mounts))), tl)
    with pytest.raises(GuardRefused, match="in use .*on /srv/data"):
        fio.run(write_plan(virtual["namespaces"][0]), tmp_path / "w", serial=virtual["serial"])
    assert not tl.events(FIO)
    guard = [e for e in tl.events() if e.name == "guard"]
    assert len(guard) == 3 and not any(e.ok for e in guard)


def test_a_write_runs_with_a_host_view_of_the_drive_host(sshd, virtual, tmp_path):
    """The virtual rig publishes its sysfs tree; the 'drive host' is this machine, so its python3
    reads the same tree and the checks pass."""
    tl = Timeline()
    _, fio = runners(_rig(sshd, virtual, host=virtual["host"]), tl)
    res = fio.run(write_plan(virtual["namespaces"][0]), tmp_path / "w", serial=virtual["serial"])
    assert res.jobs[0].directions["write"].io_bytes > 0
    guard = [e for e in tl.events() if e.name == "guard"][-1]
    assert guard.ok and guard.result["namespace"] == Path(virtual["namespaces"][0]).name
    # the presence watch reads the drive host's own tree (here the rig's): the drive stayed, nothing noted
    assert [e.name for e in tl.events() if e.meta.get("removal")] == []


def test_a_controller_that_leaves_the_drive_hosts_tree_mid_run_is_a_removal_and_its_return(sshd, virtual,
                                                                                          tmp_path):
    """dut/presence.py watches the controller where the drive host's guard view reads its sysfs: its
    link leaving the rig's tree while fio runs is a "drive removed" NOTE, its return a "drive back"."""
    tl = Timeline()
    _, fio = runners(_rig(sshd, virtual, host=virtual["host"]), tl)
    link = Path(virtual["host"]["sys_root"]) / "class" / "nvme" / Path(virtual["controller"]).name
    away = link.with_name(link.name + ".away")
    moved: list[float] = []

    def pull():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and subprocess.run(["pgrep", "-f", "^sh -c cs="],
                                                             capture_output=True).returncode:
            time.sleep(0.02)                 # until the watcher runs on the drive host
        time.sleep(0.2)
        moved.append(time.time())
        link.rename(away)
        time.sleep(0.5)
        moved.append(time.time())
        away.rename(link)

    plan = FioPlan([FioJob("w", rw="write", bs="128k", runtime=2.0, time_based=True,
                           filename=virtual["namespaces"][0])])
    puller = threading.Thread(target=pull)
    puller.start()
    try:
        fio.run(plan, tmp_path / "w", serial=virtual["serial"])
    finally:
        puller.join()
        if away.exists() and not link.exists():
            away.rename(link)
    notes = [e for e in tl.events() if e.meta.get("removal")]
    assert [e.name for e in notes] == ["drive removed", "drive back"], notes
    assert len(moved) == 2
    for e, t in zip(notes, moved):           # seen within a few 20 ms polls (and ssh's clock mapping)
        assert t - 0.05 <= e.t_start <= t + 0.5, (e.t_start, t)


def test_unreachable_host_is_one_clear_line(sshd, virtual):
    url = sshd["url"].replace(f":{sshd['port']}", f":{_free_port()}")
    with pytest.raises(RemoteError) as e:
        runners(_rig(sshd, virtual, drive_host=url), Timeline())
    msg = str(e.value)
    assert "host unreachable" in msg and "\n" not in msg and "Connection refused" in msg, msg


def test_a_key_the_host_does_not_accept_is_an_authentication_error(sshd, virtual):
    url = sshd["url"].replace("client_key", "other_key")
    with pytest.raises(RemoteError, match="authentication failed") as e:
        runners(_rig(sshd, virtual, drive_host=url), Timeline())
    assert "\n" not in str(e.value)


def test_a_missing_tool_on_the_drive_host_says_so(sshd, virtual):
    nvme, _ = runners(_rig(sshd, virtual, nvme=["no-such-nvme-here"]), Timeline())
    with pytest.raises(Exception, match="not found on drive host"):
        nvme.id_ctrl("/dev/nvme0")


@pytest.mark.parametrize("bad", ["http://host", "ssh://", "ssh://h:99999", "drivehost"])
def test_a_bad_drive_host_url_is_refused(bad):
    with pytest.raises(RemoteError, match="ssh://"):
        drive_host(bad)


def test_arguments_reach_the_far_side_unsplit(sshd):
    """ssh joins its arguments into one shell line: spaces and quotes must survive the trip."""
    h = SshHost.parse(sshd["url"])
    out = h.run(helper_argv(sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))",
                            "a b", "it's", "$HOME", ";true"))
    assert json.loads(out) == ["a b", "it's", "$HOME", ";true"]


PLAN = """\
name = "t"
power_states = [0]
[rig]
port = "sim:client-apst"
[drive]
serial = "SN1"
host = "{host}"
[[workload]]
name = "r"
rw = "read"
bs = "128k"
"""


def test_plan_names_the_drive_host_and_refuses_a_bad_one():
    from powerrig.sweep.plan import PlanError, parse

    assert parse(PLAN.format(host="ssh://lab@drivehost:2222")).drive.host == "ssh://lab@drivehost:2222"
    with pytest.raises(PlanError, match=r"drive\.host.*ssh://\[user@\]host") as e:
        parse(PLAN.format(host="drivehost"))
    assert "\n" not in str(e.value)


def test_pytest_plugin_runs_the_drive_tools_on_the_dut_host(sshd, tmp_path, monkeypatch):
    """A plain pytest with --powerrig-rig sim:PROFILE --powerrig-dut-host ssh://...: the dut fixture's
    tools ran over ssh."""
    from test_sweep_pytest_plugin import pytest_cmd

    d = tmp_path / "lab"
    d.mkdir()
    (d / "test_remote_dut.py").write_text(
        "def test_dut_is_remote(dut):\n"
        "    assert dut.nvme.remote is not None and dut.fio.remote is dut.nvme.remote\n"
        "    ev = [e for e in dut.nvme.timeline.events() if e.meta.get('drive_host')]\n"
        "    assert ev and ev[0].ok\n"
        "    print('DRIVE_HOST', dut.nvme.remote.url, dut.ident.sn.strip())\n")
    env = dict(os.environ, POWERRIG_SIM_DIR=str(tmp_path / "sim"))
    try:
        r = subprocess.run(pytest_cmd("-q", "-s", "--powerrig-rig", "sim:client-apst", "--powerrig-dut-host", sshd["url"]), cwd=d,
                           capture_output=True, text=True, timeout=300, env=env)
    finally:
        subprocess.run([sys.executable, "-m", "powerrig", "sim", "stop", "--all"], env=env, capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"DRIVE_HOST ssh://{sshd['user']}@127.0.0.1:{sshd['port']}" in r.stdout


def test_pytest_collection_reads_the_power_states_on_the_dut_host(sshd, virtual, tmp_path):
    """power_state is parametrised at collection from the drive's id-ctrl: with --powerrig-dut-host that
    nvme-cli runs on the drive host (a fake there answers), never this host's (a fake here leaves a mark)."""
    from powerrig.dut.nvme import parse_id_ctrl
    from test_sweep_pytest_plugin import pytest_cmd

    ident = subprocess.run([*virtual["nvme"], "id-ctrl", virtual["controller"], "--output-format=json"],
                           capture_output=True, text=True, timeout=60, check=True).stdout
    (sshd["dir"] / "id-ctrl.json").write_text(ident)
    remote = sshd["dir"] / "bin" / "nvme"
    calls = tmp_path / "remote-calls"
    remote.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\ncat {sshd['dir'] / 'id-ctrl.json'}\n")
    local_bin = tmp_path / "bin"
    local_bin.mkdir()
    (local_bin / "nvme").write_text(f"#!/bin/sh\ntouch {tmp_path / 'LOCAL_NVME_RAN'}\nexit 1\n")
    for f in (remote, local_bin / "nvme"):
        f.chmod(0o755)
    d = tmp_path / "lab"
    d.mkdir()
    (d / "test_states.py").write_text("def test_a(power_state):\n    pass\ndef test_b(power_state):\n    pass\n")
    env = dict(os.environ, PATH=f"{local_bin}{os.pathsep}{os.environ['PATH']}")
    try:
        r = subprocess.run(pytest_cmd("-q", "--collect-only", "--powerrig-rig", "/dev/ttyNOT-OPENED-AT-COLLECTION",
                                      "--powerrig-dut-host", sshd["url"]), cwd=d, capture_output=True, text=True,
                           timeout=300, env=env)
    finally:
        remote.unlink()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    want = [f"PS{s.ps}" for s in parse_id_ctrl(ident).power_states if not s.non_operational]
    got = [ln.split("[")[1].rstrip("]") for ln in r.stdout.splitlines() if "::test_a[" in ln]
    assert got == want and len(want) > 1, r.stdout
    assert not (tmp_path / "LOCAL_NVME_RAN").exists()
    assert calls.read_text().count("id-ctrl") == 1          # read once for the session, not per test


@pytest.mark.parametrize("url,says", [
    ("ssh://lab:s3cret@drivehost", "a password in the URL is never used (ssh logs in with keys): remove ':...'"),
    ("ssh://lab:@drivehost", "a password in the URL is never used"),
    ("ssh://lab@drivehost#frag", "'#frag' is no part of an ssh URL: remove it"),
    ("ssh://lab@drivehost:22/#", "'#' is no part of an ssh URL: remove it"),
    ("ssh://lab@drivehost/home", "'/home' is no part of an ssh URL: remove it"),
])
def test_what_an_ssh_url_would_drop_silently_is_refused(url, says):
    """The password and the #fragment were dropped without a word: the host was reached without them."""
    with pytest.raises(RemoteError, match=re.escape(says)) as e:
        drive_host(url)
    assert "s3cret" not in str(e.value) and "\n" not in str(e.value)
    from powerrig.sweep.plan import PlanError, parse
    with pytest.raises(PlanError, match=re.escape(says)):
        parse(PLAN.format(host=url))


@pytest.mark.parametrize("url,shown", [("ssh://[::1]:22", "ssh://[::1]:22"), ("ssh://lab@[fe80::1]", "ssh://lab@[fe80::1]"),
                                       ("ssh://lab@drivehost:2222", "ssh://lab@drivehost:2222")])
def test_ipv6_hosts_are_shown_in_brackets(url, shown):
    h = drive_host(url)
    assert h.url == shown
    assert shown in h.explain("ssh: connect to host ::1 port 22: Connection refused")


# -- the kernel's own traces on a real drive host: this machine's kernel, reached through the real sshd as root --
def _loop_device(tmp_path: Path) -> str:
    """A loop device over a 4 MiB file: a block device whose every I/O is this test's."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        missing("the kernel trace tests need root and losetup on the drive host (util-linux)")
    img = tmp_path / "img"
    img.write_bytes(b"\0" * (4 << 20))
    r = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True)
    if r.returncode != 0:
        missing(f"losetup cannot attach a loop device here: {r.stderr.strip()}")
    return r.stdout.strip()


def _instances() -> set[str]:
    return set(os.listdir("/sys/kernel/tracing/instances")) if os.path.isdir("/sys/kernel/tracing/instances") else set()


def test_the_block_trace_records_a_real_kernels_io_on_the_plans_device_alone_and_leaves_nothing(sshd, tmp_path):
    """dut/blocktrace.py's scripts on a real kernel's tracefs over ssh as root: the instance is filtered
    to the plan's device (I/O on another disk meanwhile is not in it), every write this test made is
    traced inside the wall-clock span it was made in (the markers' map of the trace clock), and the
    instance is gone after."""
    loop = _loop_device(tmp_path)
    before = _instances()
    try:
        bt = blocktrace.BlockTrace(SshHost.parse(sshd["url"]), str(tmp_path), [loop]).start()
        assert bt.started and bt.reason is None, bt.reason
        rdev = os.stat(loop).st_rdev
        assert bt.devices == {loop: f"{os.major(rdev)},{os.minor(rdev)}"}
        assert bt.instance in _instances() - before
        t0 = time.time()
        fd = os.open(loop, os.O_WRONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, 65536)           # page-aligned, as O_DIRECT needs
        buf.write(b"\x5a" * 65536)
        try:
            for k in range(8):
                os.pwrite(fd, buf, k * 65536)
        finally:
            os.close(fd)
        t1 = time.time()
        other = tmp_path / "other-disk"                      # the root disk's I/O, outside the filter
        other.write_bytes(os.urandom(1 << 20))
        os.sync()
        bt.stop()
        assert bt.reason is None, bt.reason
        ev, line = blocktrace.load(tmp_path / blocktrace.OUT_NAME, bt.devices)
        assert ev is not None, line
        assert set(ev.issues) == {bt.devices[loop]}, f"the filter let other devices in: {sorted(ev.issues)}"
        issues, done = ev.issues[bt.devices[loop]], ev.completions[bt.devices[loop]]
        assert len(issues) >= 8 and len(done) >= 8, line
        assert ev.bound_s < 0.005, line                       # the markers tie the clocks within milliseconds
        slack = ev.bound_s + 5e-5                             # the map is within its stated bound
        assert t0 - slack <= issues[0] and done[-1] <= t1 + slack, (t0, issues[0], done[-1], t1)
        assert blocktrace.refine(t0, t1, [bt.devices[loop]], ev) == (issues[0], done[-1])
    finally:
        subprocess.run(["losetup", "-d", loop], capture_output=True)
    assert _instances() == before, "the trace instance was left on the drive host"


def test_the_nvme_trace_on_a_real_kernel_says_in_one_line_what_is_missing_and_leaves_nothing(sshd, tmp_path):
    """dut/nvmetrace.py's start on a real kernel over ssh as root: a kernel without the nvme driver's
    tracepoints (this machine's: no NVMe device) gives the one-line reason and no instance; one with
    them traces and gives back the text with its clock markers."""
    before = _instances()
    kt = nvmetrace.KernelTrace(SshHost.parse(sshd["url"]), "/dev/nvme0", "remote-test").start()
    if os.path.isdir("/sys/kernel/tracing/events/nvme/nvme_setup_cmd"):
        assert kt.started, kt.reason
        tr, line = kt.load()
        assert tr is not None and "nvme_trace" in line, line
    else:
        assert not kt.started
        assert kt.reason is not None and "\n" not in kt.reason
        assert "has no nvme tracepoints" in kt.reason and "the host intervals stand" in kt.reason, kt.reason
        tr, line = kt.load()
        assert tr is None and line == kt.reason
    assert _instances() == before, "the trace instance was left on the drive host"
