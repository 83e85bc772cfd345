"""What the CLI's `--port` accepts: a serial port or URL as given, or `sim` for a virtual interposer.

`sim` is the virtual rig you started (`powerrig sim start`; the newest of yours if several run), so
`stream`, `record`, `calibrate` and `power` measure its drive; with none running, a bare virtual
interposer (no drive behind it) is started for this command alone. The word is the command line's
convenience, so it is resolved here, by the CLI: the library (Interposer.open) only ever sees a real
port, and the simulator knows nothing of the CLI's options.
"""
from __future__ import annotations

import logging
import sys

from powerrig.core.errors import PowerrigError

logger = logging.getLogger(__name__)

SIM_PORT = "sim"
PORT_HELP = "serial port of the interposer (see `powerrig devices`), or `sim` for your running virtual rig"


def started_rig() -> dict | None:
    """The newest virtual rig this user started with `powerrig sim start` (not one a sweep, the app or a
    test owns and will stop), or None."""
    from powerrig.core import rig_registry

    rigs = [r for r in rig_registry.running() if not r.get("owner")]
    return rigs[-1] if rigs else None


def no_rig(need: str) -> PowerrigError:
    """The one line for `--port sim` with no rig of yours when ``need`` (what needs a drive) needs one."""
    return PowerrigError(f"--port sim: no virtual rig of yours is running; {need} needs one: run "
                         "`powerrig sim start` first")


def resolve_port(port: str, need_rig: str = "") -> str:
    """The port to open. `sim`: the running virtual rig's interposer, said on stderr; with none, a
    virtual interposer in its own process (stopped when this interpreter exits), said on stderr too (its
    figures are no drive's), unless ``need_rig`` says why this command needs a whole rig (then one line
    telling to start one)."""
    if port != SIM_PORT:
        return port
    rig = started_rig()
    if rig is not None:
        print(f"powerrig: --port sim: virtual rig {rig['id']} ({rig.get('profile', '?')}) on {rig['port']}",
              file=sys.stderr, flush=True)
        return rig["port"]
    if need_rig:
        raise no_rig(need_rig)
    from powerrig.sim.interposer.launch import start_interposer   # a process launcher: nothing of the simulator is imported

    path, proc = start_interposer()
    print(f"powerrig: --port sim: no virtual rig of yours is running; a bare virtual interposer on {path} for "
          "this command (no drive behind it: `powerrig sim start` for one)", file=sys.stderr, flush=True)
    logger.info("started a virtual interposer (pid %d) on %s: no virtual rig of yours is running, so no drive "
                "is behind it (`powerrig sim start` for one)", proc.pid, path)
    return path
