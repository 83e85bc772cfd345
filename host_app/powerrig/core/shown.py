"""Stored text as a terminal is shown it: every control or format character written as an escape.

Names in the results store come from plans, drives (id-ctrl's bytes) and stations: one holding
ESC ] 0 ; ... BEL retitled the terminal of whoever listed the runs, a CR overwrote the line, U+202E
reversed it. Every human output of a stored string goes through ``printable``.
"""
from __future__ import annotations


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else (f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}")


def printable(value):
    """``value`` with each character Python calls unprintable (C0/C1 controls, format and bidi
    characters, line separators) escaped; anything not a string is returned as it is."""
    if not isinstance(value, str) or value.isprintable():
        return value
    return "".join(c if c.isprintable() or c == " " else _escape(c) for c in value)
