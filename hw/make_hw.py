#!/usr/bin/env python3
"""`make hw`: the interposer from code to KiCad files, checked, cached by the hash of its sources.

For each variant (edsff, u2): hw/board/build.py writes the netlist, schematic and BOM rows; KiCad's
ERC runs on the schematic (kicad-cli), waivers from hw/board/erc_waivers.toml apply; KiCad's own
netlist of the schematic must have exactly SKiDL's connectivity; kinet2pcb + hw/pcb/place.py give
the placed PCB and its DRC report. Then hw/bom.csv (both variants) and the ngspice front-end
simulation (hw/sim/afe.py: docs/img/afe_*.png, hw/sim/results.json). The last line printed is
`ERC: N errors, M warnings` over both variants.

Outputs go to hw/out/ (not in git) and are stored in ~/.cache/powerrig/hw/<hash of the inputs>, so a
second run, or CI with a warm cache, copies them back in about a second.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HW = Path(__file__).resolve().parent
REPO = HW.parent
BOARD = HW / "board"
VARIANTS = ("edsff", "u2")
PY = sys.executable


def inputs() -> list[Path]:
    files = sorted(BOARD.glob("*.py")) + [BOARD / "erc_waivers.toml", BOARD / "pinout_sources.toml",
                                          HW / "rails.toml", HW / "make_hw.py"]
    files += sorted((HW / "pcb").glob("*.py")) + sorted((HW / "sim").glob("*.py")) + sorted((HW / "sim").glob("*.cir"))
    return files


def input_hash() -> str:
    h = hashlib.sha256()
    for f in inputs():
        h.update(f.relative_to(HW).as_posix().encode() + b"\0" + f.read_bytes())
    h.update(subprocess.run(["kicad-cli", "version"], capture_output=True, text=True).stdout.encode())
    return h.hexdigest()[:16]


def run(cmd, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"make hw: {' '.join(map(str, cmd[:3]))} ... failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r


def project_files(out: Path, stem: str) -> None:
    """Project-local library tables so KiCad (and a person opening the files) finds the generated
    symbols and footprints next to the design."""
    shutil.copytree(BOARD / "lib", out / "lib", dirs_exist_ok=True)
    (out / "sym-lib-table").write_text('(sym_lib_table (version 7)\n  (lib (name "powerrig")(type "KiCad")'
                                       '(uri "${KIPRJMOD}/lib/powerrig.kicad_sym")(options "")(descr "generated"))\n)\n')
    (out / "fp-lib-table").write_text('(fp_lib_table (version 7)\n  (lib (name "powerrig")(type "KiCad")'
                                      '(uri "${KIPRJMOD}/lib/powerrig.pretty")(options "")(descr "generated"))\n)\n')
    pro = out / f"{stem}.kicad_pro"
    if not pro.exists():
        pro.write_text(json.dumps({"meta": {"filename": pro.name, "version": 3}}, indent=2))


def erc(out: Path, stem: str, waivers: list[dict]) -> tuple[list[str], list[str]]:
    """KiCad's ERC: (errors, warnings) as lines; waived errors become warnings with their reason."""
    rpt = out / "erc.json"
    run(["kicad-cli", "sch", "erc", "--severity-all", "--format", "json", "-o", rpt, out / f"{stem}.kicad_sch"])
    errors, warnings = [], []
    for sheet in json.loads(rpt.read_text())["sheets"]:
        for v in sheet["violations"]:
            text = v["description"] + " | " + "; ".join(i["description"] for i in v["items"])
            w = next((w for w in waivers if w["type"] == v["type"] and w["match"] in text), None)
            if w:
                warnings.append(f"{stem}: waived {v['type']}: {text} -- {w['reason']}")
            elif v["severity"] == "error":
                errors.append(f"{stem}: {v['type']}: {text}")
            else:
                warnings.append(f"{stem}: UNEXPLAINED {v['type']}: {text}")
    return errors, warnings


def check_netlists(skidl_net: Path, kicad_net: Path) -> None:
    sys.path.insert(0, str(BOARD))
    from netlist import connectivity, parse
    a, b = connectivity(parse(skidl_net.read_text())), connectivity(parse(kicad_net.read_text()))
    if a != b:
        diff = sorted(map(sorted, a ^ b))[:4]
        sys.exit(f"make hw: KiCad's netlist of {kicad_net.stem} differs from SKiDL's: {diff}")


def bom(out_root: Path) -> list[dict]:
    """One row per (variant set, manufacturer, MPN, value, footprint); refs listed."""
    rows: dict[tuple, dict] = {}
    for v in VARIANTS:
        for r in json.loads((out_root / v / f"bom-{v}.json").read_text()):
            if not r["manufacturer"] or not r["mpn"] or not r["footprint"]:
                sys.exit(f"make hw: {v} {r['ref']} lacks a footprint, manufacturer or MPN: add it to hw/board/catalog.py")
            key = (r["manufacturer"], r["mpn"], r["value"], r["footprint"], r["description"], r.get("source", ""),
                   r.get("check", ""))
            row = rows.setdefault(key, {v2: [] for v2 in VARIANTS})
            row[v].append(r["ref"])
    out = []
    for (mfr, mpn, value, fp, desc, src, check), refs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][2])):
        out.append({"manufacturer": mfr, "mpn": mpn, "value": value, "footprint": fp, "description": desc,
                    "qty_edsff": len(refs["edsff"]), "qty_u2": len(refs["u2"]),
                    "refs_edsff": " ".join(refs["edsff"]), "refs_u2": " ".join(refs["u2"]), "source": src,
                    "check": check})
    return out


def generate(out_root: Path) -> dict:
    waivers = tomllib.loads((BOARD / "erc_waivers.toml").read_text()).get("waiver", [])
    summary = {"errors": [], "warnings": [], "timings": {}}
    for v in VARIANTS:
        t0 = time.time()
        out = out_root / v
        stem = f"powerrig-{v}"
        out.mkdir(parents=True, exist_ok=True)
        run([PY, BOARD / "build.py", "--variant", v, "--out", out], cwd=out)   # SKiDL logs into its cwd
        project_files(out, stem)
        e, w = erc(out, stem, waivers)
        summary["errors"] += e
        summary["warnings"] += w
        run(["kicad-cli", "sch", "export", "netlist", "-o", out / f"{stem}-kicad.net", out / f"{stem}.kicad_sch"])
        check_netlists(out / f"{stem}.net", out / f"{stem}-kicad.net")
        run(["kicad-cli", "sch", "export", "pdf", "-o", out / f"{stem}.pdf", out / f"{stem}.kicad_sch"])
        env = dict(os.environ, KICAD9_FOOTPRINT_DIR="/usr/share/kicad/footprints")
        run([Path(PY).parent / "kinet2pcb", "-i", out / f"{stem}.net", "-o", out / f"{stem}-unplaced.kicad_pcb",
             "-w", "-nb", "-l", "/usr/share/kicad/footprints", out / "lib"], env=env)
        r = run([PY, HW / "pcb" / "place.py", "--variant", v, out / f"{stem}-unplaced.kicad_pcb", out / f"{stem}.kicad_pcb"],
                env=dict(env, KIPRJMOD=str(out)))   # library paths: DRC compares footprints with the libraries
        summary[f"pcb_{v}"] = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        summary["timings"][v] = round(time.time() - t0, 1)
    rows = bom(out_root)
    with open(out_root / "bom.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    t0 = time.time()
    run([PY, HW / "sim" / "afe.py", "--out", out_root / "sim"])
    summary["timings"]["sim"] = round(time.time() - t0, 1)
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HW / "out")
    ap.add_argument("--no-cache", action="store_true")
    a = ap.parse_args(argv)
    if not shutil.which("kicad-cli") or not shutil.which("ngspice"):
        sys.exit("make hw: kicad-cli or ngspice missing; run scripts/setup_hw.sh (or make setup) first")
    key = input_hash()
    cache = Path(os.environ.get("POWERRIG_CACHE", Path.home() / ".cache" / "powerrig")) / "hw" / key
    t0 = time.time()
    if (cache / "summary.json").exists() and not a.no_cache:
        shutil.rmtree(a.out, ignore_errors=True)
        shutil.copytree(cache, a.out)
        how = f"from the cache ({cache})"
    else:
        tmp = cache.with_name(key + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        summary = generate(tmp)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=1))
        shutil.rmtree(cache, ignore_errors=True)
        tmp.rename(cache)
        shutil.rmtree(a.out, ignore_errors=True)
        shutil.copytree(cache, a.out)
        how = "generated"
    summary = json.loads((a.out / "summary.json").read_text())
    # the committed, generated copies a reader sees without running anything
    shutil.copy(a.out / "bom.csv", HW / "bom.csv")
    shutil.copy(a.out / "sim" / "results.json", HW / "sim" / "results.json")
    for png in (a.out / "sim").glob("*.png"):
        shutil.copy(png, REPO / "docs" / "img" / png.name)
    for v in VARIANTS:
        print(f"{v}: {a.out / v / f'powerrig-{v}.net'}, .kicad_sch, .kicad_pcb ({summary.get(f'pcb_{v}', '')})")
    print(f"bom: {HW / 'bom.csv'}; simulation: {HW / 'sim' / 'results.json'}; {how} in {time.time() - t0:.1f} s "
          f"(generation took {_timings(summary['timings'])})")
    problems = consistency(a.out)
    for line in problems:
        print("  CHECK: " + line)
    print(f"consistency: {len(problems)} problems (MCU pins = firmware/board/pins.py, rails = hw/rails.toml, "
          "supply pins only through switch and shunt, AD7380 set-up = SDI/REFIO/SDOB wiring, "
          "pin tables = hw/board/pinout_sources.toml)")
    sys.path.insert(0, str(BOARD))
    import checks
    cover = checks.pin_coverage(checks.design_pin_tables(), tomllib.loads((BOARD / "pinout_sources.toml").read_text()))
    print("pin tables by what public sources support (hw/board/pinout_sources.toml; hw/README.md lists them pin "
          "by pin): " + "; ".join(f"{t}: " + ", ".join(f"{c[s]} {s}" for s in checks.PIN_STATUSES if c[s])
                                  + f" of {c['pins']}" for t, c in sorted(cover.items())))
    for line in summary["errors"] + summary["warnings"]:
        print("  " + line)
    print(f"ERC: {len(summary['errors'])} errors, {len(summary['warnings'])} warnings")
    return 1 if problems or summary["errors"] or any("UNEXPLAINED" in w for w in summary["warnings"]) else 0


def _timings(t) -> str:
    """{'edsff': 48.3, 'sim': 11.5} as "edsff 48.3 s, sim 11.5 s" (a summary from an older cache may hold text)."""
    return ", ".join(f"{k} {v:.1f} s" for k, v in t.items()) if isinstance(t, dict) else str(t)


def consistency(out: Path) -> list[str]:
    """The checks of hw/board/checks.py on each variant (not cached: they read the firmware too)."""
    sys.path.insert(0, str(BOARD))
    import checks
    pins = (REPO / "firmware" / "board" / "pins.py").read_text()
    seq = checks.firmware_sequence(REPO / "firmware" / "board" / "ad7380.py")
    doc = tomllib.loads((HW / "rails.toml").read_text())
    found = []
    for v in VARIANTS:
        res = checks.run_all((out / v / f"powerrig-{v}-kicad.net").read_text(), v, pins, doc, seq)
        found += [f"{v} {k}: {p}" for k, ps in res.items() for p in ps]
    sources = tomllib.loads((BOARD / "pinout_sources.toml").read_text())
    found += [f"pin tables: {p}" for p in checks.pin_tables(checks.design_pin_tables(), sources)]
    return found


if __name__ == "__main__":
    sys.exit(main())
