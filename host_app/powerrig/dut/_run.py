"""Running a tool as an event: argv (never a shell), host UTC at call and return, ok or error."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from powerrig.dut.commands import Argv
from powerrig.dut.remote import SSH_FAILED, RemoteError
from powerrig.core.errors import ToolError
from powerrig.core.timeline import Event, Timeline


@dataclass
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    event: Event


def run_tool(argv: list[str], timeline: Timeline, kind: str, name: str, tool: str, timeout: float,
             env: dict | None = None, check: bool = True, meta: dict | None = None,
             remote=None, binary: bool = False) -> Completed:
    """Run argv, record it on the timeline; ToolError (event marked failed) when it is missing,
    times out or (with ``check``) exits non-zero. With ``remote`` (an SshHost) argv runs on that
    host; ssh's own failure (exit 255) is a RemoteError whatever ``check`` says. ``argv`` must come
    from the door to other programs (powerrig.dut.commands): nothing else runs. ``binary``: stdout is
    kept as bytes (``nvme id-ctrl -b``); on this host only (a drive host's transport carries text)."""
    if not isinstance(argv, Argv):
        raise TypeError("run_tool runs only command lines built by powerrig.dut.commands")
    if binary and remote is not None:
        raise ToolError(f"{tool}: binary output ({' '.join(argv)}) is read on this host only, not through drive "
                        f"host {remote.url}")
    meta = dict(meta or {})
    if remote is not None:
        meta["drive_host"] = remote.url
    ev = timeline.begin(kind, name, argv=list(argv), meta=meta)
    try:
        if remote is not None:      # ssh (a process), or a QEMU guest's agent (from this process)
            p = remote.invoke(argv, timeout, env)
        else:
            p = subprocess.run(argv, capture_output=True, text=not binary, timeout=timeout, env=env,
                               stdin=subprocess.DEVNULL, shell=False)
            if binary:
                p.stderr = p.stderr.decode(errors="replace")
    except FileNotFoundError:
        if remote is not None:
            msg = "ssh not found: install openssh-client to reach a drive host"
            timeline.end(ev, ok=False, error=msg)
            raise RemoteError(msg) from None
        msg = (f"{tool} not found: {argv[0]!r} is not installed or not on PATH "
               f"(install {tool}, or set the {tool} program in the rig configuration)")
        timeline.end(ev, ok=False, error=msg)
        raise ToolError(msg) from None
    except PermissionError:
        msg = f"{tool}: {argv[0]!r} is not executable (check the {tool} program in the rig configuration)"
        timeline.end(ev, ok=False, error=msg)
        raise ToolError(msg) from None
    except subprocess.TimeoutExpired:
        msg = f"{tool} did not finish within {timeout:g} s: {' '.join(argv)} ({why_late()})"
        timeline.end(ev, ok=False, error=msg)
        raise ToolError(msg) from None
    ev.result["returncode"] = p.returncode
    if remote is not None and p.returncode == SSH_FAILED:
        msg = remote.explain(p.stderr)
        timeline.end(ev, ok=False, error=msg)
        raise RemoteError(msg)
    if remote is not None and p.returncode == 127 and "not found" in p.stderr:
        msg = (f"{tool} not found on drive host {remote.url}: {argv[0]!r} (install {tool} there, or set "
               f"the {tool} program in the rig configuration)")
        timeline.end(ev, ok=False, error=msg)
        raise ToolError(msg)
    if check and p.returncode != 0:
        out = p.stdout.decode(errors="replace") if binary else p.stdout
        first = next((ln.strip() for ln in p.stderr.splitlines() if ln.strip()), "") or \
            next((ln.strip() for ln in out.splitlines() if ln.strip()), "no output")
        msg = f"{tool} failed (exit {p.returncode}): {first} [{' '.join(argv)}]"
        timeline.end(ev, ok=False, error=msg)
        raise ToolError(msg)
    return Completed(list(argv), p.returncode, p.stdout, p.stderr, ev)


OVERLOAD = 2.0     # runnable processes per core above which a timeout may be the host's, not the device's


def why_late(loadavg=None, cores: int | None = None) -> str:
    """What a timeout's message suggests: a hung device, or, when the host had many more runnable
    processes than cores (16 virtual rigs on 2 shared cores reached a load of 49), a host too busy to
    give the tool its CPU, said in the same line with the figure so nobody hunts a device fault."""
    cores = cores or os.cpu_count() or 1
    try:
        load = (loadavg or os.getloadavg)()[0]
    except OSError:                      # no load average on this platform
        return "is the device hung?"
    if load > OVERLOAD * cores:
        return (f"this host is overloaded: load average {load:.1f} on {cores} cores, so the tool may not have had "
                "the CPU to finish; run fewer things at once, or is the device hung?")
    return "is the device hung?"


def fail(timeline: Timeline, ev: Event, msg: str) -> ToolError:
    """Mark the event failed and hand back the error to raise."""
    timeline.end(ev, ok=False, error=msg)
    return ToolError(msg)
