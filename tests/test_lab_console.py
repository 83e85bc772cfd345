"""labgrid's console and powerrig never share the interposer's port. The exporter documented in
docs/scale.md published a NetworkSerialPort on the slot's ser2net port, and its ser2net connection
kicked the old user: opening labgrid's console dropped powerrig after 0.9 s. Both YAML blocks are taken
from the doc: the exporter names nothing else on that port, and with the documented ser2net a real
labgrid console (SerialDriver on a NetworkSerialPort) opened mid-stream is turned away while powerrig
streams on to its end; the old config (kickolduser) is run beside it to show what the check catches."""
from __future__ import annotations

import json
import subprocess
import time
from urllib.parse import urlsplit

import pytest
import yaml

from conftest import POWERRIG
from lab_helpers import doc_yaml, free_port, lab_bin, ser2net_config, start_ser2net, stop, wait_listening


def test_the_documented_exporter_publishes_nothing_else_on_the_slots_port():
    exporter = yaml.safe_load(doc_yaml("PowerrigSlot:"))
    for group, resources in exporter.items():
        slot = urlsplit(resources["PowerrigSlot"]["port"])
        others = {cls: p for cls, p in resources.items() if cls not in ("PowerrigSlot", "location")}
        clash = {cls: p for cls, p in others.items() if isinstance(p, dict) and str(p.get("port")) == str(slot.port)
                 and p.get("host", slot.hostname) == slot.hostname}
        assert not clash, f"{group}: {clash} would open powerrig's ser2net port {slot.netloc}"
    conn = yaml.safe_load(doc_yaml("/etc/ser2net.yaml"))["connection"]
    assert not (conn.get("options") or {}).get("kickolduser"), "a second client would take the port"


CONSOLE = """
import json, sys
from labgrid import Environment
t = Environment(sys.argv[1]).get_target('main')
d = t.get_driver('SerialDriver', activate=False)
out = {}
try:
    t.activate(d)
    out['read'] = d.read(size=4096, timeout=1.0).decode('latin-1')
except Exception as e:
    out['error'] = f'{type(e).__name__}: {e}'
print(json.dumps(out))
"""


@pytest.mark.parametrize("config", ["documented", "kickolduser (the old doc)"])
def test_labgrids_console_cannot_take_the_port_powerrig_streams_on(sim, tmp_path, config):
    venv = lab_bin()
    s = sim()
    port = free_port()
    cfg = tmp_path / "ser2net.yaml"
    text = ser2net_config(s.port, "127.0.0.1", port)
    if config != "documented":
        text += "  options:\n    kickolduser: true\n"
    cfg.write_text(text)
    procs = [start_ser2net(cfg)]
    try:
        wait_listening("127.0.0.1", port, procs[0])
        seconds = 4
        stream = subprocess.Popen([*POWERRIG, "stream", "--port", f"rfc2217://127.0.0.1:{port}?ign_set_control",
                                   "--seconds", str(seconds), "--interval-us", "1000", "--json", "--quiet"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(stream)
        time.sleep(1.5)                 # streaming by now; then someone opens the console on the same port
        (tmp_path / "env.yaml").write_text(
            "targets:\n  main:\n    resources:\n      NetworkSerialPort:\n        host: 127.0.0.1\n"
            f"        port: {port}\n    drivers:\n      SerialDriver: {{}}\n")
        console = subprocess.run([str(venv / "python"), "-c", CONSOLE, str(tmp_path / "env.yaml")],
                                 capture_output=True, text=True, timeout=120)
        assert console.returncode == 0, console.stderr[-2000:]
        seen = json.loads(console.stdout.strip().splitlines()[-1])
        out, err = stream.communicate(timeout=120)
    finally:
        stop(procs)
    if config == "documented":
        assert stream.returncode == 0, err[-2000:]
        summary = json.loads(out)
        # to its end: the whole span arrived (samples lost to this loaded host's scheduling show as gaps)
        assert summary["end_index"] - summary["first_index"] == seconds * 1000 * 1000 // 4, json.dumps([summary, seen])
        assert summary["samples"] > seconds * 1000 // 2 and summary["crc_errors"] == 0, json.dumps([summary, seen])
        assert "error" in seen or "Port already in use" in seen.get("read", ""), seen
    else:                               # what the old doc did: the console wins, powerrig dies
        assert stream.returncode != 0 and "reader thread died" in err, (stream.returncode, err[-2000:])
