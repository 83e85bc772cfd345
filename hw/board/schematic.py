"""A KiCad 9 schematic of the SKiDL circuit, written directly: every symbol on a grid, a net label on
every pin, a no-connect flag on every unused pin.

Why not SKiDL's generate_schematic: on this board it takes ~10 minutes a variant and places parts
differently on every run. This writer takes under a second and gives the same file for the same
circuit (UUIDs derived from references), so a reviewer's diff shows only real changes. KiCad reads
connectivity from the labels; `make hw` exports KiCad's netlist of this file and checks it equals
SKiDL's (hw/board/netlist.py), so the drawing cannot disagree with the circuit.
"""
from __future__ import annotations

import re
import uuid
from functools import lru_cache
from pathlib import Path

KICAD_SYMBOLS = Path("/usr/share/kicad/symbols")
NS = uuid.UUID("6f1d7c1e-9a53-4d0b-8c55-0d3b0f1a2b3c")


def _uuid(*parts) -> str:
    return str(uuid.uuid5(NS, "/".join(map(str, parts))))


def _blocks(text: str, start: int = 0):
    """Yield (begin, end) of each balanced top-level '(' ... ')' inside text[start:]."""
    depth, begin, i, n = 0, None, start, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "(":
            if depth == 0:
                begin = i
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                yield begin, i + 1
            if depth < 0:
                return
        i += 1


@lru_cache(maxsize=None)
def _library(path: Path) -> dict[str, str]:
    text = path.read_text()
    body = text[text.index("(", 1):]
    out = {}
    for b, e in _blocks(body):
        blk = body[b:e]
        m = re.match(r'\(symbol "([^"]+)"', blk)
        if m:
            out[m.group(1)] = blk
    return out


def symbol_block(lib: str, name: str, libdirs) -> str:
    """The symbol's definition, `extends` flattened, named "lib:name" as a schematic embeds it."""
    for d in libdirs:
        p = Path(d) / f"{lib}.kicad_sym"
        if p.exists():
            syms = _library(p)
            break
    else:
        raise FileNotFoundError(f"symbol library {lib} not found in {libdirs}")
    blk = syms[name]
    m = re.search(r'\(extends "([^"]+)"\)', blk)
    if m:
        parent = symbol_block(lib, m.group(1), libdirs).split(" ", 1)[1]          # drop '(symbol "lib:parent"'
        parent = parent.split("\n", 1)[1]
        props = "".join(blk[b:e] + "\n" for b, e in _blocks(blk, 1) if blk[b:e].startswith("(property"))
        keep = [parent[b:e] for b, e in _blocks(parent) if not parent[b:e].startswith("(property")]
        keep = [re.sub(rf'\(symbol "{re.escape(m.group(1))}_(\d+_\d+)"', rf'(symbol "{name}_\1"', k) for k in keep]
        return f'(symbol "{lib}:{name}"\n' + props + "\n".join(keep) + ")"
    return blk.replace(f'(symbol "{name}"', f'(symbol "{lib}:{name}"', 1)


def pins_of(block: str) -> dict[int, list[tuple[str, float, float, int]]]:
    """unit -> [(number, x, y, angle)] in symbol coordinates (y up); unit 0 pins belong to every unit."""
    out: dict[int, list] = {}
    for m in re.finditer(r'\(symbol "[^"]*_(\d+)_(\d+)"', block):
        unit = int(m.group(1))
        sub_end = next(e for b, e in _blocks(block, m.start()))
        sub = block[m.start():sub_end]
        for pm in re.finditer(r'\(pin \w+ \w+\s*\(at ([-\d.]+) ([-\d.]+) (\d+)\).*?\(number "([^"]*)"', sub, re.S):
            out.setdefault(unit, []).append((pm.group(4), float(pm.group(1)), float(pm.group(2)), int(pm.group(3))))
    return out


def _esc(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace('"', '\\"')


def _prop(key, val, x, y, hide=False):
    h = " (hide yes)" if hide else ""
    return (f'    (property "{key}" "{_esc(val)}" (at {x:.2f} {y:.2f} 0)\n'
            f'      (effects (font (size 1.27 1.27)){h}))\n')


def write(circuit, path: Path, project: str, title: str, libdirs) -> None:
    root = _uuid(project, "root")
    parts = sorted(circuit.parts, key=lambda p: (p.ref.startswith("#"), re.sub(r"\d+", "", p.ref), int(re.sub(r"\D", "", p.ref) or 0)))
    lib_syms, placed = {}, []
    for p in parts:
        lib = p.lib.filename if hasattr(p.lib, "filename") else str(p.lib)
        lib = Path(lib).stem
        key = f"{lib}:{p.name}"
        if key not in lib_syms:
            lib_syms[key] = symbol_block(lib, p.name, libdirs)
        placed.append((p, key, lib_syms[key]))
    # shelf placement on a grid (mm, 2.54 grid so pins land on grid points)
    grid = 2.54
    x, y, shelf_h, page_w = 20 * grid, 20 * grid, 0.0, 1100.0
    out_syms, labels = [], []
    for p, key, blk in placed:
        units = pins_of(blk)
        common = units.get(0, [])
        for unit in sorted(u for u in units if u != 0) or [1]:
            pins = common + units.get(unit, [])
            if not pins:
                continue
            xs = [q[1] for q in pins] + [0]
            ys = [q[2] for q in pins] + [0]
            w = (max(xs) - min(xs)) + 30
            h = (max(ys) - min(ys)) + 15
            if x + w > page_w:
                x, y, shelf_h = 20 * grid, y + shelf_h, 0.0
            ox = round((x - min(xs) + 12) / grid) * grid
            oy = round((y + max(ys) + 6) / grid) * grid
            x += w
            shelf_h = max(shelf_h, h)
            u = _uuid(project, p.ref, unit)
            props = (_prop("Reference", p.ref, ox, oy - max(ys) - 2.5, p.ref.startswith("#"))
                     + _prop("Value", p.value, ox, oy - min(ys) + 2.5)
                     + _prop("Footprint", p.footprint or "", ox, oy, True)
                     + _prop("Datasheet", "", ox, oy, True))
            for k in ("Manufacturer", "MPN", "Source", "Description"):
                if p.fields.get(k):
                    props += _prop(k, p.fields[k], ox, oy, True)
            pin_uuids = "".join(f'    (pin "{n}" (uuid {_uuid(project, p.ref, "pin", n)}))\n' for n, *_ in pins)
            out_syms.append(
                f'  (symbol (lib_id "{key}") (at {ox:.2f} {oy:.2f} 0) (unit {unit})\n'
                f'    (exclude_from_sim no) (in_bom {"no" if p.ref.startswith("#") else "yes"}) (on_board yes) (dnp no)\n'
                f'    (uuid {u})\n{props}{pin_uuids}'
                f'    (instances (project "{project}" (path "/{root}" (reference "{p.ref}") (unit {unit}))))\n  )\n')
            by_num = {str(q.num): q for q in p.pins}
            for n, px, py, ang in pins:
                sx, sy = ox + px, oy - py
                q = by_num.get(n)
                net = q.net if q is not None else None
                name = getattr(net, "name", "") if net is not None else ""
                if net is None or not name or type(net).__name__ == "NCNet" or name.startswith("__NOCONNECT"):
                    labels.append(f'  (no_connect (at {sx:.2f} {sy:.2f}) (uuid {_uuid(project, p.ref, "nc", n)}))\n')
                    continue
                la = (ang + 180) % 360
                just = "right" if la in (180, 270) else "left"
                labels.append(f'  (label "{_esc(name)}" (at {sx:.2f} {sy:.2f} {la})\n'
                              f'    (effects (font (size 1 1)) (justify {just} bottom))\n'
                              f'    (uuid {_uuid(project, p.ref, "label", n)}))\n')
    page_h = y + shelf_h + 40
    head = (f'(kicad_sch (version 20250114) (generator "powerrig_schematic") (generator_version "9.0")\n'
            f'  (uuid {root})\n  (paper "User" {page_w + 40:.0f} {page_h:.0f})\n'
            f'  (title_block (title "{_esc(title)}") (comment 1 "generated from hw/board by make hw: do not edit"))\n'
            f'  (lib_symbols\n' + "\n".join(lib_syms.values()) + "\n  )\n")
    tail = f'  (sheet_instances (path "/" (page "1")))\n  (embedded_fonts no)\n)\n'
    path.write_text(head + "".join(out_syms) + "".join(labels) + tail)
