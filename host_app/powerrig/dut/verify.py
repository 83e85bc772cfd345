"""After a drive went away mid-write: were acknowledged writes lost, or only writes in flight?

fio's verify-state flow: the write phase runs with ``verify_state_save`` (``write_options``), so fio
writes down, when it stops, how many writes the drive had acknowledged and which were still in flight.
Once the drive is back, two read-only verify passes classify the blocks:
1. ``--verify_only --verify_state_load=1`` over the acknowledged writes (fio's ``io_bytes``: writes
   completed without error): every block it finds wrong is data the drive lost (a drive that honours
   its acknowledgements loses none);
2. ``--verify_only`` over the acknowledged writes plus the queue depth: the blocks wrong here and not
   in pass 1 were never acknowledged (in flight at the removal, failed with it): nothing was promised
   for them.
Both passes are fio runs through the one door to other programs (events on the timeline).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from powerrig.dut import commands
from powerrig.dut._run import run_tool
from powerrig.core.timeline import FIO

_BAD = re.compile(r"^verify: .*? offset (\d+), length (\d+)", re.M)


def write_options(randseed: int | None = None) -> dict:
    """fio options for a sequential write phase whose state a verify pass can load; a ``randseed``
    per cycle makes a block an earlier cycle left behind fail the verify (same seed: same headers)."""
    o = {"verify": "crc32c", "do_verify": 0, "verify_state_save": 1}
    if randseed is not None:
        o["randseed"] = int(randseed)
    return o


def bad_blocks(text: str) -> set[int]:
    """Offsets of the blocks a verify pass found wrong, from fio's output."""
    return {int(m.group(1)) for m in _BAD.finditer(text)}


def acknowledged_writes(write: dict, bs: int) -> int:
    """Writes the drive acknowledged, from the ``write`` part of fio's JSON for the cut run:
    ``io_bytes`` counts writes completed without error (``total_ios`` also counts the failed ones)."""
    return int(write["io_bytes"]) // int(bs)


def flushed_writes(job: dict, fsync_every: int, iodepth: int) -> int:
    """Writes a completed flush covered, from fio's JSON job of the cut run: the write job issued a
    flush (fio ``fsync=N``: on a block device, an NVMe Flush) after every ``fsync_every`` writes; when
    the k-th was issued at most ``iodepth - 1`` of the k x N writes before it were still in flight (the
    last issued), so the first k x N - (iodepth - 1) had completed and the flush covers them. k is fio's
    completed syncs (``sync.total_ios``); 0 without flushes."""
    k = int((job.get("sync") or {}).get("total_ios") or 0)
    return max(0, k * int(fsync_every) - (int(iodepth) - 1)) if fsync_every and k else 0


@dataclass(frozen=True)
class Classification:
    acknowledged: int        # writes the drive acknowledged (fio's completed writes)
    lost: tuple              # offsets acknowledged and wrong: data the drive lost
    in_flight: tuple         # offsets wrong but never acknowledged: writes cut off by the removal
    lost_after_flush: tuple = ()    # of ``lost``, the writes a completed flush had covered: the drive broke
    #                                 its durability promise (a volatile cache may lose the others)


def classify(fio, name: str, dev: str, bs: int, iodepth: int, acknowledged: int, ioengine: str = "libaio",
             timeout: float = 600.0, randseed: int | None = None, flushed: int = 0) -> Classification:
    """Run the two verify passes on ``dev`` (a Fio runner: its program, timeline and drive host)
    for a sequential write job ``name`` of block size ``bs`` whose drive acknowledged ``acknowledged``
    writes (``acknowledged_writes``); the first ``flushed`` of them a completed flush covered
    (``flushed_writes``): their losses are also ``lost_after_flush``."""
    def run(label, size, state_load):
        argv = commands.fio_verify_argv(fio.program, name, dev, bs, iodepth, size, ioengine, state_load, randseed)
        done = run_tool(argv, fio.timeline, FIO, label, "fio", timeout, fio.env, check=False, meta={"verify": True},
                        remote=fio.remote)
        bad = bad_blocks(done.stdout + done.stderr)
        fio.timeline.end(done.event, ok=True, bad_blocks=len(bad), returncode=done.returncode)
        return bad

    lost = run("fio verify acknowledged", acknowledged * bs, True)
    around = run("fio verify in flight", (acknowledged + iodepth) * bs, False)     # every write issued
    lost_sorted = tuple(sorted(lost))
    return Classification(acknowledged, lost_sorted, tuple(sorted(around - lost)),
                          tuple(o for o in lost_sorted if o < min(flushed, acknowledged) * bs))
