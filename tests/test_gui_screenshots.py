"""The user guide's screenshots come from a real window under Xvfb, taken by this test as a user would
(scripts/gui_screenshots.py: virtual rig, connect, preset, power state, markers, saved capture)."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO


@pytest.mark.skipif(not shutil.which("xvfb-run"), reason="needs xvfb-run (apt-get install xvfb; make test does)")
def test_screenshots_of_the_main_views_from_a_real_window(tmp_path):
    from matplotlib.image import imread

    env = {k: v for k, v in __import__("os").environ.items() if k != "QT_QPA_PLATFORM"}   # a real X window
    r = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", sys.executable,
                        str(REPO / "scripts" / "gui_screenshots.py"), "--views", "live", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    shots = sorted(tmp_path.glob("*.png"))
    assert {p.stem for p in shots} == {"connect-live", "drive-power-states", "workload-markers", "open-capture",
                                       "open-capture-zoomed", "dark-theme"}, shots
    for p in shots:
        img = imread(p)
        assert img.shape[0] >= 800 and img.shape[1] >= 1400, (p.name, img.shape)
        # not a blank or single-colour window: a plot, panels and text give many distinct colours
        colours = np.unique((img[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
        assert len(colours) > 50, (p.name, len(colours))
