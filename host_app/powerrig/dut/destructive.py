"""The one guarded door for what writes to or erases a drive: fio writes, format, sanitize, namespace
management, firmware download/commit, and the interposer's power actions (cut, restore, PERST#, PWRDIS).

Why one door: a check made in one place and an erase issued in another drift apart (a sweep once
checked the controller, then formatted whatever namespace the plan named). Here each operation takes
the device it acts on, resolves it to the drive it really is (namespace -> controller(s) -> serial,
through the sysfs of the host the drive sits in: this one, the virtual rig's tree, or a drive host's
over ssh), checks the serial the caller names, the mounts, swaps and the boot device (guard.py), and
only then issues the :class:`~powerrig.dut.commands.Permit` for that action on that device, which the
command builders (commands.py) demand. Nothing else creates a Permit (tests/test_gateways.py scans the
tree), so no destructive command line can be built around this door.

A new destructive action: add its nvme-cli subcommand to ``commands.DESTRUCTIVE_NVME`` and a function
here that calls :func:`permit` on the device it acts on, then runs the command with that permit.
"""
from __future__ import annotations

import os

from powerrig.core.errors import ToolError
from powerrig.dut.commands import FIO_WRITE, GUARDED_FEATURES, Permit, UnsafeArgument, fio_value, fio_write_targets
from powerrig.dut.guard import BROADCAST, DriveGuard, GuardRefused, RemoteHostView, decision, is_drive, opens, resolve, host_view


def permit(nvme, action: str, dev: str, serial: str | None, allow_unguarded: bool = False,
           controller: str | None = None, nsid: int | None = None, scope: str | None = None) -> Permit:
    """Check ``dev`` for ``action`` (serial named and equal to every controller's, nothing in use, not
    the boot device; with ``controller``, dev must be reached through that controller; with ``nsid``,
    the namespace(s) the command names, resolved through dev's controller, are the ones judged; with
    ``scope="subsystem"``, every namespace of dev's NVM subsystem) and return the Permit, for dev as given and for the canonical path the guard resolved it to;
    GuardRefused (one line, recorded on the timeline) otherwise."""
    target = DriveGuard(nvme, nvme.host).check(dev, serial, action, allow_unguarded, nsid, scope)
    if target is not None and controller is not None:
        want = set(resolve(controller, nvme.host).controllers)
        if not want & set(target.controllers):
            raise GuardRefused(f"refusing {action} on {dev}: it is a namespace of {', '.join(target.controllers)}, "
                               f"not of {controller} (the drive checked); name a namespace of that controller")
    judged = target.path if target is not None and target.path else None
    paths = {dev} | ({judged} if judged else set())
    return Permit(action, frozenset(paths), serial, overridden=target is None,
                  opens=((dev, judged),) if judged else (),
                  controllers=tuple(target.controllers) if target is not None else ())


def opened(p: Permit, dev: str) -> str:
    """The path the command opens: the canonical one the guard judged (a link changed after the check
    cannot redirect it), or dev as given when the guard was overridden."""
    return p.opened(dev)


def _run(nvme, action: str, dev: str, options: list[str], meta: dict, p: Permit, timeout: float) -> None:
    nvme._call(action, dev, options, action, lambda text: {"stdout": text.strip()[:200]}, meta,
               permit=p, timeout=timeout)


def format(nvme, dev: str, serial: str | None, ses: int = 0, lbaf: int | None = None, nsid: int | None = None,
           controller: str | None = None, allow_unguarded: bool = False, timeout: float = 600.0) -> None:
    """Format NVM (``nvme format``) of the namespace ``dev`` (SES 0 none, 1 user data, 2 crypto), or of
    namespace ``nsid`` through dev's controller (0xFFFFFFFF: all of them); the guard judges every
    namespace that touches."""
    if ses not in (0, 1, 2):
        raise ToolError(f"format: secure erase setting {ses} is not 0, 1 or 2")
    p = permit(nvme, "format", dev, serial, allow_unguarded, controller, nsid)
    opts = [f"--ses={ses}"]
    if lbaf is not None:
        opts.append(f"--lbaf={int(lbaf)}")
    if nsid is not None:
        opts.append(f"--namespace-id={int(nsid)}")
    if nvme.version().major >= 2:
        opts.append("--force")                  # 2.x asks for confirmation on a terminal otherwise
    _run(nvme, "format", opened(p, dev), opts, {"device": dev, "ses": ses, "lbaf": lbaf, "nsid": nsid}, p, timeout)


def sanitize(nvme, dev: str, serial: str | None, action: int = 2, allow_unguarded: bool = False,
             timeout: float = 60.0) -> None:
    """Sanitize (``--sanact``: 1 exit failure mode, 2 block erase, 3 overwrite, 4 crypto erase); returns
    once accepted (poll ``sanitize-log``). A Sanitize alters all user data in the NVM subsystem (NVMe
    1.4 section 8.15), whichever controller or namespace it is sent through: the guard judges every
    namespace of the subsystem, through every controller (mounts, serials). No ``--force``: no
    nvme-cli release has one for sanitize (it asks no confirmation; 2.3 rejects the option)."""
    if action not in (1, 2, 3, 4):
        raise ToolError(f"sanitize: action {action} is not 1 (exit failure), 2 (block), 3 (overwrite) or 4 (crypto)")
    p = permit(nvme, "sanitize", dev, serial, allow_unguarded, scope="subsystem")
    opts = [f"--sanact={action}"]
    _run(nvme, "sanitize", opened(p, dev), opts, {"device": dev, "action": action}, p, timeout)


def reset(nvme, dev: str, serial: str | None, allow_unguarded: bool = False, timeout: float = 60.0) -> None:
    """Controller reset (``nvme reset``): the controller's queues torn down and rebuilt, I/O in flight
    aborted; the namespaces and their data stay."""
    p = permit(nvme, "reset", dev, serial, allow_unguarded)
    _run(nvme, "reset", opened(p, dev), [], {"device": dev}, p, timeout)


def create_namespace(nvme, controller: str, serial: str | None, blocks: int, flbas: int = 0,
                     allow_unguarded: bool = False, timeout: float = 60.0) -> None:
    """``nvme create-ns`` of ``blocks`` logical blocks (size = capacity) in LBA format ``flbas``."""
    p = permit(nvme, "create-ns", controller, serial, allow_unguarded)
    opts = [f"--nsze={int(blocks)}", f"--ncap={int(blocks)}", f"--flbas={int(flbas)}"]
    _run(nvme, "create-ns", opened(p, controller), opts, {"device": controller, "blocks": blocks, "flbas": flbas},
         p, timeout)


def delete_namespace(nvme, controller: str, serial: str | None, nsid: int, allow_unguarded: bool = False,
                     timeout: float = 60.0) -> None:
    """``nvme delete-ns`` of namespace ``nsid``, judged through the controller as format's nsid is:
    it must be a namespace attached there (else refused: the guard cannot tell what it holds), and
    nothing of the subsystem mounted, through any controller."""
    p = permit(nvme, "delete-ns", controller, serial, allow_unguarded, nsid=_nsid(nsid))
    _run(nvme, "delete-ns", opened(p, controller), [f"--namespace-id={int(nsid)}"],
         {"device": controller, "nsid": nsid}, p, timeout)


def attach_namespace(nvme, controller: str, serial: str | None, nsid: int, controller_ids: list[int],
                     detach: bool = False, allow_unguarded: bool = False, timeout: float = 60.0) -> None:
    """``nvme attach-ns`` (or ``detach-ns``) of namespace ``nsid`` to the controllers with these ids.
    The nsid is judged through the controller (detach: it must be attached there; attach: when it
    already is, that namespace, else the controller's), a mount through any controller refuses."""
    action = "detach-ns" if detach else "attach-ns"
    nsid = _nsid(nsid)
    judged = nsid
    if not detach and not allow_unguarded and nsid not in resolve(controller, nvme.host, BROADCAST).nsids:
        judged = None       # attaching a namespace the controller has not yet: the controller, all it has
    p = permit(nvme, action, controller, serial, allow_unguarded, nsid=judged)
    ids = ",".join(str(int(c)) for c in controller_ids)
    _run(nvme, action, opened(p, controller), [f"--namespace-id={int(nsid)}", f"--controllers={ids}"],
         {"device": controller, "nsid": nsid, "controllers": list(controller_ids)}, p, timeout)


def _nsid(nsid) -> int:
    """A single namespace id (1..FFFFFFFEh): delete-ns and attach-ns name one namespace."""
    if isinstance(nsid, bool) or not isinstance(nsid, int) or not 1 <= nsid < BROADCAST:
        raise GuardRefused(f"namespace id {nsid!r} is not one namespace (1 to {BROADCAST - 1}); name the namespace "
                           "to delete, attach or detach")
    return nsid


def firmware_download(nvme, controller: str, serial: str | None, image: str, allow_unguarded: bool = False,
                      timeout: float = 600.0) -> None:
    p = permit(nvme, "fw-download", controller, serial, allow_unguarded)
    _run(nvme, "fw-download", opened(p, controller), [f"--fw={image}"], {"device": controller, "image": image},
         p, timeout)


def firmware_commit(nvme, controller: str, serial: str | None, slot: int, action: int,
                    allow_unguarded: bool = False, timeout: float = 600.0) -> None:
    """``nvme fw-commit --slot --action`` (0-3: replace, replace and activate, activate, at once)."""
    p = permit(nvme, "fw-commit", controller, serial, allow_unguarded)
    _run(nvme, "fw-commit", opened(p, controller), [f"--slot={int(slot)}", f"--action={int(action)}"],
         {"device": controller, "slot": slot, "action": action}, p, timeout)


def power_feature(nvme, controller: str, serial: str | None, fid: int, value: int, allow_unguarded: bool = False,
                  timeout: float = 30.0) -> None:
    """Set Features 25h Power Measurement (start: the drive's counters cleared, its generation number
    stepped; stop) or 23h Power Limit, dword 11 ``value`` (encoded by powerrig.dut.claims); a write to
    the drive's state, so the drive is checked first like any other (commands.GUARDED_FEATURES)."""
    if fid not in GUARDED_FEATURES:
        raise ToolError(f"set-feature {fid:#04x} is not one the guarded door issues ({', '.join(f'{f:#04x}' for f in GUARDED_FEATURES)})")
    p = permit(nvme, GUARDED_FEATURES[fid], controller, serial, allow_unguarded)
    _run(nvme, "set-feature", opened(p, controller), [f"--feature-id={fid:#04x}", f"--value={int(value)}"],
         {"device": controller, "fid": fid, "value": int(value)}, p, timeout)


def fio_write(fio, plan, serial: str | None, allow_unguarded: bool = False) -> Permit:
    """The Permit for every file a fio plan writes. Each target is asked where fio runs (this host or
    the drive host) whether it is a drive; a drive passes the guard with ``serial`` (the NvmeCli
    that ``powerrig.dut.runners`` pairs with the Fio reads its serial); regular files pass as they
    are (fio lays them out)."""
    targets = fio_write_targets(plan)
    nvme = fio.nvme
    host = nvme.host if nvme is not None else None
    if host is None and fio.remote is not None:
        host = host_view(None, fio.remote)
    with decision(host):             # a drive host is read once for each target (is_drive, then judged)
        return _fio_write(fio, plan, serial, allow_unguarded, targets, nvme, host)


def _fio_write(fio, plan, serial, allow_unguarded, targets, nvme, host) -> Permit:
    drives = [t for t in targets if is_drive(t, host)]
    overridden = False
    opened = {}
    ctrls: set = set()
    if drives:
        if nvme is None:
            raise GuardRefused(f"refusing a fio write workload on {', '.join(drives)}: this Fio has no NvmeCli to "
                               "read the drive's serial with; build the pair with powerrig.dut.runners(rig)")
        for d in drives:
            p = permit(nvme, FIO_WRITE, d, serial, allow_unguarded)
            overridden = p.overridden or overridden
            opened[d] = p.opened(d)
            ctrls |= set(p.controllers)
    for t in targets:
        if t and t not in opened:
            opened[t] = _file_opened(t, host)
    for t, c in opened.items():
        if c != t:
            _fio_can_open(t, c)
    return Permit(FIO_WRITE, frozenset(targets), serial, overridden,
                  opens=tuple(sorted((t, c) for t, c in opened.items() if c != t)), controllers=tuple(sorted(ctrls)))


def _file_opened(t: str, host) -> str:
    """What fio is to open for a write target that is no drive: a file it lays out. When a link leads
    there (the canonical path is not the one written, made absolute), the file the link led to when it
    was judged a file, so a link re-pointed afterwards (to a drive) cannot redirect the write; else t
    as given. Only where the kernel opens the very same file by either name (``lnk/`` or ``lnk/..``
    of a link to a file fail there, though realpath mends them): checked by stat here, and on a drive
    host kept to plain absolute names (its working directory and kernel are that host's)."""
    if isinstance(host, RemoteHostView):
        plain = t.startswith("/") and all(c not in ("", ".", "..") for c in t.split("/")[1:])
        seen = opens(t, host) if plain else None
        return seen[1] if seen is not None and seen[0] == "file" else t
    seen = opens(t, host)
    if seen is None or seen[0] not in ("file", "missing") or os.path.basename(t) in ("", ".", ".."):
        return t
    kind, canonical = seen
    if canonical == os.path.normpath(os.path.abspath(t)):
        return t
    try:
        same = os.path.samefile(t, canonical) if kind == "file" else \
            os.path.samefile(os.path.dirname(t) or ".", os.path.dirname(canonical))
    except OSError:
        return t
    return canonical if same else t


def _fio_can_open(given: str, canonical: str) -> None:
    """The canonical path goes into fio's filename=: one name fio reads as written, or GuardRefused."""
    if ":" in canonical:
        raise GuardRefused(f"refusing a fio write to {given}: it is {canonical}, whose ':' fio reads as a list of "
                           "files; write to a path without ':'")
    try:
        fio_value("filename", canonical)
    except UnsafeArgument as e:
        raise GuardRefused(f"refusing a fio write to {given}: it is {canonical}, which fio would read otherwise "
                           f"({e})") from None


POWER_OUTPUTS = ("12V", "3V3", "PERST", "PWRDIS")
SAFE_LEVELS = {"12V": 1, "3V3": 1, "PERST": 0, "PWRDIS": 0}


def _check_actions(actions) -> None:
    if not isinstance(actions, list) or not actions:
        raise ToolError("power: the sequence is empty; give at least one {output, level, at | after_us}")
    for a in actions:
        if not isinstance(a, dict) or a.get("output") not in POWER_OUTPUTS or a.get("level") not in (0, 1):
            raise ToolError(f"power: action {a!r} is not {{output: {'|'.join(POWER_OUTPUTS)}, level: 0|1, "
                            "at | after_us}")


def power_session(nvme, controller: str, serial: str | None, interposer, watchdog_ms: int = 1000,
                  allow_unguarded: bool = False) -> Permit:
    """The guard (serial named and equal, nothing mounted, never the host's boot drive), then power
    actions enabled on the interposer for this connection; sequences may follow until
    :func:`power_release`. For a sweep's power-loss step, whose many cycles are one session: the
    guard cannot run while the drive is off (nvme-cli cannot read its serial then)."""
    p = permit(nvme, "power", controller, serial, allow_unguarded)
    interposer.power_enable(p, watchdog_ms)
    return p


def margin_permit(nvme, controller: str, serial: str | None, allow_unguarded: bool = False) -> Permit:
    """The guard before a lab supply runs the drive's rail off nominal (a sweep's [[margin]] step):
    the serial named and equal, nothing mounted, never the host's boot drive. The supply is the lab's
    instrument, not a command line: the permit is the check, the caller then sets the supply."""
    return permit(nvme, "margin", controller, serial, allow_unguarded)


def power(nvme, controller: str, serial: str | None, interposer, actions: list[dict], watchdog_ms: int = 1000,
          allow_unguarded: bool = False, timeout: float = 10.0) -> list[dict]:
    """Run a timed power sequence on the interposer the drive sits on: :func:`power_session`, then
    the sequence; returns the executed edges [{output, level, requested, index}].

    The interposer keeps power actions enabled for this connection; its watchdog brings power back
    if the host goes silent for ``watchdog_ms``. ``power_release`` ends a session (safe state, disabled).
    """
    _check_actions(actions)
    power_session(nvme, controller, serial, interposer, watchdog_ms, allow_unguarded)
    interposer.power_sequence(actions)
    return interposer.power_edges(len(actions), timeout=timeout + sum(a.get("after_us", 0) for a in actions) / 1e6)


def power_release(interposer) -> dict:
    """The safe state (rails on, PERST# and PWRDIS released) and power actions off: no permit needed,
    it only ever restores."""
    return interposer.power_disable()
