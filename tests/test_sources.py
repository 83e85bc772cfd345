"""Measurement sources behind one protocol: the N6705C-class analyzer (its data logger, over pyvisa,
against the virtual rig's simulated N6705C at the socket boundary) measures a sweep step as the
interposer does, and the peak checks say its sampling does not meet their requirement."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from powerrig.analysis import analyse
from powerrig.capture import CaptureReader
from powerrig.capture.recorder import Recorder
from powerrig.core import rig_registry
from powerrig.core.errors import InstrumentError
from powerrig.core.names import Verdict
from powerrig.core.sampling import sampling_of
from powerrig.interposer.client import Interposer
from powerrig.results import ResultStore
from powerrig.sources import parse_spec
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import PlanError, parse
from test_sweep_ownership import PLAN as OWNED_PLAN

# the sweep tests' one-workload plan, on one power state, measured through {source}
PLAN = (OWNED_PLAN.replace('name = "owned"', 'name = "through-n6705c"').replace("power_states = [0, 2]", "power_states = [0]")
        .replace('port = "sim:d5-p5336"\n', 'port = "sim:d5-p5336"\nsource = "{source}"\n'))


def test_source_specs_and_their_one_line_refusals():
    assert parse_spec("n6705c:TCPIP::10.0.0.5::5025::SOCKET,12V=1,3V3=2") == (
        "n6705c", "TCPIP::10.0.0.5::5025::SOCKET", {"12V": "1", "3V3": "2"})
    assert parse_spec("joulescope:12V=003512,3V3=003688")[2] == {"12V": "003512", "3V3": "003688"}
    for bad, says in (("quarch:x", "unknown measurement source"), ("n6705c:", "names no VISA resource"),
                      ("n6705c:TCPIP::h::5025::SOCKET,12V", "not RAIL=VALUE"), ("joulescope:", "no unit per rail")):
        with pytest.raises(InstrumentError, match=says) as e:
            parse_spec(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(PlanError, match=r"rig\.source.*unknown measurement source"):
        parse(PLAN.format(source="quarch:1"), "p.toml")


def _recorder_on_the_rigs_interposer(simdir, out, stop: threading.Event, result: dict):
    """Record the sweep's virtual rig through its interposer while the sweep measures with the N6705C:
    the same drive over the same seconds."""
    deadline = time.monotonic() + 60
    while not rig_registry.running(simdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    [st] = rig_registry.running(simdir)
    with Interposer.open(st["port"]) as dev:
        rec = Recorder(dev, out)
        rec.start()
        stop.wait(180)
        rec.stop()
        result["res"] = rec.wait(30)


def test_a_sweep_step_through_the_simulated_n6705c_matches_the_interposer(tmp_path, simdir):
    stop, got = threading.Event(), {}
    side = tmp_path / "interposer.jls"
    t = threading.Thread(target=_recorder_on_the_rigs_interposer, args=(simdir, side, stop, got), daemon=True)
    t.start()
    plan = parse(PLAN.format(source="n6705c:sim"), "p.toml")
    store = ResultStore(tmp_path / "r.sqlite")
    try:
        last_step_done = (lambda d: stop.set() if d["kind"] == "step-done" and d["n"] == d["m"] else None)
        run = Sweep(plan, store, tmp_path / "out", on_progress=last_step_done).run()   # the rig ends with the sweep
    finally:
        stop.set()
        t.join(60)
    assert got["res"].end_reason in ("stopped", "duration"), got["res"]
    [step] = [s for s in store.steps(run) if s["workload"]]
    ms = {m["name"]: m for m in store.measurements(run) if m["step"] == step["key"]}
    n6705c_w = ms["power.mean"]["value"]

    with CaptureReader(step["capture"]) as cap:
        sampling = sampling_of(cap.metadata)
        assert sampling.sample_s == pytest.approx(1e-3) and not sampling.peak_exact
        assert cap.metadata["device"]["device"] == "N6705C"
        an = analyse(cap, cap.events, cap.metadata)
        phase = next(p for p in an.phases if p.name == ms["power.mean"]["phase"])
        assert phase.mean_w == pytest.approx(n6705c_w, rel=1e-9)
        pcm2 = next(c for c in an.checks if c.check == "OCP PCM-2" and c.phase == phase.name)
        assert not pcm2.requirement_met and pcm2.status != Verdict.PASS
        assert any("sampling requirement not met" in n and "every 1 ms" in n for n in pcm2.notes), pcm2.notes
        pcm3 = next(c for c in an.checks if c.check == "OCP PCM-3" and c.phase == phase.name)
        assert pcm3.status != Verdict.PASS and not pcm3.requirement_met
        # the same seconds of the same drive, through the interposer
        t0, t1 = cap.utc(round(phase.start_s / cap.interval_s)), cap.utc(round(phase.stop_s / cap.interval_s))
        volts = {r: cap.range_stats(f"v_{r}", round(phase.start_s / cap.interval_s),
                                    round(phase.stop_s / cap.interval_s))["mean"] for r in cap.rails}
        amps = {r: cap.range_stats(f"i_{r}", round(phase.start_s / cap.interval_s),
                                   round(phase.stop_s / cap.interval_s))["mean"] for r in cap.rails}
    with CaptureReader(side) as ref:
        a, b = int(round(float(ref.sample_id(t0)))), int(round(float(ref.sample_id(t1))))
        assert 0 <= a < b <= ref.length
        p = ref.samples("p_total", a, b)
        covered = float(np.isfinite(p).mean())       # the virtual link loses frames on a loaded machine:
        interposer_w = float(np.nanmean(p))          # the steady step's mean over what arrived
        interposer_sampling = sampling_of(ref.metadata)
    at = {r: (volts[r], amps[r]) for r in volts}
    allowed = sampling.power_error_w(at) + interposer_sampling.power_error_w(at)
    print(f"mean W over the step: N6705C {n6705c_w:.4f}, interposer {interposer_w:.4f}, "
          f"difference {n6705c_w - interposer_w:+.4f} W, stated accuracies allow +-{allowed:.4f} W "
          f"(interposer covered {covered:.1%} of the step)")
    assert covered > 0.2, f"the interposer lost {1 - covered:.0%} of the step"   # a steady step: any fifth will do
    assert abs(n6705c_w - interposer_w) <= allowed
    assert interposer_sampling.peak_exact


def test_record_through_the_simulated_n6705c(tmp_path, simdir):
    """`powerrig record --source n6705c:RESOURCE` records as from the interposer; the capture says what
    measured it and its checks read that."""
    from conftest import run_cli
    from powerrig.sim import rig as simrig

    st = simrig.start("d5-p5336", owned=True)
    out = tmp_path / "n6705c.jls"
    r = run_cli("record", "--source", f"n6705c:{st['reference']},12V=1,3V3=2", "--out", str(out), "--seconds", "1.5")
    assert r.returncode == 0, r.stderr
    with CaptureReader(out) as cap:
        assert cap.closed_cleanly and cap.rails == ("12V", "3V3") and cap.duration_s == pytest.approx(1.5)
        assert cap.metadata["device"]["device"] == "N6705C" and cap.metadata["source"]["sample_s"] == pytest.approx(1e-3)
        w = cap.range_stats("p_total")["mean"]
        assert 1.0 < w < 30.0 and cap.range_stats("v_12V")["mean"] == pytest.approx(12.0, rel=0.05)
    bad = run_cli("record", "--source", "n6705c:", "--out", str(tmp_path / "x.jls"))
    assert bad.returncode == 2 and "names no VISA resource" in bad.stderr and not (tmp_path / "x.jls").exists()


# ---- issue 41 item 3: overloads in the live N6705C's data log are gaps, never the end of a recording ------
from test_instrument_faults import Spoiler, bench  # noqa: E402,F401  (the simulated N6705C on its socket)


class ElogOverloads(Spoiler):
    """A proxy in front of the simulated N6705C that turns ``records`` current readings of channel 1's
    data-log fetches (the first ``fetches`` holding enough of them; None: every one) into the
    instrument's 9.91E+37 (its no-reading value). ``spoiled`` counts the records."""

    def __init__(self, upstream, records: int = 5, first: int = 3, fetches: int | None = 1):
        super().__init__(upstream, b"FETC:ELOG?")
        self.records, self.first, self.fetches, self.fetched = records, first, fetches, 0

    def _down(self, s, c, asked):
        with s.makefile("rb") as f:
            for line in f:
                q = asked.popleft() if asked else b""
                vals = line.rstrip(b"\n").split(b",")
                if (q.startswith(b"FETC:ELOG?") and q.endswith(b"(@1)") and len(vals) >= 2 * (self.first + self.records + 2)
                        and (self.fetches is None or self.fetched < self.fetches)):
                    for k in range(self.first, self.first + self.records):
                        vals[2 * k + 1] = b"+9.91000E+37"
                    line = b",".join(vals) + b"\n"
                    self.spoiled += self.records
                    self.fetched += 1
                c.sendall(line)
        c.close()


def test_overloads_in_the_live_n6705c_log_are_counted_gaps_and_the_recording_goes_on(tmp_path, bench):
    from conftest import run_cli

    _sim, server = bench
    host, port = server.resource.split("::")[1:3]
    spoiler = ElogOverloads((host, int(port)))
    out = tmp_path / "n6705c.jls"
    try:
        r = run_cli("record", "--source", f"n6705c:{spoiler.resource},12V=1,3V3=2", "--out", str(out), "--seconds", "5")
    finally:
        spoiler.close()
    assert spoiler.spoiled == 5
    assert r.returncode == 0, r.stderr
    with CaptureReader(out) as cap:
        assert cap.closed_cleanly and cap.duration_s == pytest.approx(5.0)
        assert cap.metadata["recording"]["end_reason"] == "duration"
        [gap] = cap.gaps
        assert gap["intervals"] == 5 and gap["reason"] == "invalid"
        p = cap.samples("p_12V")
        assert np.isnan(p[gap["sample_id"]:gap["sample_id"] + 5]).all()
        assert np.isfinite(p).sum() == cap.length - 5                  # the fetch's valid records are kept
        assert 1.0 < np.nanmax(cap.samples("p_total")) < 100.0
        summary = cap.metadata["stream"]
        assert summary["gaps"] == 1 and summary["gap_intervals"] == 5
        assert summary["invalid_readings"] == {"12V": {"voltage": {"overload": 0, "not_a_number": 0},
                                                       "current": {"overload": 0, "not_a_number": 5}},
                                               "3V3": {"voltage": {"overload": 0, "not_a_number": 0},
                                                       "current": {"overload": 0, "not_a_number": 0}}}
        texts = []
        import pyjls
        with pyjls.Reader(str(out)) as rd:
            sid = cap.metadata["layout"]["signals"]["p_12V"]
            rd.annotations(sid, 0, lambda *a: texts.append(a[4]) and False)
        assert "gap (invalid): 5 intervals lost" in texts


def test_a_sweep_through_an_n6705c_that_logs_overloads_stores_its_steps(tmp_path, simdir):
    """Before: a fetch with 9.91E37 ended the step's recording with an error, every attempt, and the run
    failed with 0 steps stored. Now each such record is a counted gap in its step's capture, a step that
    lost more than the plan's checks.max_lost_pct is invalid with the reason, and the run goes on."""
    from powerrig.sim import rig as simrig

    st = simrig.start("d5-p5336", owned=True)
    host, port = st["reference"].split("::")[1:3]
    spoiler = ElogOverloads((host, int(port)), records=1, fetches=None)     # one record of every fetch
    plan_text = PLAN.format(source=f"n6705c:{spoiler.resource},12V=1,3V3=2").replace(
        'port = "sim:d5-p5336"', f'port = "rig:{st["id"]}"') + "[checks]\nmax_lost_pct = 0.2\n"
    store = ResultStore(tmp_path / "r.sqlite")
    try:
        run = Sweep(parse(plan_text, "p.toml"), store, tmp_path / "out").run()
    finally:
        spoiler.close()
        simrig.stop(st["id"])
    steps = store.steps(run)
    assert store.run(run)["status"] == "done" and len(steps) >= 2, steps
    lost = 0
    for s in steps:
        with CaptureReader(s["capture"]) as cap:
            assert cap.gaps and {g["reason"] for g in cap.gaps} == {"invalid"}, (s["name"], cap.gaps)
            assert all(g["intervals"] == 1 for g in cap.gaps)
            lost += len(cap.gaps)
        # about 1 % lost, more than the plan's 0.2 %: the step is invalid and says why; the run went on
        assert s["status"] == "invalid" and "(checks.max_lost_pct)" in s["invalid_reason"], s
    assert 0 < lost <= spoiler.spoiled
