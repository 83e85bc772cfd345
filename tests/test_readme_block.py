"""The README's "After the demo" block runs as written, in order, after the demo (issue 40): every
command exits 0, they share the demo's results store, `--port sim` is the rig `sim start` started, and
nothing lands in the checkout. HOME is a fresh folder, so the per-user defaults (~/.local/share/powerrig,
~/.cache/powerrig/sim) are the ones a new user gets. The demo runs in its quick mode, as the README
says `make demo QUICK=1` does."""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import REPO

README = REPO / "README.md"


def after_the_demo() -> list[str]:
    """The commands of the first ```sh block under "## After the demo", one per line, as written."""
    text = README.read_text()
    section = text[text.index("## After the demo"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


# what a command run in the checkout would leave at its top (the README's old `--out run.jls`, `run-report/`,
# `run.sr`, `calibration/`, a chart) and under out/ (the old default store and sweep folders)
MADE_BY_COMMANDS = re.compile(r"^[^/]+\.(jls|sr|png|sqlite|csv)$|^[^/]*[_-]report[^/]*/$"
                              r"|^(calibration[^/]*|charts|sweeps|captures)/$")
IN_OUT = re.compile(r"\.(jls|sr|png|sqlite|csv|html)$")


def untracked() -> set[str]:
    """What the README's commands could leave in the checkout that git does not track, ignored or not:
    files of a capture's, report's, store's or chart's kind at its top and under out/. (Other processes
    working in the checkout meanwhile, tests being written, screenshots, caches, are not counted.)"""
    found = set()
    for extra in ([], ["--ignored", "--exclude-standard"]):
        out = subprocess.run(["git", "ls-files", "--others", "--directory", *extra], cwd=REPO,
                             capture_output=True, text=True, check=True).stdout
        found |= {p for p in out.splitlines() if MADE_BY_COMMANDS.search(p)}
    if (REPO / "out").is_dir():
        found |= {str(p.relative_to(REPO)) for p in (REPO / "out").rglob("*") if IN_OUT.search(p.name)}
    return found


@pytest.fixture
def user(tmp_path):
    """A new user's environment: their own HOME, no XDG or powerrig overrides."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("XDG_", "POWERRIG_")) and k not in ("HOME", "MPLCONFIGDIR")}
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen")
    yield home, env
    subprocess.run([sys.executable, "-m", "powerrig", "sim", "stop", "--all"], env=env, capture_output=True,
                   timeout=60)


def run(line: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.timeout(2400)    # ~3 min on an idle 2-core machine (demo --quick 1 min, the quick sweep 1 min); 20 at load 20
def test_after_the_demo_block_runs_as_written(user):
    home, env = user
    data = home / ".local" / "share" / "powerrig"
    lines = after_the_demo()
    assert len(lines) >= 10 and all(ln.startswith(".venv/bin/powerrig ") for ln in lines), lines
    before = untracked()
    t0 = time.monotonic()
    demo = run(".venv/bin/python -m powerrig.demo --quick", env)         # what `make demo QUICK=1` runs after setup
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert (data / "results.sqlite").is_file(), demo.stdout[-2000:]
    took = {"demo --quick": time.monotonic() - t0}
    said = {}
    for line in lines:
        t = time.monotonic()
        r = run(line, env)
        took[line[len(".venv/bin/powerrig "):][:40]] = time.monotonic() - t
        assert r.returncode == 0, f"{line}\nexit {r.returncode}\nstdout: {r.stdout[-3000:]}\nstderr: {r.stderr[-3000:]}"
        said[line] = r
    print("\n".join(f"{v:6.1f} s  {k}" for k, v in took.items()))

    def out(word: str) -> subprocess.CompletedProcess:
        [r] = [r for line, r in said.items() if word in line]
        return r

    # one store: the demo's run and the sweep's, compared, and the chart where the command said
    with sqlite3.connect(data / "results.sqlite") as db:
        assert [s for (s,) in db.execute("select status from runs order by id")] == ["done", "done"]
    cmp = out("results compare").stdout
    assert "9 shared steps" in cmp and "MiB/s/W A" in cmp, cmp
    chart = next(ln.split(": ", 1)[1] for ln in cmp.splitlines() if ln.startswith("chart: "))
    assert chart.startswith(str(data)) and open(chart, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert (data / "sweeps").is_dir() and any((data / "sweeps").glob("demo-*/report/*.html"))
    # `stream --port sim` measured the started rig's idle drive (~5.5 W), not a bare interposer (~8.2 W)
    stream = out("stream --port sim")
    mean = float(re.search(r"mean power: .*?total ([0-9.]+) W", stream.stdout).group(1))
    assert 5.0 < mean < 6.0 and "virtual rig" in stream.stderr, stream.stdout + stream.stderr
    # the recording around the workload has its three phases, and the report and export landed beside it
    caps = sorted((data / "captures").glob("record-*.jls"))
    assert len(caps) == 1
    with open(caps[0].with_name(caps[0].stem + "_report") / "phases.csv") as f:
        phases = [row.split(",")[0] for row in f.read().splitlines()[1:]]
    assert phases[:1] == ["capture"] and "idle before" in phases and "idle after" in phases
    assert any(p.startswith("workload: fio ") for p in phases), phases
    assert caps[0].with_suffix(".sr").is_file()
    assert any(p.name.startswith(caps[0].stem + "_report_") for p in caps[0].parent.iterdir())   # the one phase
    power = out("power cycle").stdout
    assert "hold-up:" in power and "inrush:" in power and "12 V off" in power, power
    assert any((data / "captures").glob("import-*.jls"))
    assert any((data / "calibration").glob("calibration-*/calibration-certificate.json"))
    rigs = subprocess.run([sys.executable, "-m", "powerrig", "sim", "list", "--json"], env=env, capture_output=True,
                          text=True, timeout=60).stdout
    assert [json.loads(x) for x in rigs.splitlines()] == []            # `sim stop` ended the one started
    assert untracked() <= before, sorted(untracked() - before)          # nothing new in the checkout
