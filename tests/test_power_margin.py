"""Rail margining (issue 29): the plan's [[margin]] keys, and a sweep on a virtual rig whose simulated
N6705C (the real pyvisa driver over its SCPI socket: the boundary) feeds the slot at each voltage, the
interposer measuring the rail it moved, and nominal restored however the step ends."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from powerrig.core.errors import PowerrigError
from powerrig.instruments import open_analyzer
from powerrig.results.sweep_report import write_sweep_report
from powerrig.results.store import ResultStore
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import PlanError, parse

PLAN = """name = "mg"
power_states = [0]
idle_steps = false
[rig]
port = "sim:d5-p5336"
supply = "reference"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.1
idle_s = 0.3
[[workload]]
name = "seqread"
rw = "read"
bs = "128k"
iodepth = 32
runtime_s = 1
[[margin]]
name = "main"
rail = "12V"
volts = [10.8, 12.0, 13.2]
workload = "seqread"
settle_s = 0.2
"""


@pytest.mark.parametrize("old, new, says", [
    ("volts = [10.8, 12.0, 13.2]", "volts = [10.8, 12.0, 13.5]",
     r"margin\[0\].volts\[2\] \(line 21\): 13.5 V is outside 12V's margin range 10.8..13.2 V"),
    ("volts = [10.8, 12.0, 13.2]", "volts = [10.7]", r"margin\[0\].volts\[0\] .*10.7 V is outside"),
    ('rail = "12V"\nvolts = [10.8, 12.0, 13.2]', 'rail = "3V3"\nvolts = [3.0, 3.3]',
     r"margin\[0\].volts\[0\] .*3 V is outside 3V3's margin range 3.003..3.597 V \(\+-9 %, PCIe CEM 3.3 Vaux\)"),
    ('rail = "12V"', 'rail = "5V"', r"margin\[0\].rail \(line 20\): '5V' cannot be margined"),
    ('workload = "seqread"', 'workload = "nope"', r"margin\[0\].workload .*no \[\[workload\]\] named 'nope'"),
    ('supply = "reference"\n', "", r"rig.supply \(line 4\): margin 'main' needs the programmable supply"),
    ('port = "sim:d5-p5336"', 'port = "/dev/ttyACM0"', r'rig.supply \(line 6\): "reference" is a virtual rig'),
    ("volts = [10.8, 12.0, 13.2]", "volts = [12.0, 12]", r"margin\[0\].volts\[1\] .*listed twice"),
])
def test_bad_margin_keys_are_one_line_errors(old, new, says):
    assert old in PLAN
    with pytest.raises(PlanError, match=says) as e:
        parse(PLAN.replace(old, new))
    assert "\n" not in str(e.value)


def test_check_refuses_a_voltage_out_of_tolerance_in_one_line(tmp_path):
    p = tmp_path / "mg.toml"
    p.write_text(PLAN)
    keys = [s.key for s in parse(PLAN).steps()]
    assert keys == ["ps0/seqread/r1", "margin/main/12V-10.800V/r1", "margin/main/12V-12.000V/r1",
                    "margin/main/12V-13.200V/r1"]
    assert "margin" not in parse(PLAN.split("[[margin]]")[0].replace('supply = "reference"\n', "")).resolved()
    p.write_text(PLAN.replace("13.2]", "13.3]"))
    r = run_cli("sweep", "--check", str(p))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "margin[0].volts[2] (line 21)" in r.stderr, r.stderr


@pytest.fixture
def rig(simdir):
    r = run_cli("sim", "start", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _plan(rig, text=PLAN):
    return parse(text.replace('port = "sim:d5-p5336"', f'port = "rig:{rig["id"]}"'), "mg.toml")


def _supplied_volts(rig) -> float:
    with open_analyzer(rig["reference"], "@py", "test") as ref:
        return ref.measure(1)[0]


def test_margin_sweep_stores_each_voltage_measured_where_it_was_set(tmp_path, rig):
    store = ResultStore(tmp_path / "r.sqlite")
    run = Sweep(_plan(rig), store, tmp_path / "out").run()
    ms = store.measurements(run)
    got = {}
    for m in ms:
        if m["step"].startswith("margin/"):
            got.setdefault(m["step"], {})[m["name"]] = m["value"]
    assert len(got) == 3
    rows = sorted(got.values(), key=lambda g: g["margin.volts_set"])
    assert [r["margin.volts_set"] for r in rows] == [10.8, 12.0, 13.2]
    for r in rows:      # the interposer's reading follows the set point (the drive's ~1 A droop: < 20 mV)
        assert r["margin.volts_measured"] == pytest.approx(r["margin.volts_set"], abs=0.05)
        assert r["throughput.mib_s"] > 100 and r["power.mean.12V"] > 1
    # a drive behind DC-DC converters draws constant power: more current at 10.8 V than at 13.2 V
    amps = [r["power.mean.12V"] / r["margin.volts_measured"] for r in rows]
    assert amps[0] > amps[2] * 1.1
    assert _supplied_volts(rig) == pytest.approx(12.0, abs=0.05)      # nominal again at the end
    page = write_sweep_report(store, run).read_text()
    assert "<h2 id=margining>Margining</h2>" in page and "13.200" in page and "10.800" in page


def test_nominal_is_restored_after_a_failing_workload(tmp_path, rig, monkeypatch):
    """The workload fails at the 13.2 V point (fio's error, raised where the engine runs it): the sweep
    fails, and the supply is back at 12 V."""
    seen = []
    run_workload = Sweep._workload

    def failing(self, step, *a):
        if step.margin is None:
            return run_workload(self, step, *a)
        seen.append(_supplied_volts(rig))
        raise PowerrigError("fio: exited 1 (injected: the drive stopped answering)")

    monkeypatch.setattr(Sweep, "_workload", failing)
    store = ResultStore(tmp_path / "r.sqlite")
    with pytest.raises(PowerrigError, match="injected"):
        Sweep(_plan(rig, PLAN.replace("volts = [10.8, 12.0, 13.2]", "volts = [13.2]")), store, tmp_path / "out").run()
    assert seen == [pytest.approx(13.2, abs=0.05)]                   # it was at the margin when it failed
    assert _supplied_volts(rig) == pytest.approx(12.0, abs=0.05)      # ... and is nominal again


def test_a_supply_channel_that_does_not_feed_the_rail_is_refused_before_it_is_changed(tmp_path, rig):
    """rig.supply_channels names channel 3 (the 5 V output) for 12V: one line, and 5 V left as it was."""
    text = PLAN.replace('supply = "reference"', 'supply = "reference"\nsupply_channels = {"12V" = 3}')
    with pytest.raises(PowerrigError, match=r"supply channel 3 reads 5\.\d+ V, not 12V's nominal 12 V: it does not "
                                            r"feed the slot's 12V; fix rig.supply_channels \(nothing was changed\)$"):
        Sweep(_plan(rig, text), ResultStore(tmp_path / "r.sqlite"), tmp_path / "out").run()
    with open_analyzer(rig["reference"], "@py", "test") as ref:
        assert ref.measure(3)[0] == pytest.approx(5.0, abs=0.05)
