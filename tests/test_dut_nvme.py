"""nvme-cli runner and parsers: fixtures of several nvme-cli versions, the real binary's error paths."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from powerrig.dut import nvme as n
from powerrig.core.errors import ToolError
from powerrig.core.timeline import NVME, Timeline


def _program(script):
    """A fake tool as the one program a prefix may be (commands.check_program: no option words,
    no interpreter before it): the script made executable, run by this Python."""
    script.write_text(f"#!{sys.executable}\n" + script.read_text())
    script.chmod(0o755)
    return [str(script)]


DATA = Path(__file__).parent / "data" / "nvme"
REAL_NVME = shutil.which("nvme")


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_id_ctrl_1x_flags_and_spacing_decode_nops_and_latencies():
    c = n.parse_id_ctrl(text("id-ctrl-1.x.json"))
    assert c.npss == 4 and c.apsta and c.sn.strip() == "S4EWNX0R123456"
    watts = [s.max_power_w for s in c.power_states]
    assert watts == [6.2, 4.3, 2.1, 0.07, 0.005]          # flags bit0 = MXPS: 700 x 0.0001 W
    assert [s.non_operational for s in c.power_states] == [False, False, False, True, True]
    assert c.state(4).worst_transition_us == 10000
    assert c.power_states[0].idle_power_w is None          # idle_scale 0 = not reported


def test_id_ctrl_2_3_flags_with_active_power_work_and_scales():
    c = n.parse_id_ctrl(text("id-ctrl-2.3.json"))
    ps0, ps1 = c.power_states
    assert ps0.max_power_w == 16.0 and ps0.idle_power_w == 4.0 and ps0.active_power_w == 14.0
    assert ps0.active_workload == 2
    assert ps1.max_power_w == 1.0                          # MXPS=1: 10000 x 0.0001 W
    assert ps1.idle_power_w == 4.0                         # idle_scale 1: 40000 x 0.0001 W
    assert (ps0.entry_latency_us, ps0.exit_latency_us) == (5000, 5000)


def test_id_ctrl_2_6_max_power_scale_keys():
    c = n.parse_id_ctrl(text("id-ctrl-2.6.json"))
    assert [s.max_power_w for s in c.power_states] == [25.0, 15.0, 10.0]
    assert all(s.idle_power_w == 5.06 for s in c.power_states)
    assert c.cctemp_k == 353 and c.tnvmcap == 61440000000000
    with pytest.raises(ToolError, match="power state 3 does not exist"):
        c.state(3)


def test_id_ctrl_missing_required_field_is_named():
    with pytest.raises(ToolError, match="'npss'"):
        n.parse_id_ctrl(text("id-ctrl-missing-npss.json"))


@pytest.mark.parametrize("name,written,temp_k,cw,thm", [
    ("smart-log-1.x.json", 960197124096, 309, 0, (3, 0)),
    ("smart-log-2.3.json", 21210849, 315, 0, (1, 0)),
    ("smart-log-2.6.json", 1474968593, 356, 2, (0, 0)),
    ("smart-log-2.11.json", 2**128 - 1, 350, 2, (5, 1)),
])
def test_smart_log_counters_across_versions(name, written, temp_k, cw, thm):
    s = n.parse_smart_log(text(name))
    assert s.data_units_written == written
    assert s.temperature_k == temp_k and s.critical_warning == cw and s.thermal_transitions == thm


def test_smart_log_comma_grouped_and_big_integers():
    assert n.parse_smart_log(text("smart-log-2.3.json")).host_write_commands == 3200631791616
    assert n.parse_smart_log(text("smart-log-2.11.json")).host_write_commands == 2**64


def test_smart_log_missing_field_named_and_garbage_rejected():
    with pytest.raises(ToolError, match="'data_units_written'"):
        n.parse_smart_log(text("smart-log-missing-written.json"))
    with pytest.raises(ToolError, match="malformed JSON"):
        n.parse_smart_log('{"critical_warning": 0, "temperature": 3')
    with pytest.raises(ToolError, match="not a number"):
        n.parse_smart_log(text("smart-log-2.6.json").replace("1474968593", '"lots"'))


def test_fdp_stats_numbers_and_strings():
    s = n.parse_fdp_stats(text("fdp-stats-2.6.json"))
    assert s.host_bytes_written == 52428800000 and s.waf == pytest.approx(1.05)
    t = n.parse_fdp_stats(text("fdp-stats-2.4-strings.json"))
    assert (t.host_bytes_written, t.media_bytes_written, t.waf) == (1048576, 2097152, 2.0)


@pytest.mark.parametrize("name,expect", [("ocp-smart-add-log-v1.json", (1 << 64) + 5),
                                         ("ocp-smart-add-log-v2.json", 39074645999616),
                                         ("ocp-smart-add-log-hilo.json", 39074645999616)])
def test_ocp_physical_media_units_written_all_forms(name, expect):
    assert n.parse_ocp_smart_add_log(text(name))["physical_media_units_written"] == expect


@pytest.mark.parametrize("name,ps,wh", [("get-feature-pm-2.x.txt", 3, 2), ("get-feature-pm-1.x.txt", 0, 0),
                                        ("get-feature-pm.json", 2, 0)])
def test_get_feature_power_management_text_and_json(name, ps, wh):
    fid, value, _ = n.parse_feature(text(name))
    assert fid == 2
    pm = n.PowerManagement.from_value(value)
    assert (pm.power_state, pm.workload_hint) == (ps, wh)


def test_apst_entries_encode_decode_roundtrip():
    entries = [n.ApstEntry(3, 100), n.ApstEntry(4, 2000)]
    buf = b"".join(e.encode() for e in entries) + bytes(240)
    s = n.decode_apst(1, buf)
    assert s.enabled and s.entries[:2] == tuple(entries) and len(s.entries) == 32
    assert entries[0].encode()[:2] == bytes([0x18, 0x64])   # ITPS 3 << 3, ITPT 100 << 8


@pytest.mark.parametrize("name,ver", [("version-1.16.txt", (1, 16, 0)), ("version-2.11.txt", (2, 11, 0))])
def test_version_text_variants(name, ver):
    assert n.parse_version(text(name)).tuple == ver


@pytest.mark.skipif(REAL_NVME is None, reason="nvme-cli not installed")
def test_real_nvme_version_detected_and_recorded():
    tl = Timeline()
    v = n.NvmeCli(["nvme"], tl).version()
    assert v.major >= 1
    (ev,) = tl.events(NVME)
    assert ev.ok and ev.argv == ["nvme", "version"] and ev.t_end >= ev.t_start


@pytest.mark.skipif(REAL_NVME is None, reason="nvme-cli not installed")
def test_real_nvme_missing_device_is_clear_error_and_failed_event():
    tl = Timeline()
    with pytest.raises(ToolError, match="No such file or directory"):
        n.NvmeCli(["nvme"], tl).smart_log("/dev/nvme97")
    (ev,) = tl.events(NVME)
    assert not ev.ok and "nvme97" in ev.error and ev.t_end is not None


def test_program_not_found_names_tool_and_fix():
    tl = Timeline()
    with pytest.raises(ToolError, match="nvme-cli not found.*rig configuration"):
        n.NvmeCli(["/nonexistent/nvme"], tl).version()
    assert not tl.events()[0].ok


def test_a_controller_not_live_says_so_and_what_to_do(tmp_path):
    """nvme-cli's words for the kernel's refusal while a controller resets or comes back after a removal
    (seen in CI right after a hot removal) get what they mean and what to do."""
    fake = tmp_path / "fake-nvme.py"
    fake.write_text('import sys\nsys.stderr.write("NVMe status: Host Pathing Error: A pathing error was detected '
                    'by the host(0x370)\\n")\nsys.exit(1)\n')
    tl = Timeline()
    with pytest.raises(ToolError, match=r"\(0x370\).*controller of /dev/nvme0 is not live.*nvme list") as e:
        n.NvmeCli(_program(fake), tl).smart_log("/dev/nvme0")
    assert "\n" not in str(e.value)
    (ev,) = tl.events(NVME)
    assert not ev.ok and "0x370" in ev.error
    other = tmp_path / "fake-other.py"                  # any other failure keeps nvme-cli's words alone
    other.write_text('import sys\nsys.stderr.write("NVMe status: Invalid Field in Command(0x2)\\n")\nsys.exit(1)\n')
    with pytest.raises(ToolError) as e:
        n.NvmeCli(_program(other), Timeline()).smart_log("/dev/nvme0")
    assert "not live" not in str(e.value) and "Invalid Field" in str(e.value)


def test_malformed_output_from_a_tool_is_a_failed_event(tmp_path):
    fake = tmp_path / "fake-nvme.py"
    fake.write_text('import sys\nprint(\'{"critical_warning": 0, "temperature": 30\')\n')
    tl = Timeline()
    with pytest.raises(ToolError, match="malformed JSON"):
        n.NvmeCli(_program(fake), tl).smart_log("/dev/nvme0")
    (ev,) = tl.events(NVME)
    assert not ev.ok and "parsed" not in ev.result


def test_id_ctrl_1x_prints_scales_as_raw_descriptor_bytes():
    """nvme-cli 1.x: idle_scale 128 and active_work_scale 130 are bytes with the scale in bits 7:6."""
    (ps0,) = n.parse_id_ctrl(text("id-ctrl-1.16-raw-scales.json")).power_states
    assert ps0.idle_power_w == 5.0 and ps0.active_power_w == 11.0 and ps0.active_workload == 2


def test_celsius_as_powerrig_and_as_nvme_cli_print_it():
    s = n.parse_smart_log(text("smart-log-1.x.json"))
    assert s.temperature_k == 309 and s.temperature_c == pytest.approx(35.85) and s.temperature_c_nvme_cli == 36


def test_analysis_reads_nvme_fields_without_drive_control():
    """One field parser below both: importing the analysis' descriptor reading pulls in no powerrig.dut."""
    import subprocess
    code = ("import sys, powerrig.analysis.descriptors as d; "
            "assert not [m for m in sys.modules if m.startswith('powerrig.dut')], 'analysis imports dut'; "
            "import powerrig.dut.nvme as n, powerrig.core.nvme_fields as f; "
            "assert d.parse_psd is f.parse_psd is n.parse_psd and d.number is f.number")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_smart_log_event_shows_both_celsius_readings(tmp_path):
    fake = tmp_path / "fake-nvme.py"
    fake.write_text(f"print(open({str(DATA / 'smart-log-2.6.json')!r}).read())\n")
    tl = Timeline()
    n.NvmeCli(_program(fake), tl).smart_log("/dev/nvme0")
    (ev,) = tl.events(NVME)
    assert ev.result["parsed"]["temperature_k"] == 356
    assert (ev.result["parsed"]["temperature_c"], ev.result["parsed"]["temperature_c_nvme_cli"]) == (82.85, 83)
