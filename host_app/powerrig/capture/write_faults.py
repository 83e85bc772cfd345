"""How a capture learns that the disk refused a write.

The JLS library writes from a thread of its own and reports a failed write only in its log, never
to the caller. Its log is routed here (to powerrig's debug log) and every error that comes from a
write is counted; at that write, in the library's thread, each open writer it may concern notes where
its file's whole chunks end (``failed_at``), which is where the capture must be cut. The writer
(capture/writer.py) checks the count at each block and stops.
"""
from __future__ import annotations

import logging
import mmap
import os
import re
import weakref
from pathlib import Path

from powerrig.capture.jls_tail import whole_chunks_end


class NativeLog(logging.Handler):
    """The JLS library logs every failed write of its writer thread through the "pyjls" logger (about
    1,100 lines for one full disk) and returns nothing to the caller. Its records are routed to
    powerrig's debug log (they are in --log-file) and counted here: an error record is how a writer
    learns that a write failed."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.errors = 0
        self.first_error = ""

    def emit(self, record: logging.LogRecord) -> None:
        # the reader's own complaints (a cut file it recovers) are no failed write
        if record.levelno >= logging.ERROR and _WRITE_FAILURE.search(record.getMessage()):
            if not self.errors:
                self.first_error = record.getMessage()
            self.errors += 1
            # called in the library's writer thread, at the failed write, before it writes anything
            # else: where the file's whole chunks end now is where the capture must end (what the
            # library writes after a failure, squeezed into the last free bytes, does not fit the rest)
            for w in open_writers():
                if w.failed_at is None and (len(OPEN) == 1 or disk_problem(w.path.parent)):
                    w.failed_at = _whole_chunks_end_of(w.path)
        _routed.debug("pyjls: %s", record.getMessage())


def open_writers() -> list:
    """The open writers, read from the library's thread while the main thread may open or close one."""
    for _ in range(10):
        try:
            return list(OPEN)
        except RuntimeError:       # the set changed while being read
            continue
    return []


def _whole_chunks_end_of(path: Path) -> int | None:
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return whole_chunks_end(buf)[0]
    except (OSError, ValueError):
        return None


_routed = logging.getLogger("powerrig.capture.jls")
_WRITE_FAILURE = re.compile(r"write mismatch|fwrite|_wr_|wr_data|fsr returned|summary_close|flush")
NATIVE = NativeLog()
_jls_logger = logging.getLogger("pyjls")
_jls_logger.addHandler(NATIVE)
_jls_logger.propagate = False
OPEN: weakref.WeakSet = weakref.WeakSet()      # writers not yet closed


def disk_problem(folder: Path, space: bool = True) -> str | None:
    """Why nothing more can be written in ``folder`` (read-only, full, no permission), or None.
    ``space=False``: only what cannot change while a recording runs (read-only, no permission), as
    ``record`` checks its --out before it starts: a disk that fills is said at the first failed write."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return f"{folder} is on a read-only filesystem; choose another --out"
    free = st.f_bavail * st.f_frsize
    if space and free < 1 << 20:
        return f"no space left on the disk holding {folder} ({free // 1024} KiB free); free space or choose another --out"
    if not os.access(folder, os.W_OK):
        return f"no permission to write in {folder}; choose another --out"
    return None
