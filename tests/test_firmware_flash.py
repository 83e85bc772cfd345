"""`powerrig flash`: what it would copy, and the devices it refuses (no board is needed for either)."""
from __future__ import annotations

from conftest import run_cli

# the virtual interposer never answers as a REPL: its refusal comes when mpremote's wait runs out (8 s by
# default, for a real board busy in main.py); 3 s gives the same refusal sooner
QUICK_REFUSAL = ("--identify-timeout", "3")


def test_dry_run_lists_the_compiled_firmware_and_its_build():
    r = run_cli("flash", "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    copied = {ln.split()[0] for ln in lines[1:]}
    assert {":main.py", ":board/reducer.mpy", ":board/rail_thumb.mpy", ":board/crc_thumb.mpy",
            ":powerrig_fw/device.mpy", ":powerrig_fw/build_info.mpy"} <= copied, copied
    assert not any(c.endswith(".py") and c != ":main.py" for c in copied), copied
    assert "compiled for armv7m" in lines[0] and "build " in lines[0], lines[0]


def test_refuses_what_is_not_a_serial_port(tmp_path):
    f = tmp_path / "not-a-port"
    f.write_text("x")
    r = run_cli("flash", "--port", str(f))
    assert r.returncode == 2 and "is not a serial port" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_refuses_a_device_that_is_not_micropython_on_rp2350(sim):
    s = sim()                      # the virtual interposer: a serial port, but no MicroPython REPL
    r = run_cli("flash", "--port", s.port, *QUICK_REFUSAL, timeout=90)
    assert r.returncode == 2 and "is not an RP2350 running MicroPython" in r.stderr, r.stdout + r.stderr


def test_needs_a_port_unless_dry_run():
    r = run_cli("flash")
    assert r.returncode == 2 and "--port is required" in r.stderr, r.stderr


def test_a_bad_identify_timeout_is_one_line():
    r = run_cli("flash", "--port", "/dev/ttyNOPE0", "--identify-timeout", "nan")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--identify-timeout must be" in r.stderr, r.stderr


def test_powerrig_firmware_is_asked_to_hand_its_console_back_before_mpremote(sim):
    """The firmware ignores Ctrl-C (kbd_intr(-1)), so mpremote alone could never interrupt it: flash
    first sends the `repl` command, which the firmware logic (here behind the virtual interposer) obeys."""
    s = sim()
    r = run_cli("flash", "--port", s.port, *QUICK_REFUSAL, timeout=90)
    assert "powerrig firmware handed its console back" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 2 and "is not an RP2350 running MicroPython" in r.stderr, r.stdout + r.stderr
