"""labgrid across hosts: three network namespaces stand for three machines, joined by veth links.

- the rig host (``rig``): the virtual rig's interposer pty behind ser2net (the documented YAML) and a
  labgrid exporter (the documented exporter YAML) publishing the PowerrigSlot;
- the drive host (``drv``): OpenSSH's sshd; the drive's nvme-cli and fio run there, reached over ssh
  (dut/remote.py, through the door in dut/commands.py);
- the worker's host (``lab``): the labgrid coordinator, labgrid-client (reserve by tags, acquire),
  the driver that reads the slot, and ``powerrig sweep`` with the port and drive the slot gave.

The worker reaches the interposer only as ``rfc2217://10.231.1.2:7001?ign_set_control`` and the drive
only as ``ssh://root@10.231.2.2``: those addresses exist inside these namespaces alone. Root is needed
(``ip netns``); under CI=true anything missing fails."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from lab_helpers import doc_yaml, lab_bin, need, ser2net_config, start_ser2net, stop, wait_listening

RIG_IP, LAB_RIG_IP, DRV_IP, LAB_DRV_IP = "10.231.1.2", "10.231.1.1", "10.231.2.2", "10.231.2.1"
COORD = f"{LAB_RIG_IP}:20408"
SSHD = "/usr/sbin/sshd"


def sh(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (argv, r.stdout, r.stderr)
    return r


@pytest.fixture
def hosts():
    """{'lab': prefix, 'rig': prefix, 'drv': prefix}: `ip netns exec NS` for three linked namespaces."""
    need(os.geteuid() == 0, "network namespaces need root")
    need(shutil.which("ip"), "iproute2 (ip) is not installed")
    tag = f"pr{os.getpid() % 100000}"
    names = {k: f"{tag}{k}" for k in ("lab", "rig", "drv")}
    made = []
    try:
        for ns in names.values():
            sh("ip", "netns", "add", ns)
            made.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for far, near_ip, far_ip in (("rig", LAB_RIG_IP, RIG_IP), ("drv", LAB_DRV_IP, DRV_IP)):
            a, b = f"to{far}", "tolab"
            sh("ip", "link", "add", a, "netns", names["lab"], "type", "veth", "peer", "name", b, "netns", names[far])
            sh("ip", "-n", names["lab"], "addr", "add", f"{near_ip}/24", "dev", a)
            sh("ip", "-n", names[far], "addr", "add", f"{far_ip}/24", "dev", b)
            sh("ip", "-n", names["lab"], "link", "set", a, "up")
            sh("ip", "-n", names[far], "link", "set", b, "up")
        yield {k: ["ip", "netns", "exec", ns] for k, ns in names.items()}
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=60)


def _sshd(d: Path, prefix: list[str]) -> tuple[subprocess.Popen, str]:
    """sshd on the drive host's address, one authorized key, strict host key checking on the client."""
    need(os.path.exists(SSHD) and shutil.which("ssh"), "OpenSSH is not installed")
    for k in ("host_key", "client_key"):
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / k))
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    (d / "sshd_config").write_text(
        f"ListenAddress {DRV_IP}\nPort 22\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
        f"SetEnv PYTHONPATH={REPO / 'host_app'}\n")
    os.makedirs("/run/sshd", exist_ok=True)
    pub = (d / "host_key.pub").read_text().split()
    (d / "known_hosts").write_text(f"{DRV_IP} {pub[0]} {pub[1]}\n")
    proc = subprocess.Popen([*prefix, SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                            stdout=open(d / "sshd.log", "w"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = (f"ssh://root@{DRV_IP}:22?IdentityFile={d}/client_key&UserKnownHostsFile={d}/known_hosts"
           "&StrictHostKeyChecking=yes&IdentitiesOnly=yes")
    return proc, url


def _exporter_yaml(slot: dict) -> str:
    """The documented exporter, for this slot: hosts and drive replaced, nothing else changed."""
    text = doc_yaml("PowerrigSlot:")
    for old, new in (("rfc2217://rackhost1:7001", f"rfc2217://{RIG_IP}:7001"),
                     ('"PHAB1234000A1P6AGN"', json.dumps(slot["serial"])),
                     ('"/dev/nvme0"', json.dumps(slot["controller"])),
                     ('"ssh://lab@drivehost3:22"', json.dumps(slot["drive_host"]))):
        assert old in text, old
        text = text.replace(old, new)
    return text


PLAN = """name = "lab-hosts"
power_states = [0]
[rig]
port = {port}
nvme = {nvme}
fio = {fio}
[drive]
controller = {controller}
namespace = {namespace}
serial = {serial}
host = {host}
[timing]
settle_s = 0.3
idle_s = 0.5
measure_s = 1.5
[[workload]]
name = "seq-read"
rw = "read"
"""

READ_SLOT = """
import json
from labgrid import Environment
t = Environment('env.yaml').get_target('main')
d = t.get_driver('PowerrigDriver')
print(json.dumps(d.plan_overrides()))
"""


@pytest.mark.timeout(600)        # ~145-200 s on the loaded shared host: a dozen labgrid-client start-ups
def test_a_plan_runs_through_a_coordinator_an_exporter_and_a_drive_host(hosts, tmp_path, monkeypatch):
    t0 = time.monotonic()
    venv = lab_bin()
    monkeypatch.setenv("POWERRIG_SIM_DIR", str(tmp_path / "sim"))
    r = run_cli("sim", "start", "--json", "--profile", "d5-p5336")
    assert r.returncode == 0, r.stderr
    rig = json.loads(r.stdout)
    procs: list[subprocess.Popen] = []
    work = tmp_path / "lab"
    work.mkdir()
    env = dict(os.environ, LG_COORDINATOR=COORD)

    def lg(*args, check=True):
        p = subprocess.run([*hosts["lab"], str(venv / "labgrid-client"), *args], cwd=work, capture_output=True,
                           text=True, timeout=120, env=env)
        assert not check or p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    def start(prefix, argv, name, cwd=work):
        procs.append(subprocess.Popen([*prefix, *argv], cwd=cwd, stdout=open(work / f"{name}.log", "w"),
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env))
        return procs[-1]

    try:
        # the drive host: sshd
        (tmp_path / "ssh").mkdir(mode=0o700)
        sshd, drive_url = _sshd(tmp_path / "ssh", hosts["drv"])
        procs.append(sshd)
        # the rig host: ser2net as documented, in front of the interposer's pty
        cfg = tmp_path / "ser2net.yaml"
        cfg.write_text(ser2net_config(rig["port"], RIG_IP, 7001))
        procs.append(start_ser2net(cfg, hosts["rig"]))
        wait_listening(RIG_IP, 7001, procs[-1], hosts["lab"])          # reached from the worker's host
        wait_listening(DRV_IP, 22, sshd, hosts["lab"])
        # the worker's host: the coordinator; the rig host's exporter registers with it over the link
        coord = start(hosts["lab"], [str(venv / "labgrid-coordinator"), "-l", COORD], "coordinator")
        wait_listening(LAB_RIG_IP, 20408, coord, hosts["rig"])
        (work / "exporter.yaml").write_text(_exporter_yaml({"serial": rig["serial"], "controller": rig["controller"],
                                                            "drive_host": drive_url}))
        start(hosts["rig"], [str(venv / "labgrid-exporter"), "-c", COORD, "-n", "rackhost1", "exporter.yaml"],
              "exporter")
        deadline = time.monotonic() + 60
        while "rackhost1/rack1-slot1/PowerrigSlot" not in lg("resources", check=False).stdout:
            assert time.monotonic() < deadline, (work / "exporter.log").read_text()[-2000:]
            time.sleep(0.3)
        lg("-p", "rack1-slot1", "create")
        lg("-p", "rack1-slot1", "add-match", "rackhost1/rack1-slot1/*")
        lg("-p", "rack1-slot1", "set-tags", "powerrig=yes", "form=U.2")
        token = lg("reserve", "--wait", "--shell", "powerrig=yes", "form=U.2").stdout.split("LG_TOKEN=")[1].split()[0]
        env["LG_TOKEN"] = token
        assert "acquired" in lg("-p", "+", "acquire").stdout
        t_acquired = time.monotonic()
        assert "acquired: rig" not in lg("-p", "rack1-slot1", "show").stdout.replace("acquired: None", "")
        (work / "env.yaml").write_text("targets:\n  main:\n    resources:\n      RemotePlace:\n        name: \"+\"\n"
                                       "    drivers:\n      PowerrigDriver: {}\nimports:\n  - powerrig.lab\n")
        got = subprocess.run([*hosts["lab"], str(venv / "python"), "-c", READ_SLOT], cwd=work, capture_output=True,
                             text=True, timeout=120, env=env)
        assert got.returncode == 0, got.stderr[-2000:]
        slot = json.loads(got.stdout.strip().splitlines()[-1])
        assert slot["rig"]["port"] == f"rfc2217://{RIG_IP}:7001?ign_set_control"
        assert slot["drive"]["host"] == drive_url
        # the sweep, on the worker's host, with what the place gave: interposer over rfc2217, drive over ssh
        (work / "plan.toml").write_text(PLAN.format(
            port=json.dumps(slot["rig"]["port"]), nvme=json.dumps(rig["nvme"]), fio=json.dumps(rig["fio"]),
            controller=json.dumps(slot["drive"]["controller"]), namespace=json.dumps(rig["namespaces"][0]),
            serial=json.dumps(slot["drive"]["serial"]), host=json.dumps(slot["drive"]["host"])))
        t_sweep = time.monotonic()
        sw = subprocess.run([*hosts["lab"], sys.executable, "-m", "powerrig", "sweep", "plan.toml", "--results",
                             "r.sqlite", "--out", "out"], cwd=work, capture_output=True, text=True, timeout=600, env=env)
        assert sw.returncode == 0, sw.stdout[-2000:] + sw.stderr[-2000:]
        t_swept = time.monotonic()
        lg("-p", "+", "release")
        assert "acquired: None" in lg("-p", "rack1-slot1", "show").stdout
    finally:
        stop(procs)
        run_cli("sim", "stop", "--all")
    from powerrig.results import ResultStore
    store = ResultStore(work / "r.sqlite")
    runs = store.runs()
    assert len(runs) == 1 and runs[0]["status"] == "done", runs
    steps = store.steps(runs[0]["id"])
    assert "seq-read" in {s["workload"] for s in steps}, steps
    sshd_log = (tmp_path / "ssh" / "sshd.log").read_text()
    assert f"Accepted publickey for root from {LAB_DRV_IP}" in sshd_log, sshd_log[-2000:]
    print(f"two-namespace labgrid test: {time.monotonic() - t0:.1f} s wall (hosts up and place acquired "
          f"{t_acquired - t0:.1f} s, slot read {t_sweep - t_acquired:.1f} s, sweep {t_swept - t_sweep:.1f} s), "
          f"{len(steps)} steps stored")
