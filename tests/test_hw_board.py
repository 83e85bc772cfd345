"""hw/: the interposer built from code by `make hw` (hw/make_hw.py) and tied to the firmware and
hw/rails.toml. Each consistency check is shown to pass on the design and to catch a change made in a
copy (of pins.py, rails.toml, the netlist or the firmware's ADC set-up)."""
from __future__ import annotations

import copy
import csv
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from conftest import REPO

HW = REPO / "hw"
pytestmark = pytest.mark.timeout(1800)      # a cold `make hw` is ~2 min on an idle 2-core machine
OUT = HW / "out"
PINS = (REPO / "firmware" / "board" / "pins.py").read_text()
RAILS = tomllib.loads((HW / "rails.toml").read_text())


@pytest.fixture(scope="module")
def board_modules():
    sys.path.insert(0, str(HW / "board"))
    try:
        yield importlib.import_module("checks"), importlib.import_module("netlist")
    finally:
        sys.path.remove(str(HW / "board"))


@pytest.fixture(scope="module")
def make_hw():
    """`make hw`'s generator (cached by the hash of hw/'s sources, so this is quick after the first run)."""
    py = REPO / ".venv-hw" / "bin" / "python"
    if not py.exists() or not shutil.which("kicad-cli") or not shutil.which("ngspice"):
        msg = "KiCad 9 / ngspice / .venv-hw missing: run scripts/setup_hw.sh (make setup does)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    r = subprocess.run([str(py), str(HW / "make_hw.py")], capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    return r.stdout


def design(board_modules, variant):
    checks, netlist = board_modules
    return checks.Netlist(netlist.parse((OUT / variant / f"powerrig-{variant}-kicad.net").read_text()))


def test_make_hw_writes_netlist_schematic_bom_pcb_and_ends_with_the_erc_line(make_hw):
    last = make_hw.strip().splitlines()[-1]
    m = re.fullmatch(r"ERC: (\d+) errors, (\d+) warnings", last)
    assert m and m.group(1) == "0", last
    waived = [ln for ln in make_hw.splitlines() if "waived" in ln]
    assert len(waived) == int(m.group(2)) and all(" -- " in ln for ln in waived), "every warning is waived with a reason"
    for v in ("edsff", "u2"):
        stem = OUT / v / f"powerrig-{v}"
        sch, pcb = stem.with_suffix(".kicad_sch").read_text(), stem.with_suffix(".kicad_pcb").read_text()
        assert stem.with_suffix(".net").stat().st_size > 10_000
        assert sch.startswith("(kicad_sch") and "(lib_symbols" in sch
        assert "Edge.Cuts" in pcb and pcb.count("(footprint ") > 90
        assert (stem.parent / f"powerrig-{v}.pdf").exists()   # KiCad opened the schematic to print it
    assert "consistency: 0 problems" in make_hw


@pytest.mark.parametrize("variant", ["edsff", "u2"])
def test_drc_of_the_placed_board_leaves_only_the_routing(make_hw, variant):
    """DRC on the placed, unrouted board: every finding is an unconnected item (the routing hw/README.md
    leaves to a person); no clearance, silkscreen, thermal or library finding is left over."""
    rpt = (OUT / variant / f"powerrig-{variant}.drc.rpt").read_text()
    kinds = re.findall(r"^\[(\w+)\]", rpt, re.M)
    assert kinds and set(kinds) == {"unconnected_items"}, sorted(set(kinds))


def test_bom_is_generated_with_footprint_manufacturer_and_mpn_for_every_part(make_hw):
    assert (HW / "bom.csv").read_text() == (OUT / "bom.csv").read_text(), "hw/bom.csv is generated: run make hw"
    rows = list(csv.DictReader((HW / "bom.csv").open()))
    assert len(rows) > 20
    for r in rows:
        assert r["manufacturer"] and r["mpn"] and r["footprint"], r
    assert {"AD7380BCPZ-RL7", "INA240A2PWR", "ADR4525BRZ", "TMP117AIDRVR", "SC1631"} <= {r["mpn"] for r in rows}
    # the card edge is the PCB's own gold fingers: nothing to buy; what no source confirms says so
    assert not any("gold fingers" in r["mpn"] or r["manufacturer"] == "PCB fabricator" for r in rows)
    flagged = {r["footprint"].split(":")[-1]: r["check"] for r in rows if r["check"]}
    for fp in ("EDSFF_1C_Receptacle", "SFF8639_Plug", "SFF8639_Receptacle"):
        assert "stand-in" in flagged[fp] and "MPN not confirmed" in flagged[fp], flagged
    # the source column: what backs each MPN (hw/board/part_sources.py); nothing backs the connectors
    by_mpn = {r["mpn"]: r for r in rows}
    assert "ti.com" in by_mpn["INA240A2PWR"]["source"] and not by_mpn["INA240A2PWR"]["check"]
    assert "analog.com" in by_mpn["ADR4525BRZ"]["source"]
    assert "another vendor" in by_mpn["2N7002,215"]["check"]          # KiCad's symbol cites onsemi's
    assert "pinout_sources.toml" in by_mpn["AD7380BCPZ-RL7"]["source"]
    for r in rows:
        if r["footprint"].startswith("powerrig:"):
            assert r["source"] == "", r


def test_part_sources_reads_the_datasheet_of_kicads_symbol_and_flags_another_vendors(board_modules, tmp_path):
    """The source column comes from the symbol library; a datasheet from another vendor is flagged,
    a generic symbol cites nothing and a citation in the catalog wins."""
    ps = importlib.import_module("part_sources")
    (tmp_path / "Lib.kicad_sym").write_text(
        '(kicad_symbol_lib\n\t(symbol "A1"\n\t\t(property "Datasheet" "https://www.ti.com/a1.pdf")\n\t)'
        '\n\t(symbol "A2"\n\t\t(extends "A1")\n\t\t(property "Datasheet" "https://www.onsemi.com/a2.pdf")\n\t)'
        '\n\t(symbol "A3"\n\t\t(property "Datasheet" "~")\n\t)\n)\n')
    assert ps.kicad_datasheet("Lib", "A2", tmp_path) == "https://www.onsemi.com/a2.pdf"
    assert ps.kicad_datasheet("Lib", "A3", tmp_path) == "" and ps.kicad_datasheet("Lib", "A9", tmp_path) == ""
    src, note = ps.source("k", "Lib", "A1", "Texas Instruments", {}, tmp_path)
    assert "ti.com/a1.pdf" in src and note == ""
    src, note = ps.source("k", "Lib", "A2", "Nexperia", {}, tmp_path)
    assert "onsemi" in src and "another vendor" in note
    assert ps.source("k", "Device", "R", "Yageo", {}, tmp_path) == ("", "")
    assert ps.source("k", "Lib", "A2", "Nexperia", {"k": "a cited page"}, tmp_path) == ("a cited page", "")


@pytest.mark.parametrize("variant", ["edsff", "u2"])
def test_mcu_pin_nets_equal_firmware_pins_and_a_changed_pin_is_caught(make_hw, board_modules, variant):
    checks, _ = board_modules
    n = design(board_modules, variant)
    assert checks.mcu_pins(n, PINS) == []
    moved = PINS.replace("ADC_SDI = const(7)", "ADC_SDI = const(8)")
    assert moved != PINS
    found = checks.mcu_pins(n, moved)
    assert any("ADC_SDI on GPIO8" in p for p in found), found
    # and the other way: the board's wire moved, pins.py unchanged
    nl = copy.deepcopy(n.nl)
    pico = n.refs("Pico")[0]
    sdi_pin = n.pin_by_function(pico, "GPIO7")
    nl["nets"]["ADC_SDI"] = [x for x in nl["nets"]["ADC_SDI"] if x != (pico, sdi_pin)]
    nl["nets"]["ADC_CS"].append((pico, sdi_pin))
    assert any("ADC_SDI" in p for p in checks.mcu_pins(checks.Netlist(nl), PINS))


def test_shunts_dividers_and_adc_channels_equal_rails_toml_and_changes_are_caught(make_hw, board_modules):
    checks, _ = board_modules
    n = design(board_modules, "u2")
    assert checks.rails(n, RAILS) == []
    doc = copy.deepcopy(RAILS)
    doc["rail"][0]["shunt_ohm"] = 0.01
    assert any("shunt" in p and "12V" in p for p in checks.rails(n, doc))
    doc = copy.deepcopy(RAILS)
    doc["rail"][1]["divider_ratio"] = 0.45
    assert any("divider ratio" in p and "3V3" in p for p in checks.rails(n, doc))
    doc = copy.deepcopy(RAILS)
    doc["rail"][0]["adc"], doc["rail"][1]["adc"] = 1, 0
    assert any("12V" in p and "ADC 1" in p for p in checks.rails(n, doc))
    doc = copy.deepcopy(RAILS)
    doc["adc"]["current_channel"], doc["adc"]["voltage_channel"] = "B", "A"
    assert len(checks.rails(n, doc)) == 2 * len(RAILS["rail"])
    doc = copy.deepcopy(RAILS)
    doc["rail"][2]["amp_gain"] = 100.0
    assert any("5V" in p and "gain" in p for p in checks.rails(n, doc))


@pytest.mark.parametrize("variant", ["edsff", "u2"])
def test_every_supply_pin_reaches_the_drive_only_through_its_switch_and_shunt(make_hw, board_modules, variant):
    checks, _ = board_modules
    n = design(board_modules, variant)
    assert checks.power_paths(n, variant) == []
    drive = next(r for r in n.nl["parts"] if n.value(r) == "DRIVE")
    pin12 = next(num for num, _nm, role in checks.PINOUTS[variant] if role == "12V")

    def with_jumper(a, b):
        nl = copy.deepcopy(n.nl)
        nl["parts"]["R999"] = {"value": "0", "footprint": "", "fields": {}}
        nl["nets"][a].append(("R999", "1"))
        nl["nets"][b].append(("R999", "2"))
        return checks.power_paths(checks.Netlist(nl), variant)
    assert any("around its shunt" in p for p in with_jumper("+12V_SW", "+12V_DRIVE"))
    assert any("around its switch" in p for p in with_jumper("+12V_FUSED", "+12V_SW"))
    assert any("around its" in p and "3V3" in p for p in with_jumper("+3V3_HOST", "+3V3_DRIVE"))
    nl = copy.deepcopy(n.nl)                     # one drive pin soldered to the host net
    nl["nets"]["+12V_DRIVE"].remove((drive, pin12))
    nl["nets"]["+12V_HOST"].append((drive, pin12))
    assert any(f"{drive}.{pin12} is on the host net" in p for p in checks.power_paths(checks.Netlist(nl), variant))


def test_firmware_adc_setup_matches_the_sdi_wiring_and_changes_are_caught(make_hw, board_modules):
    checks, _ = board_modules
    seq = checks.firmware_sequence(REPO / "firmware" / "board" / "ad7380.py")
    n = design(board_modules, "edsff")
    assert checks.adc_setup(n, PINS, seq) == []
    assert seq == (0x9002, 0xA100)                                   # CONFIG1.REFSEL, CONFIG2.SDO = 1-wire
    no_ref = tuple(w for w in seq if (w >> 12) & 7 != 1)             # CONFIG1.REFSEL never written
    assert any("REFSEL" in p for p in checks.adc_setup(n, PINS, no_ref))
    two_wire = seq + (0xA000,)                                       # CONFIG2.SDO back to 00
    assert any("SDO" in p for p in checks.adc_setup(n, PINS, two_wire))
    assert any("REFSEL" in p for p in checks.adc_setup(n, PINS, seq + (0xA0FF,)))   # a hard reset last undoes it
    assert any("ADC_SDI" in p for p in checks.adc_setup(n, PINS.replace("ADC_SDI = const(7)", "ADC_SDI = const(9)"), seq))
    sdi, sdob = checks.AD7380_PIN["SDI"], checks.AD7380_PIN["SDOB"]
    nl = copy.deepcopy(n.nl)                     # one converter's SDI on its own net
    adc = n.refs("AD7380")[-1]
    nl["nets"]["ADC_SDI"].remove((adc, sdi))
    nl["nets"]["SDI_ALONE"] = [(adc, sdi)]
    assert any("not on one net" in p for p in checks.adc_setup(checks.Netlist(nl), PINS, seq))
    nl = copy.deepcopy(n.nl)                     # SDOB wired: the board would need 2-wire mode
    nl["nets"] = {k: [x for x in v if x != (adc, sdob)] for k, v in nl["nets"].items()}
    nl["nets"]["ADC_SDO0"].append((adc, sdob))
    assert any("2-wire" in p for p in checks.adc_setup(checks.Netlist(nl), PINS, seq))


SOURCES = tomllib.loads((HW / "board" / "pinout_sources.toml").read_text())


def test_pin_tables_equal_every_pin_transcribed_from_a_source_and_a_changed_pin_is_caught(board_modules):
    """hw/board/pinout_sources.toml holds the pins a cited source confirms; the design's connector
    and AD7380 tables must agree with every one, and a pin changed in a copy of either is caught."""
    checks, _ = board_modules
    tables = checks.design_pin_tables()
    assert checks.pin_tables(tables, SOURCES) == []
    assert {s["table"] for s in SOURCES["source"]} == {"u2", "edsff", "ad7380"}
    for s in SOURCES["source"]:
        assert s["pins"] and ("http" in s["cites"] or "stored file id" in s["cites"]), s["id"]
    moved = copy.deepcopy(tables)                # the design changed: SMBus clock and data swapped on U.2
    moved["u2"]["E23"], moved["u2"]["E24"] = moved["u2"]["E24"], moved["u2"]["E23"]
    found = checks.pin_tables(moved, SOURCES)
    assert any("u2 pin E23" in p for p in found) and any("u2 pin E24" in p for p in found), found
    moved = copy.deepcopy(tables)                # the AD7380's SDI one pin off
    moved["ad7380"]["15"] = "SCLK"
    assert any("ad7380 pin 15" in p and "SDI" in p for p in checks.pin_tables(moved, SOURCES))
    src = copy.deepcopy(SOURCES)                 # the source file changed: 12 V moved to a ground pin
    next(s for s in src["source"] if s["table"] == "u2" and "P13" in s["pins"])["pins"]["P12"] = "12V"
    assert any("u2 pin P12" in p for p in checks.pin_tables(tables, src))
    src = copy.deepcopy(SOURCES)
    src["source"][0]["table"] = "m2"
    assert any("no pin table 'm2'" in p for p in checks.pin_tables(tables, src))


def test_pin_status_counts_only_independent_or_authoritative_sources_and_conflicts_by_use(board_modules):
    """What the board's design claims is computed from who states each pin: two publishers agreeing
    (confirmed-2), one authoritative source (confirmed-1), one non-authoritative publisher
    (secondary), readings that differ by use (conflict). Tallied against ../shared/hw/pinout-sources.md."""
    checks, _ = board_modules
    tables = checks.design_pin_tables()
    status = checks.pin_status(tables, SOURCES)
    u2 = status["u2"]
    assert {p for p, s in u2.items() if s == "conflict"} == {"P1", "P2", "P3", "P4", "P10"}
    note_only = {"E3", "E5", "E6", "E16", "E23", "E24", "E25", "S15"}   # the one engineering note
    assert {p for p in note_only if u2[p] == "secondary"} == note_only
    assert status["edsff"]["A6"] == "secondary" and set(status["ad7380"].values()) == {"secondary"}
    assert all(u2[f"S{i}"] == "confirmed-2" for i in range(1, 15)) and u2["E7"] == u2["E8"] == "confirmed-2"
    assert u2["P8"] == u2["P9"] == u2["P11"] == "secondary"       # pinouts.ru's two pages: one publisher
    cover = checks.pin_coverage(tables, SOURCES)
    assert cover["u2"] == {"confirmed-2": 23, "confirmed-1": 0, "secondary": 11, "conflict": 5,
                           "unknown": 29, "pins": 68}
    assert (cover["edsff"]["secondary"], cover["edsff"]["unknown"]) == (1, 55)
    src = copy.deepcopy(SOURCES)                 # without the HP manual, the SAS segment rests on one publisher
    src["source"] = [s for s in src["source"] if s["id"] != "hp-xw8600-service-manual"]
    without_hp = checks.pin_status(tables, src)["u2"]
    assert without_hp["S2"] == without_hp["P7"] == "secondary" and without_hp["E7"] == "confirmed-2"
    src = copy.deepcopy(SOURCES)                 # a spec read for E4 makes it confirmed-1
    src["source"].append({"id": "sff-ta-1001", "table": "u2", "publisher": "SNIA", "weight": "spec",
                          "cites": "x", "pins": {"E4": "PERST1#"}})
    assert checks.pin_status(tables, src)["u2"]["E4"] == "confirmed-1"
    src = copy.deepcopy(SOURCES)                 # a conflict about a pin the design lacks, by an unknown source
    src["conflict"].append({"table": "u2", "pin": "Z9", "readings": {"nobody": "GND"}})
    found = checks.pin_tables(tables, src)
    assert any("Z9: no such pin" in p for p in found) and any("unknown source 'nobody'" in p for p in found)


def test_the_symbol_and_the_checks_use_the_transcribed_ad7380_numbers(board_modules):
    checks, _ = board_modules
    ad7380 = next(s for s in SOURCES["source"] if s["table"] == "ad7380")["pins"]
    for name in ("SDI", "SDOA", "SDOB", "REFIO", "AINA+", "AINB+"):
        assert ad7380[checks.AD7380_PIN[name]] == name


def test_error_budget_json_is_last_and_every_rail_is_within_0_1_percent_calibrated():
    r = subprocess.run([sys.executable, str(HW / "error_budget.py"), "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(r.stdout)
    assert set(doc) == {x["name"] for x in RAILS["rail"]}
    for name, rail in doc.items():
        assert 0 < rail["calibrated_worst_pct"] <= 0.10, (name, rail["calibrated_worst_pct"])
        assert rail["calibrated_worst_pct"] < 100 * rail["uncalibrated"]["power_at_max"]


def test_error_budget_takes_the_simulated_front_end_and_the_calibration_method(board_modules):
    spec = importlib.util.spec_from_file_location("error_budget", HW / "error_budget.py")
    eb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(eb)
    sim = json.loads((HW / "sim" / "results.json").read_text())["rails"]
    b = eb.budget(RAILS, sim)
    assert b["12V"]["calibrated"]["dynamic_i"] == abs(sim["12V"]["ripple"]["mean_error_pct_1ms"]) / 100
    worse = eb.budget(RAILS, {"12V": {"ripple": {"mean_error_pct_1ms": 0.05}}})
    assert worse["12V"]["calibrated_worst_pct"] > b["12V"]["calibrated_worst_pct"] + 0.04
    no_tc = copy.deepcopy(RAILS)
    no_tc["calibration"]["tc_residual"] = 1.0                        # no temperature coefficients: over budget
    assert eb.budget(no_tc, sim)["12V"]["calibrated_worst_pct"] > 0.10
    s = sim["12V"]["step"]
    assert (s["from_a"], s["to_a"]) == (0.5, 6.0) and s["settle_1lsb_s"] > 0
    assert abs(s["pcm2_peak_error_pct"]) < 0.1 and 0.9 < sim["12V"]["ripple"]["ripple_amplitude_ratio"] <= 1.0
    assert 100e3 < sim["12V"]["bandwidth_hz"] < 1e6
    for name, r in sim.items():                  # the single-ended drive stays inside 0..VREF (hw/README.md)
        a = r["adc_input"]
        assert a["within_0_to_vref"] and 0 < a["ain_plus_max_v"] <= RAILS["adc"]["vref_v"], (name, a)
        assert a["common_mode_max_v"] == pytest.approx(a["ain_plus_max_v"] / 2)
    for png in ("afe_step.png", "afe_ripple.png", "afe_bode.png"):
        assert (REPO / "docs" / "img" / png).stat().st_size > 10_000
