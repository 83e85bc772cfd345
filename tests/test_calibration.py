"""Calibration and validation against the simulated reference meter, through the real CLI.

The virtual interposer starts uncalibrated (its front end's gain and offset errors uncorrected);
the simulated reference measures the same rails with its own smaller errors. After `powerrig
calibrate` the interposer must agree with the reference within 0.1 % on every channel, measured
here on points that neither the fit nor the procedure's own verification used.
"""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from powerrig.calibration.procedure import Point, errors, measure
from powerrig.calibration.window import StreamWindows
from powerrig.instruments import open_reference
from powerrig.interposer.client import Interposer
from powerrig.sim.bench.calbench import BenchFixture, ReferenceMeter, ReferenceServer
from powerrig.sim.interposer.frontend import ScriptedLoad
from powerrig.sim.interposer.board import VirtualInterposer

CHANNELS = {"12V": 1, "3V3": 2, "5V": 3}
FRESH = [Point({"12V": (11.7, 2.2), "3V3": (3.2, 0.2)}), Point({"12V": (12.4, 4.8), "3V3": (3.4, 0.4)}),
         Point({"12V": (11.2, 0.9), "3V3": (3.1, 0.08)})]


@pytest.fixture
def bench(tmp_path):
    """An uncalibrated virtual interposer and the reference meter on the same virtual rails."""
    fixture = BenchFixture(ScriptedLoad())
    sim = VirtualInterposer(load=fixture, seed=3, state_dir=str(tmp_path / "board"), calibrated=False).start()
    meter = ReferenceMeter(sim.frontend, fixture, seed=3)
    server = ReferenceServer(meter).start()
    yield sim, meter, server
    server.stop()
    sim.stop()


def fresh_errors(port: str, resource: str) -> dict:
    pts = [Point(dict(p.setpoints)) for p in FRESH]
    with open_reference(resource, "@py") as ref, Interposer.open(port) as dev, StreamWindows(dev) as win:
        try:
            measure(pts, ref, win, CHANNELS, seconds=0.3)
        finally:
            for c in (1, 2):
                ref.output(c, False)
        return errors(pts, win.rails)


def stored_calibration(port: str) -> dict:
    with Interposer.open(port) as dev:
        return dev.calibration()


def test_calibration_brings_every_channel_within_0_1_percent(bench, tmp_path):
    sim, _meter, server = bench
    before = fresh_errors(sim.port, server.resource)
    assert max(e["max_abs_pct"] for e in before.values()) > 0.1      # the board's errors are visible first
    r = run_cli("calibrate", "--port", sim.port, "--reference", server.resource, "--out", str(tmp_path / "cert"),
                "--reference-due", "2027-06-30")
    assert r.returncode == 0, r.stderr
    after = fresh_errors(sim.port, server.resource)
    for ch, e in after.items():
        assert e["max_abs_pct"] < 0.1, (ch, e)
    cert = json.loads((tmp_path / "cert" / "calibration-certificate.json").read_text())
    assert cert["written"] and cert["reference"]["calibration_due"] == "2027-06-30"
    assert set(cert["fits"]) == {"12V.v", "12V.i", "3V3.v", "3V3.i"}
    assert cert["interposer"]["serial"] and "N6705C" in cert["reference"]["identity"]
    html = (tmp_path / "cert" / "calibration-certificate.html").read_text()
    assert "12V.i" in html and "2027-06-30" in html
    # the calibration persisted on the device: a new connection reads it back
    stored = stored_calibration(sim.port)
    assert stored["rails"]["12V"]["i_gain"] == pytest.approx(cert["new_calibration"]["rails"]["12V"]["i_gain"])


def test_validate_fails_uncalibrated_and_passes_calibrated(bench, tmp_path):
    sim, _meter, server = bench
    args = ("validate", "--port", sim.port, "--reference", server.resource, "--windows", "2", "--seconds", "0.5",
            "--limit", "0.1", "--json")
    r = run_cli(*args)
    assert r.returncode == 1, r.stderr
    assert not json.loads(r.stdout)["pass"]
    assert run_cli("calibrate", "--port", sim.port, "--reference", server.resource, "--out",
                   str(tmp_path / "c")).returncode == 0
    r = run_cli(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(x["pass"] for x in json.loads(r.stdout)["rails"].values())


def _refused(sim, server, tmp_path, *extra: str) -> str:
    before = stored_calibration(sim.port)
    r = run_cli("calibrate", "--port", sim.port, "--reference", server.resource, "--out", str(tmp_path / "x"), *extra)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 or "Traceback" not in r.stderr
    assert "Traceback" not in r.stderr
    assert stored_calibration(sim.port) == before                   # nothing written
    assert not (tmp_path / "x").exists()
    return r.stderr


def test_meter_error_mid_run_writes_nothing(bench, tmp_path):
    sim, meter, server = bench
    meter.fail_after_fetches = 9
    err = _refused(sim, server, tmp_path)
    assert "rejected 'FETC:ARR:" in err and "-240" in err


def test_reference_reading_out_of_range_writes_nothing(bench, tmp_path):
    sim, _meter, server = bench
    err = _refused(sim, server, tmp_path, "--channels", "12V=2,3V3=1")     # leads swapped
    assert "out of range" in err and "--channels" in err


def test_fit_residual_over_limit_writes_nothing(bench, tmp_path):
    sim, _meter, server = bench
    err = _refused(sim, server, tmp_path, "--max-residual", "0.000001")
    assert "fit residuals over the limit" in err


def test_bad_references_are_one_line(bench, tmp_path):
    sim, _meter, server = bench
    for resource, backend, msg in (("TCPIP::127.0.0.1::1::SOCKET", "@py", "cannot open VISA resource"),
                                   ("ASRL2::INSTR", "tests/instruments/bench.yaml@sim", "not a supported reference meter"),
                                   ("GPIB0::22::INSTR", "tests/instruments/bench.yaml@sim", "needs a DC power analyzer")):
        r = run_cli("calibrate", "--port", sim.port, "--reference", resource, "--visa-backend", backend)
        assert r.returncode == 2 and msg in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_continuous_log_follows_the_rail(bench):
    """The N6705C data logger (long comparisons): one V/I pair per period, each the period's mean."""
    import time

    sim, _meter, server = bench
    with open_reference(server.resource, "@py") as ref:
        ref.set_source(1, 11.8, 2.5)
        ref.output(1, True)
        t0 = ref.elog_start([1], 0.1)
        time.sleep(0.55)
        v, i = ref.elog_fetch(1)
        ref.elog_stop([1])
        ref.output(1, False)
    assert 4 <= len(v) <= 6 and len(v) == len(i)
    droop = sim.frontend.spec.droop_ohm * 2.5
    assert v == pytest.approx(11.8 - droop, rel=1e-3) and i == pytest.approx(2.5, rel=1e-3)
    assert t0 == pytest.approx(time.time(), abs=2.0)


def test_the_temperature_pass_fits_the_front_ends_temperature_coefficients(bench, tmp_path):
    """Two-temperature calibration (hw/rails.toml [calibration]): first pass at 25 C, the board warmed
    to 50 C, `calibrate --temperature-pass` fits each gain's coefficient; the interposer then agrees with
    the reference at 50 C and the fitted coefficients are the front end's drift, corrected."""
    sim, _meter, server = bench
    assert run_cli("calibrate", "--port", sim.port, "--reference", server.resource, "--out",
                   str(tmp_path / "c1")).returncode == 0
    assert stored_calibration(sim.port)["t_ref_c"] == 25.0
    sim.frontend.spec.board_temp_c = 50.0            # the board sensor reads this from now on
    r = run_cli("calibrate", "--port", sim.port, "--reference", server.resource, "--out", str(tmp_path / "c2"),
                "--temperature-pass")
    assert r.returncode == 0, r.stderr
    cal = stored_calibration(sim.port)
    assert cal["t_ref_c"] == 25.0
    for k, rail in enumerate(("12V", "3V3")):
        for q, j in (("v", 0), ("i", 1)):
            expected = -sim.frontend.tc[k, j] * 1e6        # ppm/K that undoes the drift
            assert cal["rails"][rail][f"{q}_tc"] == pytest.approx(expected, abs=4.0), (rail, q)
    for ch, e in fresh_errors(sim.port, server.resource).items():
        assert e["max_abs_pct"] < 0.1, (ch, e)
    sim.frontend.spec.board_temp_c = 25.0
    r = run_cli("calibrate", "--port", sim.port, "--reference", server.resource, "--out", str(tmp_path / "c3"),
                "--temperature-pass")
    assert r.returncode == 2 and "at least 10 K" in r.stderr and "Traceback" not in r.stderr
