"""A run owns its output folder: one sweep process at a time writes a run's captures.

The owner holds an exclusive ``flock`` on ``OUT/.powerrig-run.lock`` for as long as it runs. The
kernel drops that lock when the process ends, however it ends (kill -9 included), so a dead run's
folder is free to resume without anyone deleting a stale file, while a live one (the same run
resumed from a second shell, or two resumes of a dead run started together) is refused in one line
naming the run, its host and its pid. The file also says who holds it, for that line and for the
note when a dead owner's folder is taken over. The lock is taken before the rig or the results are
touched, so a refusal changes nothing. The folder is the run's own: the lock file is opened without
following a link, and a folder holding a link, a hard link or another user's file anywhere is refused
(powerrig.core.owned) before anything is written into it.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from powerrig.core import owned
from powerrig.dut.commands import UnsafeArgument, fio_value
from powerrig.sweep.plan import PlanError

LOCK_NAME = ".powerrig-run.lock"


class RunBusy(PlanError):
    """Another live process owns the run's output folder; nothing was changed."""


def this_process() -> dict:
    """Who runs here: stored in the run row and in the lock file."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def describe(owner: dict) -> str:
    since = owner.get("since_utc")
    when = f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(since))} UTC" if since else ""
    return f"host {owner.get('host') or '?'}, pid {owner.get('pid') or '?'}{when}"


def check_out_name(out: str | Path) -> None:
    """The folder's name reaches fio's job file (its logs' paths): a name fio would read otherwise ('$',
    '#', ';', a line break, a blank at an end) is refused before anything is made, not at the first step."""
    try:
        fio_value("write_bw_log", str(Path(out) / "fio" / "logs"))
    except UnsafeArgument as e:
        raise PlanError(f"--out {str(out)!r} cannot be a run's output folder: {e}; choose another folder name") from None


class RunLock:
    """The exclusive lock on one output folder (``acquire`` ... ``release``)."""

    def __init__(self, out_dir: str | Path):
        self.out = Path(out_dir)
        self.path = self.out / LOCK_NAME
        self.previous: dict | None = None      # what a dead owner left in the file (taken over)
        self._fd: int | None = None

    def acquire(self, run_id: int | None, fallback: dict | None = None) -> "RunLock":
        """Take the folder for ``run_id`` or raise RunBusy naming who has it (``fallback``: the run row's
        host and pid, when the file does not say)."""
        try:
            owned.owned_dir(self.out, top=True)
            fd = owned.open_fd(self.path, "r+")     # never through a link; not inherited by fio, nvme-cli, the rig
        except OSError as e:
            raise PlanError(f"cannot use the output folder {self.out}: {e.strerror or e}; choose another --out") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd) or dict(fallback or {})
            os.close(fd)
            run = holder.get("run", run_id)
            pid, host = holder.get("pid", "?"), holder.get("host", "?")
            raise RunBusy(f"run {run if run is not None else '?'} is still running ({describe(holder)}) and owns "
                          f"{self.out}; wait for it to end or stop it (kill {pid} on {host}), then resume") from None
        try:
            owned.check_tree(self.out)          # nothing in the folder is a link to elsewhere, or someone else's
        except owned.NotOwned:
            os.close(fd)
            raise
        self.previous = _read(fd) or None
        self._fd = fd
        self.claim(run_id)
        return self

    def claim(self, run_id: int | None) -> None:
        """Write who owns the folder now (the run id is known only after the run row is made)."""
        doc = dict(this_process(), run=run_id, since_utc=time.time())
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(doc).encode(), 0)

    def release(self) -> None:
        """Give the folder up (the file stays: it is only a name for the lock, and a record of the last owner)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _holder(fd: int, wait_s: float = 1.0) -> dict:
    """Who holds the lock. The holder writes its name just after taking it: until then the file still
    names the previous (dead) owner, so a name of a process gone from this host is read again."""
    deadline = time.monotonic() + wait_s
    while True:
        doc = _read(fd)
        stale = not doc or (doc.get("host") == socket.gethostname() and not _alive(doc.get("pid")))
        if not stale or time.monotonic() > deadline:
            return doc
        time.sleep(0.02)


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:        # someone else's process: alive
        return True
    return True


def _read(fd: int) -> dict:
    try:
        doc = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
