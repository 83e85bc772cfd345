"""powerrig[lab]: the PowerrigSlot resource and PowerrigDriver in labgrid's own environment (labgrid
brings pyserial-labgrid, which replaces pyserial, so never in the base virtualenv), and one
reserve-acquire-sweep-release cycle through a real labgrid coordinator and exporter on localhost."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import POWERRIG, REPO, run_cli
from lab_helpers import LAB_BIN, free_port, lab_bin

PYPATH = f"{REPO / 'host_app'}{os.pathsep}{REPO / 'firmware'}"


@pytest.fixture(scope="module")
def lab_venv():
    """labgrid's own virtualenv, .venv-lab (scripts/setup.sh builds it: labgrid, its pyserial fork laid
    down last, powerrig editable); missing it fails under CI=true."""
    return lab_bin()


def lab_python(venv: Path, code: str, cwd: Path, env: dict | None = None, timeout: float = 180):
    e = dict(os.environ, PYTHONPATH=PYPATH, **(env or {}))
    return subprocess.run([str(venv / "python"), "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=e)


def test_the_base_environment_keeps_pyserial():
    """The base install is on pyserial, not labgrid's fork (which would replace its `serial`)."""
    from importlib.metadata import PackageNotFoundError, distribution
    assert distribution("pyserial")
    with pytest.raises(PackageNotFoundError):
        distribution("pyserial-labgrid")


def test_slot_and_driver_on_a_local_target(lab_venv, sim, tmp_path):
    s = sim()
    (tmp_path / "env.yaml").write_text(
        "targets:\n  main:\n    resources:\n      PowerrigSlot:\n"
        f"        port: \"{s.port}\"\n        drive_serial: \"SN1\"\n        rails: \"12V,3V3\"\n"
        "        form_factor: \"U.2\"\n        drive_host: \"ssh://lab@drivehost:22\"\n"
        "    drivers:\n      PowerrigDriver: {}\nimports:\n  - powerrig.lab\n")
    r = lab_python(lab_venv, """
import json, serial
from labgrid import Environment
t = Environment('env.yaml').get_target('main')
d = t.get_driver('PowerrigDriver')
dev = d.interposer()
with dev.stream(interval_us=1000) as st:
    for _ in st.blocks(seconds=0.5):
        pass
    n = st.summary()['samples']
t.deactivate(d)
print(json.dumps({'args': d.pytest_args(), 'rails': d.slot.rails, 'samples': n, 'serial': serial.__file__}))
""", tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["samples"] == 500
    assert out["rails"] == ["12V", "3V3"]
    assert out["args"] == ["--powerrig-rig", s.port, "--powerrig-dut", "/dev/nvme0", "--powerrig-dut-serial", "SN1",
                           "--powerrig-dut-host", "ssh://lab@drivehost:22"]
    assert str(LAB_BIN.parent) in out["serial"]     # labgrid's environment has its own serial package


def test_plain_pyserial_over_labgrids_fork_is_refused_loudly(lab_venv, tmp_path):
    """What pip did silently (plain pyserial's files over the fork's, whichever installed last):
    a copy of the fork with pyserial's rfc2217.py laid over it makes `import powerrig.lab` refuse in
    one line with the repair; the fork as setup.sh lays it down imports."""
    import serial
    fork = subprocess.run([str(lab_venv / "python"), "-c", "import serial, os; print(os.path.dirname(serial.__file__))"],
                          capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    site = tmp_path / "site"
    shutil.copytree(fork, site / "serial")
    for info in Path(fork).parent.glob("pyserial_labgrid-*.dist-info"):
        shutil.copytree(info, site / info.name)
    shutil.copy(Path(serial.__file__).parent / "rfc2217.py", site / "serial" / "rfc2217.py")   # pyserial's
    code = f"import sys; sys.path.insert(0, {str(site)!r}); import powerrig.lab"
    r = subprocess.run([str(lab_venv / "python"), "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    err = r.stderr.strip().splitlines()[-1]
    assert "overwritten by plain pyserial" in err and "serial/rfc2217.py" in err and "--force-reinstall" in err, err
    ok = subprocess.run([str(lab_venv / "python"), "-c", "import powerrig.lab"], capture_output=True, text=True,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr[-1000:]


def test_a_slot_takes_an_rfc2217_url_with_ser2net_options(lab_venv, tmp_path):
    """PowerrigSlot.port: ?ign_set_control (ser2net) accepted, an option pyserial lacks refused in one line."""
    for port, ok in (("rfc2217://rackhost1:7001?ign_set_control", True),
                     ("rfc2217://rackhost1:7001?ign_set_control&timeout=5", True),
                     ("rfc2217://rackhost1:7001?kickolduser", False)):
        (tmp_path / "env.yaml").write_text(
            "targets:\n  main:\n    resources:\n      PowerrigSlot:\n"
            f"        port: {json.dumps(port)}\n    drivers:\n      PowerrigDriver: {{}}\n"
            "imports:\n  - powerrig.lab\n")
        r = lab_python(lab_venv, "from labgrid import Environment\n"
                                 "print(Environment('env.yaml').get_target('main').get_driver('PowerrigDriver').slot.port)",
                       tmp_path)
        if ok:
            assert r.returncode == 0 and r.stdout.strip() == port, r.stderr[-1500:]
        else:
            assert r.returncode != 0 and "unknown option 'kickolduser'" in r.stderr, r.stderr[-1500:]


@pytest.mark.parametrize("field,value", [("drive_host", "ssh://-oProxyCommand=touch${IFS}MARK@localhost"),
                                         ("drive_host", "ssh://lab@drivehost?LocalCommand=touch%20MARK"),
                                         ("controller", "--namespace-id=0xffffffff")])
def test_a_slot_an_exporter_publishes_cannot_smuggle_an_option(lab_venv, tmp_path, field, value):
    """A PowerrigSlot comes from an exporter on another machine: its drive_host and controller pass the
    door to other programs when the resource is made (one line), before any ssh or nvme-cli runs."""
    (tmp_path / "env.yaml").write_text(
        "targets:\n  main:\n    resources:\n      PowerrigSlot:\n        port: \"/dev/ttyACM0\"\n"
        f"        {field}: {json.dumps(value)}\n    drivers:\n      PowerrigDriver: {{}}\nimports:\n  - powerrig.lab\n")
    r = lab_python(lab_venv, "from labgrid import Environment\nEnvironment('env.yaml').get_target('main')\n", tmp_path)
    assert r.returncode != 0 and f"PowerrigSlot.{field}" in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "MARK").exists()


def _wait(what: str, check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.3)
    raise AssertionError(f"{what} within {timeout} s")


PLAN = """name = "lab"
power_states = [0]
[rig]
port = "{port}"
nvme = {nvme}
fio = {fio}
[drive]
controller = "{controller}"
namespace = "{namespace}"
serial = "{serial}"
[timing]
settle_s = 0.3
idle_s = 0.5
measure_s = 1.5
[[workload]]
name = "seq-read"
rw = "read"
"""


def test_reserve_acquire_sweep_release_through_a_coordinator(lab_venv, tmp_path, monkeypatch):
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path / "sim"))
    r = run_cli("sim", "start", "--json", "--profile", "d5-p5336")
    assert r.returncode == 0, r.stderr
    rig = json.loads(r.stdout)
    coord_port = free_port()
    env = dict(os.environ, LG_COORDINATOR=f"127.0.0.1:{coord_port}", PYTHONPATH=PYPATH)
    work = tmp_path / "lab"
    work.mkdir()
    procs = []
    client = [str(lab_venv / "labgrid-client")]

    def lg(*args, check=True):
        p = subprocess.run(client + list(args), cwd=work, capture_output=True, text=True, timeout=120, env=env)
        if check:
            assert p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    try:
        procs.append(subprocess.Popen([str(lab_venv / "labgrid-coordinator"), "-l", f"127.0.0.1:{coord_port}"],
                                      cwd=work, stdout=open(work / "coordinator.log", "w"), stderr=subprocess.STDOUT,
                                      env=env))
        _wait("the coordinator answers", lambda: lg("places", check=False).returncode == 0)
        # the exporter of the rig's host: one slot, published as-is (no import needed on the exporter)
        (work / "exporter.yaml").write_text(
            f"slot1:\n  location: rack1\n  PowerrigSlot:\n    port: \"{rig['port']}\"\n"
            f"    drive_serial: \"{rig['serial']}\"\n    controller: \"{rig['controller']}\"\n"
            "    rails: \"12V,3V3\"\n    form_factor: \"U.2\"\n")
        procs.append(subprocess.Popen([str(lab_venv / "labgrid-exporter"), "-c", f"127.0.0.1:{coord_port}", "-n",
                                       "exp1", "exporter.yaml"], cwd=work, stdout=open(work / "exporter.log", "w"),
                                      stderr=subprocess.STDOUT, env=env))
        _wait("the exporter publishes the slot", lambda: "exp1/slot1/PowerrigSlot" in lg("resources", check=False).stdout)
        lg("-p", "rig1", "create")
        lg("-p", "rig1", "add-match", "exp1/slot1/PowerrigSlot")
        lg("-p", "rig1", "set-tags", "powerrig=yes", "form=U.2")
        # the worker: reserve by tags (not by name), acquire what it got, learn the slot through the driver
        tok = lg("reserve", "--wait", "--shell", "powerrig=yes", "form=U.2").stdout
        token = tok.strip().split("LG_TOKEN=")[1].split()[0]
        env["LG_TOKEN"] = token
        assert "acquired" in lg("-p", "+", "acquire").stdout
        (work / "env.yaml").write_text("targets:\n  main:\n    resources:\n      RemotePlace:\n        name: \"+\"\n"
                                       "    drivers:\n      PowerrigDriver: {}\nimports:\n  - powerrig.lab\n")
        got = lab_python(lab_venv, """
import json
from labgrid import Environment
t = Environment('env.yaml').get_target('main')
d = t.get_driver('PowerrigDriver')
desc = d.interposer().describe()
t.deactivate(d)
print(json.dumps({'plan': d.plan_overrides(), 'device': desc['device']}))
""", work, env={"LG_TOKEN": token, "LG_COORDINATOR": env["LG_COORDINATOR"]})
        assert got.returncode == 0, got.stderr[-2000:]
        slot = json.loads(got.stdout.strip().splitlines()[-1])
        assert slot["plan"]["rig"]["port"] == rig["port"] and slot["plan"]["drive"]["serial"] == rig["serial"]
        # the sweep runs on whatever rig the place gave: its port and drive come from the slot
        plan = work / "plan.toml"
        plan.write_text(PLAN.format(port=slot["plan"]["rig"]["port"], nvme=json.dumps(rig["nvme"]),
                                    fio=json.dumps(rig["fio"]), controller=slot["plan"]["drive"]["controller"],
                                    namespace=rig["namespaces"][0], serial=slot["plan"]["drive"]["serial"]))
        sw = subprocess.run([*POWERRIG, "sweep", str(plan), "--results", str(work / "r.sqlite"), "--out",
                             str(work / "out")], capture_output=True, text=True, timeout=600)
        assert sw.returncode == 0, sw.stdout[-2000:] + sw.stderr[-2000:]
        from powerrig.results import ResultStore
        runs = ResultStore(work / "r.sqlite").runs()
        assert len(runs) == 1
        lg("-p", "+", "release")
        shown = lg("-p", "rig1", "show").stdout
        assert "acquired: None" in shown or "acquired: \n" in shown, shown
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        run_cli("sim", "stop", "--all")
