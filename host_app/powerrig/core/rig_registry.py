"""The registry of running virtual rigs: one JSON file per rig in one directory.

`powerrig sim start` registers a rig here and `powerrig devices` lists the live ones, so the
registry sits below both: it imports nothing of powerrig, and neither the simulator nor device
discovery has to import the other to find a rig.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

ENV_DIR = "POWERRIG_SIM_DIR"
RIG_MODULE = b"powerrig.sim.rig"   # what a rig's process has on its command line


def root() -> Path:
    """Where running virtual rigs register themselves ($POWERRIG_SIM_DIR or ~/.cache/powerrig/sim: per
    user; a shared $POWERRIG_SIM_DIR still lists and stops only the user's own rigs, see running())."""
    return Path(os.environ.get(ENV_DIR, Path.home() / ".cache" / "powerrig" / "sim"))


def state_file(rig_id: str, where: Path | None = None) -> Path:
    return (where or root()) / f"{rig_id}.json"


def register(state: dict, where: Path | None = None) -> Path:
    """Publish a rig's state (it needs at least "id" and "pid"); the file appears whole or not at all."""
    path = state_file(str(state["id"]), where)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)
    return path


def unregister(rig_id: str, where: Path | None = None) -> None:
    state_file(rig_id, where).unlink(missing_ok=True)


def is_alive(pid: int, rig_id: str) -> bool:
    """Is pid still *this* rig? (A pid can be reused after a reboot or a crash; a zombie has no cmdline.)"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return RIG_MODULE in cmdline and rig_id.encode() in cmdline


def mine(pid: int) -> bool:
    """Is the process ``pid`` this user's? (/proc/PID belongs to the process's real owner.)"""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()
    except OSError:
        return False


def running(where: Path | None = None) -> list[dict]:
    """States of this user's rigs whose process is alive, oldest first; registrations of dead ones are
    removed. Another user's rig in a shared folder is neither listed nor touched: `powerrig sim list` and
    `sim stop --all` are about your own rigs."""
    base = where or root()
    out = []
    for f in sorted(base.glob("*.json")) if base.is_dir() else []:
        try:
            st = json.loads(f.read_text())
            alive = is_alive(int(st["pid"]), str(st["id"]))
        except (ValueError, KeyError, TypeError, OSError) as e:
            logger.warning("dropping unreadable rig registration %s: %s", f, e)
            alive = False
        if not alive:
            try:
                f.unlink(missing_ok=True)
            except PermissionError:         # a shared folder: another user's file, theirs to clear
                pass
            continue
        if mine(int(st["pid"])):
            out.append(st)
    return sorted(out, key=lambda s: s.get("started", 0))
