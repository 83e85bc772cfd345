"""A drive host reached over SSH: the nvme-cli and fio runners run their argv there.

A lab's drives often sit in other machines than the interposer's host. ``ssh://user@host:port``
names one; ``?Option=value`` pairs from an allow-list are passed to ssh as ``-o Option=value``
(IdentityFile, UserKnownHostsFile, StrictHostKeyChecking, ...; never ProxyCommand, LocalCommand and
the like: those belong in ~/.ssh/config). The command line is built by the door to other programs
(commands.py): the user and host are checked (no leading '-') and follow ``--``, so ssh never reads
them as options; ssh joins the remote command into one shell line on the far side, so each of its
words is quoted (never a shell on this side). Files (fio's job file in, its JSON output and
logs back) travel through the same connection (``cat`` and ``tar``), so nothing but sshd, a POSIX
shell and tar is needed on the drive host.
"""
from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from powerrig.dut import commands
from powerrig.dut.commands import helper_argv
from powerrig.dut.transport import SSH_FAILED, RemoteError, RemoteHost  # noqa: F401 (the names callers use)



@dataclass(frozen=True)
class SshHost(RemoteHost):
    host: str
    user: str | None = None
    port: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    connect_timeout: int = 10

    @classmethod
    def parse(cls, url: str) -> "SshHost":
        """``ssh://[user@]host[:port][?Option=value&...]``; anything else is a one-line error."""
        try:
            commands.check_value("drive host", str(url))     # urlsplit would silently drop tabs and line breaks
        except commands.UnsafeArgument as e:
            raise RemoteError(str(e)) from None
        u = urlsplit(str(url))
        if u.scheme != "ssh" or not u.hostname:
            raise RemoteError(f"drive host {url!r} is not an ssh://[user@]host[:port] URL "
                              "(e.g. ssh://lab@drivehost:22)")
        try:
            port = u.port
            if port == 0:
                raise ValueError(port)
        except ValueError:
            raise RemoteError(f"drive host {url!r}: the port is not a number 1-65535") from None
        _nothing_dropped(u, str(url))
        opts = tuple(parse_qsl(u.query, keep_blank_values=True, strict_parsing=False))
        try:
            return cls(u.hostname, u.username, port, opts)
        except commands.UnsafeArgument as e:
            raise RemoteError(f"drive host {url!r}: {e}") from None

    def __post_init__(self):
        """Checked however it was made (a URL, or in code): user, host and options are safe for ssh."""
        commands.check_ssh_user(self.user)
        commands.check_ssh_host(self.host)
        object.__setattr__(self, "options", commands.check_ssh_options(self.options))

    @property
    def url(self) -> str:
        who = f"{self.user}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host      # IPv6: [::1]:22, as ssh:// reads it
        return f"ssh://{who}{host}" + (f":{self.port}" if self.port else "")

    def ssh_argv(self) -> list[str]:
        """ssh with no prompts, built by the door (commands.ssh_argv): destination after ``--``."""
        return commands.ssh_argv(self)

    def wrap(self, argv) -> list[str]:
        """The local argv that runs ``argv`` (built by commands.py) on the drive host."""
        return commands.ssh_wrap(self, argv)

    def explain(self, stderr: str) -> str:
        """One line for an ssh failure (exit 255): unreachable, refused, or not allowed in."""
        text = " ".join(ln.strip() for ln in (stderr or "").splitlines() if ln.strip())
        low = text.lower()
        if "permission denied" in low or "too many authentication failures" in low:
            why = (f"authentication failed ({text}); install this user's public key in the drive host's "
                   "authorized_keys or name the key with ?IdentityFile=PATH")
        elif "host key verification failed" in low or "remote host identification has changed" in low:
            why = f"its host key is unknown or changed ({text}); add it with ssh-keyscan to known_hosts"
        elif any(s in low for s in ("connection refused", "no route", "could not resolve", "timed out",
                                    "network is unreachable", "name or service not known", "connection closed")):
            why = f"host unreachable ({text}); check the host name, the port and that sshd runs there"
        else:
            why = text or "ssh failed without a message"
        return f"cannot run commands on drive host {self.url}: {why}"

    def invoke(self, argv: commands.Argv, timeout: float | None, env: dict | None = None) -> subprocess.CompletedProcess:
        """Run argv (built by the door) there through ssh, output as text (a tool's run, for
        dut/_run.py). FileNotFoundError without ssh, TimeoutExpired past ``timeout``."""
        return subprocess.run(self.wrap(argv), capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL, shell=False)

    def run(self, argv: commands.Argv, timeout: float = 60.0, stdin: bytes | None = None) -> bytes:
        """Run a helper command (mkdir, cat, tar, rm) there; RemoteError when it fails."""
        try:
            p = subprocess.run(self.wrap(argv), input=stdin, capture_output=True, timeout=timeout,
                               stdin=None if stdin is not None else subprocess.DEVNULL)
        except FileNotFoundError:
            raise RemoteError("ssh not found: install openssh-client to reach a drive host") from None
        except subprocess.TimeoutExpired:
            raise RemoteError(f"drive host {self.url}: {shlex.join(argv)} did not finish within {timeout:g} s") from None
        err = p.stderr.decode(errors="replace")
        if p.returncode == SSH_FAILED:
            raise RemoteError(self.explain(err))
        if p.returncode != 0:
            first = next((ln.strip() for ln in err.splitlines() if ln.strip()), "no message")
            raise RemoteError(f"drive host {self.url}: {shlex.join(argv)} failed (exit {p.returncode}): {first}")
        return p.stdout

    def check(self) -> None:
        """Connect once: a wrong host, port or key is one clear error before any step runs."""
        self.run(helper_argv("true"), timeout=self.connect_timeout + 20)


def _nothing_dropped(u, url: str) -> None:
    """urlsplit reads a password, a path and a #fragment that ssh:// never uses: refused, never dropped
    without a word (the password is not repeated in the message)."""
    safe = u._replace(netloc=u.netloc.rsplit("@", 1)[-1], query="").geturl()
    if u.password is not None or ":" in u.netloc.rsplit("@", 1)[0] and "@" in u.netloc:
        raise RemoteError(f"drive host {safe!r} with user {u.username!r}: a password in the URL is never used (ssh "
                          "logs in with keys): remove ':...' and install this user's public key in the drive "
                          "host's authorized_keys, or name it with ?IdentityFile=PATH")
    if "#" in url:
        raise RemoteError(f"drive host {safe!r}: '#{u.fragment}' is no part of an ssh URL: remove it")
    if u.path not in ("", "/"):
        raise RemoteError(f"drive host {safe!r}: {u.path!r} is no part of an ssh URL: remove it "
                          "(ssh://[user@]host[:port][?Option=value])")


def drive_host(spec) -> RemoteHost | None:
    """None (this host) for None/"" / "local"; an SshHost for an ssh:// URL, an AgentHost for an
    agent:// one (a QEMU drive host's command agent), or the RemoteHost given."""
    if spec is None or spec == "" or spec == "local":
        return None
    if isinstance(spec, RemoteHost):
        return spec
    if str(spec).startswith("agent:"):
        # local on purpose: dut.agent also runs as `python -m powerrig.dut.agent`, and the package's
        # runners import this module: loaded at its top, runpy would find the agent imported twice
        from powerrig.dut.agent import AgentHost
        return AgentHost.parse(spec)
    return SshHost.parse(spec)
