"""The host a benchmark ran on, one line to print beside its figures."""
from __future__ import annotations

import contextlib
import os
import platform


def machine(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The host a figure was taken on, printed beside it: the same code measured 2.3 s on one host of
    the project's kind and 1.4 s on the next, so a figure without its CPU cannot be compared."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError), open(cpuinfo, encoding="ascii", errors="replace") as f:   # none: not Linux
        for line in f:
            if not line.strip():
                break                                      # the first processor's block is enough
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown CPU"
    if "cpu family" in fields:
        name += f" (family {fields['cpu family']}, model {fields.get('model', '?')})"
    return f"{name}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
