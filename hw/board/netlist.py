"""Read a KiCad s-expression netlist (SKiDL's or kicad-cli's) into plain data: parts with their
fields and nets with their (ref, pin) nodes. Used by make_hw.py and by the consistency tests, which
run on the main .venv with no KiCad or SKiDL installed in it."""
from __future__ import annotations

import re


def parse(text: str) -> dict:
    parts = {}
    for m in re.finditer(r'\(comp\s+\(ref\s+"?([^")\s]+)"?\)(.*?)(?=\(comp\s+\(ref|\(libparts|\(nets)', text, re.S):
        body = m.group(2)
        val = re.search(r'\(value\s+"?([^")]*)"?\)', body)
        fp = re.search(r'\(footprint\s+"?([^")]*)"?\)', body)
        fields = dict(re.findall(r'\(field\s+\(name\s+"?([^")]*)"?\)\s*"?([^")]*)"?\)', body))
        parts[m.group(1)] = {"value": val.group(1) if val else "", "footprint": fp.group(1) if fp else "", "fields": fields}
    nets, functions = {}, {}
    for chunk in re.split(r"\(net\s+\(code", text)[1:]:
        name = re.search(r'\(name\s+"([^"]*)"\)', chunk).group(1).lstrip("/")
        nodes = []
        for node in re.findall(r"\(node\s+(.*?)\)\s*(?=\(node|\)\s*$|\)\s*\(net|\)\s*\)|$)", chunk, re.S):
            ref = re.search(r'\(ref\s+"?([^")\s]+)"?\)', node)
            pin = re.search(r'\(pin\s+"?([^")\s]+)"?\)', node)
            if not ref or not pin or ref.group(1).startswith("#"):
                continue
            nodes.append((ref.group(1), pin.group(1)))
            fn = re.search(r'\(pinfunction\s+"([^"]*)"\)', node)
            if fn:
                functions[(ref.group(1), pin.group(1))] = fn.group(1)
        nets[name] = sorted(nodes)
    return {"parts": {r: p for r, p in parts.items() if not r.startswith("#")}, "nets": nets, "functions": functions}


def connectivity(nl: dict) -> set[frozenset]:
    """Nets as sets of (ref, pin), names ignored: what two netlists must share to be the same circuit."""
    return {frozenset(n) for n in nl["nets"].values() if len(n) > 1}


def pin_net(nl: dict) -> dict[tuple[str, str], str]:
    return {node: name for name, nodes in nl["nets"].items() for node in nodes}
