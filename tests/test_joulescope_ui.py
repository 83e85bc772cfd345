"""A new capture as the Joulescope UI loads it, with the UI's own loading code (joulescope_ui from
PyPI in the test-only virtualenv .venv-jsui, built by scripts/setup.sh): every rail's current, voltage
and power with the data the capture holds, the gpi inputs, and the events as text annotations on each
rail's power plot. Under CI=true a missing .venv-jsui fails instead of skipping."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from powerrig.capture import CaptureReader
from test_capture_layout import SEGS, write_capture
from powerrig.testing import synthetic as S

ROOT = Path(__file__).resolve().parents[1]
JSUI_PY = ROOT / ".venv-jsui" / "bin" / "python"


def _jsui_python() -> Path:
    if JSUI_PY.exists():
        return JSUI_PY
    why = f"{JSUI_PY} missing: run scripts/setup.sh (it builds the Joulescope UI tier)"
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def test_the_joulescope_ui_loader_loads_every_rail_and_the_events(tmp_path):
    py = _jsui_python()
    tr = S.interval_trace(SEGS, rows_per_block=700)
    path = write_capture(tmp_path / "c.jls", tr, S.clock(tr.first_index))
    run = subprocess.run([str(py), str(ROOT / "scripts" / "joulescope_ui_load.py"), str(path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-1500:]
    got = json.loads(run.stdout)
    sig = got["signals"]
    with CaptureReader(path) as cap:
        for rail in cap.rails:
            [source] = {n.split(".")[0] for n in sig if f"_{rail}-" in n}
            for field in ("i", "v", "p"):
                s = sig[f"{source}.{field}"]
                assert s["length"] == cap.length and s["utc"][1] > s["utc"][0]
                want = float(np.nanmean(cap.samples(f"{field}_{rail}")))
                assert s["mean"] == pytest.approx(want, rel=1e-3), (rail, field)
        assert {"0", "1", "2"} <= {n.split(".")[1] for n in sig if n.startswith(source.replace("3V3", "12V"))}
        assert all(got["plots"][q] for q in ("i", "v", "p", "0", "1", "2"))
        # the events, as text on each rail's power plot
        on_power = [a for a in got["annotations"] if a["plot"] == "p"]
        assert len(on_power) == len(cap.rails) * len(cap.events) and all("write" in a["text"] for a in on_power)
