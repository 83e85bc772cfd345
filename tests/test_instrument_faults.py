"""Every VISA failure and every invalid reading is one line: an unresolvable host, a reply that is not
ASCII, a timeout, the SCPI not-a-number 9.91E37, an overload 9.9E37 and NaN (pyvisa-sim dialogues
and a real TCP socket); and `powerrig validate` says "no verdict: the reference data is invalid"
instead of FAIL when the reference reads no measurement (a proxy on the socket between pyvisa and the
simulated N6705C turns one of its readings into 9.91E37)."""
from __future__ import annotations

import re
import socket
import threading
from collections import deque
from pathlib import Path

import pytest

from conftest import run_cli
from powerrig.core.errors import InstrumentError
from powerrig.instruments import open_reference
from powerrig.instruments.scpi import InvalidReading, invalid_reading

BENCH = str(Path(__file__).parent / "instruments" / "bench.yaml") + "@sim"
N6705C = "USB0::0x2A8D::0x0F02::MY56000001::0::INSTR"


@pytest.mark.parametrize("cmd,text,why", [
    ("MEAS:VOLT? (@2)", "NAN", "not a number"),
    ("MEAS:CURR? (@2)", r"\+9.91000E\+37", "not a number"),
    ("MEAS:VOLT? (@3)", r"\+9.90000E\+37", "an overload"),
    ("MEAS:CURR? (@3)", r"-9.90000E\+37", "an overload"),
])
def test_invalid_readings_are_refused_in_one_line(cmd, text, why):
    with open_reference(N6705C, BENCH) as ref:
        pattern = rf"^N6705C at {re.escape(N6705C)}: '{re.escape(cmd)}' answered {text}, {why}"
        with pytest.raises(InvalidReading, match=pattern) as e:
            ref.query_float(cmd)
        assert "\n" not in str(e.value)
        assert ref.measure(1) == pytest.approx((11.9987, 1.5023))          # the session is still good


def test_an_array_with_one_invalid_value_is_refused_whole():
    with open_reference(N6705C, BENCH) as ref:
        with pytest.raises(InvalidReading, match=r"answered 1 invalid value\(s\) of 4, the first at index 2: 9.91e\+37, "
                                                 r"not a number"):
            ref.query_floats("FETC:ARR:CURR? (@2)")


def test_the_scpi_markers_and_real_readings_are_told_apart():
    assert invalid_reading(9.91e37) and invalid_reading(float("nan")) and invalid_reading(float("-inf"))
    assert "overload" in invalid_reading(-9.9e37)
    for x in (0.0, 12.0, -3.3e-6, 1e30):
        assert invalid_reading(x) is None


def test_an_unresolvable_host_is_one_line():
    with pytest.raises(InstrumentError, match=r"^cannot open VISA resource 'TCPIP::no-such-meter.invalid::5025::"
                                              r"SOCKET': could not connect: .*; check the address") as e:
        open_reference("TCPIP::no-such-meter.invalid::5025::SOCKET", "@py", timeout_ms=2000)
    assert "\n" not in str(e.value)


class FakeMeter:
    """A TCP SCPI peer with scripted replies (bytes), for what pyvisa-sim cannot send."""

    def __init__(self, replies: dict[bytes, bytes]):
        self.replies = replies
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.resource = f"TCPIP::127.0.0.1::{self.srv.getsockname()[1]}::SOCKET"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        c, _ = self.srv.accept()
        with c, c.makefile("rb") as f:
            for line in f:
                q = line.strip()
                if b"?" in q:
                    c.sendall(self.replies.get(q, b'+0,"No error"') + b"\n")


def test_a_reply_that_is_not_ascii_is_one_line():
    m = FakeMeter({b"*IDN?": b"\xff\xfeKeysight,N6705C,X,1"})
    with pytest.raises(InstrumentError, match=r"answered \*IDN\? with a reply that is not ASCII text \(byte 0xff at "
                                              r"position 0\)"):
        open_reference(m.resource, "@py", timeout_ms=2000)
    m = FakeMeter({b"*IDN?": b"Keysight Technologies,N6705C,MY1,D.03", b"MEAS:VOLT? (@1)": b"12.0\xb0"})
    with open_reference(m.resource, "@py", timeout_ms=2000) as ref:
        with pytest.raises(InstrumentError, match=r"^N6705C at .* answered 'MEAS:VOLT\? \(@1\)' with a reply that is "
                                                  r"not ASCII text \(byte 0xb0 at position 4\)"):
            ref.measure(1)


# ---- validate through the CLI, the reference's reply spoiled on the socket ------------------------------------
class Spoiler:
    """A line proxy in front of the simulated reference: replies to ``target`` get 9.91E+37 as their
    first value (the meter's own 'no valid reading')."""

    def __init__(self, upstream: tuple[str, int], target: bytes):
        self.upstream, self.target = upstream, target
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.resource = f"TCPIP::127.0.0.1::{self.srv.getsockname()[1]}::SOCKET"
        self.spoiled = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            s = socket.create_connection(self.upstream)
            asked: deque[bytes] = deque()
            threading.Thread(target=self._up, args=(c, s, asked), daemon=True).start()
            threading.Thread(target=self._down, args=(s, c, asked), daemon=True).start()

    def _up(self, c, s, asked):
        with c.makefile("rb") as f:
            for line in f:
                if b"?" in line:
                    asked.append(line.strip())
                s.sendall(line)
        s.close()

    def _down(self, s, c, asked):
        with s.makefile("rb") as f:
            for line in f:
                q = asked.popleft() if asked else b""
                if q.startswith(self.target):
                    line = b"+9.91000E+37," + line.split(b",", 1)[-1]
                    self.spoiled += 1
                c.sendall(line)
        c.close()

    def close(self):
        self.srv.close()


@pytest.fixture
def bench(tmp_path):
    from powerrig.sim.bench.calbench import BenchFixture, ReferenceMeter, ReferenceServer
    from powerrig.sim.interposer.frontend import ScriptedLoad
    from powerrig.sim.interposer.board import VirtualInterposer

    fixture = BenchFixture(ScriptedLoad())
    sim = VirtualInterposer(load=fixture, seed=3, state_dir=str(tmp_path / "board")).start()
    server = ReferenceServer(ReferenceMeter(sim.frontend, fixture, seed=3)).start()
    yield sim, server
    server.stop()
    sim.stop()


def test_validate_says_the_reference_data_is_invalid_instead_of_fail(bench):
    sim, server = bench
    host, port = server.resource.split("::")[1:3]
    spoiler = Spoiler((host, int(port)), b"FETC:ARR:CURR? (@1)")
    try:
        r = run_cli("validate", "--port", sim.port, "--reference", spoiler.resource, "--windows", "2", "--seconds",
                    "0.3")
    finally:
        spoiler.close()
    assert spoiler.spoiled >= 1, r.stdout + r.stderr
    assert r.returncode == 2, r.stdout + r.stderr
    err = [ln for ln in r.stderr.splitlines() if not ln.startswith("  ")]     # progress lines are indented
    assert err == [f"powerrig: error: no verdict: the reference data is invalid in window 1 (N6705C at "
                   f"{spoiler.resource}: 'FETC:ARR:CURR? (@1)' answered 1 invalid value(s) of 1024, the first at "
                   "index 0: 9.91e+37, not a number (the meter has no valid reading); check the range, the leads and "
                   "that the channel is on)"], r.stderr
    assert "FAIL" not in r.stdout and "Traceback" not in r.stderr


def test_reading_faults_marks_each_value_as_invalid_reading_judges_it():
    """The data log's per-record marking agrees with the one-value refusal, value by value."""
    import numpy as np
    from powerrig.instruments.scpi import NOT_A_NUMBER, OVERLOAD, reading_faults
    xs = [9.91e37, -9.91e37, float("nan"), 9.9e37, -9.9e37, float("inf"), 0.0, 12.0, -3.3e-6, 1e30]
    got = reading_faults(np.array(xs))
    want = [NOT_A_NUMBER if invalid_reading(x) and "not a number" in invalid_reading(x) else
            OVERLOAD if invalid_reading(x) else 0 for x in xs]
    assert got.tolist() == want == [1, 1, 1, 2, 2, 2, 0, 0, 0, 0]
