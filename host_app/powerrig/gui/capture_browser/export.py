"""Export what the window shows: the selection between the markers (or the whole capture) to CSV or to
a sigrok session, with powerrig.export (the code `powerrig export` runs); and "save the buffer" while
streaming. The live capture is the buffer: it is read as it is written (up to its last flush, about a
second ago), so nothing stops the recording."""
from __future__ import annotations

import shutil
from pathlib import Path

from powerrig.core.errors import PowerrigError

FORMATS = {".csv": "CSV table", ".sr": "sigrok session (PulseView)"}


class ExportError(PowerrigError):
    pass


def export_range(capture: str | Path, out: str | Path, t_a: float | None = None, t_b: float | None = None,
                 decimate: int = 1) -> str:
    """Export [t_a, t_b] s of a capture (all of it when None) by the output's suffix; one line back."""
    out = Path(out)
    a, b = (sorted((t_a, t_b)) if t_a is not None and t_b is not None else (None, None))
    if out.suffix.lower() == ".csv":
        from powerrig.export.table import export_csv
        res = export_csv(capture, out, a, b, decimate=decimate)
        return f"exported {res.rows} rows to {res.path}" + (f" (1 row per {decimate} intervals)" if decimate > 1 else
                                                            " (full rate)")
    if out.suffix.lower() == ".sr":
        if decimate != 1:
            raise ExportError("a sigrok session is exported at full rate; choose no decimation, or export CSV")
        from powerrig.export.sigrok import export_sigrok
        res = export_sigrok(capture, out, a, b)
        return f"exported {res.samples} intervals to {res.path} (full rate)"
    raise ExportError(f"{out.name}: export to .csv (a table) or .sr (a sigrok session for PulseView)")


def save_buffer(capture: str | Path, out: str | Path) -> str:
    """A copy of the capture so far (the recording goes on). The copy ends at the last flush; it opens
    like any capture (its note says it was not closed: it was still recording)."""
    from powerrig.capture.reader import CaptureReader
    out = Path(out)
    if out.suffix.lower() != ".jls":
        raise ExportError(f"{out.name}: save the buffer as a .jls capture")
    if Path(capture).resolve() == out.resolve():
        raise ExportError(f"{out} is the capture being recorded; choose another name")
    shutil.copyfile(capture, out)
    with CaptureReader(out) as cap:
        return f"saved the buffer: {cap.duration_s:.1f} s in {out}"
