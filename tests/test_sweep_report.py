"""The sweep report (`powerrig report RUN`): datasheet figures per power state and workload,
throughput-per-watt curves over power state, block size and queue depth, WAF over time beside power,
every verdict with its limit, and links to the per-step capture reports. Content, not pixels."""
from __future__ import annotations

import json
import re

from conftest import run_cli
from powerrig.results import ResultStore
from powerrig.results.sweep_report import notes_text, write_sweep_report
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import parse

GRID = """name = "grid"
power_states = [0, 1]
idle_steps = false
[rig]
port = "sim:d5-p5336"
[drive]
serial = "SN1"
[[workload]]
name = "w4k-qd1"
rw = "randwrite"
bs = "4k"
iodepth = 1
[[workload]]
name = "w4k-qd32"
rw = "randwrite"
bs = "4k"
iodepth = 32
[[workload]]
name = "w128k-qd32"
rw = "randwrite"
bs = "128k"
iodepth = 32
"""


def fill_grid(store):
    """A run with figures that depend on PS, bs and QD, one step with a WAF series and one verdict each."""
    from dataclasses import asdict
    plan = parse(GRID)
    run = store.start_run(plan, "out", station="rig-1", drive={"sn": "SN1", "fr": "FW1", "mn": "M"})
    for s in plan.steps():
        w = s.workload
        eff = (100.0 if s.power_state == 0 else 80.0) * (w.bs / 4096) ** 0.5 * (1 + w.iodepth / 64)
        ms = [{"name": "power.mean", "phase": "m", "value": 10.0 - 3 * s.power_state, "units": "W", "outcome": "info"},
              {"name": "efficiency.mib_s_per_w", "phase": "m", "value": eff, "units": "MiB/s/W", "outcome": "info"},
              {"name": "OCP PCM-1", "phase": "m", "value": 10.0 - 3 * s.power_state, "units": "W",
               "upper": 12.5 - 3 * s.power_state, "marginal_upper": 11.9 - 3 * s.power_state,
               "outcome": "pass", "requirement_met": True}]
        if s.power_state == 0 and w.name == "w128k-qd32":
            series = [[k * 1.0, k + 1.0, 2.0 + 0.1 * k, 1.9 + 0.05 * k, 12.0 + 0.1 * k, 2000.0] for k in range(6)]
            ms.append({"name": "waf.cumulative", "phase": "m", "value": 2.15, "units": "", "outcome": "info",
                       "notes": json.dumps({"waf_series": series})})
        store.store_step(run, {"idx": s.index, "key": s.key, "name": s.name, "power_state": s.power_state,
                               "workload": w.name, "repetition": 1, "status": "done",
                               "params": json.dumps({"workload": asdict(w)}), "capture": f"/nowhere/{s.index}.jls"},
                         [], ms)
    store.set_run_status(run, "done")
    return run


def test_report_has_curves_over_state_block_size_and_queue_depth_waf_and_verdicts(tmp_path, results_db):
    store = ResultStore(results_db)
    run = fill_grid(store)
    text = write_sweep_report(store, run, tmp_path / "rep").read_text()
    rep = tmp_path / "rep"
    [waf] = [s for s in store.steps(run) if s["key"] == "ps0/w128k-qd32/r1"]
    for png in ("efficiency_vs_power_state.png", "efficiency_vs_block_size.png", "efficiency_vs_queue_depth.png",
                f"waf_{waf['idx']:03d}.png"):
        assert (rep / png).stat().st_size > 1000, png
        assert f"src={png}" in text, png                 # embedded in the page
    # the datasheet table names each workload's parameters
    assert re.search(r"<td>PS1</td><td[^>]*>w4k-qd32</td><td>randwrite</td><td>4k</td><td>32</td>", text)
    assert "cumulative WAF 2.150" in text
    assert text.count("<td>OCP PCM-1</td>") == 6 and "<td>9.500</td>" in text and "<td>12.500</td>" in text
    # without capture reports the link is the command that makes one
    assert "<code>powerrig report /nowhere/0.jls</code>" in text


def test_a_curve_needs_two_points(tmp_path, results_db):
    store = ResultStore(results_db)
    plan = parse(GRID.replace("power_states = [0, 1]", "power_states = [0]"))
    run = store.start_run(plan, "out")
    s = plan.steps()[0]
    store.store_step(run, {"idx": 0, "key": s.key, "name": s.name, "power_state": 0, "workload": s.workload.name,
                           "repetition": 1, "status": "done", "params": "{}"}, [],
                     [{"name": "efficiency.mib_s_per_w", "phase": "m", "value": 5.0, "units": "", "outcome": "info"}])
    text = write_sweep_report(store, run, tmp_path / "rep").read_text()
    assert not list((tmp_path / "rep").glob("*.png")) and "<img" not in text


FDP = """name = "fdp report"
power_states = [0]
idle_steps = false
[rig]
port = "sim:micron-fdp"
[drive]
serial = "VMFD00000001"
[timing]
settle_s = 0.3
idle_s = 0.5
measure_s = 4.0
[[workload]]
name = "fdp-uniform"
rw = "write"
bs = "128k"
iodepth = 32
fdp = true
waf_every_s = 0.5
streams = [{ namespace = "/dev/nvme0n1" }, { namespace = "/dev/nvme0n2" }]
"""


def test_a_verdicts_notes_read_as_words_not_python():
    """A note stored as JSON shows '-' for a missing value and 4 significant figures, not None and
    5.498402805328369; plain text and malformed JSON come through as they are."""
    got = notes_text(json.dumps({"from_ps": None, "to_ps": 0, "before_w": 5.498402805328369, "why": "no step"}))
    assert got == "from_ps: -; to_ps: 0; before_w: 5.498; why: no step"
    assert notes_text(json.dumps(["a", 0.1234567])) == "a; 0.1235"
    assert notes_text("inside the limit") == "inside the limit" and notes_text("{not json") == "{not json"
    assert notes_text(None) == ""


def test_powerrig_report_run_links_capture_reports_and_plots_waf_from_a_real_sweep(tmp_path, simdir, results_db):
    db = results_db
    run = Sweep(parse(FDP, "fdp.toml"), ResultStore(db), tmp_path / "out").run()
    r = run_cli("report", str(run), "--db", str(db), "--out", str(tmp_path / "rep"), timeout=300)
    assert r.returncode == 0, r.stderr
    index = tmp_path / "rep" / "index.html"
    assert r.stdout.strip() == str(index)
    text = index.read_text()
    [link] = re.findall(r"<a href='(captures/[^']+)'>report</a>", text)
    assert (tmp_path / "rep" / link).is_file() and "<h" in (tmp_path / "rep" / link).read_text()
    assert "src=waf_000.png" in text and (tmp_path / "rep" / "waf_000.png").stat().st_size > 1000
    store = ResultStore(db)
    [waf] = [m for m in store.measurements(run) if m["name"] == "waf.cumulative"]
    series = json.loads(waf["notes"])["waf_series"]
    assert len(series) >= 3 and all(row[4] and row[4] > 2 for row in series)     # power beside each WAF sample
    assert max(row[4] for row in series) > 10                                      # ~12 W while writing
    # a capture path still gets the capture report; a word that is neither is refused in one line
    bad = run_cli("report", "no-such-thing")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a run id" in bad.stderr


def test_energy_per_io_at_one_io_size_is_a_bar_each_and_says_the_size(tmp_path):
    """Six series at 128 KiB drew six dots on one x (109 uJ hid 111); now a labelled bar each, and the
    caption names the size instead of "over I/O size". Two sizes keep the curves."""
    from powerrig.results import command_report
    one = {f"PS{ps} {k}": [(131072, v + ps)] for ps in (0, 1, 2) for k, v in (("read", 109.0), ("write", 603.0))}
    assert command_report.plot_io(one, tmp_path / "one.png") and (tmp_path / "one.png").stat().st_size > 1000
    two = {"PS0 read": [(4096, 20.0), (131072, 109.0)]}
    assert command_report.plot_io(two, tmp_path / "two.png") and (tmp_path / "two.png").stat().st_size > 1000
    assert command_report._size(131072) == "128 KiB" and command_report._size(2**21) == "2 MiB"
