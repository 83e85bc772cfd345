"""The agent's by-hand door: ``python -m powerrig.dut.agent SOCKET [--serial SN] -- ARGV...`` (or
``python -m powerrig.dut.door``) runs ARGV in a QEMU drive host's guest, as ``ssh host -- ARGV`` would.

Why it judges what it runs: it is a way into the drive host beside the runners, so it passes the
same gateway. nvme-cli reads run; a destructive nvme-cli subcommand (commands.DESTRUCTIVE_NVME, and
any subcommand powerrig does not know) or a fio command line or job file that writes to a drive
(commands.job_writes) is refused without ``--serial`` and with it goes through destructive.permit
exactly as the runners' commands do (the guard there: canonical path, namespaces, serial, mounts);
other programs are refused but a few read-only helpers. The runners never come through here: they
call AgentHost.invoke/run in-process with their Permit already granted (dut/_run.py), so they are
not judged twice; commands.agent_wrap's command line, run by hand, is judged like any other.
"""
from __future__ import annotations

import os
import shlex
import sys

from powerrig.core.errors import PowerrigError
from powerrig.dut import commands, destructive
from powerrig.dut.agent import AgentHost
from powerrig.dut.commands import helper_argv
from powerrig.dut.guard import is_drive
from powerrig.dut.nvme import NvmeCli
from powerrig.dut.transport import SSH_FAILED, RemoteError
from powerrig.core.timeline import Timeline

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


def _nvme_request(cmd: list[str]) -> tuple[str, str | None, int | None]:
    """(action, device, nsid) of an nvme-cli command line: the subcommand as commands.nvme_action names
    it (a plugin's two words included), its one device and its --namespace-id (any abbreviation
    getopt_long would accept). A subcommand powerrig does not know counts as destructive."""
    words = cmd[1:]
    n = 2 if " ".join(words[:2]) in commands.DESTRUCTIVE_NVME | commands.NVME_READ else 1
    sub = words[:n]
    action = commands.nvme_action(sub, words[n:])
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


class _HereFiles:
    """Job files read on this host (``record -- fio job.fio``): the one helper the door's fio reading asks."""

    def run(self, argv) -> bytes:
        if list(argv)[:1] != ["cat"] or len(argv) != 2:
            raise RemoteError(f"not a job file read: {list(argv)}")
        try:
            with open(argv[1], "rb") as f:
                return f.read()
        except OSError as e:
            raise RemoteError(str(e)) from None


def judge_here(cmd: list[str], serial: str | None, nvme, allow_unguarded: bool = False) -> None:
    """A workload typed by hand that powerrig runs on this host (``powerrig record -- COMMAND``), judged
    as the agent's door judges one in a guest: nvme-cli reads and read-only fio run; a write or erase
    needs the drive's serial and passes destructive.permit through ``nvme`` (the rig's own nvme-cli for
    a virtual rig, whose tree the guard reads); another program only with ``allow_unguarded``.
    Refused (one line) otherwise."""
    if allow_unguarded:
        return
    _guard(_HereFiles(), cmd, serial, nvme)


def _guard(host, cmd: list[str], serial: str | None, nvme=None) -> None:
    """Classify a by-hand command and judge it as the runners' commands are (destructive.permit):
    reads run, a write or erase needs the drive's serial, any other program is refused."""

    prog = os.path.basename(cmd[0])
    nvme = nvme or NvmeCli(["nvme"], Timeline(), remote=host)
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
    """Run ARGV on the drive host once the door has judged it; its output and exit code pass through.
    A refusal is one line and exit 2; the agent out of reach one line and 255, as ssh's."""
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
