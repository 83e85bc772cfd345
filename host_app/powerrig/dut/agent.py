"""A drive host reached through a command agent: the second transport beside ssh.

A QEMU drive host (`powerrig sim start --drive qemu`) runs the distribution's nvme-cli and fio in a
guest whose only way in is a command agent on a virtio-serial port, behind a unix socket on this
machine: ``agent:///path/to/agent-relay.sock``. The runners use it exactly as they use ssh: argv in,
stdout, stderr and exit code out (``wrap`` gives the local argv, `python -m powerrig.dut.agent SOCK --
ARGV...`, which exits 255 when the agent cannot be reached, as ssh does), files through ``cat`` and
``tar`` there. The guest has its own clock: ``to_host`` maps its time stamps (fio's epoch logs) onto
this host's UTC from the best of a few round trips (``clock``).
"""
from __future__ import annotations

import base64
import json
import shlex
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from powerrig.dut import commands
from powerrig.dut.commands import Argv
from powerrig.dut.transport import SSH_FAILED, RemoteError, RemoteHost

SCHEME = "agent"
SYNC_ROUNDS = 8           # clock samples taken at a time (before and after each fio run)
CLOCK_MAX_AGE_S = 30.0    # a mapping whose newest sample is older than this measures again
CLOCK_WINDOW_S = 90.0     # samples this much older than the newest are dropped (the host's clock may be slewed)


@dataclass(frozen=True)
class GuestClock:
    offset_s: float           # guest time - host time
    uncertainty_s: float      # the true offset is within this (half the width of the bounds it came from)
    measured_at: float


def estimate(samples) -> GuestClock:
    """The guest's offset from samples ``(host time sent, guest time, host time answered)``, NTP-style.
    Each bounds the offset to ``[guest - answered, guest - sent]``; the guest's clock runs on QEMU's
    virtual clock, which is this host's, so the bounds of recent samples all hold at once and their
    intersection is far narrower than any one round trip (one sample's request path and another's
    answer path may each have been quick). Bounds that do not meet mean a clock was stepped between
    samples (the guest's ``date -s``, an NTP step on either side): the newest samples that agree with
    each other are the clock as it is now, and they alone map it (``current``); the older ones would
    place everything by the clock before the step (an hour off after a 1 h step)."""
    cur = current(samples)
    lo = max(g - b for a, g, b in cur)
    hi = min(g - a for a, g, b in cur)
    return GuestClock((lo + hi) / 2, (hi - lo) / 2, max(b for a, g, b in cur))


def current(samples) -> list:
    """The newest samples whose bounds all meet (in the order taken, by answer time)."""
    out, lo, hi = [], -float("inf"), float("inf")
    for a, g, b in sorted(samples, key=lambda x: x[2], reverse=True):
        nlo, nhi = max(lo, g - b), min(hi, g - a)
        if nlo > nhi:
            break
        out.append((a, g, b))
        lo, hi = nlo, nhi
    return out[::-1]


def jump_s(samples) -> float | None:
    """How far the clock moved between the samples before the newest agreeing run and that run
    (``current``), or None when all agree: the size of a step, for the reason a step gives."""
    cur = current(samples)
    older = [x for x in samples if x not in cur]
    if not older:
        return None
    return estimate(cur).offset_s - estimate(older).offset_s


_samples: dict[str, list[tuple[float, float, float]]] = {}
_clock_lock = threading.Lock()


@dataclass(frozen=True)
class AgentHost(RemoteHost):
    socket: str
    connect_timeout: int = 10
    python = None             # no python3 there: the guard mirrors the drive host's sysfs instead

    @classmethod
    def parse(cls, url: str) -> "AgentHost":
        u = urlsplit(str(url))
        if u.scheme != SCHEME or not u.path.startswith("/") or u.netloc:
            raise RemoteError(f"drive host {url!r} is not an agent:///path/to/socket URL (a QEMU drive host's "
                              "agent; `powerrig sim list` shows it)")
        return cls(u.path)

    @property
    def url(self) -> str:
        return f"{SCHEME}://{self.socket}"

    # -- the transport ------------------------------------------------------------------------------
    def request(self, req: dict, timeout: float | None) -> dict:
        """One request to the relay; RemoteError when it cannot be reached or says no."""
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(self.connect_timeout)
        try:
            s.connect(self.socket)
            s.settimeout(None if timeout is None else timeout + self.connect_timeout)
            s.sendall(json.dumps(req).encode() + b"\n")
            f = s.makefile("rb")
            line = f.readline()
        except (FileNotFoundError, ConnectionRefusedError):
            raise RemoteError(self.explain("no agent listens there (is the QEMU drive host running? "
                                           "`powerrig sim list`)")) from None
        except (TimeoutError, socket.timeout):
            raise RemoteError(f"drive host {self.url}: no answer within {timeout or self.connect_timeout:g} s") from None
        except OSError as e:
            raise RemoteError(self.explain(str(e))) from None
        finally:
            s.close()
        try:
            reply = json.loads(line)
        except ValueError:
            raise RemoteError(self.explain("the agent closed the connection")) from None
        if not reply.get("ok"):
            raise RemoteError(self.explain(reply.get("error", "the agent refused the request")))
        return reply

    def execute(self, argv: Argv, timeout: float | None = 60.0, stdin: bytes | None = None) -> tuple:
        """(exit code, stdout, stderr, guest time at start, guest time at end) of argv (built by the
        door, powerrig.dut.commands) there."""
        if not isinstance(argv, Argv):
            raise TypeError("a drive host runs only command lines built by powerrig.dut.commands")
        r = self.request({"op": "run", "script": shlex.join([str(a) for a in argv]),
                          "stdin": base64.b64encode(stdin).decode() if stdin else None, "timeout": timeout}, timeout)
        return (int(r["rc"]), base64.b64decode(r["stdout"]), base64.b64decode(r["stderr"]),
                float(r["t_guest_start"]), float(r["t_guest_end"]))

    def wrap(self, argv: Argv) -> Argv:
        """The local argv that runs ``argv`` there (as ``ssh host -- argv``; built by the door)."""
        return commands.agent_wrap(self, argv)

    def explain(self, why: str) -> str:
        text = " ".join(ln.strip() for ln in (why or "").splitlines() if ln.strip()) or "the agent failed"
        return f"cannot run commands on drive host {self.url}: {text}"

    def run(self, argv: Argv, timeout: float = 60.0, stdin: bytes | None = None) -> bytes:
        """Run a helper command (mkdir, cat, tar, rm) there; RemoteError when it fails."""
        rc, out, err, _, _ = self.execute(argv, timeout, stdin)
        if rc != 0:
            first = next((ln.strip() for ln in err.decode(errors="replace").splitlines() if ln.strip()), "no message")
            raise RemoteError(f"drive host {self.url}: {shlex.join(argv)} failed (exit {rc}): {first}")
        return out

    def check(self) -> None:
        """Reach the agent once: a stopped guest is one clear error before any step runs."""
        self.clock()

    # -- its clock ----------------------------------------------------------------------------------
    def sample_clock(self, rounds: int = SYNC_ROUNDS) -> None:
        """Take ``rounds`` clock samples now: the relay stamps each at the agent's socket (one that
        answers a single guest time is asked ``rounds`` times, bracketed here)."""
        got: list[tuple[float, float, float]] = []
        while len(got) < rounds:
            t0 = time.time()
            r = self.request({"op": "sync", "rounds": rounds}, 5.0 * rounds)
            t1 = time.time()
            if r.get("samples"):
                got = [tuple(map(float, x)) for x in r["samples"]]
                break
            got.append((t0, float(r["t_guest"]), t1))
        with _clock_lock:
            keep = [x for x in _samples.get(self.socket, []) + got if x[2] >= got[-1][2] - CLOCK_WINDOW_S]
            _samples[self.socket] = keep

    def clock(self, fresh: bool = False) -> GuestClock:
        """The guest's offset from this host's clock (``estimate`` over the recent samples), measured
        again when asked or when the newest sample is older than CLOCK_MAX_AGE_S."""
        with _clock_lock:
            have = list(_samples.get(self.socket, []))
        if fresh or not have or time.time() - have[-1][2] > CLOCK_MAX_AGE_S:
            self.sample_clock()
            with _clock_lock:
                have = list(_samples[self.socket])
        return estimate(have)

    def to_host(self, t: float) -> float:
        return t - self.clock().offset_s

    def invoke(self, argv: Argv, timeout: float | None, env=None) -> subprocess.CompletedProcess:
        """Run argv there from this process (no process per command, unlike ``wrap``): its exit
        code and output as text; the agent unreachable is exit 255 with the reason, as ssh's."""
        try:
            rc, out, err, _, _ = self.execute(argv, timeout)
        except RemoteError as e:
            if "no answer within" in str(e) or "did not answer within" in str(e):
                raise subprocess.TimeoutExpired(list(argv), timeout) from None
            return subprocess.CompletedProcess(list(argv), SSH_FAILED, "", str(e))
        return subprocess.CompletedProcess(list(argv), rc, out.decode(errors="replace"), err.decode(errors="replace"))


if __name__ == "__main__":
    # `python -m powerrig.dut.agent SOCK [--serial SN] -- ARGV` is the by-hand door (docs/qemu-nvme.md):
    # it judges what it runs with the drive guard, which sits in the layers above this transport
    # (.importlinter), so its code lives in powerrig.dut.door and this command line only leads there.
    import runpy
    runpy.run_module("powerrig.dut.door", run_name="__main__", alter_sys=True)
