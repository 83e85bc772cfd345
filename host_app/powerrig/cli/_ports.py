"""What the CLI's `--port` accepts: a serial port or URL as given, or `sim` for a virtual interposer.

The word `sim` is the command line's convenience, so it is resolved here, by the CLI: the library
(Interposer.open) only ever sees a real port, and the simulator knows nothing of the CLI's options.
"""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

SIM_PORT = "sim"
PORT_HELP = "serial port of the interposer (see `powerrig devices`), or `sim` to start a virtual one"


def resolve_port(port: str) -> str:
    """The port to open. `sim` starts a virtual interposer in its own process (stopped when this
    interpreter exits) and answers its pseudo-terminal."""
    if port != SIM_PORT:
        return port
    from powerrig.sim.launch import start_interposer   # a process launcher: nothing of the simulator is imported

    path, proc = start_interposer()
    logger.info("started a virtual interposer (pid %d) on %s", proc.pid, path)
    return path
