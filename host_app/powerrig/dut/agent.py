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
import sys
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from powerrig.dut import commands
from powerrig.dut.commands import Argv, helper_argv
from powerrig.dut.transport import SSH_FAILED, RemoteError, RemoteHost

SCHEME = "agent"
SYNC_ROUNDS = 12          # round trips per clock measurement; the shortest one is kept
CLOCK_MAX_AGE_S = 30.0    # re-measured after this long (the guest clock may drift)


@dataclass(frozen=True)
class GuestClock:
    offset_s: float           # guest time - host time
    uncertainty_s: float      # half the round trip it was measured in: the true offset is within this
    measured_at: float


_clocks: dict[str, GuestClock] = {}
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
    def clock(self, fresh: bool = False) -> GuestClock:
        """The guest's offset from this host's clock, from the shortest of SYNC_ROUNDS round trips
        (kept for CLOCK_MAX_AGE_S)."""
        with _clock_lock:
            c = _clocks.get(self.socket)
            if c is not None and not fresh and time.time() - c.measured_at < CLOCK_MAX_AGE_S:
                return c
            best = None
            for _ in range(SYNC_ROUNDS):
                t0 = time.time()
                tg = float(self.request({"op": "sync"}, 5.0)["t_guest"])
                t1 = time.time()
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, tg - (t0 + t1) / 2)
            c = GuestClock(best[1], best[0] / 2, time.time())
            _clocks[self.socket] = c
            return c

    def to_host(self, t: float) -> float:
        return t - self.clock().offset_s


def main(argv: list[str] | None = None) -> int:
    """`python -m powerrig.dut.agent SOCKET -- ARGV...`: run ARGV on the drive host, pass its output
    and exit code through; 255 and one line when the agent cannot be reached."""
    a = list(sys.argv[1:] if argv is None else argv)
    if len(a) < 3 or a[1] != "--":
        print("usage: python -m powerrig.dut.agent SOCKET -- PROGRAM [ARG...]", file=sys.stderr)
        return 2
    host = AgentHost(a[0])
    stdin = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    try:
        rc, out, err, _, _ = host.execute(helper_argv(*a[2:]), None, stdin or None)
    except (RemoteError, commands.UnsafeArgument) as e:
        print(e, file=sys.stderr)
        return SSH_FAILED
    sys.stdout.buffer.write(out)
    sys.stderr.buffer.write(err)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
