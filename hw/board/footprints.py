"""Footprints KiCad's library lacks, written into hw/board/lib/powerrig.pretty: the EDSFF 1C card edge
(gold fingers, 0.6 mm pitch, side B on F.Cu, side A on B.Cu), an EDSFF 1C receptacle and the SFF-8639
plug and receptacle land patterns. Pads are at the connector pitch in the spec's order; the layout
review replaces the receptacle/plug land patterns with the vendor drawings (hw/README.md, "Left to a person").
"""
from __future__ import annotations

from pathlib import Path

from pinouts import PINOUTS


def _pad(num, x, y, w, h, layer_set, kind="smd", shape="rect"):
    return (f'  (pad "{num}" {kind} {shape} (at {x:.3f} {y:.3f}) (size {w:.3f} {h:.3f}) (layers {layer_set}))\n')


def _fp(name, pads, descr, w, h):
    body = (f'(footprint "{name}" (version 20241229) (generator "powerrig_footprints") (layer "F.Cu")\n'
            f'  (descr "{descr}")\n  (attr smd)\n'
            f'  (property "Reference" "REF**" (at 0 {-h / 2 - 1.5:.2f} 0) (layer "F.SilkS") (effects (font (size 1 1) (thickness 0.15))))\n'
            f'  (property "Value" "{name}" (at 0 {h / 2 + 1.5:.2f} 0) (layer "F.Fab") (effects (font (size 1 1) (thickness 0.15))))\n'
            f'  (fp_rect (start {-w / 2:.2f} {-h / 2:.2f}) (end {w / 2:.2f} {h / 2:.2f}) (stroke (width 0.05) (type default)) (fill no) (layer "F.CrtYd"))\n')
    return body + "".join(pads) + ")\n"


def edsff_edge():
    pins = PINOUTS["edsff"]
    pads = []
    for num, _name, _role in pins:
        side, k = num[0], int(num[1:])
        x = (k - 14.5) * 0.6 + (0.9 if k > 6 else 0)            # key between positions 6 and 7
        layers = '"F.Cu" "F.Mask"' if side == "B" else '"B.Cu" "B.Mask"'
        pads.append(_pad(num, x, 0, 0.4, 2.6 if k % 3 else 3.0, layers))  # longer pads mate first
    return _fp("EDSFF_1C_CardEdge", pads, "SFF-TA-1002 1C card edge, 0.6 mm pitch, key after position 6", 20, 4)


def edsff_receptacle():
    pads = []
    for num, _name, _role in PINOUTS["edsff"]:
        side, k = num[0], int(num[1:])
        x = (k - 14.5) * 0.6 + (0.9 if k > 6 else 0)
        pads.append(_pad(num, x, -1.6 if side == "B" else 1.6, 0.35, 1.4, '"F.Cu" "F.Paste" "F.Mask"'))
    return _fp("EDSFF_1C_Receptacle", pads, "SFF-TA-1002 1C receptacle land pattern (replace with the vendor drawing)", 22, 6)


def sff8639(name, descr):
    pads = []
    for num, _name, _role in PINOUTS["u2"]:
        seg, k = num[0], int(num[1:])
        if seg == "S":
            x, y = (k - 14.5) * 0.8, -2.0
        elif seg == "E":
            x, y = (k - 13) * 0.8, 0.0
        else:
            x, y = (k - 8) * 1.27 - 16, 2.4
        pads.append(_pad(num, x, y, 0.5 if seg != "P" else 0.8, 1.6, '"F.Cu" "F.Paste" "F.Mask"'))
    return _fp(name, pads, descr, 40, 7)


def write(libdir: Path) -> Path:
    pretty = libdir / "powerrig.pretty"
    pretty.mkdir(parents=True, exist_ok=True)
    for name, text in (("EDSFF_1C_CardEdge", edsff_edge()), ("EDSFF_1C_Receptacle", edsff_receptacle()),
                       ("SFF8639_Plug", sff8639("SFF8639_Plug", "SFF-8639 plug land pattern (replace with the vendor drawing)")),
                       ("SFF8639_Receptacle", sff8639("SFF8639_Receptacle", "SFF-8639 receptacle land pattern (replace with the vendor drawing)"))):
        (pretty / f"{name}.kicad_mod").write_text(text)
    return pretty
