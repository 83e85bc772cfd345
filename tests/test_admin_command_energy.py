"""A controller reset, a format, a sanitize, a flush and a firmware commit on the virtual rig, each
issued through the guarded door (dut/destructive.py) and placed from the virtual drive host's kernel
trace, with its energy above the level before (analysis/admin_energy.py, as sweep/command_trace.py
stores it) held to the virtual SSD's truth (sim/ssd/admin_power.py); and the window's first and last
samples on rails of a known energy."""
from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from powerrig.analysis.admin_energy import energy_above
from powerrig.capture import CaptureReader
from powerrig.capture.recorder import Recorder
from powerrig.core.timeline import NVME, Timeline
from powerrig.dut import destructive, runners
from powerrig.dut.guard import GuardRefused
from powerrig.results import command_report
from powerrig.sim import rig as simrig
from powerrig.sim.ssd.admin_power import DEFAULTS
from powerrig.sim.ssd.client import request
from powerrig.sim.ssd.drive import SsdError, VirtualSSD
from powerrig.sim.ssd.drive_trace import SimTrace
from powerrig.sim.ssd.profile import ProfileError, load
from powerrig.sweep import command_trace
from powerrig.sweep.plan_rig import open_interposer

# the stated tolerance: 5 % of the truth, or 2 mJ for the small ones (a 6 mJ flush, a -64 mJ reset dip:
# 2 mJ is 20 us of a 100 W error, or the baseline off by 10 mW over 0.2 s)
REL, ABS_J = 0.05, 0.002
KIND = {"format": "format", "sanitize": "sanitize", "flush": "flush", "fw-commit": "fw_commit", "reset": "reset"}


def test_each_command_energy_above_the_level_before_matches_the_virtual_ssd(tmp_path, simdir):
    st = simrig.start("d5-p5336", owned=True)
    try:
        ctrl, ns, serial = st["controller"], st["namespaces"][0], st["serial"]
        tl = Timeline()
        nvme, _ = runners({"nvme": st["nvme"], "fio": st["fio"], "host": st.get("host")}, tl)
        dev = open_interposer(st["port"])
        cap_path = tmp_path / "admin.jls"
        covered = [0.0]
        rec = Recorder(dev, cap_path, interval_us=100, timeline=tl, progress_every_s=0.1,
                       on_progress=lambda p: covered.__setitem__(0, p.covered_s))
        t_rec = time.time()
        rec.start()
        try:
            time.sleep(0.5)
            traces = command_trace.Recorders(SimTrace(st["endpoint"], ctrl, "t-a", "admin").start(),
                                             SimTrace(st["endpoint"], ctrl, "t-q", "io").start(), None)
            assert traces.admin.started and traces.io.started
            time.sleep(0.3)
            destructive.format(nvme, ns, serial, ses=1, controller=ctrl)
            time.sleep(0.3)
            destructive.sanitize(nvme, ctrl, serial, action=2)
            time.sleep(0.9)                    # the sanitize runs on after its completion (~0.57 s)
            nvme.flush(ns)
            time.sleep(0.3)
            destructive.firmware_commit(nvme, ctrl, serial, slot=1, action=3)
            time.sleep(0.3)
            destructive.reset(nvme, ctrl, serial)
            time.sleep(0.4)
            # the guard stands: a wrong serial is refused, nothing reaches the drive
            with pytest.raises(GuardRefused):
                destructive.format(nvme, ns, "NOT-THE-SERIAL", controller=ctrl)
            trace, note = command_trace.place(tl, traces, None)
            # the stream runs behind the wall clock on a loaded machine: stop once it holds the last command
            need = time.time() - t_rec
            t_wait = time.monotonic() + 30
            while covered[0] < need and time.monotonic() < t_wait:
                time.sleep(0.05)
        finally:
            rec.stop()
            rec.wait(30)
        truth = request(st["endpoint"], {"op": "admin_truth", "dev": ctrl})["commands"]
    finally:
        simrig.stop(st["id"])
    assert trace is not None and "I/O commands traced" in note
    assert [t["kind"] for t in truth] == ["format", "sanitize", "flush", "fw_commit", "reset"]
    by_kind = {t["kind"]: t for t in truth}
    with CaptureReader(cap_path) as cap:
        evs = {e.name: e for e in cap.events if e.kind == NVME and e.name in KIND}
        rows = command_trace.command_rows(cap)
        dt = cap.interval_s
    assert [r["phase"] for r in rows] == ["format", "sanitize", "flush", "fw-commit", "reset"]
    for r in rows:
        n = json.loads(r["notes"])
        t = by_kind[KIND[r["phase"]]]
        e = evs[r["phase"]]
        # placed on the traced submission: the flush on the I/O queue, the reset at its teardown's Delete SQ
        assert e.meta.get("placed") == "nvme_trace" and n["from"] == "nvme_trace", (r["phase"], e.meta)
        assert e.t_start <= t["t_start"] + dt and t["t_start"] - e.t_start < 0.002, r["phase"]
        assert n["cut_short"] is None, (r["phase"], n)
        assert r["name"] == "command.energy_above_j" and r["units"] == "J"
        assert abs(r["value"] - t["energy_j"]) <= max(REL * abs(t["energy_j"]), ABS_J), (r["phase"], r["value"], t)
        # settled back after the busy interval ended, not long after it
        assert t["t_end"] - t["t_start"] - dt <= n["duration_s"] <= t["t_end"] - t["t_start"] + 0.01, (r["phase"], n)
        assert n["baseline_w"] > 1.0 and math.copysign(1, n["peak_w"]) == math.copysign(1, t["extra_w"])
    ev_of = {r["phase"]: json.loads(r["notes"]) for r in rows}
    # a sanitize completes at once and its work runs on: the window goes past the completion
    assert ev_of["sanitize"]["command_s"] < 0.05 < 0.5 < ev_of["sanitize"]["duration_s"]
    # a format completes when done; the reset's placed event spans teardown to rebuild
    assert ev_of["format"]["command_s"] >= by_kind["format"]["t_end"] - by_kind["format"]["t_start"] - 0.001
    assert evs["reset"].meta["opcode"] == "nvme_admin_delete_sq" and ev_of["reset"]["command_s"] > 0.07
    assert evs["flush"].meta["opcode"] == "nvme_cmd_flush"
    html = command_report.tables([{**r, "step": "ps0/admin"} for r in rows])
    assert "command-energy" in html and "fw-commit" in html and "sanitize" in html


DT = 1e-4


def test_the_first_sample_is_counted_whole_and_the_baseline_ends_before_it():
    base, extra, n0, frac, n_on = 5.0, 2.0, 1000, 0.37, 300
    p = np.full(3000, base)
    # the command starts 37 % into interval n0: that interval holds 63 % of a full interval's excess
    p[n0] += extra * (1 - frac)
    p[n0 + 1:n0 + n_on] += extra
    p[n0 + n_on] += extra * frac
    c = energy_above(p, n0 + frac, DT, complete=n0 + n_on)
    assert c.baseline_w == pytest.approx(base) and c.cut_short is None
    assert c.energy_j == pytest.approx(extra * n_on * DT, rel=1e-9)
    assert c.duration_s == pytest.approx(n_on * DT, abs=0.0015)
    # a baseline that took in the start's interval would be biased by it; it stays clean
    noisy = p + np.random.default_rng(3).normal(0, 0.02, len(p))
    c2 = energy_above(noisy, n0 + frac, DT, complete=n0 + n_on)
    assert c2.energy_j == pytest.approx(extra * n_on * DT, rel=0.02)


def test_the_last_sample_of_a_cut_window_is_counted_for_its_part_and_the_cut_said():
    base, extra, n0 = 5.0, 2.0, 1000
    p = np.full(3000, base)
    p[n0:] += extra                     # never settles back
    c = energy_above(p, n0, DT, complete=n0 + 10, end_at=2000.25)
    assert c.energy_j == pytest.approx(extra * 1000.25 * DT, rel=1e-9)
    assert "next load-changing event" in c.cut_short and c.duration_s == pytest.approx(1000.25 * DT)
    # at the end of the samples: counted to the last sample, said so
    end = energy_above(p, n0, DT, complete=n0 + 10)
    assert end.energy_j == pytest.approx(extra * 2000 * DT, rel=1e-9) and "samples ended" in end.cut_short
    # a dip counts negative; a command at the very first sample has no baseline, said so
    dip = np.full(3000, base)
    dip[n0:n0 + 500] -= 0.8
    assert energy_above(dip, n0, DT, complete=n0 + 500).energy_j == pytest.approx(-0.8 * 500 * DT, rel=1e-9)
    first = energy_above(p, 0.4, DT)
    assert math.isnan(first.energy_j) and "no samples before" in first.note


def test_a_load_change_under_50_ms_before_leaves_no_level_and_says_why():
    """A workload's decaying tail is not a level: a baseline of a few intervals after it read energies
    below zero (the same rule as analysis.command_energy, analysis.level_before.MIN_PRE_S)."""
    base, extra, n0 = 5.0, 2.0, 1000
    p = np.full(3000, base)
    p[n0:n0 + 300] += extra
    tail = p.copy()
    tail[n0 - 20:n0] += np.linspace(1.0, 0.05, 20)         # the last 2 ms: a write's tail decaying
    short = energy_above(tail, n0, DT, complete=n0 + 300, pre_from=n0 - 20, pre_by="measure:write-128k")
    assert math.isnan(short.energy_j) and math.isnan(short.baseline_w)
    assert "measure:write-128k ended 2.0 ms before" in short.note and "needs 50 ms" in short.note
    # 60 ms after the change: a level, and the energy above it
    ok = energy_above(p, n0, DT, complete=n0 + 300, pre_from=n0 - 600, pre_by="measure:write-128k")
    assert ok.note is None and ok.baseline_w == pytest.approx(base)
    assert ok.energy_j == pytest.approx(extra * 300 * DT, rel=1e-9)
    # exactly the first interval of the level allowed (pre_from 50 ms before): still a level
    edge = energy_above(p, n0, DT, complete=n0 + 300, pre_from=n0 - 500)
    assert edge.note is None and edge.energy_j == pytest.approx(extra * 300 * DT, rel=1e-9)


class _Clock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def test_a_profiles_power_admin_table_sets_the_signature_and_a_bad_key_is_one_line(tmp_path):
    (tmp_path / "big-format.toml").write_text('extends = "d5-p5336"\nname = "big-format"\n'
                                              '[power.admin]\nformat_w = 6.5\nformat_base_s = 0.2\n')
    clk = _Clock(1000.0)
    ssd = VirtualSSD(load(tmp_path / "big-format.toml"), clock=clk)
    plain = VirtualSSD("d5-p5336", clock=_Clock(1000.0))
    clk.t = 1001.0
    sig = ssd.erase("format", 1)
    tb = ssd.profile.capacity_bytes / 1e12
    assert sig.extra_w == 6.5 and sig.duration_s == pytest.approx(0.2 + DEFAULTS["format_s_per_tb"] * tb)
    # the model's rails (1 ms means) hold exactly that energy above the level before, whatever the edges
    dt = 1e-3
    t = 1000.5 + (np.arange(int(1.5 / dt)) + 0.5) * dt
    p = np.array([ssd.power_at(np.linspace(a - dt / 2, a + dt / 2, 41)).mean() for a in t])
    got = energy_above(p, (1001.0 - 1000.5) / dt, dt, complete=(1001.0 + sig.duration_s - 1000.5) / dt)
    assert got.cut_short is None and got.energy_j == pytest.approx(sig.energy_j, rel=0.01)
    # a profile without the table is the drive it always was: the defaults
    assert plain.erase("format", 1).extra_w == DEFAULTS["format_w"]
    # another command while it is busy is refused, as a drive in a format refuses
    with pytest.raises(SsdError, match="busy with a format"):
        plain.admin_busy("flush", t=1000.01)
    (tmp_path / "typo.toml").write_text('extends = "d5-p5336"\nname = "typo"\n[power.admin]\nformat_watts = 6.5\n')
    with pytest.raises(ProfileError, match=r"\[power.admin\] has unknown keys \['format_watts'\]"):
        VirtualSSD(load(tmp_path / "typo.toml"), clock=clk)


def test_a_why_cell_keeps_its_arrows_whole():
    """A narrow why cell broke "1.099 -> 1.099 W" as "- >" (seen in a new user's report): the arrow
    is kept on one line, and the text is still escaped."""
    why = "the level did not change by more than 0.100 W (1.099 -> 1.099 W) <b>"
    m = {"name": "transition.rails_settle_s", "step": "ps1/idle", "value": 0.061, "upper": 0.12,
         "outcome": "pass", "notes": json.dumps({"from_ps": 0, "to_ps": 1, "why": why})}
    html = command_report.tables([m])
    assert "(1.099 <span style=white-space:nowrap>-&gt;</span> 1.099 W) &lt;b&gt;" in html
    assert html.count("-&gt;") == html.count("nowrap>-&gt;") == 1
