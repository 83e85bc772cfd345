"""The destructive-operation guard against the real thing: the Linux NVMe driver, nvme-cli 2.3 and
fio 3.33 in a QEMU guest whose drive is an NVM subsystem (sim.qemu.machine.Subsystem): two
controllers with one serial, nsid 1 and 2 private to the first, nsid 3 private to the second, nsid 4
shared by both, and another drive beside it (its own serial, nsid 7). Once with the kernel's native
multipath off (a block device per controller and namespace: the shared namespace twice) and once on
(the kernel's default: one head per namespace under the subsystem, hidden paths per controller).

The truth is not powerrig's: QEMU's trace (which namespaces a stretch of it wrote or formatted,
sim.qemu.trace.changed_namespaces) and the namespaces' data (a marker written on the host into each
namespace's backing file before every case, read back after). For every action the guard accepts,
the namespaces it judged (the guard's NOTE event: ``nsids``, else ``nsid``) must be the ones the
command may touch, and those the trace and the data say it touched must be among them (the very
same ones when the command's reach is fixed); the serial named must be the drive's. Every action
refused leaves every namespace as it was, and says why in one line.

The actions come from a seeded generator (POWERRIG_GUARD_SEED, POWERRIG_GUARD_CASES) over path
forms the guest's shell can make (the device, ``//dev/..``, ``/dev/./..``, ``/dev/../dev/..``,
links in the guest's /tmp named like another drive's namespace, links to links, relative links,
the generic /dev/ngXnY and the controller /dev/nvmeX), nsid arguments (none, 1, 2, 3, 4, 7 and the
broadcast 0xffffffff), the serial (right, the other drive's) and the action (format through
NvmeCli.format, a fio write through Fio.run). The issue's reproductions (issue 36, item 5) are
tests of their own. One guest per multipath mode, booted for the module.
"""
from __future__ import annotations

import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from powerrig.core.errors import PowerrigError
from powerrig.core.timeline import FIO, NOTE, NVME, Timeline
from powerrig.dut import runners
from powerrig.dut.fio import FioJob, FioPlan
from powerrig.dut.guard import DriveGuard, GuardRefused

SERIAL, OTHER = "QEMUSUBSYS01", "QEMUOTHER002"
BCAST = 0xFFFFFFFF
MARK = 64 * 1024                     # bytes of marker at the start of each namespace
SEED = int(os.environ.get("POWERRIG_GUARD_SEED", "36"))
# generated actions per guest: each guard decision mirrors the guest's sysfs through the agent (0.2-0.4 s
# at load 2; a few times that under heavy load): few enough for the tier's budget, more by hand
CASES = {"multipath-off": 6, "multipath-on": 4}
FIO_SHARE = 0.2                      # of them fio writes (2-3 s each under TCG), the rest formats


def _subsystem():
    from powerrig.sim.qemu.machine import Subsystem
    return Subsystem(other_serial=OTHER)


# -- the guest, as its own sysfs and QEMU's configuration say (not as the guard reads it) -------------

@dataclass(frozen=True)
class Dev:
    path: str                 # /dev/...
    kind: str                 # "blk", "ng" (generic char device) or "ctrl" (controller char device)
    nsid: int | None          # None for a controller
    ctrls: frozenset          # QEMU's controllers that reach it: "s0", "s1" (the subsystem's), "o" (the other drive)
    serial: str
    devno: str = ""           # "MAJ:MIN"


@dataclass
class Layout:
    devs: dict = field(default_factory=dict)            # path -> Dev
    attached: dict = field(default_factory=dict)        # QEMU controller -> nsids attached to it

    def blk(self, nsid: int, ctrl: str | None = None) -> Dev:
        """The block device of nsid (through controller ``ctrl`` when there are several)."""
        got = [d for d in self.devs.values() if d.kind == "blk" and d.nsid == nsid and (ctrl is None or ctrl in d.ctrls)]
        assert got, f"no block device for nsid {nsid} via {ctrl} in {sorted(self.devs)}"
        return sorted(got, key=lambda d: d.path)[0]

    def reach(self, dev: Dev, nsid: int | None) -> tuple[set, bool]:
        """(the namespaces `nvme format dev [--namespace-id=nsid]` may touch, whether that is fixed).
        Broadcast: every namespace attached to the controller the command goes to (through a
        multipath head, any of the head's controllers: the kernel picks the path)."""
        if not nsid:                              # nvme-cli reads 0 as "the device's own"
            return ({dev.nsid} if dev.nsid is not None else set()), True
        on = set().union(*(self.attached[c] for c in dev.ctrls))
        if nsid == BCAST:
            return on, len(dev.ctrls) == 1
        return ({nsid} if nsid in on else set()), True


LAYOUT_SH = (
    'for d in /sys/class/block/nvme*; do n=${d##*/}; [ -b /dev/$n ] || continue; '
    'echo "B $n $(cat $d/nsid) $(readlink -f $d) $(cat $d/dev)"; done; '
    'for c in /sys/class/nvme/nvme*; do echo "C ${c##*/} $(cat $c/cntlid) $(cat $c/serial) $(cat $c/dev)"; done; '
    'for d in /sys/class/nvme-generic/ng*; do n=${d##*/}; [ -c /dev/$n ] && echo "G $n $(readlink -f $d) $(cat $d/dev)"; done; '
    'true')


def read_layout(guest) -> Layout:
    sub = guest.subsystem
    lay = Layout()
    for k in range(sub.controllers):
        lay.attached[f"s{k}"] = {n.nsid for n in sub.namespaces if n.shared or n.ctrl == k}
    lay.attached["o"] = {sub.other_nsid}
    out = guest.agent.run(LAYOUT_SH, timeout=60).stdout.decode().splitlines()
    ctrl = {}                                    # guest controller name -> QEMU's
    for line in out:
        w = line.split()
        if w[0] == "C":
            ctrl[w[1]] = "o" if w[3] == OTHER else f"s{int(w[2])}"
            lay.devs[f"/dev/{w[1]}"] = Dev(f"/dev/{w[1]}", "ctrl", None, frozenset({ctrl[w[1]]}),
                                           OTHER if w[3] == OTHER else SERIAL, w[4])
    blocks = {}
    for line in out:
        w = line.split()
        if w[0] == "B":
            name, nsid, real = w[1], int(w[2]), Path(w[3])
            if real.parent.name in ctrl:                                   # a namespace of one controller
                cs = frozenset({ctrl[real.parent.name]})
            else:                                                          # a multipath head: QEMU's attachment
                cs = frozenset(c for c, ns in lay.attached.items() if c != "o" and nsid in ns)
            serial = OTHER if cs == {"o"} else SERIAL
            blocks[name] = Dev(f"/dev/{name}", "blk", nsid, cs, serial, w[4])
    lay.devs.update({d.path: d for d in blocks.values()})
    for line in out:
        w = line.split()
        if w[0] == "G" and "nvme" + w[1][2:] in blocks:                    # ngXnY is the disk nvmeXnY's
            b = blocks["nvme" + w[1][2:]]
            lay.devs[f"/dev/{w[1]}"] = Dev(f"/dev/{w[1]}", "ng", b.nsid, b.ctrls, b.serial, w[3])
    return lay


@dataclass
class QRig:
    mode: str
    guest: object
    relay: object
    layout: Layout
    drive_host: str
    nsids: tuple
    _links: int = 0
    _runners: tuple | None = None

    def sh(self, script: str, timeout: float = 60.0) -> str:
        r = self.guest.agent.run(script, timeout=timeout)
        assert r.rc == 0, f"guest shell failed ({r.rc}): {script}: {r.stderr.decode(errors='replace').strip()}"
        return r.stdout.decode(errors="replace")

    def runners(self) -> tuple:
        """(timeline, NvmeCli, Fio) of this guest, made once (each action reads the events it added)."""
        if self._runners is None:
            tl = Timeline()
            self._runners = (tl, *runners({"nvme": ["nvme"], "fio": ["fio"], "drive_host": self.drive_host}, tl))
        return self._runners

    # the data truth: the namespaces' backing files on this host
    def _marker(self, nsid: int) -> bytes:
        return (f"powerrig-guard-marker nsid={nsid};".encode() * (MARK // 16))[:MARK]

    def mark(self, nsids=None) -> None:
        for n in nsids if nsids is not None else self.nsids:
            with open(self.guest.ns_image(n), "r+b") as f:
                f.write(self._marker(n))
                f.flush()

    def changed(self) -> set:
        out = set()
        for n in self.nsids:
            with open(self.guest.ns_image(n), "rb") as f:
                if f.read(MARK) != self._marker(n):
                    out.add(n)
        return out

    def trace_at(self) -> int:
        return self.guest.trace_log.stat().st_size

    def trace_since(self, offset: int) -> dict:
        from powerrig.sim.qemu.trace import changed_namespaces
        time.sleep(0.15)                         # QEMU's log is line-buffered: let the last lines land
        with open(self.guest.trace_log, errors="replace") as f:
            f.seek(offset)
            return changed_namespaces(f)

    def link(self, target: str, name: str, via: int = 0, relative: bool = False) -> str:
        """A link in the guest's /tmp named ``name`` that resolves to ``target`` (through ``via``
        links to links first; ``relative``: the last one a relative ../../.. path)."""
        self._links += 1
        d = f"/tmp/guard/{self._links}"
        cmds, prev = [f"mkdir -p {d}/a"], target
        for k in range(via):
            cmds.append(f"ln -s {prev} {d}/a/hop{k}")
            prev = f"{d}/a/hop{k}"
        cmds.append(f"ln -s {'../../..' + prev if relative else prev} {d}/{name}")   # /tmp/guard/N/../../.. is /
        self.sh(" && ".join(cmds))
        return f"{d}/{name}"

    def node(self, dev: Dev, name: str, where: str | None = None) -> str:
        """A device node (mknod, not a link) of ``dev`` named ``name``, in the guest's /tmp or ``where``."""
        self._links += 1
        d = where or f"/tmp/guard/{self._links}"
        major, minor = dev.devno.split(":")
        self.sh(f"mkdir -p {d} && mknod {d}/{name} {'b' if dev.kind == 'blk' else 'c'} {major} {minor}")
        return f"{d}/{name}"


@pytest.fixture(scope="module", params=["multipath-off", "multipath-on"])
def qrig(request, tmp_path_factory):
    """One subsystem guest per multipath mode (fails under CI=true when QEMU or its image is missing)."""
    from powerrig.sim.qemu.image import ImageError, find
    from powerrig.sim.qemu.machine import Guest
    from powerrig.sim.qemu.relay import Relay

    try:
        find()
    except ImageError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the QEMU drive host is missing under CI: {e}")
        pytest.skip(str(e))
    mode = request.param
    d = tmp_path_factory.mktemp(f"guard-{mode}")
    sub = _subsystem()
    guest = Guest(d, SERIAL, mem_mb=512, subsystem=sub, multipath=None if mode == "multipath-on" else False)
    guest.start()
    relay = None
    try:
        relay = Relay(guest.agent, d / "agent-relay.sock").start()
        lay = read_layout(guest)
        nsids = tuple(sorted({n.nsid for n in sub.namespaces} | {sub.other_nsid}))
        rig = QRig(mode, guest, relay, lay, f"agent://{relay.path}", nsids)
        print(f"\n{mode}: the subsystem guest booted in {guest.boot_s:.1f} s; "
              + ", ".join(f"{d.path}=nsid {d.nsid} via {'+'.join(sorted(d.ctrls))}"
                          for d in sorted(lay.devs.values(), key=lambda d: d.path) if d.kind == "blk"))
        rig.mark()
        yield rig
    finally:
        if relay is not None:
            relay.stop()
        guest.stop()


# -- one action, judged against the truth ---------------------------------------------------------------

@dataclass
class Outcome:
    accepted: bool             # the guard let it through (the tool ran)
    error: str | None          # the refusal or the tool's failure, as raised
    judged: set                # nsids the guard judged (its NOTE events)
    trace: dict                # nsid -> {"write", "format"} from QEMU's trace
    data: set                  # nsids whose marker changed
    tool_ok: bool
    removals: int = 0          # "drive removed" notes (nobody pulls a drive here: each one is false)
    controllers: set = field(default_factory=set)    # the controllers the guard's passing decisions named


def _judged(events) -> set:
    """The nsids the guard judged in its passing decisions among these events."""
    out = set()
    for e in events:
        if e.kind == NOTE and e.name == "guard" and e.ok:
            r = e.result
            if r.get("nsids") is not None:
                out |= {int(n) for n in r["nsids"]}
            elif r.get("nsid") is not None:                 # the guard before issue 36: one nsid
                out.add(int(r["nsid"]))
    return out


def cases(mode: str) -> int:
    return int(os.environ.get("POWERRIG_GUARD_CASES", CASES[mode]))


def act(rig: QRig, action: str, path: str, serial: str, nsid: int | None = None, direct: bool = True) -> Outcome:
    """Run one format or fio write through powerrig's own faces; what the guard judged and what the
    trace and the data say was touched. Restores every marker it finds changed."""
    tl, nvme, fio = rig.runners()
    n0 = len(tl)
    off = rig.trace_at()
    err = None
    try:
        if action == "format":
            nvme.format(path, serial, ses=0, nsid=nsid)
        else:
            plan = FioPlan([FioJob("w", rw="write", bs="64k", size="256k", filename=path, direct=direct,
                                   ioengine="libaio")])
            out = Path(rig.guest.rundir) / "fio-out" / str(time.monotonic_ns())
            fio.run(plan, out, serial=serial)
    except PowerrigError as e:
        err = str(e)
    events = list(tl)[n0:]
    if os.environ.get("POWERRIG_GUARD_DEBUG"):
        print("    " + ", ".join(f"{e.kind}:{e.name} {(e.t_end or e.t_start) - e.t_start:.2f}s" for e in events))
    judged = _judged(events)
    ran = [e for e in events if (e.kind == NVME and e.name == "format") or e.kind == FIO]
    tool_ok = bool(ran) and all(e.ok for e in ran) and err is None
    trace = rig.trace_since(off)
    data = rig.changed()
    if data:
        rig.mark(data)
    # accepted: a guard decision passed and the tool was started (a plain file needs no decision)
    accepted = bool(ran)
    removals = sum(1 for e in events if e.kind == NOTE and e.name == "drive removed")
    ctrls = {c for e in events if e.kind == NOTE and e.name == "guard" and e.ok for c in e.result.get("controllers") or ()}
    return Outcome(accepted, err, judged, trace, data, tool_ok, removals, ctrls)


def verdict(rig: QRig, case: str, out: Outcome, dev: Dev | None, serial: str, may: set | None,
            exact: bool) -> list[str]:
    """What is wrong with this outcome (empty: nothing). ``may``: the namespaces the command may
    touch (None: not a drive), ``exact``: that reach is fixed (not up to the kernel's path choice)."""
    bad = []
    touched = set(out.trace)
    if out.removals:
        bad.append(f"{case}: {out.removals} 'drive removed' note(s), yet no drive left (fio's removal watcher "
                   "picked its controller by the file's name?)")
    if touched != out.data:
        bad.append(f"{case}: the trace says {sorted(touched)} were changed, the data {sorted(out.data)}")
    if not out.accepted:
        if touched or out.data:
            bad.append(f"{case}: REFUSED ({out.error}) yet namespaces {sorted(touched | out.data)} changed")
        if out.error is None or "\n" in out.error:
            bad.append(f"{case}: the refusal is not one line: {out.error!r}")
        return bad
    if dev is not None and dev.serial != serial:
        bad.append(f"{case}: ACCEPTED with serial {serial!r} on a namespace of the drive {dev.serial!r} "
                   f"(touched {sorted(touched)})")
    if not touched <= out.judged:
        bad.append(f"{case}: ACCEPTED judging nsids {sorted(out.judged)}, but nvme-cli/fio touched {sorted(touched)} "
                   f"(trace {dict((k, sorted(v)) for k, v in out.trace.items())})")
    if may is not None and may and out.judged != may:
        bad.append(f"{case}: ACCEPTED judging nsids {sorted(out.judged)}; the command reaches {sorted(may)}")
    if exact and out.tool_ok and may is not None and touched != may:
        bad.append(f"{case}: the tool succeeded but touched {sorted(touched)}, the model says {sorted(may)} "
                   "(test model wrong?)")
    return bad


# -- the generator --------------------------------------------------------------------------------------

FORMS = ("plain", "//", "/./", "/../", "link-decoy", "link-to-link", "relative-link", "dev-link", "node-decoy",
         "relative-path", "ng", "controller")
N_FIO_FORMS = 10          # fio writes take the block device forms (libaio on /dev/ng* is EINVAL)
NSIDS = (0, 1, 2, 3, 4, 7, BCAST, BCAST, -1, 2**32 + 1)


def _form(rig: QRig, rnd: random.Random, form: str, dev: Dev) -> str:
    name = dev.path[len("/dev/"):]
    decoys = [p[len("/dev/"):] for p, d in rig.layout.devs.items() if d.kind == "blk" and d.path != dev.path]
    if form == "plain":
        return dev.path
    if form == "//":
        return "/" + dev.path
    if form == "/./":
        return f"/dev/./{name}"
    if form == "/../":
        return f"/dev/../dev/{name}"
    if form == "link-decoy":
        return rig.link(dev.path, rnd.choice(decoys))
    if form == "link-to-link":
        return rig.link(dev.path, rnd.choice(decoys), via=rnd.randint(1, 2))
    if form == "relative-link":
        return rig.link(dev.path, rnd.choice(decoys + [name]), relative=True)
    if form == "dev-link":                               # a link in the guest's /dev named like a namespace
        rig._links += 1
        rig.sh(f"ln -s {name} /dev/nvme9n{rig._links}")
        return f"/dev/nvme9n{rig._links}"
    if form == "node-decoy":                             # a device node of it, named like another one
        return rig.node(dev, rnd.choice(decoys))
    if form == "relative-path":                          # from the agent's working directory, /
        return rnd.choice((f"dev/{name}", f"./dev/{name}", f"tmp/../dev/{name}"))
    raise AssertionError(form)


def generate(rig: QRig, rnd: random.Random, n: int):
    """(case text, action, path, serial, nsid, the device it really is)."""
    lay = rig.layout
    blks = sorted((d for d in lay.devs.values() if d.kind == "blk"), key=lambda d: d.path)
    for k in range(n):
        action = "fio" if rnd.random() < FIO_SHARE else "format"
        dev = rnd.choice(blks)
        if action == "fio" and rnd.random() < 0.2:           # a plain file: no drive, nothing of one touched
            path = rig.link(f"/tmp/guard/plain{k}.img", rnd.choice(blks).path[len("/dev/"):]) if rnd.random() < 0.5 \
                else f"/tmp/guard/plain{k}.img"
            yield f"#{k} fio {path!r} (a regular file)", action, path, SERIAL, None, None, "file"
            continue
        form = rnd.choice(FORMS if action == "format" else FORMS[:N_FIO_FORMS])
        nsid = None
        if form == "ng":
            dev = lay.devs["/dev/ng" + dev.path[len("/dev/nvme"):]]
            path = dev.path
        elif form == "controller":
            dev = lay.devs[sorted(p for p, d in lay.devs.items() if d.kind == "ctrl" and d.ctrls <= dev.ctrls)[0]]
            path = dev.path
        else:
            path = _form(rig, rnd, form, dev)
        if action == "format" and (form == "controller" or rnd.random() < 0.5):
            nsid = rnd.choice(NSIDS)
        serial = dev.serial if rnd.random() < 0.85 else (OTHER if dev.serial == SERIAL else SERIAL)
        yield (f"#{k} {action} {path!r} (= {dev.path}, nsid {dev.nsid}){'' if nsid is None else f' nsid={nsid:#x}'}"
               f" serial {serial}", action, path, serial, nsid, dev, form)


def test_qemu_guard_property_every_accepted_target_is_what_nvme_cli_and_fio_touched(qrig):
    """The property, over generated actions: accepted -> judged == reach, touched within judged
    (the same when the reach is fixed), the serial the drive's; refused -> nothing touched, one line."""
    rnd = random.Random(f"{SEED}-{qrig.mode}")
    bad, seen = [], Counter()
    t0 = time.time()
    n = cases(qrig.mode)
    for case, action, path, serial, nsid, dev, form in generate(qrig, rnd, n):
        if dev is None:
            may, exact = set(), True
        else:
            may, exact = qrig.layout.reach(dev, nsid) if action == "format" else ({dev.nsid}, True)
        out = act(qrig, action, path, serial, nsid, direct=dev is not None)   # the guest's /tmp has no O_DIRECT
        seen[(action, form, "accepted" if out.accepted else "refused")] += 1
        problems = verdict(qrig, case, out, dev, serial, may, exact)
        bad += problems
        print(f"  {'FAIL' if problems else 'ok  '} {case}: "
              f"{'accepted' if out.accepted else 'refused'} judged {sorted(out.judged)} touched {sorted(out.trace)}"
              f"{'' if out.error is None else ' - ' + out.error[:160]}")
    print(f"{qrig.mode}: seed {SEED}, {n} actions in {time.time() - t0:.1f} s: "
          + ", ".join(f"{a} {f} {o} x{n}" for (a, f, o), n in sorted(seen.items())))
    assert not bad, f"{len(bad)} guard holes ({qrig.mode}, seed {SEED}):\n" + "\n".join(bad)


# -- issue 36, item 5, on the real guest ----------------------------------------------------------------

def _check(qrig, case, out, dev, serial, may, exact=True):
    bad = verdict(qrig, case, out, dev, serial, may, exact)
    print(f"  {case}: {'accepted' if out.accepted else 'refused'} judged {sorted(out.judged)} "
          f"touched {sorted(out.trace)}{'' if out.error is None else ' - ' + out.error[:160]}")
    return bad


def test_qemu_guard_format_with_nsid_2_on_the_nsid_1_device_is_refused_or_judges_nsid_2(qrig):
    ns1 = qrig.layout.blk(1, "s0")
    out = act(qrig, "format", ns1.path, SERIAL, nsid=2)
    bad = _check(qrig, f"format {ns1.path} (nsid 1) nsid=2", out, ns1, SERIAL, {2})
    assert not bad, "\n".join(bad)


def test_qemu_guard_broadcast_format_judges_every_namespace_of_the_controller_shared_included(qrig):
    ns1 = qrig.layout.blk(1, "s0")
    out = act(qrig, "format", ns1.path, SERIAL, nsid=BCAST)
    bad = _check(qrig, f"format {ns1.path} (nsid 1) nsid=0xffffffff", out, ns1, SERIAL, {1, 2, 4})
    assert not bad, "\n".join(bad)
    if out.accepted:
        assert out.judged == {1, 2, 4} == set(out.trace), "the broadcast reaches nsid 1, 2 and the shared 4, not 3"
    if qrig.mode == "multipath-on":
        # through the shared namespace's head the kernel sends the admin command down a path of its
        # choosing: the guard must judge what either controller's broadcast reaches
        head = qrig.layout.blk(4)
        may, exact = qrig.layout.reach(head, BCAST)
        assert may == {1, 2, 3, 4} and not exact
        out = act(qrig, "format", head.path, SERIAL, nsid=BCAST)
        bad = _check(qrig, f"format {head.path} (nsid 4's head) nsid=0xffffffff", out, head, SERIAL, may, exact)
        assert not bad, "\n".join(bad)


def test_qemu_guard_shared_namespace_mounted_through_the_other_controller_is_refused(qrig):
    """Multipath off: nsid 4 is /dev/nvmeAnX through one controller and /dev/nvmeBnY through the
    other; mounted through the second, writing or formatting it through the first (or a broadcast
    format through the first controller's nsid 1) must be refused, the data untouched. With
    multipath on there is one device for it (a head): mounted, it is refused as any mounted one.
    Then mounted through a device node outside /dev (mknod in the guest's /tmp: the mount table
    names that path, not a /dev one): refused all the same.
    (Mounted read-only, so the only writer the trace and the data could show is the action.)"""
    lay = qrig.layout
    via0, via1 = lay.blk(4, "s0"), lay.blk(4, "s1")
    assert (via0 != via1) == (qrig.mode == "multipath-off")
    mounted = via1 if qrig.mode == "multipath-off" else via0
    node = qrig.node(mounted, "disk")
    bad = []
    for source, actions in (
            (mounted.path, [("fio write", "fio", via0.path, None), ("format", "format", via0.path, None)]
             + ([("broadcast format via nsid 1", "format", lay.blk(1, "s0").path, BCAST)]
                if qrig.mode == "multipath-off" else [])),
            (node, [("format", "format", via0.path, None)])):
        # read-only: mounted (in use) all the same, and the filesystem writes nothing the data check would
        # see (the marker written over its superblock after each round: a new filesystem each time)
        qrig.sh(f"mke2fs -q {mounted.path} && sync && mkdir -p /mnt/shared && mount -o ro {source} /mnt/shared")
        try:
            qrig.mark()
            for case, action, path, nsid in actions:
                out = act(qrig, action, path, SERIAL, nsid)
                c = f"{case} {path} while nsid 4 is mounted through {source} ({mounted.path})"
                bad += _check(qrig, c, out, lay.devs[path], SERIAL, None)
                if out.accepted:
                    bad.append(f"{c}: ACCEPTED (touched {sorted(out.trace)}): a mounted namespace was written or erased")
        finally:
            qrig.sh("umount /mnt/shared")
            qrig.mark()
    assert not bad, "\n".join(bad)


def test_qemu_guard_multipath_namespace_of_a_two_controller_subsystem_is_accepted_with_its_serial(qrig):
    """The shared namespace of the two-controller subsystem, through the kernel's device for it (with
    native multipath: the head, which kernel 6.1 gives no multipath/ folder), is formatted with the
    drive's serial (judged: nsid 4 alone, through every controller that reaches it) and refused with
    another serial, the refusal naming the drive's. (The property test covers the private ones.)"""
    dev = qrig.layout.blk(4)
    out = act(qrig, "format", dev.path, SERIAL)
    bad = _check(qrig, f"format {dev.path} (nsid 4, shared, {qrig.mode})", out, dev, SERIAL, {4})
    if not out.accepted:
        bad.append(f"{dev.path} (nsid 4, {qrig.mode}) refused with its own serial: {out.error}")
    elif len(out.controllers) < len(dev.ctrls):
        bad.append(f"{dev.path} (nsid 4): the guard lists controllers {sorted(out.controllers)}, the device is "
                   f"reached through {len(dev.ctrls)}")
    tl, nvme, _ = qrig.runners()
    try:
        DriveGuard(nvme, nvme.host).check(dev.path, OTHER, "a guard test")
        bad.append(f"{dev.path} (nsid 4) accepted with the other drive's serial")
    except GuardRefused as e:
        if SERIAL not in str(e) or "\n" in str(e):
            bad.append(f"{dev.path}: refused with the wrong serial but not naming the drive's in one line ({e})")
    assert not bad, "\n".join(bad)


def test_qemu_guard_sanitize_judges_every_namespace_of_the_subsystem(qrig):
    """Sanitize alters all user data in the NVM subsystem (NVMe base spec, Sanitize Operations), not
    the namespace of the device it is sent through: the guard must judge every namespace of the
    subsystem (1-4, through both controllers), never the other drive's. QEMU 7.2 does not implement
    Sanitize (no trace truth here): the controller refuses it, which must come back as one line
    naming the NVMe status, not as an option nvme-cli 2.3 does not know."""
    tl, nvme, _ = qrig.runners()
    n0 = len(tl)
    ns1 = qrig.layout.blk(1, "s0")
    off = qrig.trace_at()
    err = None
    try:
        nvme.sanitize(ns1.path, SERIAL, action=2)
    except PowerrigError as e:
        err = str(e)
    events = list(tl)[n0:]
    judged = _judged(events)
    print(f"  sanitize {ns1.path}: judged {sorted(judged)}; {err}")
    bad = []
    if any(e.kind == NOTE and e.name == "guard" and e.ok for e in events) and judged != {1, 2, 3, 4}:
        bad.append(f"sanitize through {ns1.path} ({qrig.mode}) ACCEPTED judging nsids {sorted(judged)}: a sanitize "
                   "erases every namespace of the subsystem, 1-4")
    if err is not None and ("unrecognized option" in err or "\n" in err):
        bad.append(f"sanitize through {ns1.path}: nvme-cli did not take the command line: {err}")
    assert not set(qrig.trace_since(off)) and not qrig.changed()
    assert not bad, "\n".join(bad)
