"""Tool prefixes are programs, not options (issue 36, item 4): ``[rig] fio = ["fio", "--name=x",
"--rw=write", "--filename=victim"]`` on a read plan with no serial overwrote the victim, and
``["fio", "--exec_prerun=touch f"]`` ran the command, though the docs say a read cannot become a
write and exec_prerun is refused. A prefix is one program, optionally after wrappers allowed by name
(sudo, doas, nice, ionice) that take no options; the virtual rig publishes its impersonations as one
executable each, so they pass the same check."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from powerrig.core.timeline import FIO, Timeline
from powerrig.dut import runners
from powerrig.dut.commands import UnsafeArgument, check_program
from powerrig.dut.fio import Fio, FioJob, FioPlan
from powerrig.sweep.plan import PlanError, parse

needs_fio = pytest.mark.skipif(shutil.which("fio") is None and os.environ.get("CI") != "true",
                               reason="fio not installed (scripts/setup.sh installs it)")

ATTACKS = [["fio", "--name=x", "--rw=write", "--filename=victim"],      # the issue's: a second, writing job
           ["fio", "--exec_prerun=touch f"],                             # the issue's: a program run by fio
           ["fio", "--readwrite=write", "--filename=victim"], ["fio", "-", "victim"],
           ["sudo", "fio", "--exec_prerun=touch f"], ["nice", "-n", "5", "fio"], ["sudo", "-u", "x", "fio"],
           ["env", "X=1", "fio"], ["fio", "extra.fio"], ["python3", "-c", "open('f','w')"], ["sudo"], ["nice", "sudo"],
           ["fio", "name=x"], ["/usr/bin/fio", "--output=victim"]]


@pytest.mark.parametrize("prefix", ATTACKS, ids=lambda p: " ".join(p))
def test_a_prefix_with_options_or_more_words_is_refused_in_one_line(prefix):
    with pytest.raises(UnsafeArgument) as e:
        check_program("fio program", prefix)
    msg = str(e.value)
    assert "\n" not in msg and "fio program" in msg and "program" in msg, msg


@pytest.mark.parametrize("prefix", [["nvme"], ["/usr/sbin/nvme"], ["sudo", "nvme"], ["/usr/bin/sudo", "nvme"],
                                    ["doas", "nvme"], ["nice", "ionice", "fio"], "sudo nvme".split(), "fio",
                                    ["/opt/tools 2/fio"]])
def test_a_program_optionally_after_allowed_wrappers_passes(prefix):
    assert check_program("nvme program", prefix) == ([prefix] if isinstance(prefix, str) else prefix)


PLAN = """name = "p"
power_states = [0]
idle_steps = false
[rig]
port = "/dev/ttyACM0"
fio = {fio}
[drive]
controller = "/dev/nvme0"
namespace = "/dev/nvme0n1"
serial = ""
[[workload]]
name = "r"
rw = "randread"
runtime_s = 1.0
"""


@pytest.mark.parametrize("prefix", ATTACKS[:2] + [["sudo", "-E", "nvme"]], ids=lambda p: " ".join(p))
def test_the_attack_prefixes_are_refused_at_check(tmp_path, prefix):
    """Refused by parse and by `powerrig sweep --check`, with one line naming rig.fio."""
    text = PLAN.format(fio=json.dumps(prefix))
    with pytest.raises(PlanError, match=r"rig.fio \(line 6\): .*program"):
        parse(text)
    p = tmp_path / "p.toml"
    p.write_text(text)
    r = run_cli("sweep", "--check", str(p))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "rig.fio (line 6)" in r.stderr, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    with pytest.raises(PlanError, match=r"rig.nvme \(line 6\): .*program"):
        parse(text.replace("fio = ", "nvme = "))


@needs_fio
@pytest.mark.parametrize("prefix", ATTACKS[:4], ids=lambda p: " ".join(p))
def test_real_fio_with_an_attack_prefix_writes_and_runs_nothing(tmp_path, monkeypatch, prefix):
    """The reproduction with real fio: a read plan (no serial), the attack prefix. Before: the victim
    was overwritten, ``f`` created. Now: refused before fio starts, by the runner and by runners()."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "victim").write_bytes(b"keep" * 4096)
    (tmp_path / "x.img").write_bytes(b"\0" * 65536)
    plan = FioPlan([FioJob("r", rw="read", bs="4k", size="64k", ioengine="psync", filename="x.img")])
    tl = Timeline()
    with pytest.raises(UnsafeArgument) as e:
        Fio(prefix, tl).run(plan, tmp_path / "run")
    assert "\n" not in str(e.value)
    with pytest.raises(UnsafeArgument):
        runners({"fio": prefix})
    assert (tmp_path / "victim").read_bytes() == b"keep" * 4096
    assert not (tmp_path / "f").exists() and not tl.events(FIO)


@needs_fio
def test_real_fio_runs_the_same_read_through_an_allowed_wrapper(tmp_path, monkeypatch):
    """The counterpart: ``nice fio`` (a wrapper with no options) runs the read and nothing else."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.img").write_bytes(b"\0" * 65536)
    plan = FioPlan([FioJob("r", rw="read", bs="4k", size="64k", ioengine="psync", filename="x.img")])
    res = Fio(["nice", "fio"], Timeline()).run(plan, tmp_path / "run")
    assert res.jobs[0].directions["read"].io_bytes == 65536
    assert sorted(os.listdir(tmp_path)) == ["run", "x.img"]


def test_the_virtual_rigs_tools_are_one_program_each(tmp_path):
    """The virtual rig's nvme and fio were ``[python, -S, -P, .../nvme_cli.py, --endpoint, SOCK]``,
    which the check now refuses; a launcher in the rig's own folder is one path that runs that line
    (the arguments pass through as they are)."""
    from powerrig.dut.nvme import NvmeCli
    from powerrig.sim.rig import tool_launcher
    from powerrig.sim.ssd.drive import VirtualSSD
    from powerrig.sim.ssd.server import SsdServer

    sock = str(tmp_path / "s p a c e" / "ssd.sock")
    Path(sock).parent.mkdir()
    nvme, fio = tool_launcher("nvme", sock, tmp_path / "rig"), tool_launcher("fio", sock, tmp_path / "rig")
    assert len(nvme) == len(fio) == 1 and check_program("nvme program", nvme) == nvme
    with SsdServer(VirtualSSD("d5-p5336"), sock):
        assert NvmeCli(nvme).id_ctrl("/dev/nvme0").power_states
        p = subprocess.run(fio + ["--version"], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stdout.startswith("fio-3"), p.stderr
    assert tool_launcher("nvme", sock, tmp_path / "rig") == nvme          # written again, same path


def test_a_started_virtual_rig_publishes_programs(simdir):
    """`powerrig sim start`: the state's nvme and fio pass check_program as they are."""
    r = run_cli("sim", "start", "--json", "--profile", "client-apst")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    for tool in ("nvme", "fio"):
        assert len(st[tool]) == 1 and check_program(f"{tool} program", st[tool]) == st[tool]
    nvme, _ = runners({"nvme": st["nvme"], "fio": st["fio"], "host": st["host"]})
    assert nvme.id_ctrl(st["controller"]).power_states
