"""The two doors (powerrig.dut.commands: every argv and job file for another program; powerrig.dut.
destructive: every write, erase, namespace or firmware change) and the defects of issue 25 they
close, each reproduced: fio option injection through a line break (real fio), ssh option injection
through the destination and ?ProxyCommand= (real ssh), a format on a namespace nobody checked, and
the virtual rig's format and fio on different namespaces. Then fuzzing at the process boundary (fake
nvme, fio and ssh on PATH record every argv and job file), the destructive commands enumerated, and
a scan of the tree that no caller goes around either door."""
from __future__ import annotations

import ast
import functools
import json
import os
import random
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from powerrig.core.errors import PowerrigError
from powerrig.core.timeline import FIO, NVME, Timeline
from powerrig.dut import commands, destructive, runners
from powerrig.dut.commands import (DESTRUCTIVE_NVME, FIO_WRITE, WRITE_MODES, Argv, Permit, UnsafeArgument,
                                   fio_job_file, nvme_argv)
from powerrig.dut.fio import Fio, FioJob, FioPlan
from powerrig.dut.guard import GuardRefused, HostView
from powerrig.dut.nvme import NvmeCli
from powerrig.dut.remote import RemoteError, SshHost, drive_host
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.rig import tool_launcher
from powerrig.sim.ssd.server import SsdServer
from powerrig.sweep.plan import PlanError, parse

PKG = REPO / "host_app" / "powerrig"
needs_fio = pytest.mark.skipif(shutil.which("fio") is None and os.environ.get("CI") != "true",
                               reason="fio not installed (scripts/setup.sh installs it)")
needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None and os.environ.get("CI") != "true",
                               reason="ssh not installed (scripts/setup.sh installs openssh-client)")


def files(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")}


# -- 1. fio option injection ------------------------------------------------------------------------------
INJECTED = "x.img\nrw=write\nsize=512k\nfilename=other.img"


@needs_fio
@pytest.mark.parametrize("job", [dict(filename=INJECTED), dict(filename="x.img", extra={"verify": "md5\nrw=write"}),
                                 dict(filename="x.img", size="1m\nfilename=other.img"),
                                 dict(filename="x.img", extra={"readwrite": "write"}),       # an alias past job_writes
                                 dict(filename="x.img", extra={"exec_prerun": "touch other.img"}),
                                 dict(filename="${HOME}/other.img")])
def test_a_read_job_cannot_smuggle_an_option_into_real_fio(tmp_path, monkeypatch, job):
    """Before: the line break became a line of the job file and real fio wrote other.img (512 KiB)."""
    monkeypatch.chdir(tmp_path)
    plan = FioPlan([FioJob("r", rw="read", bs="4k", runtime=0.3, time_based=True, ioengine="psync",
                           **{"size": "1m", **job})])
    with pytest.raises(UnsafeArgument) as e:
        Fio(["fio"], Timeline()).run(plan, tmp_path / "run")
    assert "\n" not in str(e.value)
    assert files(tmp_path) == set()                     # nothing created: not other.img, not even x.img


@needs_fio
def test_the_same_read_job_without_the_injection_runs_real_fio_on_its_file_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = FioPlan([FioJob("r", rw="read", bs="4k", size="1m", runtime=0.3, time_based=True, ioengine="psync",
                           filename="x.img")])
    Fio(["fio"], Timeline()).run(plan, tmp_path / "run")
    assert {f for f in files(tmp_path) if not f.startswith("run")} == {"x.img"}


def test_the_injection_is_refused_at_check_with_one_line(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN.replace('namespace = "/dev/nvme0n1"', f'namespace = {json.dumps(INJECTED)}'))
    r = run_cli("sweep", "--check", str(plan))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert "drive.namespace (line 9)" in line and "line feed" in line


# -- 2. ssh option injection --------------------------------------------------------------------------------
@pytest.mark.parametrize("url", ["ssh://-oProxyCommand=touch${IFS}MARK@localhost",
                                 "ssh://-oProxyCommand=touch%20MARK@localhost",
                                 "ssh://lab@-oProxyCommand=x",
                                 "ssh://lab@localhost?ProxyCommand=touch%20MARK",
                                 "ssh://lab@localhost?proxycommand=touch%20MARK",
                                 "ssh://lab@localhost?PermitLocalCommand=yes&LocalCommand=touch%20MARK",
                                 "ssh://lab@localhost?KnownHostsCommand=touch%20MARK",
                                 "ssh://lab@localhost?ProxyJump=-oProxyCommand=x",
                                 "ssh://lab@localhost?IdentityFile=a%20-oProxyCommand=x",
                                 "ssh://lab@localhost?ProxyCommand=",
                                 "ssh://lab@local\nhost", "ssh://lab@localhost\t"])
def test_a_drive_host_cannot_smuggle_an_ssh_option(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RemoteError) as e:
        runners({"drive_host": url})
    assert "\n" not in str(e.value)
    assert not (tmp_path / "MARK").exists()


@needs_ssh
def test_real_ssh_reads_the_destination_after_double_dash_as_a_host(tmp_path, monkeypatch):
    """The second wall: were a user '-oProxyCommand=touch MARK' let through, real ssh gets it after
    '--' and tries to resolve it as a host name; the local command never runs."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(commands, "check_ssh_user", lambda u: u)
    h = SshHost.__new__(SshHost)
    for k, v in dict(host="localhost", user=f"-oProxyCommand=touch {tmp_path / 'MARK'} #", port=None,
                     options=(), connect_timeout=3).items():
        object.__setattr__(h, k, v)
    argv = commands.ssh_wrap(h, commands.helper_argv("true"))
    assert argv[argv.index("--") + 1].startswith("-oProxyCommand")
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 255 and not (tmp_path / "MARK").exists()
    # and without '--' (the argv before the fix), the same ssh runs the command
    argv.remove("--")
    subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (tmp_path / "MARK").exists()


def test_allowed_ssh_options_pass_in_their_own_spelling():
    h = SshHost.parse("ssh://lab@drivehost:2222?identityfile=/k/id&StrictHostKeyChecking=yes")
    a = h.ssh_argv()
    assert a[-2:] == ["--", "lab@drivehost"] and "IdentityFile=/k/id" in a and "StrictHostKeyChecking=yes" in a
    assert SshHost.parse("ssh://[::1]:22").ssh_argv()[-1] == "::1"


# -- 3. format on the namespace the door checked -----------------------------------------------------------
@pytest.fixture
def two_drives(tmp_path):
    """Two virtual drives (nvme0, nvme1: different serials) and the host view that shows them."""
    a, b = VirtualSSD("d5-p5336"), VirtualSSD("client-apst")
    with SsdServer([a, b], str(tmp_path / "ssd.sock")) as server:
        prog = tool_launcher("nvme", server.socket_path, tmp_path)
        fio = tool_launcher("fio", server.socket_path, tmp_path)
        yield server, a, b, prog, fio


def test_format_of_a_namespace_on_another_drive_is_refused(two_drives):
    server, a, b, prog, _ = two_drives
    tl = Timeline()
    nvme = NvmeCli(prog, tl, host=HostView(**server.host))
    with pytest.raises(GuardRefused, match=f"its serial is '{b.sn}', the caller names '{a.sn}'"):
        destructive.format(nvme, "/dev/nvme1n1", a.sn, ses=1, controller="/dev/nvme0")
    with pytest.raises(GuardRefused, match="it is a namespace of nvme1, not of /dev/nvme0"):
        destructive.format(nvme, "/dev/nvme1n1", b.sn, ses=1, controller="/dev/nvme0")
    assert not b.erases and not a.erases and not [e for e in tl.events(NVME) if e.name == "format"]
    destructive.format(nvme, "/dev/nvme0n1", a.sn, ses=1, controller="/dev/nvme0")
    assert [k for _, k, _ in a.erases] == ["format"] and not b.erases


FORMAT_PLAN = """name = "fmt"
power_states = [0]
[rig]
port = "{port}"
[drive]
controller = "/dev/nvme0"
namespace = "{namespace}"
serial = "{serial}"
[preparation]
kind = "format"
[[workload]]
name = "r"
rw = "read"
"""


def test_the_sweep_formats_only_the_namespace_it_checked(two_drives, tmp_path):
    """Before: the guard checked the controller (nvme0, serial right), then `nvme format` ran on the
    plan's namespace, here one of the other drive, which it erased."""
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.plan_rig import bring_up

    server, a, b, prog, fio = two_drives
    plan = parse(FORMAT_PLAN.format(port="/dev/ttyNONE", namespace="/dev/nvme1n1", serial=a.sn))
    rig = bring_up(plan)
    rig.nvme, rig.fio, rig.host = prog, fio, server.host
    sweep = Sweep(plan, None, tmp_path / "out")
    sweep._rig = rig
    nvme, f = rig.runners(Timeline())
    sweep._ident = nvme.id_ctrl(rig.controller)
    with pytest.raises(GuardRefused):
        sweep._prepare(nvme, f)
    assert not b.erases and not a.erases


def test_on_a_virtual_rig_format_and_fio_use_the_same_namespace(tmp_path, monkeypatch):
    """Before: a sim: plan formatted the plan's namespace while fio used the virtual rig's; then the
    rig's namespace silently replaced the plan's (issue 36). Now a namespace the rig lacks stops
    bring-up in one line, and the one the plan names is the one formatted and written."""
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.plan_rig import bring_up

    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path / "sim"))
    with pytest.raises(PlanError, match="drive.namespace /dev/nvme0n7 is not one of this rig's") as e:
        bring_up(parse(FORMAT_PLAN.format(port="sim:client-apst", namespace="/dev/nvme0n7", serial="VCL0000000000001")))
    assert "\n" not in str(e.value)
    plan = parse(FORMAT_PLAN.format(port="sim:client-apst", namespace="/dev/nvme0n1", serial="VCL0000000000001"))
    rig = bring_up(plan)
    try:
        tl = Timeline()
        nvme, f = rig.runners(tl)
        sweep = Sweep(plan, None, tmp_path / "out")
        sweep._rig, sweep._ident = rig, nvme.id_ctrl(rig.controller)
        sweep._prepare(nvme, f)
        (fmt,) = [e for e in tl.events(NVME) if e.name == "format"]
        fio_ns = {j.filename for j in sweep._fio_plan(plan.workloads[0], 1.0).jobs}
        assert fmt.ok and fio_ns == {fmt.meta["device"]} == {rig.namespaces[0]} == {plan.drive.namespace}
    finally:
        rig.close()


# -- the destructive commands, enumerated ---------------------------------------------------------------------
@pytest.mark.parametrize("action", sorted(DESTRUCTIVE_NVME))
def test_no_destructive_nvme_command_is_built_without_the_doors_permit(action):
    words = action.split()
    cmd, opts = (words[:1], ["--save"]) if action == "set-feature --save" else (words, [])
    with pytest.raises(UnsafeArgument, match="only through powerrig.dut.destructive"):
        nvme_argv(["nvme"], cmd, "/dev/nvme0n1", opts)
    for wrong in (Permit(action, frozenset({"/dev/nvme1n1"})), Permit("format" if action != "format" else "sanitize",
                                                                      frozenset({"/dev/nvme0n1"}))):
        with pytest.raises(UnsafeArgument):
            nvme_argv(["nvme"], cmd, "/dev/nvme0n1", opts, wrong)
    ok = nvme_argv(["nvme"], cmd, "/dev/nvme0n1", opts, Permit(action, frozenset({"/dev/nvme0n1"})))
    assert isinstance(ok, Argv) and ok[1:1 + len(cmd)] == cmd


@pytest.mark.parametrize("sub", ["nvme-format", "fw-activate2", "--help", "format;true", "admin-passthru2"])
def test_unknown_nvme_subcommands_are_refused(sub):
    with pytest.raises(UnsafeArgument):
        nvme_argv(["nvme"], sub, "/dev/nvme0")


@pytest.mark.parametrize("opts", [dict(rw=m) for m in sorted(WRITE_MODES)] +
                         [dict(rw="read", extra={"verify": v}) for v in ("md5", "crc32c", "pattern")] +
                         [dict(rw="randread", extra={"verify": "crc32c", "do_verify": 1})])
def test_no_fio_write_is_built_without_the_doors_permit(opts, tmp_path):
    plan = FioPlan([FioJob("w", filename="/dev/nvme0n1", runtime=1, time_based=True, **opts)])
    with pytest.raises(UnsafeArgument, match="powerrig.dut.destructive"):
        fio_job_file(plan, None)
    with pytest.raises(UnsafeArgument):
        fio_job_file(plan, None, Permit(FIO_WRITE, frozenset({"/dev/nvme1n1"})))
    assert "filename=/dev/nvme0n1" in fio_job_file(plan, None, Permit(FIO_WRITE, frozenset({"/dev/nvme0n1"})))
    tl = Timeline()                      # and Fio.run without a serial: the guard refuses before fio runs
    with pytest.raises(GuardRefused):
        Fio(["fio"], tl).run(plan, tmp_path / "run")
    assert not tl.events(FIO)


@pytest.mark.parametrize("extra", [{"readwrite": "write"}, {"exec_prerun": "x"}, {"exec_postrun": "x"},
                                   {"ioengine": "exec"}, {"ioengine": "external:/tmp/x.so"}, {"unlink": 1},
                                   {"write_iolog": "/tmp/x"}, {"directory": "/dev"}, {"fill_device": 1},
                                   {"trigger_cmd": "x"}, {"rw": "Write"}, {"filename": "-"}, {"bs": "4k$x"}])
def test_fio_options_outside_the_allow_list_are_refused(extra):
    with pytest.raises(UnsafeArgument):
        fio_job_file(FioPlan([FioJob("r", rw="read", filename="x.img", extra=extra)]), None)


def test_a_program_prefix_through_ssh_is_refused():
    """Commands through an ssh prefix would run on another machine while the guard reads this one."""
    with pytest.raises(UnsafeArgument, match="drive host"):
        runners({"nvme": ["ssh", "lab@drivehost", "nvme"]})
    with pytest.raises(PlanError, match=r"rig.nvme \(line 7\): .*drive host"):
        parse(PLAN.replace('port = "/dev/ttyACM0"', 'port = "/dev/ttyACM0"\nnvme = "sudo ssh lab@h nvme"'))


# -- the scan: nothing goes around the doors ------------------------------------------------------------------
def _calls(tree, name):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            n = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if n == name:
                yield node


@functools.lru_cache(maxsize=1)
def _trees() -> tuple:
    return tuple((p.relative_to(PKG).as_posix(), ast.parse(p.read_text())) for p in sorted(PKG.rglob("*.py")))


def _tree():
    return iter(_trees())


def test_only_the_doors_build_permits_command_lines_and_guard_decisions():
    where = {"Permit": set(), "Argv": set(), "DriveGuard": set(), "check_destructive": set()}
    for rel, tree in _tree():
        for name in where:
            if any(True for _ in _calls(tree, name)):
                where[name].add(rel)
    assert where["Permit"] == {"dut/destructive.py"}
    assert where["Argv"] == {"dut/commands.py"}
    assert where["DriveGuard"] <= {"dut/destructive.py", "dut/guard.py"}
    assert where["check_destructive"] <= {"dut/guard.py"}


# the modules that start processes, and why; everything else goes through dut/_run.py or remote.py
SPAWNERS = {"dut/_run.py", "dut/remote.py",               # the runners: Argv from dut/commands.py only
            "cli/flash.py",                                  # mpy-cross and mpremote (the firmware, not a drive)
            "cli/record.py",                                 # `record -- COMMAND`: typed by hand, judged by dut/door.judge_here first
            "sim/interposer/launch.py", "sim/rig.py", "sim/interposer/board.py",   # the simulator's own processes
            "testing/postgres.py",                            # the tests' throwaway PostgreSQL server
            "sim/qemu/machine.py", "sim/qemu/image.py"}          # the QEMU drive host: qemu, its image build


def test_no_module_starts_nvme_fio_or_ssh_around_the_runners():
    found = set()
    for rel, tree in _tree():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in ("subprocess", "os", "pty") and \
                    node.attr in ("run", "Popen", "call", "check_call", "check_output", "system", "spawn",
                                  "execv", "execvp", "execve", "popen"):
                found.add(rel)
    assert found <= SPAWNERS, f"new process starters: {found - SPAWNERS}; build their argv in dut/commands.py"


def test_the_runners_refuse_a_command_line_not_built_by_the_door():
    from powerrig.dut._run import run_tool
    with pytest.raises(TypeError):
        run_tool(["nvme", "format", "/dev/nvme0n1"], Timeline(), NVME, "x", "nvme-cli", 1)
    with pytest.raises(TypeError):
        SshHost.parse("ssh://lab@h").run(["rm", "-rf", "/"])


# -- fuzzing at the process boundary --------------------------------------------------------------------------
PLAN = """name = "fz"
power_states = [0]
idle_steps = false
description = ""
[rig]
port = "/dev/ttyACM0"
[drive]
controller = "/dev/nvme0"
namespace = "/dev/nvme0n1"
serial = ""
host = ""
[[workload]]
name = "r"
rw = "randread"
runtime_s = 1.0
[[workload.streams]]
namespace = "/dev/nvme0n1"
"""
PIECES = ["\n", "\r", "\x00", "\t", "\x1b", "\x7f", "\x85", "\u2028", "-", "--", "-o", "-oProxyCommand=touch MARK",
          "=", "$", "${HOME}", ":", ";", "#", "[", "]", "[global]", "rw=write", "\nrw=write\n", "filename=MARK",
          "ProxyCommand", "LocalCommand", "?", "&", "@", "/", " ", "'", '"', "\\", "%0a", "%2d", "..", "é",
          "ssh", "global", "x.img", "/dev/nvme0n1", "/dev/nvme0n2", "a", "b", "Z", "0", "9", "_", "."]
FIELDS = {("drive", "controller"): 'controller = "/dev/nvme0"',
          ("drive", "namespace"): 'namespace = "/dev/nvme0n1"\nserial',
          ("drive", "host"): 'host = ""',
          ("workload", "name"): 'name = "r"',
          ("workload", "streams", "namespace"): 'namespace = "/dev/nvme0n1"\n',
          ("workload", "size"): "runtime_s = 1.0",
          ("workload", "rw"): 'rw = "randread"',
          ("rig", "nvme"): 'port = "/dev/ttyACM0"',
          ("rig", "fio"): 'port = "/dev/ttyACM0"',
          ("name",): 'name = "fz"',
          ("description",): 'description = ""',
          ("drive", "serial"): 'serial = ""'}


NOT_ARGV = {("name",), ("description",), ("drive", "serial")}    # stored and compared, never passed to a program
VALID = {("workload", "size"): ["4k", "1m", "50%", "10g", "512"], ("workload", "name"): ["r", "w.1", "a-b"],
         ("workload", "rw"): ["read", "randread"]}


def random_text(rng: random.Random, valid=()) -> str:
    """1-6 pieces; a field's own valid values weigh in, so some of what is made is accepted."""
    pieces = PIECES + list(valid) * 12
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))


def _plan_with(field, value: str) -> str:
    v = json.dumps(value)             # a TOML basic string: JSON's escapes are TOML's
    old = FIELDS[field]
    if field == ("drive", "namespace"):           # no streams: fio takes the drive's namespace
        return PLAN.replace(old, f"namespace = {v}\nserial", 1).split("[[workload.streams]]")[0]
    if field == ("workload", "streams", "namespace"):
        return PLAN[:PLAN.rindex(old)] + f"namespace = {v}\n"
    if field == ("workload", "size"):
        return PLAN.replace(old, f"size = {v}")
    if field[0] == "rig":                         # a prefix is one program (after wrappers)
        return PLAN.replace(old, f'{old}\n{field[1]} = ["sudo", {v}]')
    key = old.split(" =")[0]
    return PLAN.replace(old, f"{key} = {v}", 1)


# a POSIX sh script (starts in a millisecond): each run appends its name and arguments, NUL-separated, ended by \x01
FAKE = """#!/bin/sh
{ printf '%s\\0' "$(basename "$0")" "$@"; printf '\\001'; } >> "$FAKE_LOG"
"""


@pytest.fixture
def boundary(tmp_path, monkeypatch):
    """nvme, fio and ssh on PATH that only record their argv (and fio its job file)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("nvme", "fio", "ssh"):
        (bin_ / tool).write_text(FAKE)
        (bin_ / tool).chmod(0o755)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)

    def ran() -> list[list[str]]:
        raw = log.read_bytes().decode() if log.exists() else ""
        log.unlink(missing_ok=True)
        return [rec.split("\0")[:-1] for rec in raw.split("\x01")[:-1]]
    return work, ran


def job_sections(text: str) -> dict[str, dict[str, str]]:
    """A job file read the way fio reads it: a section per [name], one key=value per line."""
    out, cur = {}, None
    for line in text.splitlines():
        if not line.strip() or line.lstrip()[0] in ";#":
            continue
        if line.startswith("["):
            cur = out.setdefault(line.strip()[1:-1], {})
            continue
        k, _, v = line.partition("=")
        assert k not in cur, f"{k} twice in one section"
        cur[k] = v
    return out


JOB_KEYS = {"rw", "bs", "iodepth", "numjobs", "filename", "runtime", "time_based", "direct", "size", "offset",
            "rwmixread", "write_bw_log", "write_iops_log"}


@pytest.mark.parametrize("field", sorted(FIELDS), ids=lambda f: ".".join(f))
def test_fuzz_plan_fields_reach_nvme_and_fio_only_as_the_values_they_are(field, boundary, tmp_path):
    """Random strings (line breaks, NUL, leading '-', '$', ':', '[global]', ProxyCommand ...) in each
    field that reaches a command line or job file: the plan is refused with one line naming the key,
    or the engine's nvme-cli and fio runs carry exactly the value, in exactly the intended argv and
    job file, and nothing else runs or is created."""
    from powerrig.sweep.engine import Sweep
    from powerrig.sweep.plan_rig import bring_up

    work, ran = boundary
    rng = random.Random(zlib.crc32(".".join(field).encode()))      # seeded: the same strings every run
    accepted = 0
    for _ in range(120):
        value = random_url(rng) if field == ("drive", "host") else random_text(rng, VALID.get(field, ()))
        try:
            plan = parse(_plan_with(field, value), "fz.toml")
        except PlanError as e:
            msg = str(e)
            assert "\n" not in msg and msg.startswith("plan fz.toml: ") and field[0] in msg
            continue
        accepted += 1
        if field not in NOT_ARGV:                     # what passed holds nothing another program reads as syntax
            assert all(ch.isprintable() or ch == " " for ch in value)
        rig = bring_up(plan)
        rig.nvme, rig.fio = ["nvme"], ["fio"]        # the fakes (a fuzzed prefix is the plan's own program)
        if plan.drive.host:
            host = SshHost.parse(plan.drive.host)
            assert host.ssh_argv()[-2] == "--" and not host.ssh_argv()[-1].startswith("-")
            rig.drive_host = None
        tl = Timeline()
        nvme, fio = rig.runners(tl)
        with pytest.raises(PowerrigError):           # the fake prints no id-ctrl: a parse error, after the call
            nvme.id_ctrl(plan.drive.controller)
        sweep = Sweep(plan, None, tmp_path / "out")
        sweep._rig = rig
        w = plan.workloads[0]
        fplan = sweep._fio_plan(w, plan.runtime_of(w))
        with pytest.raises(PowerrigError):           # the fake writes no JSON
            fio.run(fplan, work / "run", name="step")
        got = ran()
        assert got == [
            ["nvme", "id-ctrl", plan.drive.controller, "--output-format=json"],
            ["fio", "--output-format=json", f"--output={work / 'run' / 'step.json'}", str(work / "run" / "step.fio")]]
        sections = job_sections((work / "run" / "step.fio").read_text())     # the file fio was given
        assert list(sections) == ["global", *[j.name for j in fplan.jobs]]
        for j in fplan.jobs:
            assert set(sections[j.name]) <= JOB_KEYS
            assert sections[j.name]["filename"] == j.filename
            assert sections[j.name]["rw"] == j.rw and j.rw in ("read", "randread")    # no serial: reads only
        assert files(work) <= {"run", "run/logs", "run/step.fio"}
        shutil.rmtree(work / "run")
    assert accepted >= 5, "the generator must also produce values a plan accepts"


URL_PARTS = ["ssh://", "ssh://", "lab", "lab@", "-o", "-oProxyCommand=touch MARK", "@", "localhost", "h1", ":22",
             ":0", ":x", "?", "&", "=", "IdentityFile", "identityfile", "ProxyCommand", "LocalCommand",
             "StrictHostKeyChecking", "yes", "/k", "%20", "%0a", "%2d", "\n", "\x00", " ", "[::1]", "$", ";", "'"]


def random_url(rng: random.Random) -> str:
    return "ssh://" + "".join(rng.choice(URL_PARTS) for _ in range(rng.randint(1, 7)))


def test_fuzz_host_strings_give_one_ssh_argv_shape_or_one_line(boundary):
    """Random drive-host strings through every entry point (plan drive.host, pytest --dut-host, the
    runners): refused with one line, or the ssh that runs (a fake on PATH) has exactly the intended
    argv: allow-listed -o options, '--', a destination that is not an option, one quoted command."""
    from powerrig.pytest_plugin import RigSlot, _checked

    work, ran = boundary
    rng = random.Random(25)
    accepted = 0
    for k in range(600):
        url = random_url(rng)[6 * (k % 2):]
        try:
            h = drive_host(url)
        except RemoteError as e:
            assert "\n" not in str(e)
            with pytest.raises(pytest.UsageError):
                _checked(RigSlot("s", "sim:x", None, None, url), "opts")
            with pytest.raises(PlanError):
                parse(PLAN.replace('host = ""', f"host = {json.dumps(url)}", 1))
            continue
        if h is None:
            continue
        accepted += 1
        _checked(RigSlot("s", "sim:x", None, None, url), "opts")
        assert parse(PLAN.replace('host = ""', f"host = {json.dumps(url)}", 1)).drive.host == url
        runners({"drive_host": url})                 # connects once: `true` on the far side
        (a,) = ran()
        assert a[:7] == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]
        i = 7
        if a[i] == "-p":
            assert 1 <= int(a[i + 1]) <= 65535
            i += 2
        while a[i] == "-o":
            assert a[i + 1].split("=")[0] in commands.SSH_OPTIONS.values()
            i += 2
        assert a[i] == "--" and not a[i + 1].startswith("-") and a[i + 2:] == ["true"]
        assert files(work) == set()
    assert accepted >= 20


def test_pytest_dut_host_that_smuggles_an_option_is_a_usage_error(tmp_path):
    """The same string as the plan's, from `pytest --dut-host`: one usage line, no test runs, no marker."""
    from test_sweep_pytest_plugin import pytest_cmd

    (tmp_path / "test_x.py").write_text("def test_x(dut):\n    pass\n")
    mark = tmp_path / "MARK"
    r = subprocess.run(pytest_cmd("-q", "--rig", "sim:client-apst",
                                  "--dut-host=ssh://-oProxyCommand=touch${IFS}MARK@localhost"),
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 4, r.stdout + r.stderr            # pytest's usage error
    assert "drive host user '-oProxyCommand" in r.stderr and not mark.exists()
