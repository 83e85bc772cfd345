"""The real rp2 firmware image on an emulated RP2040, streaming to the unmodified host (docs/emulator.md).

MicroPython's rp2 port (built from ../shared/vendor for RPI_PICO) runs in rp2040js with PIO, DMA and
USB CDC; firmware/ is in its flash filesystem and main.py starts it as on a board. Three emulated
AD7380s answer the board's own PIO program at the pins from a waveform made by the host simulator's
front-end model, and the board's USB CDC is a pseudo-terminal that `powerrig stream` opens like
/dev/ttyACM0. What is checked against the waveform fed in: every frame arrives (none lost, no gap, no
overrun), the energy of the stream, the digital inputs of every interval, an edge-triggered burst,
the converters' register set-up over SDI and the PIO's serial timing, and the host's clock fit of a
device clock that runs ~10x slower than real time.

Inputs: the vendored MicroPython/picotool tarballs and boot ROM, arm-none-eabi-gcc, cmake, Node and
rp2040js (scripts/setup.sh). Missing ones skip the test with the reason, and FAIL it under CI=true.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from conftest import REPO, run_cli

sys.path.insert(0, str(REPO / "tools" / "rp2emu"))
import emulated_board as eb  # noqa: E402

from powerrig.interposer import Interposer  # noqa: E402
from powerrig.sim.frontend import ACTIVITY_BIT, MARKER_BIT, PERST_BIT, FrontEnd  # noqa: E402

# The shortest interval the RP2040 path keeps up with, 2 rails, found by benchmarks/bench_rp2_emulator.py
# (docs/emulator.md has the sweep); the RP2350's budget is QEMU's (docs/firmware-budget.md).
INTERVAL_US = 10000
STREAM_S = 2.0
RAILS = ["12V", "3V3"]
PERIOD_S = 4e-6
WAVE_S = 5.0                 # longer than boot + stream + burst: no wrap (the model would repeat it)
MARKER_HALF_PERIOD_S = 0.04  # the marker input toggles every 40 ms: rising edges every 80 ms


class StepLoad:
    """A drive whose 12 V power steps every 13 ms through four levels with a 20 W spike every 50 ms,
    a 3.3 V current swinging at 7 Hz, activity on for 100 ms of every 200 ms: any window of the stream
    has structure, so a sample-index slip between the board and the waveform shows in its energy."""

    nominal_volts = {"12V": 12.0, "3V3": 3.3, "5V": 5.0}

    def rail_currents(self, t):
        w12 = 3.0 + 2.5 * (np.floor(t / 0.013) % 4) + 15.0 * (np.mod(t, 0.05) < 300e-6)
        return {"12V": w12 / 12.0, "3V3": 0.10 + 0.05 * np.sin(2 * np.pi * 7 * t), "5V": np.zeros_like(t)}

    def activity(self, t):
        return np.mod(t, 0.2) < 0.1


def waveform() -> tuple[np.ndarray, dict]:
    """(codes n x 7 int16, the board's calibration): the simulator's front end over the step load,
    plus a marker input toggling every 40 ms."""
    fe = FrontEnd(StepLoad(), seed=11)
    t = np.arange(int(WAVE_S / PERIOD_S)) * PERIOD_S
    codes, _truth = fe.sample(t)
    marker = (np.floor(t / MARKER_HALF_PERIOD_S).astype(np.int64) % 2).astype(np.int16) * MARKER_BIT
    codes[:, -1] |= marker
    return codes, fe.factory_calibration()


def unavailable(reason: str):
    """A missing input: skipped with the reason, but a failure under CI=true (the tier must run there)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"emulator tier cannot run under CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    why = eb.node_ready()
    if why:
        unavailable(why)
    try:
        eb.bootrom()
        eb.image()
    except eb.Unavailable as e:
        unavailable(str(e))
    codes, cal = waveform()
    b = eb.EmulatedBoard(codes, tmp_path_factory.mktemp("rp2emu"), calibration=cal)
    b.start()
    b.cal = cal
    yield b
    b.close()


def expected_power(codes: np.ndarray, cal: dict, first: int, end: int) -> float:
    """Mean total power (W) of RAILS over board samples first..end-1, straight from the waveform's codes.
    The AD7380 clocks out each conversion in the NEXT frame, so board sample k carries waveform row k-1."""
    rows = codes[first - 1:end - 1]
    total = np.zeros(len(rows))
    from powerrig.rails import rails

    lsb = {r.name: (r.v_lsb, r.i_lsb) for r in rails().rails}
    for k, name in enumerate(["12V", "3V3", "5V"]):
        if name not in RAILS:
            continue
        c = cal["rails"][name]
        v = (rows[:, 2 * k].astype(np.float64) - c["v_offset"]) * lsb[name][0] * c["v_gain"]
        i = (rows[:, 2 * k + 1].astype(np.float64) - c["i_offset"]) * lsb[name][1] * c["i_gain"]
        total += v * i
    return float(total.mean())


@pytest.fixture(scope="module")
def streamed(board):
    """`powerrig stream` (the real CLI, pyserial on the pty) for STREAM_S of device time."""
    before = board.stats()
    r = run_cli("stream", "--port", board.port, "--seconds", str(STREAM_S), "--interval-us", str(INTERVAL_US),
                "--rails", ",".join(RAILS), "--json", "--quiet", "--reply-timeout", "900", timeout=3000)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout), before, board.stats()


# the emulated board runs at 1-10 % of real time: minutes of wall time (docs/emulator.md has the figures)
pytestmark = pytest.mark.timeout(3600)


def test_rp2_emulator_streams_every_frame_with_the_energy_fed_in(board, streamed):
    s, before, after = streamed
    intervals = int(round(STREAM_S * 1e6 / INTERVAL_US))
    assert s["samples"] == intervals, s
    assert (s["dropped_frames"], s["gaps"], s["gap_intervals"], s["overruns"], s["crc_errors"],
            s["bad_headers"], s["malformed_frames"]) == (0, 0, 0, 0, 0, 0, 0), s
    want = expected_power(board.codes, board.cal, s["first_index"], s["end_index"])
    got = s["mean_power_w"]["total"]
    print(f"rp2 emulator: interval {INTERVAL_US} us, {STREAM_S} s emulated, frames {s['frames']}, "
          f"lost {s['dropped_frames']}, energy {got * STREAM_S:.6f} J vs {want * STREAM_S:.6f} J fed in "
          f"({(got / want - 1) * 100:+.4f} %), emulated {after['emu_s'] - before['emu_s']:.2f} s in "
          f"{after['wall_s'] - before['wall_s']:.1f} s wall")
    assert abs(got / want - 1) < 1e-3, (got, want)
    # the converters were clocked within their datasheet timing, and set up over SDI
    adc = after["adc"]
    assert adc["sclk_during_conversion"] == 0 and adc["conversion_rate_breaches"] == 0, adc
    assert adc["sclk_too_fast"] == 0 and adc["short_frames"] == 0, adc
    assert all(r["one_wire"] and r["external_ref"] for r in adc["registers"]), adc["registers"]
    assert adc["waveform_wraps"] == 0, "the waveform repeated: make WAVE_S longer"


def test_rp2_emulator_clock_fit_follows_the_slow_device_clock(streamed):
    """The host fitted the emulated clock as a crystal far off nominal (docs/emulator.md, "Time")."""
    s, before, after = streamed
    rate = (after["emu_s"] - before["emu_s"]) / (after["wall_s"] - before["wall_s"])
    fitted = 1.0 + s["clock"]["drift_ppm"] * 1e-6           # device seconds per host second
    assert rate < 0.9, f"the emulator ran at {rate:.2f}x real time: this check wants a slow device"
    assert abs(fitted / rate - 1) < 0.25, (fitted, rate)


def test_rp2_emulator_digital_inputs_and_edge_trigger(board, streamed):
    """Each interval's digital OR/AND equal the waveform's; a burst on the marker's rising edge starts
    its post-trigger samples at an edge of the waveform."""
    codes = board.codes
    dig = codes[:, -1].astype(np.int64)
    with Interposer.open(board.port, timeout=900) as dev:
        with dev.stream(interval_us=INTERVAL_US, rails=RAILS, stall_timeout=30) as st:
            blocks = list(st.blocks(seconds=0.25))
        spi = INTERVAL_US // 4
        seen = 0
        for b in blocks:
            assert b.valid.all()
            for j in range(len(b)):
                k = b.first_index + j * spi                 # digital inputs: no pipeline delay
                assert (int(b.dig_or[j]), int(b.dig_and[j])) == (int(np.bitwise_or.reduce(dig[k:k + spi])),
                                                                int(np.bitwise_and.reduce(dig[k:k + spi])))
                seen += 1
        assert seen == int(0.25e6 / INTERVAL_US)
        ors = np.concatenate([b.dig_or for b in blocks]).astype(int)
        assert (ors & PERST_BIT).all() and (ors & ACTIVITY_BIT).any() and (ors & MARKER_BIT).any()
        burst = dev.burst(pre=100, post=400, trigger="edge", bit=2, rising=True, timeout=600)
    edge = burst.first_index + 100                            # the first post-trigger sample
    assert dig[edge] & MARKER_BIT and not dig[edge - 1] & MARKER_BIT, (edge, dig[edge - 3:edge + 3])
    assert np.array_equal(burst.codes[:, -1], codes[burst.first_index:burst.first_index + 500, -1])
