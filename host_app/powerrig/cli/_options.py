"""Options shared by `stream` and `record`, checked before anything is opened: a bad value is one
line that says what to type instead, and changes nothing (no port opened, no file created)."""
from __future__ import annotations

import math
import signal
import sys
from contextlib import contextmanager

from powerrig.core.bounds import OPTIONS, show
from powerrig.core.errors import PowerrigError


class OptionError(PowerrigError):
    """A command-line value that cannot be right."""


def _ceiling(option: str) -> str:
    return show(OPTIONS[option].hi)


def seconds(value: float | None, hint: str = "") -> float | None:
    """A duration: positive and finite (nan, inf, 0 and negatives would never end or never start), up to
    its ceiling (core/bounds.py)."""
    if value is not None and (not math.isfinite(value) or value <= 0 or value > OPTIONS["--seconds"].hi):
        raise OptionError(f"--seconds must be a positive, finite number of seconds up to {_ceiling('--seconds')}, "
                          f"not {value:g}{hint}")
    return value


def interval_us(value: int | None) -> int | None:
    """None is the device's default; 0 must not silently mean it."""
    if value is not None and not 0 < value <= OPTIONS["--interval-us"].hi:
        raise OptionError(f"--interval-us must be a positive number of microseconds up to "
                          f"{_ceiling('--interval-us')}, not {value}; leave it out for the device's default (1000)")
    return value


def add_reply_timeout(p) -> None:
    """--reply-timeout, for the commands that open an interposer (stream, record)."""
    p.add_argument("--reply-timeout", type=float, default=2.0,
                   help="seconds to wait for the interposer's first reply (default 2; an emulated board "
                        "running far slower than real time may need minutes, docs/emulator.md)")


def reply_timeout(value: float) -> float:
    if not math.isfinite(value) or value <= 0 or value > OPTIONS["--reply-timeout"].hi:
        raise OptionError(f"--reply-timeout must be a positive, finite number of seconds up to "
                          f"{_ceiling('--reply-timeout')}, not {value:g}")
    return value


def rails(value: str | None) -> list[str] | None:
    """Comma-separated rail names, each once: a rail listed twice would count its power twice."""
    if value is None:
        return None
    names = [r.strip() for r in value.split(",")]
    if any(not n for n in names):
        raise OptionError(f"--rails {value!r} has an empty name; list rails like --rails 12V,3V3")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise OptionError(f"--rails lists {', '.join(dup)} more than once; list each rail once "
                          "(a rail counted twice doubles the total power)")
    return names


class LiveLine:
    """The `\\r` progress line on stderr; anything printed after it starts on a new line."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.active = False

    def show(self, text: str) -> None:
        if self.enabled:
            print("\r" + text, end="", file=sys.stderr, flush=True)
            self.active = True

    def end(self) -> None:
        if self.active:
            print(file=sys.stderr, flush=True)
            self.active = False


class Caught:
    """Which signal stopped a command (None: none did)."""
    name: str | None = None


@contextmanager
def stop_on_signals(stop):
    """SIGINT and SIGTERM both call ``stop("interrupted")`` so the recording ends cleanly (a service
    manager or `timeout` sends SIGTERM; a shell script's `cmd &` starts us with SIGINT ignored, so
    the handler is installed whatever was inherited). A second signal interrupts at once. Yields a
    ``Caught`` that names the signal, so the command can say what it stopped."""
    caught = Caught()

    def handler(signum, _frame):
        if caught.name is not None:
            raise KeyboardInterrupt
        caught.name = signal.Signals(signum).name
        stop("interrupted")
    saved = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield caught
    finally:
        for s, h in saved.items():
            signal.signal(s, h)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, as Ctrl-C raises KeyboardInterrupt: whatever treats an
    interrupt cleanly (a sweep marks its run "interrupted") treats a service manager's stop alike."""

    def __str__(self) -> str:
        return "stopped by SIGTERM"


@contextmanager
def sigterm_interrupts():
    """SIGTERM raises Terminated and SIGINT KeyboardInterrupt wherever the program is, whatever was
    inherited: a shell script's `powerrig sweep plan.toml &` starts us with SIGINT ignored (so Python
    installs no handler of its own), and a later `kill -INT` or Ctrl-C did nothing: the run went on."""
    def handler(_signum, _frame):
        raise Terminated()
    saved = signal.signal(signal.SIGTERM, handler)
    saved_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, saved)
        signal.signal(signal.SIGINT, saved_int)
