"""Export a time range of a capture by the output's name: ``.csv`` a table (full rate or decimated),
``.sr`` a sigrok session for PulseView. The desktop app's File > Export runs this; one line back."""
from __future__ import annotations

from pathlib import Path

from powerrig.core.errors import PowerrigError
from powerrig.export.table import export_csv
from powerrig.export.sigrok import export_sigrok

FORMATS = {".csv": "CSV table", ".sr": "sigrok session (PulseView)"}


class ExportError(PowerrigError):
    pass


def export_range(capture: str | Path, out: str | Path, t_a: float | None = None, t_b: float | None = None,
                 decimate: int = 1) -> str:
    """Export [t_a, t_b] s of a capture (all of it when None) by the output's suffix; one line back."""
    out = Path(out)
    a, b = (sorted((t_a, t_b)) if t_a is not None and t_b is not None else (None, None))
    if out.suffix.lower() == ".csv":
        res = export_csv(capture, out, a, b, decimate=decimate)
        return f"exported {res.rows} rows to {res.path}" + (f" (1 row per {decimate} intervals)" if decimate > 1 else
                                                            " (full rate)")
    if out.suffix.lower() == ".sr":
        if decimate != 1:
            raise ExportError("a sigrok session is exported at full rate; choose no decimation, or export CSV")
        res = export_sigrok(capture, out, a, b)
        return f"exported {res.samples} intervals to {res.path} (full rate)"
    raise ExportError(f"{out.name}: export to .csv (a table) or .sr (a sigrok session for PulseView)")
