"""Where powerrig keeps a user's things when a command is not told: one data folder per user.

The demo, the sweep, record, import, calibrate, the results commands, the web page and the desktop
app all default to the same folder, so each finds what the last one made (`make demo` then
`powerrig results list`), nothing lands in the folder a command happens to be run from (a clone of
this repository), and nothing is shared with other users or cleared at reboot as /tmp is.

The folder follows the XDG Base Directory Specification (specifications.freedesktop.org,
basedir-spec 0.8): ``$XDG_DATA_HOME/powerrig``, where an unset, empty or relative XDG_DATA_HOME means
``~/.local/share``.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

APP = "powerrig"


def data_dir() -> Path:
    """The user's powerrig data folder (not created here)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / APP


def results_db() -> Path:
    """The default results store: every run the demo, `powerrig sweep` and the app make."""
    return data_dir() / "results.sqlite"


def sweeps_dir() -> Path:
    """Where each sweep's captures, fio output and logs go, one folder per run."""
    return data_dir() / "sweeps"


def captures_dir() -> Path:
    """Recordings made by hand (`powerrig record`, `powerrig import`, the app's live captures)."""
    return data_dir() / "captures"


def calibration_dir() -> Path:
    """Calibration certificates, one folder per calibration."""
    return data_dir() / "calibration"


def charts_dir() -> Path:
    """Charts the CLI draws (`powerrig results compare --png`) when no file is named."""
    return data_dir() / "charts"


def stamp() -> str:
    """A file-name-safe UTC time, so files made one after another sort by name."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime())


def new_file(folder: Path, prefix: str, suffix: str) -> Path:
    """``folder/prefix-TIME.suffix`` (``-2``, ``-3`` ... if that name is taken), folder created (0700:
    a user's recordings are theirs)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    base = f"{prefix}-{stamp()}"
    path, n = folder / f"{base}{suffix}", 1
    while os.path.lexists(path):
        n += 1
        path = folder / f"{base}-{n}{suffix}"
    return path


LATEST = "latest"


def latest_capture() -> Path | None:
    """The newest capture (.jls) in the captures folder, or None."""
    folder = captures_dir()
    found = [p for p in folder.glob("*.jls") if p.is_file()] if folder.is_dir() else []
    return max(found, key=lambda p: (p.stat().st_mtime, p.name)) if found else None
