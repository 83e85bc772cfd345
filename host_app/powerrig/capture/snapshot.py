"""Save the buffer: a copy of a capture that is still being recorded. The recording is the buffer: it
is read as it is written (up to its last flush, about a second ago), so nothing stops it."""
from __future__ import annotations

import shutil
from pathlib import Path

from powerrig.core.errors import PowerrigError
from powerrig.capture.reader import CaptureReader


class SnapshotError(PowerrigError):
    """The live buffer cannot be saved as a capture (nothing recorded yet, or the file cannot be written)."""


def save_buffer(capture: str | Path, out: str | Path) -> str:
    """A copy of the capture so far (the recording goes on). The copy ends at the last flush; it opens
    like any capture (its note says it was not closed: it was still recording). One line back."""
    out = Path(out)
    if out.suffix.lower() != ".jls":
        raise SnapshotError(f"{out.name}: save the buffer as a .jls capture")
    if Path(capture).resolve() == out.resolve():
        raise SnapshotError(f"{out} is the capture being recorded; choose another name")
    shutil.copyfile(capture, out)
    with CaptureReader(out) as cap:
        return f"saved the buffer: {cap.duration_s:.1f} s in {out}"
