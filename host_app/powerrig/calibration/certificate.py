"""The calibration certificate: a JSON record and a one-page HTML a vendor can sign and file."""
from __future__ import annotations

import html
import json
from pathlib import Path

from powerrig import __version__


def certificate(result, dev_description: dict, reference, reference_due: str | None) -> dict:
    return {
        "kind": "powerrig calibration certificate",
        "date": result.date,
        "powerrig": __version__,
        "interposer": {"serial": dev_description.get("serial"), "firmware": dev_description.get("firmware"),
                       "board": dev_description.get("board")},
        "reference": {"identity": str(reference.identity), "resource": reference.resource,
                      "calibration_due": reference_due},
        "rails": result.rails,
        "fits": {k: f.to_dict() for k, f in result.fits.items()},
        "error_before_pct": result.before,
        "error_after_pct": result.after,
        "written": result.written,
        "old_calibration": result.old_calibration,
        "new_calibration": result.new_calibration,
        "fit_points": [p.to_dict() for p in result.fit_points],
        "verification_points_before": [p.to_dict() for p in result.verify_before],
        "verification_points_after": [p.to_dict() for p in result.verify_after],
    }


def write_certificate(cert: dict, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / "calibration-certificate.json"
    js.write_text(json.dumps(cert, indent=2))
    page = out_dir / "calibration-certificate.html"
    page.write_text(_html(cert))
    return js, page


def _html(c: dict) -> str:
    e = html.escape
    rows = []
    for ch, f in c["fits"].items():
        b = c["error_before_pct"].get(ch, {})
        a = c["error_after_pct"].get(ch, {})
        unit = "V" if ch.endswith(".v") else "A"
        rows.append(f"<tr><td>{e(ch)}</td><td>{f['gain']:.6f}</td><td>{f['offset']:+.3e} {unit}</td>"
                    f"<td>{f['residual_max']:.2e} {unit}</td><td>{f['residual_fs'] * 100:.4f}%</td>"
                    f"<td>{b.get('max_abs_pct', float('nan')):.4f}%</td><td>{a.get('max_abs_pct', float('nan')):.4f}%</td></tr>")
    ip, ref = c["interposer"], c["reference"]
    status = "written to the interposer and verified" if c["written"] else "NOT written (dry run)"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>powerrig calibration certificate</title>
<style>body{{font:14px sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #999;padding:3px 8px;text-align:right}}th{{background:#eee}}td:first-child{{text-align:left}}</style>
</head><body><h1>Calibration certificate</h1>
<p><b>Interposer</b> serial {e(str(ip['serial']))}, firmware {e(str(ip['firmware']))}, board {e(str(ip['board']))}<br>
<b>Reference</b> {e(ref['identity'])} at {e(ref['resource'])}; its calibration due {e(str(ref['calibration_due'] or 'not stated'))}<br>
<b>Date</b> {e(c['date'])} &middot; powerrig {e(c['powerrig'])} &middot; calibration {status}</p>
<h2>Fit per channel (reference = gain &times; reading + offset)</h2>
<table><tr><th>channel</th><th>gain</th><th>offset</th><th>max residual</th><th>residual / FS</th>
<th>error before (verification points)</th><th>error after</th></tr>{''.join(rows)}</table>
<p>Errors are the largest |interposer &minus; reference| / reference over {len(c['verification_points_before'])}
verification points that were not used by the fit; fit points: {len(c['fit_points'])}.</p>
<p>Signed: ______________________ &nbsp; Date: ____________</p></body></html>"""
