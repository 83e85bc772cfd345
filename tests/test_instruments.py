"""Reference-meter drivers against pyvisa-sim dialogues: identification, readings, the error queue,
timeouts, and refusing instruments powerrig does not support."""
from __future__ import annotations

from pathlib import Path

import pytest

from powerrig.core.errors import InstrumentError
from powerrig.instruments import Dmm, PowerAnalyzer, open_reference

BENCH = str(Path(__file__).parent / "instruments" / "bench.yaml") + "@sim"
N6705C = "USB0::0x2A8D::0x0F02::MY56000001::0::INSTR"


def test_power_analyzer_identifies_and_measures():
    with open_reference(N6705C, BENCH) as ref:
        assert isinstance(ref, PowerAnalyzer)
        assert ref.identity.model == "N6705C" and ref.identity.serial == "MY56000001"
        assert ref.measure(1) == pytest.approx((11.9987, 1.5023))


def test_rejected_command_raises_with_the_instruments_words():
    with open_reference(N6705C, BENCH) as ref:
        with pytest.raises(InstrumentError, match=r"rejected 'OUTP ON,\(@2\)'.*-113"):
            ref.output(2, True)
        ref.output(1, True)              # the queue was drained: the next good command passes


def test_timeout_is_named():
    with open_reference(N6705C, BENCH, timeout_ms=200) as ref:
        with pytest.raises(InstrumentError, match="did not answer 'MEAS:CURR\\? \\(@4\\)' within 0.2 s"):
            ref.query("MEAS:CURR? (@4)")


def test_dmm_configures_and_reads():
    with open_reference("GPIB0::22::INSTR", BENCH) as dmm:
        assert isinstance(dmm, Dmm)
        dmm.configure("v", nplc=10)
        assert dmm.read() == pytest.approx(12.00012345)
        with pytest.raises(InstrumentError, match="'v' or 'i'"):
            dmm.configure("w")


def test_unsupported_instrument_is_refused():
    with pytest.raises(InstrumentError, match="DP832 .*not a supported reference meter"):
        open_reference("ASRL2::INSTR", BENCH)


def test_missing_resource_and_non_scpi_device():
    with pytest.raises(InstrumentError, match=r"cannot open VISA resource 'TCPIP::127.0.0.1::1::SOCKET'"):
        open_reference("TCPIP::127.0.0.1::1::SOCKET", "@py")     # nothing listens on port 1
    with pytest.raises(InstrumentError, match=r"\*IDN\?"):
        open_reference("ASRL3::INSTR", BENCH, timeout_ms=200)
