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
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from powerrig.core.errors import PowerrigError
from powerrig.dut import commands
from powerrig.dut.commands import Argv, helper_argv
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
    answer path may each have been quick). Bounds that do not meet (a stepped clock) leave the
    sample of the shortest round trip alone."""
    lo = max(g - b for a, g, b in samples)
    hi = min(g - a for a, g, b in samples)
    last = max(b for a, g, b in samples)
    if lo <= hi:
        return GuestClock((lo + hi) / 2, (hi - lo) / 2, last)
    a, g, b = min(samples, key=lambda s: s[2] - s[0])
    return GuestClock(g - (a + b) / 2, (b - a) / 2, last)


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


# -- the by-hand door -------------------------------------------------------------------------------------
USAGE = "usage: python -m powerrig.dut.agent SOCKET [--serial SN] [--allow-unguarded] -- PROGRAM [ARG...]"
READ_ONLY = frozenset({"cat", "ls", "stat", "readlink", "uname", "true", "echo", "df", "ps", "sleep", "lsblk"})
FIO_RUN_OPTIONS = frozenset({"output", "output-format", "status-interval", "eta", "eta-newline", "eta-interval",
                             "minimal", "terse-version", "version", "help", "readonly", "showcmd", "parse-only",
                             "section", "warnings-fatal", "max-jobs", "alloc-size", "append-terse"})
FIO_LOGS = frozenset({"name", "write_bw_log", "write_iops_log", "write_lat_log"})
REFUSED = 2


class Refused(Exception):
    """A by-hand command the door will not run (one line: what and how)."""


def _door_args(a: list[str]) -> tuple[str, str | None, bool, list[str]]:
    """SOCKET, --serial, --allow-unguarded and the command after ``--``; Refused (usage) otherwise."""
    if "--" not in a or a.index("--") < 1 or len(a) <= a.index("--") + 1:
        raise Refused(USAGE)
    k = a.index("--")
    head, cmd = a[:k], a[k + 1:]
    sock, serial, unguarded, rest = head[0], None, False, head[1:]
    while rest:
        w = rest.pop(0)
        if w == "--allow-unguarded":
            unguarded = True
        elif w == "--serial" and rest:
            serial = rest.pop(0)
        elif w.startswith("--serial="):
            serial = w.split("=", 1)[1]
        else:
            raise Refused(f"{w!r} is not an option of the agent's door; {USAGE}")
    return sock, serial, unguarded, cmd


def _options(words: list[str], what: str) -> tuple[dict, list[str]]:
    """--name=value, --flag and -x options, and the positional words; Refused for any other form
    (``--name value``, ``-xVALUE``): the door must tell a value from a device without guessing."""
    opts, pos = {}, []
    for w in words:
        if w.startswith("--") and len(w) > 2:
            k, eq, v = w[2:].partition("=")
            opts[k] = v if eq else None
        elif w.startswith("-") and len(w) == 2:
            opts[w[1]] = None
        elif w.startswith("-"):
            raise Refused(f"{what}: option {w!r}: by hand give options as --name=value (or a bare flag) so the "
                          "door can tell the device from an option's value")
        else:
            pos.append(w)
    return opts, pos


def _nvme_action(sub: list[str], words: list[str]) -> str:
    """commands.nvme_action, and by hand also set-feature's short ``-s`` and abbreviated ``--sa[ve]``
    (getopt_long takes both): either makes the feature persist."""
    action = commands.nvme_action(sub, words)
    if action == "set-feature":
        for w in words:
            name = w[2:].split("=", 1)[0]
            if (w.startswith("--") and len(name) >= 2 and "save".startswith(name)) or \
                    (w.startswith("-") and not w.startswith("--") and "s" in w[1:]):
                return "set-feature --save"
    return action


def _nvme_request(cmd: list[str]) -> tuple[str, str | None, int | None]:
    """(action, device, nsid) of an nvme-cli command line: the subcommand as commands.nvme_action names
    it (a plugin's two words included), its one device and its --namespace-id (any abbreviation
    getopt_long would accept). A subcommand powerrig does not know counts as destructive."""
    words = cmd[1:]
    n = 2 if " ".join(words[:2]) in commands.DESTRUCTIVE_NVME | commands.NVME_READ else 1
    sub = words[:n]
    action = _nvme_action(sub, words[n:])
    if action in commands.NVME_READ | commands.NVME_VOLATILE:
        return action, None, None
    opts, pos = _options(words[n:], f"nvme {action}")
    if len(pos) != 1:
        raise Refused(f"nvme {action or '(no subcommand)'} by hand: name exactly one device (got "
                      f"{', '.join(pos) or 'none'})")
    nsid = None
    for k, v in opts.items():
        if len(k) >= 2 and "namespace-id".startswith(k):
            try:
                nsid = int(v or "", 0)
            except ValueError:
                raise Refused(f"nvme {action} by hand: --{k}={v!r} is not a namespace number") from None
    return action, pos[0], nsid


def _fio_targets(cmd: list[str], host) -> list[str]:
    """Every file a fio command line writes: its jobs (global options merged, the command line's
    into the job files' jobs too, in either order) and the job files it names (read there); Refused
    for an option the door cannot judge (commands.FIO_KEYS and fio's own run options only), an
    ``include``, a job file on stdin, or a word that is neither option nor job file."""
    opts, files = [], []
    for w in cmd[1:]:
        if w.startswith("--"):
            k, eq, v = w[2:].partition("=")
            if k not in FIO_RUN_OPTIONS:
                opts.append((k, v if eq else None))
        elif w.startswith("-"):
            raise Refused(f"fio by hand: {w!r}: give fio's options as --name=value and job files by path")
        else:
            files.append(w)
    cli_glob, cli_jobs = _scopes(opts, "the command line")
    scopes = [[cli_glob, j] for j in cli_jobs] or [[cli_glob]]
    for f in files:
        try:
            text = host.run(helper_argv("cat", f)).decode(errors="replace")
        except RemoteError:
            raise Refused(f"fio by hand: {f!r} is neither an option in --name=value form nor a job file "
                          "there") from None
        glob, jobs = _scopes(_job_file(text, f), f"job file {f}")
        scopes += [[cli_glob, glob, j] for j in jobs or [{}]]
    out = []
    for sc in scopes:
        if any(commands.job_writes(m) for m in ({k: v for d in sc for k, v in d.items()},
                                                {k: v for d in reversed(sc) for k, v in d.items()})):
            out += [f for d in sc for f in str(d.get("filename", "")).split(":") if f]
    return list(dict.fromkeys(out))


def _job_file(text: str, name: str) -> list[tuple[str, str | None]]:
    """A fio job file as (key, value) pairs, a section header as ("name", SECTION)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in ";#":
            continue
        if line.startswith("[") and line.endswith("]"):
            out.append(("name", line[1:-1].strip()))
        elif line.startswith("include"):
            raise Refused(f"fio by hand: {name} includes another file; give the jobs in one file")
        else:
            k, eq, v = line.partition("=")
            out.append((k.strip(), v.strip() if eq else None))
    return out


def _scopes(pairs: list[tuple[str, str | None]], where: str) -> tuple[dict, list[dict]]:
    """(global options, jobs) from (key, value) pairs: ``name`` starts a job ([global] and the options
    before the first --name are every job's); each key from commands.FIO_KEYS, each value through
    commands.fio_value (the same checks as the runners' job files)."""
    glob: dict = {}
    jobs: list[dict] = []
    cur = glob
    for k, v in pairs:
        if k not in commands.FIO_KEYS | FIO_LOGS:
            raise Refused(f"fio by hand: option {k!r} in {where} is not one the guard can judge (see FIO_KEYS "
                          "in powerrig/dut/commands.py); run it through powerrig's runners")
        if k == "name":
            cur = glob if v == "global" else {}
            if cur is not glob:
                jobs.append(cur)
            continue
        cur[k] = commands.fio_value(k, "1" if v is None else v)
    return glob, jobs


def _guard(host: AgentHost, cmd: list[str], serial: str | None) -> None:
    """Classify a by-hand command and judge it as the runners' commands are (destructive.permit):
    reads run, a write or erase needs the drive's serial, any other program is refused."""
    from powerrig.core.timeline import Timeline
    from powerrig.dut import destructive
    from powerrig.dut.guard import is_drive
    from powerrig.dut.nvme import NvmeCli

    prog = os.path.basename(cmd[0])
    nvme = NvmeCli(["nvme"], Timeline(), remote=host)
    if prog == "nvme":
        action, dev, nsid = _nvme_request(cmd)
        if action in commands.NVME_READ | commands.NVME_VOLATILE:
            return
        _need(serial, f"nvme {action} on {dev}")
        destructive.permit(nvme, action, dev, serial, nsid=nsid)
    elif prog == "fio":
        drives = [t for t in _fio_targets(cmd, host) if is_drive(t, nvme.host)]
        if drives:
            _need(serial, f"a fio write on {', '.join(drives)}")
        for d in drives:
            destructive.permit(nvme, commands.FIO_WRITE, d, serial)
    elif prog not in READ_ONLY:
        raise Refused(f"{prog} by hand: the agent's door runs nvme-cli, fio and the read-only helpers "
                      f"({', '.join(sorted(READ_ONLY))}), each judged by the drive guard; anything else could "
                      "write around it (pass --allow-unguarded to run it anyway, logged)")


def _need(serial: str | None, what: str) -> None:
    if not serial or not serial.strip():
        raise Refused(f"refusing {what} by hand: it writes to or erases the drive; name the drive's serial "
                      "(--serial SN before --) and the guard checks it, the mounts and the boot device")


def main(argv: list[str] | None = None) -> int:
    """`python -m powerrig.dut.agent SOCKET [--serial SN] -- ARGV...`: run ARGV on the drive host, pass
    its output and exit code through; 255 and one line when the agent cannot be reached.

    This is the by-hand door only, so it judges what it runs itself: nvme-cli reads run; a
    destructive nvme-cli subcommand (commands.DESTRUCTIVE_NVME, and any subcommand powerrig does not
    know) or a fio job that writes (commands.job_writes) to a drive is refused without ``--serial``,
    and with it goes through destructive.permit exactly as the runners' commands do; other programs
    are refused. Why the runners are not affected: they never come through here, they call
    AgentHost.invoke/run in-process with their Permit already granted (dut/_run.py). agent_wrap's
    command line, run by hand, is judged here like any other.
    """
    a = list(sys.argv[1:] if argv is None else argv)
    try:
        sock, serial, unguarded, cmd = _door_args(a)
        host = AgentHost(sock)
        if unguarded:
            print(f"WARNING: {shlex.join(cmd)} runs on {host.url} without the drive guard (--allow-unguarded)",
                  file=sys.stderr)
        else:
            _guard(host, cmd, serial)
    except Refused as e:
        print(e, file=sys.stderr)
        return REFUSED
    except (RemoteError, commands.UnsafeArgument) as e:
        print(e, file=sys.stderr)
        return SSH_FAILED if isinstance(e, RemoteError) else REFUSED
    except PowerrigError as e:           # the guard's refusal (GuardRefused), a tool's failure
        print(e, file=sys.stderr)
        return REFUSED
    stdin = None if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    try:
        rc, out, err, _, _ = host.execute(helper_argv(*cmd), None, stdin or None)
    except (RemoteError, commands.UnsafeArgument) as e:
        print(e, file=sys.stderr)
        return SSH_FAILED
    sys.stdout.buffer.write(out)
    sys.stderr.buffer.write(err)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
