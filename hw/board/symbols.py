"""A KiCad 9 symbol library (hw/board/lib/powerrig.kicad_sym) for parts KiCad's libraries lack: the
dual AD7380 (KiCad has only the quad AD7380-4) and the two drive connectors.

Why generated: the schematic generator needs pin geometry, and the connector symbols follow the pin
lists in pinouts.py, so a pin change there cannot leave the symbol behind.
"""
from __future__ import annotations

from pinouts import PINOUTS

# AD7380 (16-lead LFCSP, 3 x 3 mm): pin numbers as transcribed in hw/board/pinout_sources.toml (a
# secondary source; hw/README.md says what is unverified). The SKiDL code and the checks address
# the pins by name through AD7380_PIN, so a renumbering here reaches everything.
AD7380_PINS = [("1", "GND", "power_in"), ("2", "VLOGIC", "power_in"), ("3", "REGCAP", "passive"),
               ("4", "VCC", "power_in"), ("5", "AINB-", "input"), ("6", "AINB+", "input"), ("7", "AINA-", "input"),
               ("8", "AINA+", "input"), ("9", "REFCAP", "passive"), ("10", "GND", "power_in"), ("11", "REFIO", "passive"),
               ("12", "~{CS}", "input"), ("13", "SDOA", "output"), ("14", "SDOB", "output"), ("15", "SDI", "input"),
               ("16", "SCLK", "input"), ("17", "EP", "passive")]
AD7380_PIN = {name: num for num, name, _t in reversed(AD7380_PINS)}   # name -> number (GND: the first one)


def _pin(num, name, etype, x, y, rot):
    return (f'      (pin {etype} line (at {x:.2f} {y:.2f} {rot}) (length 2.54)\n'
            f'        (name "{name}" (effects (font (size 1.0 1.0))))\n'
            f'        (number "{num}" (effects (font (size 1.0 1.0)))))\n')


def symbol(name, pins, footprint="", descr="", ref="U", width=20.32):
    half = (len(pins) + 1) // 2
    left, right = pins[:half], pins[half:]
    top = (half + 1) * 2.54 / 2
    body = (f'      (rectangle (start {-width / 2:.2f} {top:.2f}) (end {width / 2:.2f} {-top:.2f})\n'
            f'        (stroke (width 0.254) (type default)) (fill (type background)))\n')
    out = "".join(_pin(n, nm, et, -width / 2 - 2.54, top - 2.54 * (i + 1), 0) for i, (n, nm, et) in enumerate(left))
    out += "".join(_pin(n, nm, et, width / 2 + 2.54, top - 2.54 * (i + 1), 180) for i, (n, nm, et) in enumerate(right))
    props = [("Reference", ref), ("Value", name), ("Footprint", footprint), ("Datasheet", ""), ("Description", descr)]
    p = "".join(f'    (property "{k}" "{v}" (at 0 {top + 1.27 + 1.27 * j:.2f} 0) (effects (font (size 1.27 1.27)){" (hide yes)" if j > 1 else ""}))\n'
                for j, (k, v) in enumerate(props))
    return (f'  (symbol "{name}" (pin_names (offset 1.016)) (exclude_from_sim no) (in_bom yes) (on_board yes)\n{p}'
            f'    (symbol "{name}_0_1"\n{body}    )\n    (symbol "{name}_1_1"\n{out}    )\n  )\n')


def library() -> str:
    syms = [symbol("AD7380", AD7380_PINS, "Package_CSP:LFCSP-16-1EP_3x3mm_P0.5mm_EP1.3x1.3mm",
                   "dual 16-bit 4 MSPS simultaneous-sampling SAR ADC"),
            symbol("EDSFF_1C", [(n, nm, "passive") for n, nm, _r in PINOUTS["edsff"]], "", "SFF-TA-1002 1C, SFF-TA-1009 pinout", "J", 30.48),
            symbol("SFF8639", [(n, nm, "passive") for n, nm, _r in PINOUTS["u2"]], "", "SFF-8639 68-pin (U.2)", "J", 30.48)]
    return '(kicad_symbol_lib (version 20241209) (generator "powerrig_symbols") (generator_version "9.0")\n' + "".join(syms) + ")\n"
