"""Power-loss plan steps (issue 29): the virtual SSD's verify media and what a power edge does to its
I/O, the plan's [[power_loss]] keys, and a sweep whose cycles find exactly what the virtual drive lost
(the sim's fio and nvme-cli are the boundary: real fio is not involved for the virtual SSD)."""
from __future__ import annotations

import json

import pytest

from conftest import run_cli
from powerrig.capture import CaptureReader
from powerrig.results.sweep_report import write_sweep_report
from powerrig.results.store import ResultStore
from powerrig.sim.ssd.model import JobLoad
from powerrig.sim.ssd.power import PoweredDrive, PowerSpec
from powerrig.sim.ssd.power_io import PatternMedia, PowerLossIO
from powerrig.sim.ssd.drive import VirtualSSD
from powerrig.sim.ssd.client import request
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import PlanError, parse

BS, QD = 4096, 8


class Clock:
    def __init__(self, t: float = 1.8e9):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _writing(spec: PowerSpec, bs: int = BS):
    clock = Clock()
    ssd = VirtualSSD("d5-p5336", clock=clock)
    drive = PoweredDrive(ssd, spec)
    io = PowerLossIO(ssd).attach(drive)
    jobs = [JobLoad("w", "write", bs, QD)]
    rid = ssd.start_io(jobs, 10.0, t=clock.t)
    io.started(rid, {0: {"ns": 1, "offset": 0, "pattern": "7"}}, jobs)
    clock.t += 0.5
    return clock, ssd, drive, io, rid


def _collect(ssd, io, rid):
    res = ssd.stop_io(rid)
    io.ended(rid, res["write_bytes"])
    return res


def test_media_keeps_each_ranges_pattern_and_verify_names_the_blocks_that_differ():
    m = PatternMedia()
    m.write(1, 0, 10 * BS, "a")
    m.write(1, 4 * BS, 6 * BS, "b")
    assert m.bad_blocks(1, 0, 10 * BS, BS, "a") == [4 * BS, 5 * BS]
    assert m.bad_blocks(1, 0, 12 * BS, BS, "b") == [k * BS for k in (0, 1, 2, 3, 6, 7, 8, 9, 10, 11)]
    assert m.bad_blocks(2, 0, 2 * BS, BS, "a") == [0, BS]              # another namespace: nothing written


def test_a_cut_loses_what_the_plp_flush_could_not_save_and_verify_finds_exactly_that():
    clock, ssd, drive, io, rid = _writing(PowerSpec(defect_rate=1.0))        # a weak capacitor every cut
    rec = drive.set_output("12V", 0, clock.t)
    assert ssd.run_status(rid)["failed"]
    [cut] = io.truth
    lost_cache = sorted(off for (_ns, off), _tok in drive.cache.lost)
    assert cut["output"] == "12V" and cut["lost_offsets"] == lost_cache and rec["lost_writes"] == len(lost_cache) > 0
    n = cut["acknowledged"]
    assert n == int(_collect(ssd, io, rid)["write_bytes"][0] // BS)
    assert io.verify(1, 0, n * BS, BS, "7") == lost_cache                    # what fio's pass 1 reads back
    around = io.verify(1, 0, (n + QD) * BS, BS, "7")
    assert sorted(set(around) - set(lost_cache)) == [(n + k) * BS for k in range(QD)]   # in flight: never written
    assert io.verify(1, 0, n * BS, BS, "8") != []                           # another cycle's seed does not verify
    assert not io.ready()
    drive.set_output("12V", 1, clock.t + 0.01)
    clock.t += 0.01 + drive.spec.enum_delay_ms * 1e-3 - 1e-3
    assert not io.ready()                                                   # still enumerating
    clock.t += 2e-3
    assert io.ready()


def test_restoring_the_safe_state_the_drive_is_in_leaves_it_ready():
    """The session's release writes every output's safe level; on a drive already powered that is no
    power cycle: it must not look like one (a sweep's next nvme-cli command failed, 'not ready')."""
    clock, ssd, drive, io, rid = _writing(PowerSpec())
    assert io.ready()
    for out, level in (("12V", 1), ("3V3", 1), ("PERST", 0), ("PWRDIS", 0)):
        drive.set_output(out, level, clock.t)
    assert io.ready() and not ssd.run_status(rid)["failed"]


def test_a_healthy_capacitor_saves_every_acknowledged_write():
    # 128 KiB writes: the 2 ms of cache hold ~50, the healthy hold-up flushes 144 (the model's PLP costs
    # 10 us per write, so thousands of 4 KiB writes a millisecond would outrun even a healthy one)
    bs = 131072
    clock, ssd, drive, io, rid = _writing(PowerSpec(defect_rate=0.0), bs)
    drive.set_output("12V", 0, clock.t)
    _collect(ssd, io, rid)
    [cut] = io.truth
    assert cut["acknowledged"] > 1000 and cut["lost_offsets"] == []
    assert io.verify(1, 0, cut["acknowledged"] * bs, bs, "7") == []


def test_perst_fails_the_io_but_loses_nothing():
    clock, ssd, drive, io, rid = _writing(PowerSpec(defect_rate=1.0))
    drive.set_output("PERST", 1, clock.t)
    assert ssd.run_status(rid)["failed"] and not io.ready()
    n = int(_collect(ssd, io, rid)["write_bytes"][0] // BS)
    assert n > 0 and io.verify(1, 0, n * BS, BS, "7") == [] and [(x["output"], x["lost_offsets"]) for x in io.truth] == [("PERST", [])]


def test_a_surprise_removal_loses_what_the_cache_held_when_power_went_with_the_reset():
    clock, ssd, drive, io, rid = _writing(PowerSpec(defect_rate=1.0))
    for out in ("PERST", "12V", "3V3"):              # a hot-plug's removal: all on one sample
        drive.set_output(out, 1 if out == "PERST" else 0, clock.t)
    n = int(_collect(ssd, io, rid)["write_bytes"][0] // BS)
    [rec] = io.truth
    lost = sorted(off for (_ns, off), _tok in drive.cache.lost)
    assert rec["output"] == "PERST" and rec["acknowledged"] == n and rec["lost_offsets"] == lost and lost
    assert io.verify(1, 0, n * BS, BS, "7") == lost


PLAN = """name = "pl"
power_states = [0]
idle_steps = false
[rig]
port = "sim:d5-p5336"
[drive]
serial = "VPHA5336000001"
[timing]
settle_s = 0.2
idle_s = 0.5
[[power_loss]]
name = "seq"
cycles = 2
bs = "128k"
iodepth = 8
cut_ms = [0, 100]
off_ms = 10
"""
PERST = """[[perst_stress]]
name = "seq"
cycles = 1
"""
HOTPLUG = """[[hotplug]]
name = "seq"
cycles = 1
off_ms = 200
"""


@pytest.mark.parametrize("old, new, says", [
    ("cut_ms = [0, 100]", "cut_ms = [300, 100]", r"power_loss\[0\].cut_ms \(line 16\): \[300, 100\] is empty"),
    ("cut_ms = [0, 100]", "cut_ms = [0, 1, 2]", r"power_loss\[0\].cut_ms \(line 16\): must be a number of ms"),
    ("cycles = 2", "cycles = 0", r"power_loss\[0\].cycles \(line 13\): 0 is out of range 1..100000"),
    ("off_ms = 10", "off_ms = 0", r"power_loss\[0\].off_ms \(line 17\): 0 is out of range 1"),
    ("off_ms = 10", "off_ms = [100, 10]", r"power_loss\[0\].off_ms \(line 17\): \[100, 10\] is empty"),
    ("off_ms = 10", 'off_ms = 10\n[[perst_stress]]\nname = "p"\noff_ms = [10, "x"]',
     r"perst_stress\[0\].off_ms\[1\] \(line 20\): must be a number"),
    ("off_ms = 10", "cut_at = 10", r"power_loss\[0\].cut_at \(line 17\): unknown key"),
    ('name = "seq"', 'name = "global"', r"power_loss\[0\].name"),
    ('serial = "VPHA5336000001"', 'serial = ""', r"drive.serial \(line 7\): power_loss 'seq' switches the drive's power"),
    ('port = "sim:d5-p5336"', 'port = "sim:d5-p5336"\nsource = "n6705c:TCPIP::x::INSTR"',
     r"rig.source \(line 6\): .* cannot switch the drive's power"),
])
def test_bad_power_loss_keys_are_one_line_errors(old, new, says):
    assert old in PLAN
    with pytest.raises(PlanError, match=says) as e:
        parse(PLAN.replace(old, new))
    assert "\n" not in str(e.value)


def test_check_lists_the_power_loss_step_and_refuses_a_bad_one_in_one_line(tmp_path):
    p = tmp_path / "pl.toml"
    p.write_text(PLAN)
    plan = parse(PLAN)
    assert [s.key for s in plan.steps()] == ["power-loss/seq/r1"] and plan.steps()[0].power_loss.cut_ms == (0, 100)
    both = parse(PLAN + PERST + HOTPLUG.replace("off_ms = 200\n", "")).steps()
    assert [s.key for s in both] == ["power-loss/seq/r1", "perst-stress/seq/r1", "hot-plug/seq/r1"]
    assert both[1].power_loss.kind == "perst" and both[1].power_loss.off_ms == (10, 100)      # the 10-100 ms
    assert both[2].power_loss.kind == "hotplug" and both[2].power_loss.off_ms == (500, 500)
    assert "power_loss" not in parse(PLAN.split("[[power_loss]]")[0].replace("idle_steps = false", "")).resolved()
    p.write_text(PLAN.replace("cycles = 2", "cycles = 2.5"))
    r = run_cli("sweep", "--check", str(p))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "power_loss[0].cycles (line 13)" in r.stderr, r.stderr


@pytest.fixture
def weak_rig(simdir, monkeypatch):
    """A virtual rig whose drive finds a weak PLP capacitor at every cut (so there are losses to find)."""
    monkeypatch.setenv("POWERRIG_SIM_POWER", json.dumps({"defect_rate": 1.0}))
    r = run_cli("sim", "start", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_power_loss_sweep_finds_exactly_the_acknowledged_writes_the_drive_lost(tmp_path, weak_rig):
    rig = weak_rig
    plan = parse(PLAN.replace('port = "sim:d5-p5336"', f'port = "rig:{rig["id"]}"') + PERST + HOTPLUG, "pl.toml")
    store = ResultStore(tmp_path / "r.sqlite")
    run = Sweep(plan, store, tmp_path / "out").run()
    truth = request(rig["endpoint"], {"op": "power_truth", "dev": "/dev/nvme0"})
    cuts = truth["cuts"]
    downs = [e for e in truth["edges"] if "holdup_s" in e]         # 12 V cuts (the session's end restores too)
    ups = [e for e in truth["edges"] if "inrush_peak_a" in e]       # 12 V power-ons
    step, perst, hot = store.steps(run)
    params = json.loads(step["params"])
    cycles = [json.loads(x) for x in (tmp_path / "out" / params["fio_dir"]).joinpath("cycles.jsonl").read_text().splitlines()]
    assert len(cycles) == 2 and len(cuts) == 4 and step["status"] == "done" and params["power_cycles"] == 2
    for c, t in zip(cycles, cuts):
        # found = injected, block by block: fio's verify over what the drive acknowledged
        assert c["acknowledged"] == t["acknowledged"] > 0
        assert c["lost"] == len(t["lost_offsets"]) and c["lost_offsets"] == t["lost_offsets"][:64]
        assert 1 <= c["in_flight"] <= 8 and not set(c["in_flight_offsets"]) & set(c["lost_offsets"])
        on, off = c["edges"][1], c["edges"][0]
        # 10 ms off as asked; an edge the starved virtual board's pass reached late is set late and its
        # row says at which sample (the firmware's rule: late, never samples lost), so executed >= asked
        assert on["requested"] - off["requested"] == 10_000 // 4
        assert off["index"] >= off["requested"] and on["index"] >= on["requested"]
    assert sum(c["lost"] for c in cycles) > 0
    # a burst can miss on a starved virtual rig (samples dropped just before the restore): said, not guessed
    assert len(downs) == len(ups) == 3                               # two cuts, one removal
    for c, cut, on in zip(cycles, downs, ups):
        if c["holdup_s"] is None:
            assert c["inrush_peak_a"] is None and "burst" in c["burst_error"]
            continue
        assert c["cut_found_at"] == c["edges"][0]["index"] and c["on_found_at"] == c["edges"][1]["index"]
        assert c["holdup_s"] == pytest.approx(cut["holdup_s"], rel=0.05)
        assert c["inrush_peak_a"] == pytest.approx(on["inrush_peak_a"], rel=0.05)
        assert c["inrush_charge_c"] == pytest.approx(on["inrush_charge_c"], rel=0.05)
        # power-on to ready: 120 ms in the model, between the polls' bounds (the edge's UTC within rtt / 2)
        assert c["ready_lo_s"] - c["rtt_s"] / 2 - 0.01 <= 0.120 <= c["ready_s"] + c["rtt_s"] / 2 + 0.01
        assert c["first_io_s"] >= c["ready_lo_s"]
    # PERST# under load: the I/O fails, power stays, so nothing acknowledged is lost (the model flushes)
    [p] = [json.loads(x) for x in (tmp_path / "out" / json.loads(perst["params"])["fio_dir"]).joinpath(
        "cycles.jsonl").read_text().splitlines()]
    assert [(e["output"], e["level"]) for e in p["edges"]] == [("PERST", 1), ("PERST", 0)]
    assert p["edges"][1]["requested"] - p["edges"][0]["requested"] == -(-round(p["off_ms"] * 1000) // 4)
    assert 10 <= p["off_ms"] <= 100 and all(x["index"] >= x["requested"] for x in p["edges"])
    assert p["acknowledged"] == cuts[2]["acknowledged"] > 0 and p["lost"] == 0 and 1 <= p["in_flight"] <= 8
    assert p["ready_s"] > 0 and "holdup_s" not in p
    # hot-plug: removal (PERST#, 12 V, 3.3 V on one sample), insertion 200 ms later with PERST# released
    # T_PVPERL (100 ms) after power; what the cache held when power went is lost (truth: the reset's record)
    [h] = [json.loads(x) for x in (tmp_path / "out" / json.loads(hot["params"])["fio_dir"]).joinpath(
        "cycles.jsonl").read_text().splitlines()]
    e = h["edges"]
    assert [(x["output"], x["level"]) for x in e] == [("PERST", 1), ("12V", 0), ("3V3", 0), ("3V3", 1), ("12V", 1),
                                                       ("PERST", 0)]
    assert e[0]["requested"] == e[1]["requested"] == e[2]["requested"] and all(x["index"] >= x["requested"] for x in e)
    assert e[3]["requested"] - e[2]["requested"] == 200_000 // 4 and e[5]["requested"] - e[4]["requested"] == 100_000 // 4
    assert cuts[3]["output"] == "PERST"
    assert h["acknowledged"] == cuts[3]["acknowledged"] and h["lost_offsets"] == cuts[3]["lost_offsets"][:64]
    assert h["link"] == {"speed": "16.0 GT/s PCIe", "width": 4} and h["holdup_s"] is None
    if h["inrush_peak_a"] is not None:
        assert h["inrush_peak_a"] == pytest.approx(ups[2]["inrush_peak_a"], rel=0.05)
    assert any(c["inrush_peak_a"] is not None for c in cycles + [h])      # not every burst missed
    ms = {m["name"]: m for m in store.measurements(run) if m["step"] == step["key"]}
    assert ms["power_loss.lost_writes"]["value"] == sum(len(t["lost_offsets"]) for t in cuts[:2])
    assert ms["power_loss.lost_writes"]["outcome"] == "fail" and ms["power_loss.cycles"]["value"] == 2
    assert ms["power_loss.link_width_min"]["value"] == 4
    with CaptureReader(step["capture"]) as cap:
        notes = [e for e in cap.events if e.name == "power cycle"]
    assert len(notes) == 2 and all(e.meta["planned"] for e in notes)      # recorded as power cycles
    html = write_sweep_report(store, run, tmp_path / "rep").read_text()
    assert "<h2 id=power-loss>Power loss</h2>" in html and "power-loss/seq/r1" in html and "class=fail" in html


def test_the_link_is_read_from_the_controllers_pci_function_and_none_without_one(tmp_path):
    from powerrig.dut.sysfs import HostView, link
    from powerrig.sim.ssd.server import write_host_view

    view = HostView(**write_host_view(tmp_path / "h", {"/dev/nvme0": VirtualSSD("d5-p5336")}))
    assert link("/dev/nvme0", view) == {"speed": "16.0 GT/s PCIe", "width": 4}
    assert link("/dev/nvme1", view) is None                     # no such controller: nothing to read


def test_no_two_cycles_of_a_plan_write_with_the_same_seed():
    """A cycle writing an earlier cycle's seed would let that cycle's blocks pass for its own: a lost
    write could verify. Steps of different tables share the plan's seed, and still differ."""
    from powerrig.sweep.power_loss import cycle_seed

    steps = parse(PLAN + PERST + HOTPLUG).steps()
    seeds = [cycle_seed(s.power_loss.seed, s.key, k) for s in steps for k in range(2000)]
    assert len(set(seeds)) == len(seeds)


# ---- a flush every N writes (fio fsync=N; [[power_loss]] fsync_every) ----------------------------------------
def test_a_flush_every_n_writes_puts_them_on_the_media_before_a_cut():
    """The virtual drive honours fio's fsync=N: a weak capacitor loses only writes after the last
    completed flush (every write up to it reached the media)."""
    clock = Clock()
    ssd = VirtualSSD("d5-p5336", clock=clock)
    drive = PoweredDrive(ssd, PowerSpec(defect_rate=1.0))
    io = PowerLossIO(ssd).attach(drive)
    jobs = [JobLoad("w", "write", BS, QD)]
    rid = ssd.start_io(jobs, 10.0, t=clock.t)
    io.started(rid, {0: {"ns": 1, "offset": 0, "pattern": "7", "fsync": 512}}, jobs)
    clock.t += 0.5
    drive.set_output("12V", 0, clock.t)
    [cut] = io.truth
    n = cut["acknowledged"]
    flushed = n // 512 * 512          # ~750 writes in the cache at the cut: a weak capacitor saves ~40 of them
    assert cut["lost_offsets"] and min(cut["lost_offsets"]) >= flushed * BS, (n, cut["lost_offsets"][:3])
    assert io.verify(1, 0, flushed * BS, BS, "7") == []


def test_fsync_every_is_optional_and_an_unset_one_keeps_the_plan_s_hash():
    assert parse(PLAN).hash == "0127f7063ffa11bc"                      # as before the key existed
    assert parse(PLAN).steps()[0].power_loss.fsync_every is None
    pl = parse(PLAN + "fsync_every = 16\n")
    assert pl.steps()[0].power_loss.fsync_every == 16 and pl.hash != parse(PLAN).hash
    for bad, says in (("0", "0 is out of range 1.."), ("2.5", "must be an integer"), ('"x"', "must be")):
        with pytest.raises(PlanError, match=r"power_loss\[0\].fsync_every \(line 18\): " + says) as e:
            parse(PLAN + f"fsync_every = {bad}\n")
        assert "\n" not in str(e.value)


@pytest.fixture
def healthy_rig(simdir, monkeypatch):
    monkeypatch.setenv("POWERRIG_SIM_POWER", json.dumps({"defect_rate": 0.0}))
    r = run_cli("sim", "start", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_power_loss_step_with_fsync_every_reports_flushed_writes_and_none_lost_after_a_flush(tmp_path, healthy_rig):
    rig = healthy_rig
    text = (PLAN.replace('port = "sim:d5-p5336"', f'port = "rig:{rig["id"]}"').replace("cycles = 2", "cycles = 1")
            .replace("cut_ms = [0, 100]", "cut_ms = 100") + "fsync_every = 16\n")
    store = ResultStore(tmp_path / "r.sqlite")
    run = Sweep(parse(text, "pl.toml"), store, tmp_path / "out").run()
    [step] = store.steps(run)
    fio_dir = tmp_path / "out" / json.loads(step["params"])["fio_dir"]
    [c] = [json.loads(x) for x in (fio_dir / "cycles.jsonl").read_text().splitlines()]
    assert "fsync=16" in (fio_dir / "cycle00001" / "seq.fio").read_text().split()
    assert c["acknowledged"] > 100 and c["lost"] == 0 and c["lost_after_flush"] == 0
    assert c["flushed"] == c["acknowledged"] // 16 * 16 - (8 - 1) > 0          # fio's completed syncs x 16, less QD - 1
    ms = {m["name"]: m for m in store.measurements(run)}
    after = ms["power_loss.lost_after_flush_writes"]
    assert after["value"] == 0 and after["outcome"] == "pass"
    assert json.loads(after["notes"])["flushed_writes"] == c["flushed"]
    html = write_sweep_report(store, run, tmp_path / "rep").read_text()
    table = html.split("<h2 id=power-loss>Power loss</h2>")[1].split("</table>")[0]
    assert "<th>lost after a completed flush</th>" in table and "<th>flushed</th>" in table
    row = table.split("power-loss/seq/r1</td>")[1].split("</tr>")[0]
    cells = [x.split("</td>")[0] for x in row.split("<td>")[1:]]
    heads = [x.split("</th>")[0] for x in table.split("<th>")[2:]]
    got = dict(zip(heads, cells))
    assert got["flushed"] == str(c["flushed"]) and got["lost after a completed flush"] == "0", got
