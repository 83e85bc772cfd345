"""The pytest plugin's ``capture`` places the block's admin commands from the (virtual) drive host's
kernel trace as sweeps do (sweep/command_trace.py): in the capture each command sits on the controller's
side with nvme-cli's interval beside it, and the block's traced commands come back on ``c.trace``."""
from __future__ import annotations

from test_sweep_pytest_plugin import newdir, run_pytest  # noqa: F401 (the fixture)


def test_pytest_plugin_capture_places_admin_commands_from_the_drive_hosts_trace(newdir):  # noqa: F811
    (newdir / "test_placed.py").write_text(
        "from powerrig.capture import CaptureReader\n"
        "def test_placed(rig, dut, capture):\n"
        "    with capture('b') as c:\n"
        "        dut.nvme.set_power_state(dut.controller, 1)\n"
        "        dut.nvme.smart_log(dut.controller)\n"
        "    with CaptureReader(c.path) as cap:\n"
        "        nv = [e for e in cap.events if e.kind == 'nvme']\n"
        "    assert {e.name for e in nv} >= {'get-feature power', 'set-feature power', 'smart-log'}\n"
        "    for e in nv:\n"
        "        assert e.meta.get('placed') == 'nvme_trace', e.meta\n"
        "        assert e.meta['host_t_start'] <= e.t_start <= e.t_end <= e.meta['host_t_end']\n"
        "        assert e.t_end - e.t_start < 0.002 < e.meta['host_t_end'] - e.meta['host_t_start']\n"
        "    sf = [x for x in c.trace.admin() if x.opcode == 'nvme_admin_set_features']\n"
        "    assert [x.args['cdw11'] for x in sf] == [1]\n")
    r = run_pytest(newdir, "-q", "--powerrig-rig", "sim:d5-p5336")
    assert r.returncode == 0, r.stdout[-3000:]
    assert "1 passed" in r.stdout
