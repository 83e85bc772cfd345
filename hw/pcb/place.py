#!/usr/bin/env python3
"""Place the footprints of a netlist-derived board by the layout guide (hw/pcb/LAYOUT.md), add the
outline, four copper layers, net classes, design rules and ground zones, save, and run DRC.

    python hw/pcb/place.py --variant edsff UNPLACED.kicad_pcb PLACED.kicad_pcb

Uses KiCad 9's pcbnew module (Debian's /usr/bin/python3 or .venv-hw, which sees it). Routing is
left to a person (hw/README.md says what): this fixes where every part sits so that the Kelvin
connections, the 6 A path, the guard around the sense nets and the distance between the ADCs and
the Pico 2's switching regulator come out as the guide says.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pcbnew
from pcbnew import FromMM, VECTOR2I

RAILS = ("12V", "3V3", "5V")
SHARED = {"GND", "+3V3", "+3V3A", "VBUS", "VREF_2V5", "ADC_SCLK", "ADC_CS", "ADC_SDI", "RAIL_FAULT", ""}
# board size per variant (mm) and the x of the host edge / drive connector
SIZE = {"edsff": (130.0, 90.0), "u2": (140.0, 95.0)}
NETCLASSES = {  # name: (track mm, clearance mm, via diameter, via drill, patterns)
    # clearances fit the fine-pitch pads these nets end on (eFuse QFN 0.5 mm, TSSOP 0.65 mm); 12 V needs 0.1 mm
    "Power": (3.0, 0.2, 1.0, 0.5, ["+12V_*"]),
    "PowerAux": (1.0, 0.2, 0.8, 0.4, ["+3V3_HOST", "+3V3_SW", "+3V3_DRIVE", "+5V_*"]),
    "Kelvin": (0.2, 0.2, 0.6, 0.3, ["ISNS_*"]),
    "Analog": (0.25, 0.2, 0.6, 0.3, ["CSA_*", "AIN_*", "VDIV_*", "VBUF_*", "VREF_2V5", "+3V3A"]),
    "PCIe": (0.2, 0.2, 0.6, 0.3, ["PET*", "PER*", "REFCLK*"]),
}


def nets_of(fp) -> set[str]:
    return {p.GetNetname().lstrip("/") for p in fp.Pads()}


def rail_of(names: set[str]) -> str | None:
    for r in RAILS:
        pat = re.compile(rf"(^\+{r}_(HOST|FUSED|SW|DRIVE)$|_{r}(_[PN])?$|^EN_{r}$|^RAIL_{r}_EN$)")
        if any(pat.search(n) for n in names):
            return r
    return None


def anchors(W: float, H: float) -> dict[str, tuple[float, float, float]]:
    """Where the ICs and big parts go (x, y, rotation), per the layout guide."""
    a = {}
    lane = {"12V": 14.0, "3V3": 30.0, "5V": 44.0}          # one horizontal lane per rail, 12 V widest
    for r, y in lane.items():
        a[f"switch_{r}"] = (28.0, y, 0)
        a[f"shunt_{r}"] = (58.0, y, 0)
        a[f"amp_{r}"] = (58.0, y + 7.0, 0)                 # right under its shunt: short Kelvin pair
        a[f"buf_{r}"] = (80.0, y + 7.0, 0)
        a[f"adc_{r}"] = (96.0, y + 4.0, 0)
    a["temp"] = (70.0, 22.0, 0)                            # between the 12 V and 3.3 V shunts
    a["ref"] = (110.0, 30.0, 0)                            # centred on the three ADCs
    a["ldo"] = (110.0, 46.0, 0)
    a["pico"] = (40.0, H - 16.0, 90)                       # bottom left: its buck-boost away from the ADCs
    a["gates"] = (90.0, H - 14.0, 0)
    a["marker"] = (W - 24.0, H - 8.0, 0)
    return a


def role(fp) -> str:
    ref, val = fp.GetReference(), fp.GetValue()
    names = nets_of(fp)
    r = rail_of(names)
    if val == "HOST":
        return "host"
    if val == "DRIVE":
        return "drive"
    if val.startswith("Pico"):
        return "pico"
    if val == "TMP117":
        return "temp"
    if val == "ADR4525":
        return "ref"
    if val.startswith("LP5907"):
        return "ldo"
    if val == "MARKER":
        return "marker"
    if ref.startswith("U") and ("74LVC" in val or "PERST0_N_SSD" in names or "PWRDIS_SSD" in names):
        return "gates"
    if val == "AD7380" and r:
        return f"adc_{r}"
    if val.startswith("INA240") and r:
        return f"amp_{r}"
    if val == "OPA333" and r:
        return f"buf_{r}"
    if ref.startswith("R") and "m" in val and r and any(n.startswith("ISNS") for n in names):
        return f"shunt_{r}"
    if ref.startswith("U") and r:
        return f"switch_{r}"
    return "passive"


def _box(fp):
    b = fp.GetBoundingBox(False)
    return (pcbnew.ToMM(b.GetLeft()) - 0.25, pcbnew.ToMM(b.GetTop()) - 0.25,
            pcbnew.ToMM(b.GetRight()) + 0.25, pcbnew.ToMM(b.GetBottom()) + 0.25)


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _inside(b, ox, oy, w, h) -> bool:
    return b[0] > ox + 0.5 and b[1] > oy + 0.5 and b[2] < ox + w - 0.5 and b[3] < oy + h - 0.5


def _spiral(x0: float, y0: float):
    """Candidate spots around (x0, y0), nearest first, on a 0.5 mm grid."""
    pts = {(round(x0 + dx * 0.5, 2), round(y0 + dy * 0.5, 2)) for dx in range(-60, 61) for dy in range(-40, 41)}
    return sorted(pts, key=lambda p: (p[0] - x0) ** 2 + (p[1] - y0) ** 2)


def place(board, variant: str) -> None:
    W, H = SIZE[variant]
    OX, OY = 30.0, 30.0
    A = anchors(W, H)
    fps = sorted(board.GetFootprints(), key=lambda f: f.GetReference())
    roles = {f.GetReference(): role(f) for f in fps}
    pos = {}

    def put(fp, x, y, rot=0.0, back=False):
        if back and not fp.IsFlipped():
            fp.Flip(fp.GetPosition(), pcbnew.FLIP_DIRECTION_LEFT_RIGHT if hasattr(pcbnew, "FLIP_DIRECTION_LEFT_RIGHT") else False)
        fp.SetOrientationDegrees(rot)
        fp.SetPosition(VECTOR2I(FromMM(OX + x), FromMM(OY + y)))
        pos[fp.GetReference()] = (x, y)

    used: dict[str, int] = {}
    for fp in fps:
        r = roles[fp.GetReference()]
        if r == "host":
            put(fp, 4.0, H / 2, 90)               # card edge / plug on the left board edge
        elif r == "drive":
            put(fp, W - 6.0, H / 2, 90)           # receptacle on the right edge
        elif r in A:
            k = used[r] = used.get(r, -1) + 1     # a second part with the same role sits beside the first
            x, y, rot = A[r]
            put(fp, x + 9.0 * k, y, rot)
    # passives: next to the part they serve (the IC sharing a signal net), on the nearest free spot
    boxes = [_box(f) for f in fps if roles[f.GetReference()] != "passive"]
    owners = {f.GetReference(): f for f in fps if roles[f.GetReference()] != "passive"}
    for fp in fps:
        ref = fp.GetReference()
        if roles[ref] != "passive":
            continue
        mine = nets_of(fp) - SHARED
        best = next((o for o, of in owners.items() if mine & nets_of(of) and o in pos
                     and roles[o] not in ("host", "drive")), None)
        if best is None:                                   # decoupling: the nearest IC on the same supply
            best = next((o for o, of in owners.items()
                         if nets_of(fp) & nets_of(of) & {"+3V3A", "+3V3", "VBUS", "VREF_2V5"} and o in pos), None)
        bx, by = pos.get(best, (W / 2, H - 6.0))
        for x, y in _spiral(bx, by):
            if not (2.0 <= x <= W - 2.0 and 2.0 <= y <= H - 2.0):
                continue
            put(fp, x, y)
            b = _box(fp)
            if not any(_overlap(b, o) for o in boxes) and _inside(b, OX, OY, W, H):
                break
        boxes.append(_box(fp))
    # reference designators on the fab layer (the assembly drawing): on a board this dense they
    # would overlap each other and the pads on the silkscreen; outlines and pin-1 marks stay on silk
    for fp in fps:
        fp.Reference().SetLayer(pcbnew.B_Fab if fp.IsFlipped() else pcbnew.F_Fab)
    # outline
    pts = [(OX, OY), (OX + W, OY), (OX + W, OY + H), (OX, OY + H)]
    for (x1, y1), (x2, y2) in zip(pts, pts[1:] + pts[:1]):
        s = pcbnew.PCB_SHAPE(board, pcbnew.SHAPE_T_SEGMENT)
        s.SetStart(VECTOR2I(FromMM(x1), FromMM(y1)))
        s.SetEnd(VECTOR2I(FromMM(x2), FromMM(y2)))
        s.SetLayer(pcbnew.Edge_Cuts)
        s.SetWidth(FromMM(0.1))
        board.Add(s)
    # four layers: signal / GND / power / signal; GND zones on In1 and B.Cu
    board.SetCopperLayerCount(4)
    gnd = board.FindNet("GND")
    for layer in (pcbnew.In1_Cu, pcbnew.B_Cu):
        z = pcbnew.ZONE(board)
        z.SetLayer(layer)
        z.SetNet(gnd)
        ol = z.Outline()
        ol.NewOutline()
        # no outer-layer pour around the EDSFF gold fingers (side A is on B.Cu): the fingers are
        # plain pads up to the board edge, and a pour there would half-connect the GND fingers
        x0 = OX + (8.0 if variant == "edsff" and layer == pcbnew.B_Cu else 0.5)
        for x, y in ((x0, OY + 0.5), (OX + W - 0.5, OY + 0.5), (OX + W - 0.5, OY + H - 0.5), (x0, OY + H - 0.5)):
            ol.Append(FromMM(x), FromMM(y))
        board.Add(z)


def rules(board) -> None:
    ds = board.GetDesignSettings()
    ds.m_MinClearance = FromMM(0.15)
    ds.m_TrackMinWidth = FromMM(0.15)
    ds.m_ViasMinSize = FromMM(0.5)
    ds.m_MinThroughDrill = FromMM(0.2)          # the eFuse footprint's thermal vias
    ns = ds.m_NetSettings
    ns.GetDefaultNetclass().SetClearance(FromMM(0.15))
    for name, (w, c, vd, vdr, pats) in NETCLASSES.items():
        nc = pcbnew.NETCLASS(name)
        nc.SetTrackWidth(FromMM(w))
        nc.SetClearance(FromMM(c))
        nc.SetViaDiameter(FromMM(vd))
        nc.SetViaDrill(FromMM(vdr))
        ns.SetNetclass(name, nc)
        for p in pats:
            ns.SetNetclassPatternAssignment(p, name)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", required=True, choices=sorted(SIZE))
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    a = ap.parse_args(argv)
    board = pcbnew.LoadBoard(str(a.src))
    place(board, a.variant)
    rules(board)
    pcbnew.ZONE_FILLER(board).Fill(board.Zones())
    pcbnew.SaveBoard(str(a.dst), board)
    rpt = a.dst.with_suffix(".drc.rpt")
    pcbnew.WriteDRCReport(board, str(rpt), pcbnew.EDA_UNITS_MM, True)
    n = len(board.GetFootprints())
    print(f"{n} footprints placed, {len(NETCLASSES)} net classes, DRC report {rpt.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
