"""The one door to other programs: every command line and job file powerrig hands to nvme-cli, fio and
ssh is built here, from values checked here.

Why one door: a value that reaches another program is read by that program's parser, not ours. A
line break in a fio value adds a line (a new option) to the job file; a value that starts with '-'
is read as an option by nvme-cli and ssh; ``?ProxyCommand=`` makes ssh run a program on this host;
``$VAR`` in a fio value is expanded by fio, so the guard would check one name and fio open another.
fio also cuts every value at '#' or ';' and drops the blanks around it, so the guard would judge
``a.img#x`` and fio write ``a.img``; an invisible or bidi character (U+200B, U+202E) shows one name
and passes another. So every value passes :func:`check_value` (no control or invisible characters,
and no leading '-' where a program reads positional arguments), every fio value :func:`fio_value`
(nothing fio reads otherwise than it is written), fio keys and ssh options come from allow-lists, a
tool prefix is a program and nothing else (:func:`check_program`), and the ssh destination always
follows ``--``. The builders return :class:`Argv`; the process runners (``_run.run_tool``,
``remote.SshHost.run``) run nothing else.

Commands that write to or erase a drive (:data:`DESTRUCTIVE_NVME`, fio jobs that write) are built
only with a :class:`Permit` for that action and device, and only the guarded door (destructive.py)
issues one, after it checked the drive (tests/test_gateways.py scans the tree for that).
"""
from __future__ import annotations

import os
import re
import shlex
import sys
import unicodedata
from dataclasses import dataclass

from powerrig.core.errors import ToolError


class UnsafeArgument(ToolError):
    """A value would reach another program as something other than a value (a new line, an option)."""


class Argv(list):
    """A command line built by this module; the runners refuse any other list."""


@dataclass(frozen=True)
class Permit:
    """What destructive.py checked: ``action`` on ``targets`` (devices or files), for the drive with
    ``serial`` (``overridden``: allow_unguarded skipped the checks, logged). Built there only."""
    action: str
    targets: frozenset
    serial: str | None = None
    overridden: bool = False
    # (target as given, the canonical path the guard judged it to be): what the command opens, so a
    # link re-pointed after the check cannot redirect it
    opens: tuple = ()
    # the controllers the guard judged the targets to be reached through (fio's removal watch)
    controllers: tuple = ()

    def covers(self, action: str, target: str | None) -> bool:
        return self.action == action and (target is None or target in self.targets)

    def opened(self, target: str) -> str:
        """The path a command opens for ``target``: the canonical one the guard judged, or ``target``
        as given (a file fio lays out, no link in its way; or the guard overridden)."""
        return dict(self.opens).get(target, target)


# -- the value check ----------------------------------------------------------------------------------
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_SAY = {"\n": "a line feed (\\n)", "\r": "a carriage return (\\r)", "\x00": "a NUL byte", "\t": "a tab"}


# invisible or reordering characters: format (U+200B, U+202E, U+2066-2069, U+FEFF, U+00AD ...), private
# use, unassigned, surrogates, spaces other than ' ' (U+00A0, U+3000), and the blank letters and marks
# that render as nothing (Hangul fillers, the combining grapheme joiner, variation selectors)
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cn", "Cs", "Zl", "Zp", "Zs"})
_BLANK_GLYPHS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")


def _invisible(ch: str) -> bool:
    o = ord(ch)
    return (unicodedata.category(ch) in _INVISIBLE_CATEGORIES and ch != " ") or ch in _BLANK_GLYPHS or \
        0xFE00 <= o <= 0xFE0F or 0xE0100 <= o <= 0xE01EF


def check_value(field: str, value, positional: bool = False) -> str:
    """``value`` as text, or UnsafeArgument naming ``field``: control characters (CR, LF, NUL, tab,
    any other C0/C1 code, Unicode line separators) never pass, nor invisible or bidi characters (the
    name shown would not be the name used); with ``positional`` (a device, a path the program reads
    as an argument) neither does an empty value or one that starts with '-'."""
    s = value if isinstance(value, str) else str(value)
    m = _CONTROL.search(s)
    if m:
        what = _SAY.get(m.group(), f"the control character U+{ord(m.group()):04X}")
        raise UnsafeArgument(f"{field} {s!r} holds {what}, which another program would read as a new line "
                             "or command: remove it")
    if not s.isascii():
        ch = next((c for c in s if _invisible(c)), None)
        if ch is not None:
            name = unicodedata.name(ch, "") or unicodedata.category(ch)
            raise UnsafeArgument(f"{field} {s!r} holds U+{ord(ch):04X} ({name}), which is invisible or reorders "
                                 "the text: the name shown is not the name a program gets: remove it")
    if positional and not s.strip():
        raise UnsafeArgument(f"{field} is empty: name the device or file")
    if positional and s.startswith("-"):
        raise UnsafeArgument(f"{field} {s!r} starts with '-', which nvme-cli, fio and ssh read as an option: "
                             f"give a path (/dev/... or ./{s})")
    return s


def check_device(field: str, value) -> str:
    """A device or file path a program reads as a positional argument. A device reaches fio as well
    (a namespace is fio's filename), so it is read as fio reads a value (:func:`_fio_reading`):
    one name for the guard, nvme-cli and fio, whichever face it came in by."""
    if not isinstance(value, str):
        raise UnsafeArgument(f"{field} must be a path (text), not {type(value).__name__} {value!r}")
    return _fio_reading(f"{field} {value!r}", check_value(field, value, positional=True))


def _fio_reading(what: str, s: str) -> str:
    """``s``, or UnsafeArgument if fio 3.33 would read it as another value: it cuts every job-file
    line (and a filename= again, the command line's too) at the first '#' or ';' (a comment) and
    drops the blanks around it (parse.c strip_blank_end, options.c str_filename_cb)."""
    cut = re.search("[#;]", s)
    if cut:
        raise UnsafeArgument(f"{what} holds {cut.group()!r}, where fio cuts the value (a comment: it would use "
                             f"{s[:cut.start()].strip()!r}): remove it, or rename the file without '#' and ';'")
    if s != s.strip():
        raise UnsafeArgument(f"{what} {'starts' if s[:1].isspace() else 'ends'} with a blank, which fio drops "
                             f"(it would use {s.strip()!r}): remove the blank")
    return s


REMOTE_SHELLS = frozenset({"ssh", "slogin", "rsh", "sshpass", "dbclient", "plink", "autossh", "mosh"})
# programs a prefix may put before the tool, each with no options of its own: they run the next word
# as it is (sudo/doas as root, nice/ionice at a lower priority) and can turn no read into a write
WRAPPERS = ("sudo", "doas", "nice", "ionice")


def check_program(field: str, prefix) -> list[str]:
    """A program prefix (``["nvme"]``, ``["sudo", "nvme"]``, the virtual rig's launcher): one program,
    optionally after WRAPPERS named alone, and no other word. An option word in a prefix reaches the
    tool: ``["fio", "--filename=victim", "--rw=write"]`` made a read plan write, ``--exec_prerun=``
    ran a program, none of it seen by the checks on the plan's own keys. No remote shell either:
    commands run through an ssh prefix would reach a drive on another machine while the guard reads
    this one's /sys."""
    words = [prefix] if isinstance(prefix, str) else list(prefix or ())
    if not words:
        raise UnsafeArgument(f"{field} is empty: name the program (e.g. [\"nvme\"])")
    for k, w in enumerate(words):
        if not isinstance(w, str):
            raise UnsafeArgument(f"{field}[{k}] must be text, not {type(w).__name__} {w!r}")
        check_value(f"{field}[{k}]", w)
        if os.path.basename(w) in REMOTE_SHELLS:
            raise UnsafeArgument(f"{field} runs {w!r}: the drive guard would read this host's /sys while the "
                                 "commands run on another; name that machine as the drive host "
                                 "(ssh://user@host) instead")
    how = (f"a prefix is the program alone ([\"fio\"], [\"/usr/local/bin/nvme\"]), optionally after "
           f"{', '.join(WRAPPERS)} with no options; tool options come from the plan's own keys")
    for k, w in enumerate(words):
        if not w.strip():
            raise UnsafeArgument(f"{field}[{k}] is empty: {how}")
        if w.startswith("-") or "=" in w:
            raise UnsafeArgument(f"{field} {words!r}: {w!r} is an option word, which the program would obey "
                                 f"unchecked: {how}")
    for k, w in enumerate(words):
        if k < len(words) - 1 and os.path.basename(w) not in WRAPPERS:
            raise UnsafeArgument(f"{field} {words!r}: {w!r} is followed by {words[k + 1]!r}, which it would read "
                                 f"as an argument: {how}")
    if os.path.basename(words[-1]) in WRAPPERS:
        raise UnsafeArgument(f"{field} {words!r} ends with the wrapper {words[-1]!r}: name the program after it")
    return words


def _option(field: str, opt: str) -> str:
    """A long option our own code passes (``--name`` or ``--name=value``), value checked."""
    if not re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", opt, re.S):
        raise UnsafeArgument(f"{field} {opt!r} is not a --long-option: powerrig passes nothing else")
    return check_value(field, opt)


# -- nvme-cli -------------------------------------------------------------------------------------------
NVME_READ = frozenset({"version", "list", "list-subsys", "id-ctrl", "id-ns", "list-ns", "list-ctrl",
                       "get-feature", "smart-log", "get-log", "error-log", "fw-log", "sanitize-log",
                       "self-test-log", "effects-log", "show-regs", "fdp stats", "fdp configs", "fdp usage",
                       "ocp smart-add-log", "log power-measurement"})
NVME_VOLATILE = frozenset({"set-feature",      # power state and APST, lost at power-off; --save makes it stick
                           "flush"})           # the write cache onto the media: what a read sees is unchanged
DESTRUCTIVE_NVME = frozenset({
    "format", "sanitize", "create-ns", "delete-ns", "attach-ns", "detach-ns", "fw-download", "fw-commit",
    "fw-activate", "set-feature --save", "write", "write-zeroes", "write-uncor", "dsm", "copy", "io-passthru",
    "admin-passthru", "security-send", "reset", "subsystem-reset", "set-property", "lockdown", "virt-mgmt",
    "resv-register", "resv-acquire", "resv-release", "device-self-test", "zns reset-zone", "zns finish-zone",
    "zns offline-zone", "zns zone-append", "zns set-zone-desc", "fdp update", "fdp set"})
# set-feature of these features changes what the drive does beyond a power state (a power limit caps it; a
# power measurement started clears the drive's counters): the guarded door issues them (destructive.power_feature)
GUARDED_FEATURES = {0x23: "set-feature power-limit", 0x25: "set-feature power-measurement"}
DESTRUCTIVE_NVME = DESTRUCTIVE_NVME | frozenset(GUARDED_FEATURES.values())


def _feature_ids(options) -> set[int]:
    """The feature ids a set-feature line names. nvme-cli takes any unambiguous prefix of a long option
    (getopt_long: --feature=, --f=) and reads the number with strtoul base 0 (045 is octal): a value
    Python reads otherwise is refused rather than guessed."""
    out = set()
    for o in options:
        name, eq, v = o[2:].partition("=")
        if eq and name and "feature-id".startswith(name):
            try:
                if re.fullmatch(r"\s*[+]?0[0-7]+", v):
                    raise ValueError
                out.add(int(v, 0))
            except ValueError:
                raise UnsafeArgument(f"nvme-cli set-feature --feature-id {v!r}: give the feature id as a decimal or "
                                     "0x-prefixed hex number") from None
    return out


def nvme_action(command, options=()) -> str:
    """The action an nvme-cli command line performs: its subcommand, or "set-feature --save"."""
    words = command.split() if isinstance(command, str) else list(command)
    action = " ".join(words)
    guarded = sorted(GUARDED_FEATURES[f] for f in _feature_ids(options) if f in GUARDED_FEATURES) \
        if action == "set-feature" else []
    if guarded:
        return guarded[0]
    if action == "set-feature" and any(_saves(o) for o in options):
        return "set-feature --save"
    return action


def _saves(word: str) -> bool:
    """Does this set-feature word make the feature persist? getopt_long takes ``--save``, any
    unambiguous prefix of it from ``--sa``, and the short ``-s`` alone or in a cluster."""
    if word.startswith("--"):
        name = word[2:].split("=", 1)[0]
        return len(name) >= 2 and "save".startswith(name)
    return word.startswith("-") and "s" in word[1:]


def nvme_argv(program, command, device: str | None, options=(), permit: Permit | None = None) -> Argv:
    """``program command device options``: a read or volatile command, or a destructive one covered by
    ``permit`` (for that action and that very device); any other subcommand is refused."""
    words = command.split() if isinstance(command, str) else list(command)
    opts = [_option(f"nvme-cli {' '.join(words)} option", o) for o in options]
    action = nvme_action(words, opts)
    if action in DESTRUCTIVE_NVME:
        if permit is None or not permit.covers(action, device):
            raise UnsafeArgument(f"nvme-cli {action} on {device} writes to or erases the drive: it runs only "
                                 "through powerrig.dut.destructive, which checks the drive first")
    elif action not in NVME_READ | NVME_VOLATILE:
        raise UnsafeArgument(f"nvme-cli {action!r} is not a command powerrig runs (reads: "
                             f"{', '.join(sorted(NVME_READ))}; destructive ones go through powerrig.dut.destructive)")
    argv = check_program("nvme-cli program", program) + words
    if device is not None:
        dev = check_device(f"nvme-cli {action} device", device)
        if dev.startswith("mctp:"):         # nvme-cli 2.x get_dev: an NVMe-MI endpoint, not a path
            raise UnsafeArgument(f"nvme-cli {action} device {dev!r} is read by nvme-cli as an NVMe-MI (MCTP) "
                                 f"address, another drive than the file the guard would judge: give the /dev path "
                                 f"(or ./{dev} for a file of that name)")
        argv.append(dev)
    return Argv(argv + opts)


# -- fio --------------------------------------------------------------------------------------------------
RW_MODES = frozenset({"read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "readwrite", "randrw",
                      "trimwrite"})
WRITE_MODES = RW_MODES - {"read", "randread"}
# the options a job file may hold; fio's aliases (readwrite=, blocksize=) and options that run programs
# (exec_prerun, ioengine=exec), load code (ioengine=external), fill, unlink or create other files stay out
FIO_KEYS = frozenset({
    "rw", "bs", "bssplit", "bsrange", "blockalign", "iodepth", "iodepth_batch", "iodepth_batch_complete",
    "iodepth_low", "numjobs", "size", "io_size", "offset", "offset_increment", "filename", "rwmixread",
    "rwmixwrite", "rate", "rate_iops", "rate_min", "rate_process", "runtime", "time_based", "ramp_time",
    "startdelay", "loops", "number_ios", "ioengine", "direct", "buffered", "norandommap", "randrepeat",
    "random_generator", "random_distribution", "percentage_random", "thinktime", "thinktime_blocks",
    "thinktime_spin", "stonewall", "wait_for_previous", "new_group", "group_reporting", "verify", "do_verify",
    "verify_only", "verify_backlog", "verify_interval", "verify_pattern", "verify_fatal", "fdp", "fdp_pli",
    "plids", "dataplacement", "cmd_type", "hipri", "fixedbufs", "registerfiles", "sqthread_poll", "nonvectored",
    "end_fsync", "fsync", "fdatasync", "invalidate", "thread", "cpus_allowed", "cpumask", "log_avg_msec",
    "log_unix_epoch", "clat_percentiles", "lat_percentiles", "percentile_list", "gtod_reduce", "disable_lat",
    "disable_clat", "disable_slat", "disable_bw_measurement", "ba", "zero_buffers", "refill_buffers",
    "scramble_buffers", "buffer_compress_percentage", "dedupe_percentage", "allow_mounted_write",
    "verify_state_save",      # the verify-state flow after a removal (dut/verify.py): fio's own <job>-verify.state
    "randseed"})              # a power-loss cycle's own seed: its verify headers differ from the last cycle's
FIO_IOENGINES = frozenset({"libaio", "io_uring", "io_uring_cmd", "psync", "pvsync", "pvsync2", "sync", "vsync",
                           "posixaio", "mmap", "null", "windowsaio"})
_JOB_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def _truthy(v) -> bool:
    """fio boolean options: present without a value, 1, true, yes, on."""
    if v is None or v is False:
        return False
    return str(v).strip().lower() not in ("0", "false", "no", "off")


def job_writes(options: dict) -> bool:
    """Does a job with these (merged global + job) options write to its file? rw with a write or trim
    part does; so does a job with ``verify`` set and ``verify_only`` not stopping it from writing
    first (fio writes the pattern it verifies)."""
    rw = str(options.get("rw", options.get("readwrite", "read"))).split(":")[0].strip()
    if rw in WRITE_MODES:
        return True
    verify = options.get("verify")
    return verify is not None and str(verify).strip().lower() not in ("0", "none", "") and \
        not _truthy(options.get("verify_only"))


FIO_VALUE_MAX = 4096      # bytes: PATH_MAX, so no file name is cut; key=value stays within fio's 8191-byte line
JOB_NAME_MAX = 200        # fio keeps 255 characters of a section line, then drops the last (its ']')


def fio_value(key: str, value) -> str:
    """One fio option value as the job file holds it, or UnsafeArgument naming the option. Refused as
    well: what fio 3.33 reads otherwise than it is written (parse.c strip_blank_end, on every job-file
    line and again on a filename=, the command line's too): a '#' or ';' (fio cuts the value there, a
    comment), a blank at either end (dropped), in a file name a '\\' (fio reads '\\:' as a ':' of
    the name), and a value over FIO_VALUE_MAX bytes (fio reads a job-file line with fgets into 8192
    bytes: the rest of a longer line is a line of its own, ``size=64k<blanks>rw=write`` made a read
    write): the guard would judge one name and fio open another (tests/test_fio_names.py)."""
    s = str(int(value)) if isinstance(value, bool) else str(value)
    field = f"fio option {key}="
    check_value(field, s)
    if "$" in s:
        raise UnsafeArgument(f"{field}{s!r} holds '$', which fio expands (environment variables, $ncpus): "
                             "write the value itself")
    if len(s.encode()) > FIO_VALUE_MAX:
        raise UnsafeArgument(f"{field}{s[:40]!r}... is {len(s.encode())} bytes: fio reads a job file line in pieces of "
                             f"8191 bytes and the rest as a line of its own (an option): give at most "
                             f"{FIO_VALUE_MAX} bytes")
    _fio_reading(f"{field}{s!r}", s)
    if key == "filename" and "\\" in s:
        raise UnsafeArgument(f"{field}{s!r} holds '\\', which fio drops before a ':' (it would open "
                             f"{s.replace(chr(92) + ':', ':')!r}): rename the file without '\\'")
    if key == "filename" and any(f.startswith("-") or not f for f in s.split(":")):
        raise UnsafeArgument(f"{field}{s!r}: fio reads '-' as stdin/stdout and an empty name as its own "
                             "default: give a path")
    if key == "rw" and not re.fullmatch(rf"({'|'.join(sorted(RW_MODES))})(:\d+)?", s):
        raise UnsafeArgument(f"{field}{s!r} is not one of {', '.join(sorted(RW_MODES))}")
    if key == "ioengine" and s not in FIO_IOENGINES:
        raise UnsafeArgument(f"{field}{s!r} is not an engine powerrig runs ({', '.join(sorted(FIO_IOENGINES))})")
    return s


def fio_options(where: str, options: dict) -> list[tuple[str, str]]:
    """(key, value) pairs, each key from FIO_KEYS and each value through :func:`fio_value`."""
    out = []
    for k, v in options.items():
        if not isinstance(k, str) or k not in FIO_KEYS:
            raise UnsafeArgument(f"fio option {k!r} in {where} is not one powerrig passes to fio (allowed: "
                                 "the documented workload options; see FIO_KEYS in powerrig/dut/commands.py)")
        out.append((k, fio_value(k, v)))
    return out


def fio_sections(plan) -> list[tuple[str, list[tuple[str, str]], dict]]:
    """The checked sections of a FioPlan: (name, checked options, merged options) per job."""
    if not plan.jobs:
        raise UnsafeArgument("a fio plan needs at least one job")
    names = [j.name for j in plan.jobs]
    if len(set(names)) != len(names):
        raise UnsafeArgument(f"fio job names must be unique in a plan: {names}")
    glob = dict(plan.global_options)
    fio_options("[global]", glob)
    out = []
    for j in plan.jobs:
        check_job_name("fio job name", j.name)
        opts = j.options()
        out.append((j.name, fio_options(f"job {j.name!r}", opts), {**glob, **opts}))
    return out


def check_job_name(field: str, name) -> str:
    """A fio section name: letters, digits, '_', '-', '.'; not 'global' (fio's own section); at most
    JOB_NAME_MAX characters (fio would cut a longer one)."""
    if not isinstance(name, str) or not _JOB_NAME.fullmatch(name) or name == "global":
        raise UnsafeArgument(f"{field} {name!r}: use letters, digits, '_', '-' and '.' only (not 'global', "
                             "fio's own section)")
    if len(name) > JOB_NAME_MAX:
        raise UnsafeArgument(f"{field} {name[:40]!r}... has {len(name)} characters: fio cuts a section name "
                             f"(it keeps 254): give at most {JOB_NAME_MAX}")
    return name


def fio_write_targets(plan) -> list[str]:
    """Every file a writing job of the plan writes (fio's ':'-separated lists split; "" for a job
    without a filename, which writes a file named after it in fio's working directory)."""
    targets = []
    for _, _, merged in fio_sections(plan):
        if job_writes(merged):
            for f in str(merged.get("filename", "")).split(":"):
                if f not in targets:
                    targets.append(f)
    return targets


FIO_WRITE = "fio write"


def fio_job_file(plan, log_prefix: str | None, permit: Permit | None = None) -> str:
    """The job file of a FioPlan. A plan that writes needs a Permit covering every file it writes."""
    sections = fio_sections(plan)
    missing = [t for t in fio_write_targets(plan) if permit is None or not permit.covers(FIO_WRITE, t)]
    if missing:
        raise UnsafeArgument(f"this fio plan writes to {', '.join(repr(t) for t in missing)}: writes run only "
                             "through powerrig.dut.destructive (Fio.run with the drive's serial), which checks the drive")
    g = [(k, fio_value(k, _opened(permit, k, v))) for k, v in plan.global_options.items()]
    io_log = bool(getattr(plan, "io_log", False))
    if log_prefix is not None:
        avg = 0 if io_log else int(plan.log_avg_msec)     # 0: a line per I/O (its completion and latency)
        g += [("log_unix_epoch", "1"), ("log_avg_msec", fio_value("log_avg_msec", avg))]
    if plan.group_reporting:
        g.append(("group_reporting", "1"))
    lines = ["; written by powerrig", "[global]"] + [f"{k}={v}" for k, v in g]
    for name, opts, _ in sections:
        lines += ["", f"[{name}]"] + [f"{k}={fio_value(k, _opened(permit, k, v))}" for k, v in opts]
        if log_prefix is not None:
            log = fio_value("write_bw_log", f"{log_prefix}/{name}")
            lines += [f"write_lat_log={log}"] if io_log else [f"write_bw_log={log}", f"write_iops_log={log}"]
    return "\n".join(lines) + "\n"


def _opened(permit: Permit | None, key: str, value):
    """A filename= value as fio is to open it: each ':'-separated name the canonical path the guard
    judged for it (the permit's), so a link re-pointed after the check cannot redirect the write; the
    plan (and so reports, phases, traces) keeps the names the user gave."""
    if key != "filename" or permit is None or not permit.opens:
        return value
    return ":".join(permit.opened(f) for f in str(value).split(":"))


def fio_argv(program, job_file: str, output: str, output_format: str = "json",
             status_interval: float | None = None) -> Argv:
    """``fio --output-format=.. --output=.. [--status-interval=..] JOBFILE``."""
    if output_format not in ("json", "json+"):
        raise UnsafeArgument(f"fio output format {output_format!r}: the runner parses json or json+")
    a = check_program("fio program", program) + [f"--output-format={output_format}",
                                                 f"--output={check_value('fio output file', output)}"]
    if status_interval:
        a.append(f"--status-interval={float(status_interval):g}")
    return Argv(a + [check_device("fio job file", job_file)])


def fio_verify_argv(program, name: str, device: str, bs: int, iodepth: int, size: int, ioengine: str = "libaio",
                    state_load: bool = False, randseed: int | None = None) -> Argv:
    """A read-only verify pass (``--verify_only``) over what a sequential write job ``name`` wrote
    (its crc32c headers), optionally limited by the state that job saved (``--verify_state_load``).
    ``randseed``: the write job's, when it had one (the headers carry a seed derived from it; a new
    seed per cycle is how a block left from an earlier cycle is told from one written now)."""
    if ioengine not in FIO_IOENGINES:
        raise UnsafeArgument(f"fio ioengine {ioengine!r} is not one powerrig runs")
    a = check_program("fio program", program) + [
        f"--name={check_job_name('fio verify job', name)}",
        f"--filename={fio_value('filename', check_device('fio verify device', device))}", "--rw=write",
        f"--bs={int(bs)}", f"--iodepth={int(iodepth)}", f"--size={int(size)}", "--direct=1",
        f"--ioengine={ioengine}", "--verify=crc32c", "--verify_only", "--verify_fatal=0", "--verify_dump=0"]
    if randseed is not None:
        a.append(f"--randseed={int(randseed)}")
    return Argv(a + (["--verify_state_load=1"] if state_load else []))


def fio_version_argv(program) -> Argv:
    return Argv(check_program("fio program", program) + ["--version"])


# -- ssh ----------------------------------------------------------------------------------------------------
# ?Option=value pairs a drive-host URL may carry; anything else (ProxyCommand, LocalCommand,
# KnownHostsCommand, PKCS11Provider, ProxyJump, forwarding, ControlPath ...) belongs in ~/.ssh/config
SSH_OPTIONS = {k.lower(): k for k in (
    "IdentityFile", "IdentitiesOnly", "UserKnownHostsFile", "GlobalKnownHostsFile", "StrictHostKeyChecking",
    "HostKeyAlias", "HostKeyAlgorithms", "CheckHostIP", "UpdateHostKeys", "HashKnownHosts", "VerifyHostKeyDNS",
    "CertificateFile", "PubkeyAcceptedAlgorithms", "PubkeyAcceptedKeyTypes", "PreferredAuthentications",
    "KexAlgorithms", "Ciphers", "MACs", "Compression", "AddressFamily", "ConnectTimeout", "ConnectionAttempts",
    "ServerAliveInterval", "ServerAliveCountMax", "TCPKeepAlive", "IPQoS", "RekeyLimit")}
_RUNS_PROGRAMS = {"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "pkcs11provider",
                  "securitykeyprovider", "proxyjump", "remotecommand", "match", "include"}
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_HOST = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*)|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")


def check_ssh_user(user: str | None) -> str | None:
    if user is None:
        return None
    check_value("drive host user", user)
    if not _USER.fullmatch(user):
        raise UnsafeArgument(f"drive host user {user!r}: use letters, digits, '_', '.' and '-' (not first)")
    return user


def check_ssh_host(host: str) -> str:
    check_value("drive host name", host)
    if not host or not _HOST.fullmatch(host):
        raise UnsafeArgument(f"drive host name {host!r}: give a host name or IP address (letters, digits, '.', "
                             "'-' not first, or an IPv6 address in [brackets])")
    return host


def check_ssh_options(pairs) -> tuple[tuple[str, str], ...]:
    """``?Option=value`` pairs: names from SSH_OPTIONS (ssh spells them case-blind), plain values."""
    out = []
    for k, v in pairs:
        name = SSH_OPTIONS.get(str(k).lower())
        if name is None:
            why = "it runs a program or reaches another host" if str(k).lower() in _RUNS_PROGRAMS else \
                "it is not one powerrig passes"
            raise UnsafeArgument(f"drive host option {k!r} is refused ({why}); allowed: {', '.join(sorted(SSH_OPTIONS.values()))} "
                                 "(set anything else in ~/.ssh/config)")
        check_value(f"drive host option {name}", v, positional=True)
        if re.search(r"[\s\"'\\]", v):
            raise UnsafeArgument(f"drive host option {name}={v!r}: spaces, quotes and backslashes are not allowed "
                                 "(ssh would split the value)")
        out.append((name, v))
    return tuple(out)


def ssh_argv(host) -> Argv:
    """ssh to an SshHost, ready for one remote command: no prompts (BatchMode: a missing key fails at
    once), allow-listed options, and the destination after ``--`` so it is never read as an option."""
    a = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(host.connect_timeout)}", "-o", "LogLevel=ERROR"]
    if host.port:
        a += ["-p", str(int(host.port))]
    for k, v in check_ssh_options(host.options):
        a += ["-o", f"{k}={v}"]
    user = check_ssh_user(host.user)
    dest = check_ssh_host(host.host)
    return Argv(a + ["--", f"{user}@{dest}" if user else dest])


def ssh_wrap(host, argv: Argv) -> Argv:
    """The local argv that runs ``argv`` (built here) on the drive host: ssh joins its arguments into
    one line for the far side's shell, so they go as one, each word quoted (shlex.join)."""
    if not isinstance(argv, Argv):
        raise TypeError("ssh_wrap runs only command lines built by powerrig.dut.commands")
    return Argv(ssh_argv(host) + [shlex.join([str(a) for a in argv])])


def agent_wrap(host, argv: Argv) -> Argv:
    """The local argv that runs ``argv`` (built here) through a QEMU drive host's command agent
    (powerrig.dut.agent, ``ssh host -- argv``'s counterpart): the agent gets the words as they are and
    joins them for the guest's shell, each quoted."""
    if not isinstance(argv, Argv):
        raise TypeError("a drive host runs only command lines built by powerrig.dut.commands")
    return Argv([sys.executable, "-m", "powerrig.dut.agent", check_device("agent socket", host.socket), "--",
                 *argv])


def helper_argv(*words) -> Argv:
    """A helper command on a drive host (mkdir, cat, tar, rm, python3): our own words and paths,
    checked like any value (the far side's shell reads them, quoted)."""
    return Argv([check_value(f"drive host command word {k}", w, positional=k == 0) for k, w in enumerate(words)])
