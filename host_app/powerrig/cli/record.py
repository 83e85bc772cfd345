"""`powerrig record --port PORT [--out FILE] [--seconds N] [-- WORKLOAD COMMAND...]`: stream to a capture.

Records through the one recorder (powerrig.capture.recorder); Ctrl-C and SIGTERM end it cleanly,
with the capture's close record written and the reason it ended in its metadata. Given a workload
command after ``--`` (``-- fio job.fio``), it records an idle lead-in, runs the command, records an idle
tail and stops; the three are phases in the capture ("idle before", "workload: fio job.fio", "idle
after"), so the report gives idle and active watts and the energy of each, as it does for a sweep's
step. Without --out the capture goes to your captures folder (core/paths.py).
"""
from __future__ import annotations

import os
import sys
import time

from powerrig.cli import _options as opt
from powerrig.core.errors import CaptureError, LinkError, PowerrigError


def register(sub) -> None:
    p = sub.add_parser("record", help="record the interposer's stream to a capture file (.jls), optionally "
                                      "around a workload command",
                       description="Record the rails to a capture. After `--`, a workload command to run during "
                                   "the recording, between idle windows of --idle-s, each a phase of the capture: "
                                   "powerrig record --port sim -- fio fixtures/jobs/seq-read-128k.fio")
    p.add_argument("--port", default=None,
                   help="serial port of the interposer (or a simulator's pty), or `sim` for your running virtual "
                        "rig (its fio and nvme come first on the workload's PATH)")
    p.add_argument("--source", default="interposer", metavar="SPEC",
                   help="what measures the rails (default: the interposer on --port): n6705c:RESOURCE[,12V=1,3V3=2] "
                        "or joulescope:12V=SERIAL,3V3=SERIAL (docs/lab-instruments.md)")
    p.add_argument("--visa-backend", default="@py", help="pyvisa backend for an n6705c source (default @py, pyvisa-py; "
                                                           "'' for the system VISA)")
    p.add_argument("--out", default=None, help="capture file to write (.jls; default: a new file in "
                                               "~/.local/share/powerrig/captures)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a capture already at --out (without it, an existing file is refused, never replaced)")
    p.add_argument("--seconds", type=float, default=None,
                   help="stop after this much device time (default: until Ctrl-C, or the workload's end)")
    p.add_argument("--idle-s", type=float, default=2.0,
                   help="with a workload: idle seconds recorded before and after it (default 2)")
    p.add_argument("--drive", default=None, metavar="CONTROLLER",
                   help="the drive's controller (e.g. /dev/nvme0): its identity (model, serial, firmware) is read "
                        "with nvme-cli into the capture; a virtual rig's drive is read without it")
    p.add_argument("--serial", default=None, metavar="SN",
                   help="the drive's serial number: a workload that writes to or erases a drive runs only with it, "
                        "after the drive guard has checked it (the same guard as sweeps)")
    p.add_argument("--allow-unguarded", action="store_true",
                   help="run a workload program other than fio or nvme-cli (the guard cannot judge what it writes)")
    p.add_argument("--interval-us", type=int, default=None, help="interval length in us (default: the device's)")
    p.add_argument("--rails", default=None, help="comma-separated rails (default: all the device has)")
    p.add_argument("workload", nargs="*", metavar="-- COMMAND",
                   help="a workload to run while recording, after `--` (e.g. -- fio job.fio)")
    opt.add_reply_timeout(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from powerrig.capture.recorder import Recorder
    from powerrig.cli._ports import SIM_PORT, no_rig, resolve_port, started_rig
    from powerrig.core import paths
    from powerrig.core.timeline import Timeline
    from powerrig.interposer.client import Interposer

    workload = [w for w in args.workload]
    if workload and workload[0] == "--":
        workload = workload[1:]
    if workload and args.seconds is not None:
        raise opt.OptionError("give --seconds or a workload command, not both: with a workload the recording "
                              "ends --idle-s after the command")
    if workload and not (0 <= args.idle_s <= 3600):
        raise opt.OptionError(f"--idle-s must be within 0..3600 seconds, not {args.idle_s:g}")
    out = _check_out(args.out, args.overwrite) if args.out else paths.new_file(paths.captures_dir(), "record", ".jls")
    seconds = opt.seconds(args.seconds, hint=" (leave it out to record until Ctrl-C)")
    interval = opt.interval_us(args.interval_us)
    rails = opt.rails(args.rails)
    reply_timeout = opt.reply_timeout(args.reply_timeout)
    live = opt.LiveLine()
    t0 = time.monotonic()
    rig = started_rig() if args.port == SIM_PORT else None
    if workload and rig is None and args.port == SIM_PORT and args.source == "interposer" \
            and os.path.basename(workload[0]) in ("fio", "nvme"):
        # a bare virtual interposer has no drive: this host's fio or nvme would run against its own /dev/nvme*
        raise no_rig(f"a {os.path.basename(workload[0])} workload (its drive)")
    if workload:
        _judge(workload, args.serial, args.allow_unguarded, rig)     # before anything is recorded or run
    if args.source != "interposer":
        from powerrig.sources import open_source
        opened = open_source(args.source, backend=args.visa_backend or None)
    elif not args.port:
        raise CaptureError("record needs --port (the interposer's serial port, or `sim`) or --source SPEC")
    else:
        opened = Interposer.open(resolve_port(args.port), timeout=reply_timeout)
    tl = Timeline()
    with opened as dev:
        meta = {"device": dev.description, "calibration": dev.description.get("calibration"), "port": args.port,
                "command": ["powerrig", "record", *sys.argv[2:]]}
        drive = _drive_identity(rig, args.drive, tl)
        if drive:
            meta["drive"] = drive
        rec = Recorder(dev, out, interval_us=interval, rails=rails, seconds=seconds, metadata=meta, timeline=tl,
                       on_progress=lambda p: live.show(_live_text(p)))
        with opt.stop_on_signals(rec.stop) as caught:
            if workload:
                rc = _around_workload(rec, tl, workload, args.idle_s, rig, live)
                res = rec.wait(60.0)
            else:
                rc, res = 0, rec.run()
    live.end()
    print(_result_text(res, time.monotonic() - t0,
                       f" (ended {args.idle_s:g} s after the workload)" if workload and res.end_reason == "stopped" else None))
    if res.end_reason == "interrupted" and seconds is not None and res.covered_s < seconds:
        sig = caught.name or "an interrupt"
        print(f"powerrig: error: recording stopped by {sig} after {res.covered_s:.3f} s of the {seconds:g} s asked; "
              f"{out} holds the {res.covered_s:.3f} s covered", file=sys.stderr)
        return 143 if sig == "SIGTERM" else 130
    if res.end_reason == "link-lost":
        raise LinkError(f"{res.error} (the capture {out} is closed and holds what came before)")
    if res.end_reason == "error":
        said = "" if str(out) in (res.error or "") else f" (the capture {out} is closed and holds what came before)"
        raise CaptureError(f"{res.error}{said}")
    print(f"next: powerrig report {out}   (or `powerrig report latest`)", file=sys.stderr)
    if rc:
        print(f"powerrig: error: the workload exited with status {rc}; {out} holds the recording around it",
              file=sys.stderr)
        return rc if 0 < rc < 126 else 1
    return 0


def _judge(command: list[str], serial: str | None, unguarded: bool, rig: dict | None) -> None:
    """The workload typed after `--` through the drive guard, as the agent's by-hand door judges one
    (dut/door.judge_here): reads run; a write or erase needs --serial and passes destructive.permit; any
    other program needs --allow-unguarded. A refusal is one line and nothing is recorded."""
    from powerrig.core.timeline import Timeline
    from powerrig.dut import door, runners

    nvme, _fio = runners({"nvme": rig["nvme"], "host": rig["host"]} if rig else {}, Timeline())
    try:
        door.judge_here(command, serial, nvme, unguarded)
    except door.Refused as e:
        raise PowerrigError(f"record: {e}") from None


def _drive_identity(rig: dict | None, controller: str | None, tl) -> dict | None:
    """The drive's identity for the capture (the report's "drive MN SN"): the virtual rig's own drive, or
    --drive read with this host's nvme-cli. An identity that cannot be read is a warning, not a lost run."""
    if rig is None and not controller:
        return None
    from dataclasses import asdict

    from powerrig.dut import runners

    nvme, _fio = runners({"nvme": rig["nvme"], "host": rig["host"]} if rig else {}, tl)
    ctrl = controller or rig.get("controller", "/dev/nvme0")
    try:
        ident = nvme.id_ctrl(ctrl)
    except PowerrigError as e:
        print(f"powerrig: warning: the drive's identity was not read ({e}); the capture names no drive",
              file=sys.stderr)
        return None
    return {"controller": ctrl, "id_ctrl": asdict(ident), "mn": ident.mn.strip(), "sn": ident.sn.strip()}


def _around_workload(rec, tl, command: list[str], idle_s: float, rig: dict | None, live) -> int:
    """Idle, the command, idle: each a phase on the capture's timeline (host UTC, placed on the samples
    by the capture's clock). The recording starts first and its first block is waited for, so the idle
    lead-in is inside it. The command's exit status, or 130 when a signal stopped the recording."""
    import shlex
    import subprocess
    import threading

    from powerrig.core.timeline import PHASE

    first = threading.Event()
    shown = rec.on_progress

    def progress(p):
        first.set()
        shown(p)
    rec.on_progress = progress
    rec.start()
    first.wait(30.0)                    # a stream that never starts ends the recorder with its reason
    env = dict(os.environ)
    if rig is not None:                 # the virtual rig's fio and nvme, as a bench's are on its PATH
        env["PATH"] = os.pathsep.join([os.path.dirname(rig["fio"][0]), env.get("PATH", "")])
        live.end()
        print(f"powerrig: the workload runs with virtual rig {rig['id']}'s fio and nvme first on PATH",
              file=sys.stderr, flush=True)

    def idle(name: str) -> None:
        if idle_s > 0 and not rec.stop_event.is_set():
            ev = tl.begin(PHASE, name, meta={"idle": True})
            rec.stop_event.wait(idle_s)
            tl.end(ev)

    idle("idle before")
    rc = 130
    if not rec.stop_event.is_set():
        ev = tl.begin(PHASE, f"workload: {shlex.join(command)}", argv=list(command), meta={"command": list(command)})
        try:
            rc = subprocess.run(command, env=env).returncode
        except OSError as e:
            tl.end(ev, ok=False, error=str(e))
            if not rec.stop_event.is_set():
                rec.stop("stopped")
            raise CaptureError(f"the workload {shlex.join(command)} could not start: {e.strerror or e}") from None
        live.end()
        tl.end(ev, ok=rc == 0, error=None if rc == 0 else f"exit status {rc}", returncode=rc)
        idle("idle after")
    if not rec.stop_event.is_set():     # (a signal's stop keeps its reason, "interrupted")
        rec.stop("stopped")
    return rc


def _check_out(path: str, overwrite: bool = False):
    """Refuse an output the writer cannot create before opening the device (or starting a virtual one),
    and one that would replace a file already there unless asked: yesterday's command line run again
    must not empty yesterday's capture."""
    import time
    from pathlib import Path

    from powerrig.capture.write_faults import disk_problem

    out = Path(path)
    if out.suffix.lower() != ".jls":
        raise CaptureError(f"--out {out} must end in .jls")
    if out.is_dir():
        raise CaptureError(f"--out {out} is a folder; give a file name ending in .jls")
    if not out.parent.exists():
        raise CaptureError(f"folder {out.parent} does not exist; create it or choose another --out")
    if out.exists() and not overwrite:
        st = out.stat()
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(st.st_mtime))
        raise CaptureError(f"--out {out} already exists ({st.st_size:,} bytes, written {when}); give another "
                           "--out, or add --overwrite to replace it")
    why = disk_problem(out.parent, space=False)     # read-only, no permission: the writer's own words, said first
    if why:
        raise CaptureError(f"cannot create capture {out}: {why}")
    return out


def _live_text(p) -> str:
    of = f"/{p.requested_s:g}" if p.requested_s else ""
    return (f"recording {p.covered_s:8.1f}{of} s covered  lost {p.lost_s:.3f} s  gaps {p.gaps}  "
            f"now {p.watts.get('total', float('nan')):7.3f} W")


def _result_text(res, wall_s: float, ended: str | None = None) -> str:
    s = res.summary
    mw = s.get("mean_power_w", {}).get("total", float("nan"))
    ended = ended if ended is not None else {"duration": "", "stopped": " (stopped)", "interrupted": " (stopped by a signal)",
                                             "link-lost": " (link lost)", "error": " (failed)"}[res.end_reason]
    return (f"{res.path}: {res.covered_s:.3f} s covered ({wall_s:.1f} s wall), {res.lost_s:.3f} s lost in "
            f"{s.get('gaps', 0)} gaps, mean {mw:.3f} W, crc errors {s.get('crc_errors', 0)}{ended}")
