"""After a drive went away mid-write: which blocks fio's verify pass finds wrong, and whether any
of them was a write the drive had acknowledged (lost data) or only one in flight at the removal
(never acknowledged, so nothing was promised).

The write phase keeps a per-I/O log with offsets (``acknowledged_options``: each completion the
drive acknowledged); the verify pass (``--verify_only --verify_state_load=1``, fio's verify-state
flow) prints each bad block. ``classify`` sets the two against each other.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_BAD = re.compile(r"^verify: .*? offset (\d+), length (\d+)", re.M)


def acknowledged_options() -> dict:
    """fio options for a write job whose every acknowledged write is logged with its offset (the
    runner adds write_bw_log; log_avg_msec=0 logs each completion, log_offset=1 adds the offset)."""
    return {"verify": "crc32c", "do_verify": 0, "verify_state_save": 1, "log_offset": 1}


def acknowledged(log_files: list[Path]) -> set[int]:
    """Offsets of the completed writes in fio per-I/O logs (time, value, ddir, bs, offset[, prio])."""
    out = set()
    for p in log_files:
        for line in Path(p).read_text().splitlines():
            cols = [c.strip() for c in line.split(",")]
            if len(cols) >= 5 and cols[2] == "1":
                out.add(int(cols[4]))
    return out


def bad_blocks(text: str) -> set[int]:
    """Offsets of the blocks a verify pass found wrong, from fio's output."""
    return {int(m.group(1)) for m in _BAD.finditer(text)}


@dataclass(frozen=True)
class Classification:
    acknowledged: int        # writes the drive acknowledged
    bad: int                 # blocks the verify pass found wrong
    lost: tuple              # offsets acknowledged and wrong: data the drive lost
    in_flight: tuple         # offsets wrong but never acknowledged: writes cut off by the removal


def classify(ack: set[int], bad: set[int]) -> Classification:
    return Classification(len(ack), len(bad), tuple(sorted(bad & ack)), tuple(sorted(bad - ack)))
