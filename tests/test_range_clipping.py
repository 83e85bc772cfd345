"""Range saturation: intervals whose codes reached a channel's clamp are found from the records as
they are (powerrig.interposer.frames.clipped), counted per rail in the capture (clip records, close
record), and a phase holding them is INVALID with one line saying which channel, how often and that
its energy is a lower bound; a drive within range (95 % of full scale with ripple) gives none. On
synthetic records (codes built here from raw samples with docs/protocol.md's definitions) and on a
virtual rig whose client drive draws over the 3V3 channel's 1.0 A full scale (recorded, and swept:
the step invalid with the why in the sweep report)."""
from __future__ import annotations

import html
import math
import time

import numpy as np
import pyjls
import pytest

from powerrig.analysis import verdicts
from powerrig.analysis.pipeline import analyse
from powerrig.analysis.source import ArraySource
from powerrig.capture import CaptureReader
from powerrig.capture import layout as L
from powerrig.capture.recorder import Recorder
from powerrig.capture.writer import CaptureWriter
from powerrig.capture_report import write_report
from powerrig.core.blocks import CLIP_I, CLIP_V, IntervalBlock
from powerrig.core.names import Verdict
from powerrig.core.rails import rails
from powerrig.core.timeline import PHASE, Event, Timeline
from powerrig.interposer import frames as wire
from powerrig.sim import rig as simrig
from powerrig.sim.ssd.client import request
from powerrig.results.store import ResultStore
from powerrig.results.sweep_report import write_sweep_report
from powerrig.sweep import measure
from powerrig.sweep.engine import Sweep
from powerrig.sweep.plan import parse
from powerrig.sweep.plan_rig import open_interposer
from powerrig.testing.synthetic import clock

CODE_MAX = 32767
SPI = 250                       # 1 ms intervals of 4 us samples
PERIOD_S = 4e-6


def records(v: np.ndarray, i: np.ndarray) -> np.ndarray:
    """Interval records of raw codes (samples x rails), as docs/protocol.md "DATA records" defines
    them: codes clamped to +-32767, sums, p_min/p_max = floor(min/max(v*i) / 2**15)."""
    v = np.clip(np.rint(v).astype(np.int64), -CODE_MAX, CODE_MAX)
    i = np.clip(np.rint(i).astype(np.int64), -CODE_MAX, CODE_MAX)
    n, r = v.shape[0] // SPI, v.shape[1]
    rec = np.zeros(n, wire.record_dtype(r))
    for k in range(r):
        vk, ik = v[:, k].reshape(n, SPI), i[:, k].reshape(n, SPI)
        p = vk * ik
        s = p.sum(axis=1)
        rec[f"sum_v{k}"], rec[f"sum_i{k}"] = vk.sum(axis=1), ik.sum(axis=1)
        rec[f"sum_p_hi{k}"], rec[f"sum_p_lo{k}"] = s >> 15, s & 0x7FFF
        rec[f"p_min{k}"], rec[f"p_max{k}"] = p.min(axis=1) >> 15, p.max(axis=1) >> 15
        rec[f"peak{k}"] = -2**30
    return rec


def raw_trace(n: int, seed: int = 1):
    """n intervals on 12V, 3V3, 5V at nominal voltage (noise as the virtual front end's); 3V3's current
    at 95 % of full scale with a 3 % ripple, the others at 30 %; the truth of where 3V3 clips is set
    by the caller."""
    rng = np.random.default_rng(seed)
    cfg = rails()
    m = n * SPI
    t = np.arange(m)
    v = np.stack([np.full(m, r.nominal_v / r.v_lsb) for r in cfg.rails], axis=1) + rng.normal(0, 1.2, (m, 3))
    i = np.stack([np.full(m, 0.3 * CODE_MAX)] * 3, axis=1) + rng.normal(0, 2.5, (m, 3))
    i[:, 1] = 0.95 * CODE_MAX * (1 + 0.03 * np.sin(2 * np.pi * t / 50)) + rng.normal(0, 2.5, m)
    return v, i


def test_the_integer_screen_never_hides_a_clipped_record():
    """``clipped`` skips the full test when an integer screen says no record can pass it. Record by
    record at each test's boundary (mean codes one unit either side of the clamp's margin; the largest
    product, positive or negative, one unit either side of the steady ceiling) and over random
    records, the screened result is the full test's."""
    near = CODE_MAX - wire.CLIP_MARGIN
    rng = np.random.default_rng(7)
    n = 3000
    rec = np.zeros(n, wire.record_dtype(1))
    at_clamp = rng.random(n) < 0.3                  # these test the means; the rest the products
    v_mean = np.where(at_clamp, rng.choice([near - 1, near, -near], n),
                      rng.choice([26000, 2000, wire.CLIP_MIN_V_CODE, wire.CLIP_MIN_V_CODE - 1], n))
    rec["sum_v0"] = v_mean * SPI + rng.integers(-1, 2, n)
    rec["sum_i0"] = np.where(at_clamp & (rng.random(n) < 0.5), rng.choice([near - 1, near, -near], n), 1500) * SPI \
        + rng.integers(-1, 2, n)
    ceiling = (rec["sum_v0"] / SPI) * near / 2.0**15          # where (p_max + 1) * 2**15 meets it
    edge = np.clip(np.ceil(ceiling) - 1 + rng.integers(-1, 2, n), -2**15, 2**15 - 1)
    side = rng.random(n)
    rec["p_max0"] = np.where(side < 0.5, edge, rng.integers(-2000, 2000, n))
    rec["p_min0"] = np.where(side >= 0.5, np.clip(-edge - 1, -2**15, 2**15 - 1), -100)
    hits = 0
    for k in range(n):                              # one record at a time: the screen sees it alone
        one = rec[k:k + 1]
        full = wire._clipped(one, 0, SPI)
        assert (wire.clipped(one, 0, SPI) == full).all(), (k, one)
        hits += int(full.any())
    assert 100 < hits < n - 100                     # both sides of every boundary were reached
    calm = records(np.full((SPI * 40, 1), 26000.0), np.full((SPI * 40, 1), 1500.0))
    assert not wire._near_clamp(calm, 0, SPI)       # a calm rail is screened out, the full test skipped


def decode(v, i, first_index=1_000_000, rows_per_block=700):
    """IntervalBlocks through the host's decoding (records_to_si), in blocks of rows_per_block."""
    cfg = rails()
    desc = {"rails": [{"name": r.name, "v_lsb": r.v_lsb, "i_lsb": r.i_lsb} for r in cfg.rails]}
    scales = wire.rail_scales(desc, cfg.names)
    rec = records(v, i)
    si = wire.records_to_si(rec, scales, SPI, 25)
    clip = wire.records_clipped(rec, len(scales), SPI)
    n = len(si["dig_or"])
    for s in range(0, n, rows_per_block):
        e = min(n, s + rows_per_block)
        yield IntervalBlock(first_index + s * SPI, SPI, PERIOD_S, tuple(cfg.names),
                            *(si[f][s:e] for f in ("v", "i", "p", "p_min", "p_max", "p_peak", "dig_or", "dig_and")),
                            np.ones(e - s, bool), clip=clip[s:e])


def test_clip_bits_from_the_codes_first_and_last_interval_and_within_range():
    n = 12
    v, i = raw_trace(n)
    i[0:SPI, 1] = 1.3 * CODE_MAX                   # the first interval: sustained, over full scale
    i[3 * SPI + 117, 1] = 1.2 * CODE_MAX          # one sample at the clamp; the mean stays at 95 %
    i[7 * SPI:8 * SPI, 1] *= -1                    # a reverse current at 95 %: within range
    i[7 * SPI + 9, 1] = -1.1 * CODE_MAX           # ... and one sample at the negative clamp
    v[5 * SPI:6 * SPI, 2] = 1.05 * CODE_MAX        # 5V's voltage over its range for one interval
    i[(n - 1) * SPI:, 1] = 1.3 * CODE_MAX         # the last interval
    clip = np.stack([wire.clipped(records(v, i), k, SPI) for k in range(3)], axis=1)
    want = np.zeros((n, 3), np.uint8)
    want[[0, 3, 7, n - 1], 1] = CLIP_I
    want[5, 2] = CLIP_V
    assert np.array_equal(clip, want), clip.T
    # a power-on inside an interval: 12V steps from 0 to nominal at its middle sample with an inrush
    # at 60 % of full scale, far above the ceiling its mean voltage (half the nominal) gives: not clipped
    on_v, on_i = raw_trace(4, seed=6)
    on_v[:2 * SPI + SPI // 2, 0] = 0.0
    on_i[:2 * SPI + SPI // 2, 0] = 0.0
    on_i[2 * SPI + SPI // 2:2 * SPI + SPI // 2 + 20, 0] = 0.6 * CODE_MAX
    assert not wire.clipped(records(on_v, on_i), 0, SPI).any()
    # a rail that is off (0 V, 0 A, noise): its ceiling is ~0, and nothing is called clipped
    off = np.random.default_rng(2).normal(0, 2.5, (n * SPI, 1))
    assert not wire.clipped(records(off, off.copy()), 0, SPI).any()


def test_capture_counts_clipped_intervals_per_rail_and_the_phase_is_invalid(tmp_path):
    n = 3000
    v, i = raw_trace(n)
    over = np.zeros(n, bool)
    over[:40] = True                                # from the capture's first interval
    over[1000:1812] = True                          # 812 intervals in the middle, across blocks
    over[2990:] = True                              # to its last
    i[np.repeat(over, SPI), 1] = 1.3 * CODE_MAX
    spike = 2500                                    # one sample at the clamp, mean at 95 %
    i[spike * SPI + 3, 1] = 1.2 * CODE_MAX
    over[spike] = True
    cl = clock()
    utc = lambda sid: float(cl.utc(1_000_000 + sid * SPI))          # noqa: E731
    events = [Event(PHASE, "idle ps0", utc(100), utc(900)), Event(PHASE, "format", utc(950), utc(1950))]
    path = tmp_path / "clip.jls"
    cfg = rails()
    meta = {"device": {"rails": [{"name": r.name, "v_lsb": r.v_lsb, "i_lsb": r.i_lsb} for r in cfg.rails]}}
    blocks = list(decode(v, i))
    with CaptureWriter(path, metadata=meta, timeline=Timeline(events), clock=cl) as w:
        for b in blocks:
            w.write(b)
    cap = CaptureReader(path)
    assert cap.closed_cleanly
    got = cap.clipped()
    assert got["3V3"] == {"current": int(over.sum()), "voltage": 0, "intervals": int(over.sum())}
    assert got["12V"]["intervals"] == got["5V"]["intervals"] == 0
    assert cap.close_record["clipped"]["3V3"]["current"] == over.sum()
    assert cap.clipped(0, 1)["3V3"]["current"] == 1 and cap.clipped(n - 1, n)["3V3"]["current"] == 1
    assert cap.clipped(1812, 2500)["3V3"]["intervals"] == 0
    assert "3V3 in" in cap.info()
    # the in-memory source says the same
    assert ArraySource.from_blocks(blocks, cl).clipped() == got
    # the analysis: the phase over the clipped range is invalid, the idle one is not
    a = analyse(cap, cap.events, cap.metadata)
    by = {r.name: r for r in a.phases}
    fmt, idle = by["format"], by["idle ps0"]
    assert fmt.clipped["3V3"]["current"] == 812 and fmt.lower_bound
    touched = math.ceil(fmt.phase.stop) - math.floor(fmt.phase.start)     # its edge intervals count in part
    assert touched in (1000, 1001, 1002)
    assert fmt.invalid == (f"3V3 current at the channel's 1.0 A full scale in 812 of {touched} intervals: "
                           "readings clipped, energy and power are lower bounds"), fmt.invalid
    assert not idle.clipped and not idle.invalid
    checks = [c for c in a.checks if c.phase == "format"]
    assert checks and all(c.status == Verdict.INVALID and "full scale" in c.why for c in checks)
    assert all(c.status != Verdict.INVALID for c in a.checks if c.phase == "idle ps0")
    assert any("range saturated" in x for x in a.warnings)
    # the capture report: the alert at the top, the verdict's why, the energy a lower bound
    said = []
    page = write_report(path, tmp_path / "report", on_warning=said.append).read_text()
    assert said == [f"the range saturated: 3V3 at full scale in {int(over.sum())} of {n} intervals; readings there "
                    "are clipped, their power and energy lower bounds"]
    assert html.escape(fmt.invalid) in page and "(lower bound)" in page
    # what a sweep stores for the phase (its report's verdict list reads the why from these rows)
    rows = measure.measurements(a, "format", "idle ps0")
    energy = next(m for m in rows if m["name"] == "energy")
    assert energy["outcome"] == "invalid" and verdicts.why_of(energy) == "lower bound: " + fmt.invalid
    look = verdicts.summary(rows)["look"]
    assert look and all(x["phase"] == "format" for x in look if x["outcome"] == "invalid")
    assert any(x["why"] == fmt.invalid for x in look)
    # the clip records and their annotations are what pyjls reads (group GROUP_CLIP on 3V3's power)
    r = pyjls.Reader(str(path))
    try:
        tags, notes = [], []
        r.user_data(lambda tag, data: tags.append(tag) and False)
        sig = cap.metadata["layout"]["signals"]["p_3V3"]
        r.annotations(sig, 0, lambda ts, y, kind, group, data: notes.append((ts, group, data)) and False)
    finally:
        r.close()
    assert L.UD_CLIP in tags
    clip_notes = [x for x in notes if x[1] == L.GROUP_CLIP]
    assert clip_notes and clip_notes[0][0] == 0 and "3V3 current at full scale" in clip_notes[0][2]
    assert len(cap.clips) == 3      # [0, 40) + [1000, 1400); [1400, 1812) + 2500 (a second each); 2990.. at close


def test_clipping_on_and_off_for_seconds_is_a_record_a_second_and_one_annotation(tmp_path):
    n = 5000
    v, i = raw_trace(n, seed=4)
    over = np.arange(n) % 2 == 1                     # every other interval: 2500 runs
    i[np.repeat(over, SPI), 1] = 1.3 * CODE_MAX
    path = tmp_path / "flicker.jls"
    with CaptureWriter(path) as w:
        for b in decode(v, i, rows_per_block=333):
            w.write(b)
    cap = CaptureReader(path)
    assert cap.clipped()["3V3"]["current"] == over.sum() == cap.close_record["clipped"]["3V3"]["current"]
    assert cap.clipped(1, 2)["3V3"]["current"] == 1 and cap.clipped(0, 1)["3V3"]["current"] == 0
    assert len(cap.clips) <= 6, len(cap.clips)       # 5 s of it: about a record a second
    r = pyjls.Reader(str(path))
    try:
        notes = []
        r.annotations(cap.metadata["layout"]["signals"]["p_3V3"], 0,
                      lambda ts, y, kind, group, data: notes.append(group) and False)
    finally:
        r.close()
    assert notes.count(L.GROUP_CLIP) == 1


def test_within_range_at_95_percent_with_ripple_nothing_is_clipped(tmp_path):
    v, i = raw_trace(2000, seed=3)
    path = tmp_path / "ok.jls"
    with CaptureWriter(path) as w:
        for b in decode(v, i):
            w.write(b)
    cap = CaptureReader(path)
    assert all(c["intervals"] == 0 for c in cap.clipped().values())
    assert not cap.clips and "range clipped" not in cap.info()
    assert 0.93 < float(np.nanmean(cap.samples("i_3V3"))) / rails().rail("3V3").i_full_scale < 0.97


# the client drive without APST (it would park in a non-operational state when idle)
PROFILE = 'extends = "client-apst"\nname = "client-{name}"\n[identity]\napst = false\n[power]\nidle_w = {watts}\n'


def _record_idle(tmp_path, watts: float, name: str):
    """A virtual rig whose client drive (all of it on 3V3) idles at ``watts``: 1.2 s recorded, the
    middle 0.8 s an idle phase; (capture, analysis, the model's true mean power over the phase)."""
    prof = tmp_path / f"{name}.toml"
    prof.write_text(PROFILE.format(name=name, watts=watts))
    st = simrig.start(str(prof), owned=True)
    try:
        dev = open_interposer(st["port"])
        tl = Timeline()
        path = tmp_path / f"{name}.jls"
        covered = [0.0]
        rec = Recorder(dev, path, interval_us=1000, timeline=tl, progress_every_s=0.1,
                       on_progress=lambda p: covered.__setitem__(0, p.covered_s))
        t0 = time.time()
        rec.start()
        try:
            time.sleep(0.2)
            ph = tl.begin(PHASE, "idle ps0")
            time.sleep(0.8)
            tl.end(ph)
            need, deadline = time.time() - t0 + 0.1, time.monotonic() + 20
            while covered[0] < need and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            rec.stop()
            rec.wait(30)
        truth = request(st["endpoint"], {"op": "power_model", "dev": st["controller"], "t0": ph.t_start,
                                         "t1": ph.t_end, "step_s": 0.001})["watts"]
    finally:
        simrig.stop(st["id"])
    cap = CaptureReader(path)
    return cap, analyse(cap, cap.events, cap.metadata), float(np.mean(truth))


def test_virtual_rig_drive_over_the_3v3_full_scale_is_invalid_with_the_why(tmp_path, simdir):
    fs_w = 3.3 * rails().rail("3V3").i_full_scale      # ~3.3 W: what 3V3 can read at nominal voltage
    cap, a, truth_w = _record_idle(tmp_path, 1.3 * fs_w, "over")
    got = cap.clipped()
    assert got["3V3"]["current"] > 0.9 * cap.length, got
    assert all(got[r]["intervals"] == 0 for r in cap.rails if r != "3V3"), got
    r = next(x for x in a.phases if x.name == "idle ps0")
    n = r.clipped["3V3"]["current"]
    assert r.invalid and r.invalid.startswith(f"3V3 current at the channel's 1.0 A full scale in {n} of "), r.invalid
    assert "energy and power are lower bounds" in r.invalid
    assert r.mean_w < 0.85 * truth_w           # what the clipping hides: the reading is low
    assert all(c.status == Verdict.INVALID for c in a.checks if c.phase == "idle ps0")
    assert cap.close_record["clipped"]["3V3"] == got["3V3"]      # the whole capture: the close record's count


def test_virtual_rig_drive_at_95_percent_of_full_scale_is_not_clipped(tmp_path, simdir):
    fs_w = 3.3 * rails().rail("3V3").i_full_scale
    cap, a, truth_w = _record_idle(tmp_path, 0.95 * fs_w, "within")
    assert all(c["intervals"] == 0 for c in cap.clipped().values()), cap.clipped()
    r = next(x for x in a.phases if x.name == "idle ps0")
    assert not r.clipped and not r.invalid
    assert r.mean_w == pytest.approx(truth_w, rel=0.03)
    assert float(np.nanmax(cap.samples("i_3V3"))) > 0.9 * rails().rail("3V3").i_full_scale   # near it, not at it


SWEEP = '''name = "over-3v3"
power_states = [0]
idle_steps = true
[rig]
port = "rig:{rig}"
interval_us = 1000
[timing]
settle_s = 0.3
idle_s = 0.6
cooldown_s = 0.2
'''


def test_a_sweep_step_on_a_drive_over_the_3v3_full_scale_is_invalid_with_the_why_in_its_report(tmp_path, simdir):
    prof = tmp_path / "over.toml"
    prof.write_text(PROFILE.format(name="sweep-over", watts=1.3 * 3.3 * rails().rail("3V3").i_full_scale))
    st = simrig.start(str(prof), owned=True)
    try:
        store = ResultStore(tmp_path / "r.sqlite")
        run = Sweep(parse(SWEEP.format(rig=st["id"]), "over.toml"), store, tmp_path / "out").run()
    finally:
        simrig.stop(st["id"])
    [step] = store.steps(run)
    assert step["status"] == "invalid", step
    assert step["invalid_reason"].startswith("3V3 current at the channel's 1.0 A full scale in "), step["invalid_reason"]
    # cooldown_s retries a throttled step once; a clipped one would clip again, so it is not retried
    assert step["attempts"] == 1 and len(list((tmp_path / "out").rglob("*.jls"))) == 1
    idle = next(m for m in store.measurements(run) if m["name"] == "power.idle")
    assert idle["outcome"] == "invalid"
    page = write_sweep_report(store, run, tmp_path / "report").read_text()
    assert html.escape(step["invalid_reason"]) in page
