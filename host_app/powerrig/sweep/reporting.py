"""The report a sweep leaves when it ends: the run's sweep report (results/sweep_report.py, its first screen the
verdict summary and every step's trace) with each step's capture report (powerrig/capture_report.py) beside it,
linked relatively, so `powerrig sweep` and the demo hand over one page and no second command is needed."""
from __future__ import annotations

from pathlib import Path

from powerrig.capture_report import write_report
from powerrig.results.sweep_report import write_sweep_report


def write_run_report(store, run_id: int, out_dir: str | Path | None = None, on_warning=None) -> Path:
    """Write the sweep report of ``run_id`` (default folder: the run's output folder /report) with every
    step's capture report under captures/; returns index.html. ``on_warning(line)``: a capture's alerts."""
    def one(capture, out):
        return write_report(capture, out, on_warning=(lambda line: on_warning(f"{capture}: {line}"))
                            if on_warning else None)
    return write_sweep_report(store, run_id, out_dir, one)
