"""A sweep hands over a report that shows the point (issue 40 items 2, 3, 4): `powerrig sweep` of the
datasheet-validation plan (shortened: PS0 and PS2, a 12 s idle, 3 s workloads) ends with the verdict
summary and the report's path; the report's first screen is the verdict summary and every step's power
trace, per-step capture reports made by the sweep itself, links relative (no file://) that resolve from
the report's folder; one verdict per requirement and value, PS2 at its maximum marginal, no negative
per-command energy; and the first screen in headless Chromium (POWERRIG_DOCS_IMG=1 refreshes
docs/img/report-first-screen.png)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest

from conftest import REPO, run_cli
from powerrig.results.first_screen import limit_text
from powerrig.results.pyplot import pyplot
from powerrig.results.step_trace import fit_titles, strip_rows

CHROMIUM = "/usr/bin/chromium"
PLAN = (REPO / "fixtures" / "plans" / "datasheet-validation.toml").read_text()
SHORT = {"power_states = [0, 1, 2]": "power_states = [0, 2]", "idle_steps = true": "idle_steps = false",
         "self_reported_power = true": "self_reported_power = false", "settle_s = 2.0": "settle_s = 0.5",
         "idle_s = 40.0": "idle_s = 12.0",    # past IDLP's 10 s settle: no idle window (no PWR-6) before it
         # the sim's nvme trace text of a whole write workload takes minutes on a loaded host: not this test's matter
         "measure_s = 30.0": "measure_s = 3.0\ncommand_trace = false"}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("first-screen")
    text = PLAN
    for a, b in SHORT.items():
        assert a in text, a
        text = text.replace(a, b)
    plan = tmp / "datasheet-short.toml"
    plan.write_text(text)
    env_sim = os.environ.get("POWERRIG_SIM_DIR")
    os.environ["POWERRIG_SIM_DIR"] = str(tmp / "sim")
    try:
        r = run_cli("sweep", str(plan), "--results", str(tmp / "r.sqlite"), "--out", str(tmp / "out"), timeout=600)
    finally:
        run_cli("sim", "stop", "--all")
        if env_sim is None:
            os.environ.pop("POWERRIG_SIM_DIR", None)
        else:
            os.environ["POWERRIG_SIM_DIR"] = env_sim
    assert r.returncode == 0, r.stdout + r.stderr
    return {"tmp": tmp, "out": r.stdout, "db": tmp / "r.sqlite", "report": tmp / "out" / "report" / "index.html"}


def test_the_sweep_ends_with_the_verdict_summary_and_its_report(swept):
    out = swept["out"]
    done = out.index("sweep done")
    summary = out.index("verdicts: ", done)
    assert re.search(r"verdicts: (\d+ (fail|marginal|partial|pass|invalid|n/a)(, )?)+ \(of \d+ verdicts\)", out)
    assert "fail     ps0/actp-seq-write-128k/r1 OCP PWR-6 (idle) 5.498 W: 5.498 W over the 5.25 W limit" in out
    assert out.index(f"report: {swept['report']}") > summary and swept["report"].is_file()


def test_one_verdict_per_requirement_and_value_and_ps2_at_its_maximum_is_marginal(swept):
    from powerrig.results import ResultStore
    from powerrig.analysis.verdicts import is_judged

    ms = [m for m in ResultStore(str(swept["db"])).measurements(1) if is_judged(m)]
    seen = defaultdict(set)
    for m in ms:
        if m["value"] is not None:
            seen[(m["name"], m["upper"], m["lower"], round(m["value"], 3))].add(m["outcome"])
    assert all(len(v) == 1 for v in seen.values()), {k: v for k, v in seen.items() if len(v) > 1}
    once = defaultdict(int)
    for m in ms:
        once[(m["step"], m["name"], m["phase"])] += 1
    assert max(once.values()) == 1
    [ps2] = [m for m in ms if m["step"].startswith("ps2/") and m["name"] == "OCP PCM-1"]
    assert ps2["outcome"] == "marginal" and 9.5 <= ps2["value"] <= 10.0 and ps2["marginal_upper"] == 9.5, ps2
    assert json.loads(ps2["notes"])[0].startswith(f"{ps2['value']:.4g} W is within the 10 W limit by")
    [actp] = [m for m in ms if m["step"].startswith("ps2/") and m["name"] == "NVMe ACTP"]     # 3 s: no 10 s mean
    assert actp["outcome"] == "n/a" and "ACTP is the highest 10 s mean" in json.loads(actp["notes"])[0]
    assert {m["outcome"] for m in ms if m["name"] == "OCP PWR-6"} == {"fail"}


def test_the_first_screen_is_the_summary_and_every_steps_trace_with_relative_links(swept):
    rep = swept["report"]
    text = rep.read_text()
    a, b, c = text.index("Verdict summary"), text.index("Power per step"), text.index("id=figures")
    assert a < b < c
    assert "file://" not in text and "requirement met" not in text
    assert (rep.parent / "run_strip.png").stat().st_size > 10_000
    for k in (0, 1):
        assert (rep.parent / f"trace_{k:03d}.png").stat().st_size > 10_000
    links = re.findall(r"(?:href|src)='([^']+)'", text) + re.findall(r"src=([^ >']+\.png)", text)
    assert links and not any(x.startswith(("/", "file:")) for x in links)
    for x in links:
        assert (rep.parent / unquote(x)).exists(), x
    steps = re.findall(r"<a href='(captures/[^']+/report\.html)'>step report</a>", text)
    assert len(steps) == 2
    assert "energy per phase" in text and re.search(r"<td class=l>measure:actp-seq-write-128k</td><td>\d", text)


def test_no_negative_energy_per_command_in_any_capture_report(swept):
    from powerrig.analysis import analyse
    from powerrig.capture import CaptureReader

    caps = sorted((swept["tmp"] / "out" / "captures").glob("*.jls"))
    assert len(caps) == 2
    for cap in caps:
        with CaptureReader(cap) as c:
            an = analyse(c, c.events, c.metadata)
        assert an.commands
        bad = [(x.name, x.start_s, x.energy_above_j) for x in an.commands if x.energy_above_j < 0]
        assert not bad, (cap.name, bad)
        assert all(x.note for x in an.commands if x.energy_above_j != x.energy_above_j), cap.name   # NaN says why
    pages = list((swept["report"].parent / "captures").glob("*/report.html"))
    assert len(pages) == 2
    for page in pages:
        text = page.read_text()
        cells = re.findall(r"<td>(-\d[\d.]*)</td><td>[\d.–-]+</td><td>[\d.–-]+</td><td>(?:cut|full)", text)
        assert not cells, (page, cells)
        # every report opens with its verdicts: the capture's own summary above its trace
        assert text.index("<b>Verdicts: ") < text.index("Power over time"), page
        assert re.search(r"fail</b> OCP PWR-6 \(idle\) 5.498 W: 5.498 W over the 5.25 W limit", text), page


def test_the_first_screen_in_chromium(swept, tmp_path):
    if not Path(CHROMIUM).exists():
        msg = f"no {CHROMIUM} (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    from PIL import Image

    shot = tmp_path / "first.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1366,900", f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                    swept["report"].as_uri()], capture_output=True, timeout=120)
    img = Image.open(shot).convert("RGB")
    assert img.size == (1366, 900)
    assert len(img.getcolors(1 << 20) or []) > 200, "the first screen looks blank"
    # the strip of traces is on the first screen. The 3.3 V rail's green line runs across both panels
    # (1,162-1,169 columns in five screenshots; its legend swatch and the "pass" badge ~60). The total's
    # blue and the 12 V rail's orange show too, but the total is drawn over the 12 V line (3.3 V is ~0 W
    # here), so their pure colours are few and move with the lines' sub-pixel place: 193-307 pixels in
    # the same five, the legend alone 62 (a make test run failed at 193 against the old bound of 200)
    px = np.asarray(img).astype(int)
    r, g, b = px[..., 0], px[..., 1], px[..., 2]
    green_columns = int(((g > 130) & (r < 90) & (b < 90)).any(axis=0).sum())
    blue_orange = int((((b > 150) & (r < 90) & (g > 90) & (g < 150)) | ((r > 220) & (g > 100) & (g < 160) & (b < 60))).sum())
    assert green_columns > 800 and blue_orange > 120, (green_columns, blue_orange)
    if os.environ.get("POWERRIG_DOCS_IMG") == "1":
        shutil.copy(shot, REPO / "docs" / "img" / "report-first-screen.png")


def test_the_strip_splits_steps_into_even_rows():
    """9 steps at 8 a row are 5 and 4: a last step alone would be stretched over the whole width."""
    assert [len(r) for r in strip_rows(list(range(9)), 8)] == [5, 4]
    assert [len(r) for r in strip_rows(list(range(8)), 8)] == [8]
    assert [len(r) for r in strip_rows(list(range(17)), 8)] == [6, 6, 5]
    assert strip_rows([], 8) == []


def test_a_short_steps_title_is_cut_to_its_panel():
    """A 4 s idle step beside a 16 s workload: its title ends in an ellipsis inside its own panel, not
    over the next one's."""
    plt = pyplot()
    fig = plt.figure(figsize=(4.0, 2.0), dpi=100)
    narrow, wide = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 8]})
    cut = narrow.set_title("1. ps0/idle/r1 with a long name", fontsize=7, loc="left")
    whole = wide.set_title("2. ps0/seq-read-128k/r1", fontsize=7, loc="left")
    try:
        fit_titles(fig, [(narrow, cut), (wide, whole)])
        r = fig.canvas.get_renderer()
        assert cut.get_text().endswith("\u2026") and cut.get_text().startswith("1.")
        assert cut.get_window_extent(r).width <= narrow.get_window_extent(r).width
        assert whole.get_text() == "2. ps0/seq-read-128k/r1"            # one that fits is left whole
    finally:
        plt.close(fig)


def test_a_summary_rows_limit_reads_like_its_measured_value():
    """The limit beside "9.995 W" is "10 W", not "10.000"; both bounds share the units; none is "-"."""
    assert limit_text(None, 10.0, "9.995 W") == "10 W"
    assert limit_text(-5.0, 5.0, "5.421 %") == "-5 / 5 %"
    assert limit_text(None, 5.25, "5.498 W") == "5.25 W"
    assert limit_text(None, None, "10.51 W") == "-" and limit_text(None, 2.0, "-") == "2"
