"""The tool processes this process started (found in /proc by their command line), so a face can stop
the fio it ran without holding its Popen: the runners run tools to completion on a worker thread."""
from __future__ import annotations

import os
import signal
from pathlib import Path


def children_running(prefix: list[str]) -> list[int]:
    """Pids of this process's children whose command line starts with ``prefix`` (the fio we ran)."""
    pids = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        for pid in kids:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if [a.decode(errors="replace") for a in argv[:len(prefix)]] == prefix:
                pids.append(int(pid))
    return pids


def stop_children(prefix: list[str]) -> int:
    """SIGTERM to each child started with ``prefix``; how many there were."""
    pids = children_running(prefix)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    return len(pids)
