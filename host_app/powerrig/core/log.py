"""Where the host's log records go. Modules only ever do ``logger = logging.getLogger(__name__)``;
the program that owns the process (the CLI, the demo, the GUI) calls ``setup`` once.

Default: warnings and errors to stderr, one line each, so what a module swallowed is still seen.
``verbosity`` 1 adds info, 2 debug; a log file, when given, gets everything from powerrig with
timestamps (for overnight runs: what happened at 3 a.m. is in the file, not on a closed terminal).
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path

from powerrig.core.errors import PowerrigError

STDERR_FORMAT = "powerrig: %(level)s: %(message)s"            # like the CLI's "powerrig: error: ..."
VERBOSE_FORMAT = "powerrig: %(level)s: %(name)s: %(message)s"
FILE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(threadName)s] %(message)s"

_OURS = "_powerrig_handler"    # marks the handlers setup() installed, so a second call replaces them


class _ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        record.level = record.levelname.lower()
        return super().format(record)


def level_for(verbosity: int) -> int:
    return logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG


def setup(verbosity: int = 0, log_file: str | Path | None = None, stream=None) -> None:
    """Configure logging for this process (again: the previous setup's handlers are replaced)."""
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(h)
        h.close()
    console = logging.StreamHandler(stream or sys.stderr)
    console.setLevel(level_for(verbosity))
    console.setFormatter(_ConsoleFormatter(STDERR_FORMAT if verbosity <= 0 else VERBOSE_FORMAT))
    handlers: list[logging.Handler] = [console]
    if log_file is not None:
        try:
            fh = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as e:
            raise PowerrigError(f"cannot write the log file {log_file}: {e.strerror}; choose another --log-file") from None
        fh.setLevel(logging.DEBUG)
        fh.setFormatter(logging.Formatter(FILE_FORMAT))
        handlers.append(fh)
    for h in handlers:
        setattr(h, _OURS, True)
        root.addHandler(h)
    root.setLevel(logging.WARNING)        # other libraries: their warnings only
    logging.getLogger("powerrig").setLevel(logging.DEBUG if log_file is not None else level_for(verbosity))
    logging.captureWarnings(True)          # warnings.warn(...) from any library becomes a logged warning
