"""Logging: the CLI sets it up once; what a module logs reaches stderr (warnings by default, more
with -v) and, with --log-file, a timestamped file. Before, the host configured no logging at all."""
from __future__ import annotations

import io
import logging
import os
import subprocess

from conftest import POWERRIG
from powerrig.core import log


def _cli(*args, sim_dir, timeout=60):
    env = dict(os.environ, POWERRIG_SIM_DIR=str(sim_dir))
    return subprocess.run([*POWERRIG, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_a_swallowed_problem_is_a_warning_on_stderr_and_in_the_log_file(tmp_path):
    sims = tmp_path / "sims"
    sims.mkdir()
    (sims / "0bad.json").write_text("{not json")      # a registration torn by a crash
    r = _cli("--log-file", str(tmp_path / "run.log"), "sim", "list", sim_dir=sims)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("powerrig: warning: dropping unreadable rig registration")
    text = (tmp_path / "run.log").read_text()
    assert "WARNING powerrig.core.rig_registry" in text and "0bad.json" in text
    assert not (sims / "0bad.json").exists()


def test_verbose_shows_info_and_quiet_default_does_not(tmp_path):
    r = _cli("-v", "stream", "--port", "sim", "--seconds", "0.3", "--json", "--quiet", sim_dir=tmp_path, timeout=90)
    assert r.returncode == 0, r.stderr
    assert "powerrig: info: powerrig.cli._ports: started a virtual interposer" in r.stderr


def test_an_unwritable_log_file_is_a_one_line_error(tmp_path):
    r = _cli("--log-file", str(tmp_path / "no" / "such" / "dir" / "x.log"), "sim", "list", sim_dir=tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("powerrig: error: cannot write the log file")


def test_setup_twice_replaces_its_handlers():
    root = logging.getLogger()
    before = list(root.handlers)
    levels = root.level, logging.getLogger("powerrig").level
    out = io.StringIO()
    try:
        log.setup(0, stream=io.StringIO())
        log.setup(0, stream=out)
        ours = [h for h in root.handlers if h not in before]
        assert len(ours) == 1
        logging.getLogger("powerrig.test").info("not shown")
        logging.getLogger("powerrig.test").warning("shown once")
        assert out.getvalue() == "powerrig: warning: shown once\n"
    finally:
        for h in [h for h in root.handlers if h not in before]:
            root.removeHandler(h)
        root.setLevel(levels[0])
        logging.getLogger("powerrig").setLevel(levels[1])
        logging.captureWarnings(False)
