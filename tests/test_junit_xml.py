"""The plugin's JUnit XML as Jenkins' xunit (its junit-10 schema: no <properties> inside a testcase)
and GitLab (testcase, system-out) read it, with every measured figure kept; and its options carry a
prefix, so another plugin's --rig cannot clash with them."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from test_sweep_pytest_plugin import newdir, run_pytest  # noqa: F401  (newdir is a fixture)

SCHEMA = xmlschema.XMLSchema(Path(__file__).parent / "data" / "junit-10.xsd")

FIGURES = """
from powerrig.pytest_plugin import assert_at_most
def test_fio(rig, dut, capture, powerrig_record):
    with capture('w') as c:
        dut.run_fio('w', rw='read', runtime=1.5)
    assert_at_most('read mean power', c['mean_w'], 25.0, tolerance=0.05, record_property=powerrig_record)
"""


def _figures(text: str) -> dict:
    return {k: v for k, _, v in (line.partition(" = ") for line in text.splitlines()) if _}


def test_the_figures_are_in_a_junit_10_valid_file(newdir):  # noqa: F811
    """pytest's default family (xunit2) with -o junit_logging=system-out, as docs/sweeps.md says."""
    (newdir / "test_fig.py").write_text(FIGURES)
    r = run_pytest(newdir, "-q", "--powerrig-rig", "sim:d5-p5336", "--junitxml", "j.xml",
                   "-o", "junit_family=xunit2", "-o", "junit_logging=system-out")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    SCHEMA.validate(newdir / "j.xml")                     # raises with the offending element
    root = ET.parse(newdir / "j.xml").getroot()
    case = next(root.iter("testcase"))
    assert case.find("properties") is None
    # GitLab: the test's own system-out holds its figures
    shown = _figures(case.findtext("system-out"))
    assert 1.0 < float(shown["w.mean_w"]) < 25.0 and float(shown["read mean power.limit"]) == 25.0
    assert float(shown["w.mib_s"]) > 100                 # the virtual D5-P5336 reads GB/s
    # Jenkins: the testsuite's properties, one per figure, named by the test
    suite = {p.get("name"): p.get("value") for p in root.find("testsuite").find("properties")}
    assert suite == {f"test_fig.py::test_fio::{k}": v for k, v in shown.items()}


def test_xunit1_is_what_jenkins_refuses(newdir):  # noqa: F811
    """The old advice (-o junit_family=xunit1 'to keep properties') gives testcases file and line
    attributes, which junit-10 does not allow: the docs now say xunit2, pytest's default."""
    (newdir / "test_plain.py").write_text("def test_ok():\n    pass\n")
    r = run_pytest(newdir, "-q", "--junitxml", "j.xml", "-o", "junit_family=xunit1")
    assert r.returncode == 0, r.stdout[-2000:]
    with pytest.raises(xmlschema.XMLSchemaValidationError, match="'file' attribute not allowed"):
        SCHEMA.validate(newdir / "j.xml")


def test_pytests_record_property_is_what_the_schema_refuses(tmp_path):
    """The check has teeth: what record_property writes (the plugin's figures before) fails junit-10."""
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="pytest" tests="1" failures="0" errors="0">'
                   '<testcase name="t" classname="c" time="0.1"><properties>'
                   '<property name="idle.mean_w" value="5.5"/></properties></testcase></testsuite></testsuites>')
    with pytest.raises(xmlschema.XMLSchemaValidationError, match="properties"):
        SCHEMA.validate(bad)


def test_options_are_prefixed_and_the_old_names_still_work(newdir):  # noqa: F811
    (newdir / "test_states.py").write_text("def test_ps(power_state):\n    pass\n")
    new = run_pytest(newdir, "-q", "--collect-only", "--powerrig-rig", "sim:d5-p5336")
    old = run_pytest(newdir, "-q", "--collect-only", "--rig", "sim:d5-p5336")
    assert new.returncode == 0 and old.returncode == 0, new.stdout[-2000:] + old.stdout[-2000:]
    ids = [ln for ln in new.stdout.splitlines() if "::" in ln]
    assert ids and ids == [ln for ln in old.stdout.splitlines() if "::" in ln]
    assert "--rig is deprecated, use --powerrig-rig" in old.stdout + old.stderr
    assert "deprecated" not in new.stdout + new.stderr


def test_another_plugins_rig_option_does_not_clash(newdir):  # noqa: F811
    """A conftest that defines --rig of its own: pytest starts (no 'conflicting option'), the other
    plugin gets its --rig and powerrig is driven by --powerrig-rig."""
    (newdir / "conftest.py").write_text(
        "def pytest_addoption(parser):\n    parser.addoption('--rig', default='none')\n")
    (newdir / "test_other.py").write_text(
        "def test_theirs(request):\n    assert request.config.getoption('--rig') == 'theirs'\n"
        "def test_ours(power_state):\n    pass\n")
    r = run_pytest(newdir, "-q", "--rig", "theirs", "--powerrig-rig", "sim:d5-p5336", "-k", "theirs or PS0")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 passed" in r.stdout and "deprecated" not in r.stdout
