"""The design tied to the code: four checks of a KiCad netlist (the one kicad-cli exports from the
generated schematic) against the firmware and hw/rails.toml. Each returns a list of problems (empty
when consistent), so `make hw` and tests/test_hw_board.py share them and a test can feed a changed
copy of any input and see the change caught.

  mcu_pins      every Pico 2 GPIO net equals firmware/board/pins.py
  rails         shunt value, amplifier gain, divider ratio and ADC channel pair per rail equal rails.toml
  power_paths   every supply pin of the drive connector reaches the host only through its switch and shunt
  adc_setup     the firmware's AD7380 set-up (firmware/board/ad7380.py) matches how SDI, REFIO and SDOB are wired
and one check of the design's own pin tables:
  pin_tables    the connector and AD7380 pin tables equal every pin transcribed from a source into
                hw/board/pinout_sources.toml
"""
from __future__ import annotations

import re
from collections import defaultdict

from pinouts import PINOUTS, RAIL_ROLES
from symbols import AD7380_PIN, AD7380_PINS

ON_MODULE = {"STATUS_LED"}          # the Pico 2's own LED (GPIO25): not on the module's pins
INA240_GAIN = {"INA240A1": 20, "INA240A2": 50, "INA240A3": 100, "INA240A4": 200}
SI = {"m": 1e-3, "k": 1e3, "M": 1e6, "u": 1e-6, "n": 1e-9, "": 1.0}


def si(value: str) -> float:
    m = re.match(r"^\s*([\d.]+)\s*([mkMun]?)", value)
    if not m:
        raise ValueError(f"cannot read a value from {value!r}")
    return float(m.group(1)) * SI[m.group(2)]


class Netlist:
    """Lookups over netlist.parse() output."""

    def __init__(self, nl: dict):
        self.nl = nl
        self.net_of = {node: name for name, nodes in nl["nets"].items() for node in nodes}
        self.fn = nl["functions"]
        self.pins_of = defaultdict(list)
        for (ref, pin) in self.net_of:
            self.pins_of[ref].append(pin)

    def value(self, ref):
        return self.nl["parts"][ref]["value"]

    def refs(self, value_prefix):
        return sorted((r for r, p in self.nl["parts"].items() if p["value"].startswith(value_prefix)),
                      key=lambda r: (len(r), r))

    def nodes(self, net):
        return self.nl["nets"].get(net, [])

    def pin_by_function(self, ref, function):
        for pin in self.pins_of[ref]:
            if self.fn.get((ref, pin)) == function:
                return pin
        return None

    def net(self, ref, pin):
        return self.net_of.get((ref, str(pin)))

    def connected(self, ref, pin) -> bool:
        n = self.net(ref, pin)
        return n is not None and len(self.nodes(n)) > 1

    def other_end(self, ref, net):
        """The net at the other pin of a two-pin part."""
        for pin in self.pins_of[ref]:
            n = self.net(ref, pin)
            if n != net:
                return n
        return None


def pins_constants(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s*=\s*const\((\d+)\)", text, re.M)}


def expected_gpio_nets(pins: dict[str, int]) -> dict[int, str]:
    """pins.py as GPIO -> net name: X_BASE with X_COUNT gives nets X0.. on consecutive GPIOs."""
    out = {}
    for name, gpio in pins.items():
        if name.endswith("_COUNT") or name in ON_MODULE:
            continue
        if name.endswith("_BASE"):
            stem = name[:-5]
            for k in range(pins.get(stem + "_COUNT", 1)):
                out[gpio + k] = f"{stem}{k}"
        else:
            out[gpio] = name
    return out


def mcu_pins(n: Netlist, pins_text: str) -> list[str]:
    pico = n.refs("Pico")
    if len(pico) != 1:
        return [f"expected one Pico 2 module, found {pico}"]
    ref = pico[0]
    wired = {}
    for pin in n.pins_of[ref]:
        m = re.match(r"GPIO(\d+)", n.fn.get((ref, pin), ""))
        if m and n.connected(ref, pin):
            wired[int(m.group(1))] = n.net(ref, pin)
    want = expected_gpio_nets(pins_constants(pins_text))
    problems = []
    for gpio, name in sorted(want.items()):
        if wired.get(gpio) != name:
            problems.append(f"pins.py puts {name} on GPIO{gpio}; the board has {wired.get(gpio) or 'nothing'} there")
    for gpio, net in sorted(wired.items()):
        if gpio not in want:
            problems.append(f"the board wires net {net} to GPIO{gpio}; pins.py has no constant for it")
    return problems


def _adc_of_sdo(n: Netlist, pins: dict[str, int], k: int):
    net = f"ADC_SDO{k}"
    for ref, pin in n.nodes(net):
        if n.value(ref) == "AD7380" and pin == AD7380_PIN["SDOA"]:
            return ref
    return None


def rails(n: Netlist, doc: dict) -> list[str]:
    problems = []
    plus = {"A": AD7380_PIN["AINA+"], "B": AD7380_PIN["AINB+"]}
    cur_pin, vol_pin = plus[doc["adc"]["current_channel"]], plus[doc["adc"]["voltage_channel"]]
    for r in doc["rail"]:
        name = r["name"]
        sw, drive = f"+{name}_SW", f"+{name}_DRIVE"
        shunts = [ref for ref, pin in n.nodes(sw) if ref.startswith("R") and pin == "1" and n.net(ref, 4) == drive]
        if len(shunts) != 1:
            problems.append(f"{name}: no single Kelvin shunt between {sw} and {drive} (found {shunts})")
            continue
        sh = shunts[0]
        if abs(si(n.value(sh)) - r["shunt_ohm"]) > 1e-9:
            problems.append(f"{name}: shunt {sh} is {n.value(sh)}, rails.toml says {r['shunt_ohm']} ohm")
        sp, sn = n.net(sh, 2), n.net(sh, 3)
        amps = [ref for ref, pin in n.nodes(sp) if n.value(ref).startswith("INA240") and pin == "2" and n.net(ref, 3) == sn]
        if len(amps) != 1:
            problems.append(f"{name}: no INA240 across the shunt's sense pins")
            continue
        amp = amps[0]
        if INA240_GAIN.get(n.value(amp)) != r["amp_gain"]:
            problems.append(f"{name}: {amp} is {n.value(amp)} (gain {INA240_GAIN.get(n.value(amp))}), rails.toml says {r['amp_gain']}")
        # divider: drive -> top -> node (buffer +) -> bottom -> GND
        ratio = None
        for ref, _pin in n.nodes(drive):
            if not ref.startswith("R") or ref == sh:
                continue
            mid = n.other_end(ref, drive)
            bufs = [b for b, p in n.nodes(mid) if n.value(b) == "OPA333" and p == "3"]
            bottoms = [b for b, _p in n.nodes(mid) if b.startswith("R") and b != ref and n.other_end(b, mid) == "GND"]
            if bufs and len(bottoms) == 1:
                top, bot = si(n.value(ref)), si(n.value(bottoms[0]))
                ratio, buf = bot / (top + bot), bufs[0]
        if ratio is None:
            problems.append(f"{name}: no buffered divider at {drive}")
            continue
        if abs(ratio - r["divider_ratio"]) > 2e-4 * r["divider_ratio"]:
            problems.append(f"{name}: divider ratio {ratio:.6f}, rails.toml says {r['divider_ratio']}")
        adc = _adc_of_sdo(n, {}, r["adc"])
        if adc is None:
            problems.append(f"{name}: no AD7380 on ADC_SDO{r['adc']} (rails.toml adc = {r['adc']})")
            continue

        def reaches(out_net, want_pin):
            for ref, _p in n.nodes(out_net):
                if ref.startswith("R") and n.value(ref) == "33.2":
                    if (adc, want_pin) in n.nodes(n.other_end(ref, out_net)):
                        return True
            return False
        if not reaches(n.net(amp, 8), cur_pin):
            problems.append(f"{name}: the amplifier's output does not reach channel {doc['adc']['current_channel']} of {adc} (ADC {r['adc']})")
        if not reaches(n.net(buf, 1), vol_pin):
            problems.append(f"{name}: the divider's buffer does not reach channel {doc['adc']['voltage_channel']} of {adc} (ADC {r['adc']})")
    return problems


SWITCH_PINS = {"TPS26630RGE": ({"1", "2", "5"}, {"17", "18"}), "TPS22917DBV": ({"1"}, {"6"})}


def power_paths(n: Netlist, variant: str) -> list[str]:
    """Graph of nets joined by conducting parts (resistors, fuses, shunts, switches IN-OUT); each
    drive supply pin must be reachable from its host pins, and no longer without the shunt or without
    the switch."""
    host = [r for r in n.nl["parts"] if n.value(r) == "HOST"]
    drive = [r for r in n.nl["parts"] if n.value(r) == "DRIVE"]
    if len(host) != 1 or len(drive) != 1:
        return [f"expected one HOST and one DRIVE connector, found {host} {drive}"]
    edges = []                                  # (net a, net b, ref, kind)
    for ref, part in n.nl["parts"].items():
        pins = n.pins_of[ref]
        kind = None
        if ref[0] in "RF":
            kind = "shunt" if len(pins) == 4 else "r"
            nets = {n.net(ref, p) for p in pins}
            nets = sorted(x for x in nets if x)
            edges += [(nets[0], b, ref, kind) for b in nets[1:]]
        sw = SWITCH_PINS.get(part.get("fields", {}).get("Value") or "") or next(
            (v for k, v in SWITCH_PINS.items() if part["fields"].get("MPN", "").startswith(k[:8])), None)
        if ref.startswith("U") and sw:
            ins = {n.net(ref, p) for p in sw[0]} - {None}
            outs = {n.net(ref, p) for p in sw[1]} - {None}
            edges += [(a, b, ref, "switch") for a in ins for b in outs]

    def reach(src, dst, skip):
        adj = defaultdict(set)
        for a, b, ref, kind in edges:
            if kind not in skip:
                adj[a].add(b)
                adj[b].add(a)
        seen, todo = {src}, [src]
        while todo:
            x = todo.pop()
            for y in adj[x]:
                if y not in seen and y != "GND":
                    seen.add(y)
                    todo.append(y)
        return dst in seen

    problems = []
    for role, rail in RAIL_ROLES.items():
        hpins = [num for num, _nm, r in PINOUTS[variant] if r == role]
        if not hpins:
            continue
        hnets = {n.net(host[0], p) for p in hpins}
        if len(hnets) != 1:
            problems.append(f"{rail}: the host connector's {role} pins are on different nets {sorted(map(str, hnets))}")
        h = sorted(map(str, hnets))[0]
        for p in hpins:
            d = n.net(drive[0], p)
            where = f"{rail}: drive pin {drive[0]}.{p}"
            if d is None:
                problems.append(f"{where} is not connected")
            elif d == h or not reach(h, d, set()):
                problems.append(f"{where} is {'on the host net' if d == h else 'not supplied from the host'}")
            elif reach(h, d, {"shunt"}):
                problems.append(f"{where} is supplied from the host around its shunt")
            elif reach(h, d, {"switch"}):
                problems.append(f"{where} is supplied from the host around its switch")
    return problems


def adc_setup(n: Netlist, pins_text: str, sequence) -> list[str]:
    """Derive the register state the wiring needs and replay the firmware's words against it."""
    pins = pins_constants(pins_text)
    adcs = n.refs("AD7380")
    problems = []
    if not adcs:
        return ["no AD7380 in the netlist"]
    sdi_nets = {n.net(a, AD7380_PIN["SDI"]) for a in adcs}
    if len(sdi_nets) != 1 or None in sdi_nets:
        return [f"the AD7380s' SDI pins are not on one net: {sorted(map(str, sdi_nets))}"]
    sdi = sdi_nets.pop()
    pico = n.refs("Pico")[0]
    gpios = [int(m.group(1)) for (r, p), f in n.fn.items() if r == pico and (m := re.match(r"GPIO(\d+)", f))
             and n.net(r, p) == sdi]
    if gpios != [pins.get("ADC_SDI")]:
        problems.append(f"the AD7380s' SDI is on GPIO{gpios}, firmware/board/pins.py ADC_SDI = {pins.get('ADC_SDI')}")
    external_ref = all(any(n.value(r).startswith("ADR45") for r, _p in n.nodes(n.net(a, AD7380_PIN["REFIO"]))) for a in adcs)
    one_wire = all(not n.connected(a, AD7380_PIN["SDOB"]) for a in adcs)
    regs = {1: 0, 2: 0}                          # power-on state: internal reference, 2-wire
    for k, w in enumerate(sequence):
        if not w & 0x8000:
            problems.append(f"set-up word {k} (0x{w:04x}) is not a write")
            continue
        addr, data = (w >> 12) & 7, w & 0xFFF
        if addr == 2 and data & 0xFF in (0x3C, 0xFF):   # a soft or hard reset returns to power-on
            regs = {1: 0, 2: 0}
            continue
        regs[addr] = data
    if bool(regs[1] & 0x002) != external_ref:
        problems.append(f"REFIO is {'driven by the ADR4525' if external_ref else 'not driven'} but the set-up "
                        f"{'leaves' if not regs[1] & 2 else 'selects'} the external reference (CONFIG1.REFSEL)")
    sdo = (regs[2] >> 8) & 3
    if (sdo == 1) != one_wire:
        problems.append(f"SDOB is {'unconnected (1-wire)' if one_wire else 'wired (2-wire)'} but the set-up leaves "
                        f"CONFIG2.SDO = {sdo}")
    return problems


def firmware_sequence(path) -> tuple[int, ...]:
    """The 16-bit words firmware/board/ad7380.py writes at start-up (frame() of each SETUP entry), read
    under CPython with a stand-in for MicroPython's const (the module touches no hardware at import)."""
    import sys
    import types

    stub = types.ModuleType("micropython")
    stub.const = lambda x: x
    saved = sys.modules.get("micropython")
    sys.modules["micropython"] = stub
    try:
        scope: dict = {}
        exec(compile(open(path).read(), str(path), "exec"), scope)
        return tuple(scope["frame"](reg, value) for reg, value in scope["SETUP"])
    finally:
        if saved is None:
            sys.modules.pop("micropython", None)
        else:
            sys.modules["micropython"] = saved


def run_all(kicad_netlist_text: str, variant: str, pins_text: str, rails_doc: dict, sequence) -> dict[str, list[str]]:
    from netlist import parse

    n = Netlist(parse(kicad_netlist_text))
    return {"mcu_pins": mcu_pins(n, pins_text), "rails": rails(n, rails_doc),
            "power_paths": power_paths(n, variant), "adc_setup": adc_setup(n, pins_text, sequence)}


def design_pin_tables() -> dict[str, dict[str, str]]:
    """The design's pin tables as {table: {pin number: name}} (the keys pinout_sources.toml uses)."""
    tables = {v: {num: name for num, name, _role in pins} for v, pins in PINOUTS.items()}
    tables["ad7380"] = {num: name for num, name, _type in AD7380_PINS}
    return tables


def pin_tables(tables: dict[str, dict[str, str]], sources: dict) -> list[str]:
    """Every pin a source states (hw/board/pinout_sources.toml) must have that name in the design, and
    every recorded conflict must be about a real pin, read by sources that exist."""
    problems = conflict_problems(tables, sources)
    for src in sources["source"]:
        have = tables.get(src["table"])
        if have is None:
            problems.append(f"{src['id']}: no pin table {src['table']!r} in the design")
            continue
        for pin, name in src["pins"].items():
            if have.get(str(pin)) != name:
                problems.append(f"{src['table']} pin {pin}: the design has {have.get(str(pin))!r}, "
                                f"{src['id']} says {name!r}")
    return problems


AUTHORITATIVE = {"spec", "vendor-manual"}
PIN_STATUSES = ("confirmed-2", "confirmed-1", "secondary", "conflict", "unknown")


def pin_status(tables: dict[str, dict[str, str]], sources: dict) -> dict[str, dict[str, str]]:
    """Per pin table: {pin: status}, computed from who states the pin (the key at the top of
    pinout_sources.toml): a claim counts only as much as its sources' independence and authority."""
    by_pin: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for src in sources["source"]:
        for pin in src["pins"]:
            by_pin[(src["table"], str(pin))].append(src)
    conflicts = {(c["table"], str(c["pin"])) for c in sources.get("conflict", [])}
    status: dict[str, dict[str, str]] = {}
    for table, pins in tables.items():
        status[table] = {}
        for pin in pins:
            said = by_pin.get((table, pin), [])
            if (table, pin) in conflicts:
                status[table][pin] = "conflict"
            elif len({s["publisher"] for s in said}) >= 2:
                status[table][pin] = "confirmed-2"
            elif any(s["weight"] in AUTHORITATIVE for s in said):
                status[table][pin] = "confirmed-1"
            else:
                status[table][pin] = "secondary" if said else "unknown"
    return status


def pin_coverage(tables: dict[str, dict[str, str]], sources: dict) -> dict[str, dict[str, int]]:
    """Per pin table: how many pins have each status (PIN_STATUSES order), the total under "pins"."""
    out = {}
    for table, by_pin in pin_status(tables, sources).items():
        counts = {s: 0 for s in PIN_STATUSES}
        for s in by_pin.values():
            counts[s] += 1
        out[table] = {**counts, "pins": len(by_pin)}
    return out


def conflict_problems(tables: dict[str, dict[str, str]], sources: dict) -> list[str]:
    """A [[conflict]] block must name a pin of the design and readings by sources that exist."""
    ids = {s["id"] for s in sources["source"]}
    problems = []
    for c in sources.get("conflict", []):
        if str(c["pin"]) not in tables.get(c["table"], {}):
            problems.append(f"conflict on {c['table']} pin {c['pin']}: no such pin in the design")
        problems += [f"conflict on {c['table']} pin {c['pin']}: unknown source {k!r}" for k in c["readings"] if k not in ids]
    return problems
