"""The desktop app's Power panel driven as a user drives it (pytest-qt, offscreen) on a virtual rig
(issue 29): a 12 V cycle with the drive's serial runs through the drive guard, its executed edges land
on the timeline and the plot, and the raw burst gives the model's inrush and hold-up; a wrong serial
is refused in one line with nothing switched; no interposer is one line too."""
from __future__ import annotations

import math
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("pytestqt")

from gui_helpers import private_settings, sim_window  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402
from powerrig.gui.services import Services  # noqa: E402


@pytest.fixture(scope="module")
def rig_window(qapp, tmp_path_factory):
    """One window on one virtual rig (the default enterprise drive) for the module."""
    with sim_window(qapp, tmp_path_factory.mktemp("gui-power"), lambda win, svc: bool(win.power_panel.serial.text())) as got:
        yield got


def _edges(svc):
    return [e for e in svc.timeline if e.meta.get("power_edge")]


def _ready(svc) -> bool:
    """The controller answers again (120 ms after power-on or PERST# release in the model)."""
    from powerrig.core.errors import PowerrigError
    try:
        svc.drive.nvme.get_power_state(svc.drive.controller)
        return True
    except PowerrigError:
        return False


def _wait_result(bot, svc):
    got = []
    svc.power.updated.connect(got.append)
    bot.waitUntil(lambda: any(d["state"] in ("done", "failed") for d in got), timeout=90_000)
    svc.power.updated.disconnect(got.append)
    return next(d for d in got if d["state"] in ("done", "failed"))


def test_a_cycle_with_the_drives_serial_shows_edges_inrush_and_holdup(rig_window):
    from powerrig.sim.ssd.power import PowerSpec
    win, svc, bot = rig_window
    panel = win.power_panel
    # prefilled from the drive nvme-cli read, not from the rig's description
    assert panel.serial.text() == svc.drive.identity.sn.strip()
    errors = len(svc.errors)
    panel.off_ms.setValue(20.0)
    n = len(_edges(svc))
    for _ in range(3):           # a burst misses when the starved virtual board drops samples before the restore
        panel.cycle_button.click()
        assert not panel.cycle_button.isEnabled()            # until the action ends
        d = _wait_result(bot, svc)
        assert d["state"] == "done", d
        if d["holdup_s"] is not None:
            break
        assert "no burst" in panel.result.text() and d["inrush_peak_a"] is None       # said, never made up
        n = len(_edges(svc))
    assert svc.errors[errors:] == []
    # the two edges executed where asked, 20 ms apart on the interposer's sample clock
    assert [(e["output"], e["level"]) for e in d["edges"]] == [("12V", 0), ("12V", 1)]
    assert d["edges"][1]["index"] - d["edges"][0]["index"] == 20_000 // 4
    assert d["edges"][1]["at_ms"] == pytest.approx(20.0)
    # on the app's timeline (so on the capture and the plot), in that order, 20 ms apart in host time
    new = _edges(svc)[n:]
    assert [e.name for e in new] == ["12 V off", "12 V on"]
    assert new[1].t_start - new[0].t_start == pytest.approx(0.020, abs=1e-6)
    bot.waitUntil(lambda: {"12 V off", "12 V on"} <= {e["name"] for e in svc.captures.events_s()}, timeout=10_000)
    # the raw burst around the restore measures the virtual drive's model (within the bench's 5 %)
    spec = PowerSpec()
    holdup = spec.holdup_tau_ms * 1e-3 * math.log(12.0 / spec.plp_threshold_v)
    assert d["holdup_s"] == pytest.approx(holdup, rel=0.05), d
    assert d["inrush_charge_c"] == pytest.approx(spec.inrush_peak_a * spec.inrush_tau_us * 1e-6, rel=0.05), d
    assert spec.inrush_peak_a < d["inrush_peak_a"] < spec.inrush_peak_a + 3.0, d
    text = panel.result.text()
    print(text)                                           # the figures docs/user-guide.md quotes
    assert "12 V off" in text and "hold-up 1." in text and "inrush" in text and "mC" in text, text
    # the session ended with the action: power on, actions off on the interposer
    st = svc.connection.dev.power_status()
    assert st["enabled"] is False and st["state"]["12V"] == 1
    assert panel.cycle_button.isEnabled()


def test_a_wrong_serial_is_refused_in_one_line_and_nothing_switches(rig_window):
    win, svc, bot = rig_window
    panel = win.power_panel
    right = panel.serial.text()
    bot.waitUntil(lambda: _ready(svc), timeout=10_000)    # refused for the serial, not for a drive enumerating
    n = len(_edges(svc))
    try:
        panel.serial.setText("NOT-THIS-DRIVE")
        panel.cycle_button.click()
        d = _wait_result(bot, svc)
    finally:
        panel.serial.setText(right)
    assert d["state"] == "failed"
    msg = win.statusBar().currentMessage()
    assert "NOT-THIS-DRIVE" in msg and "\n" not in msg and "Traceback" not in msg, msg
    assert "refused" in panel.result.text()
    assert _edges(svc)[n:] == []                           # no edge executed
    st = svc.connection.dev.power_status()
    assert st["enabled"] is False and st["state"]["12V"] == 1
    # the serial is the user's once typed: a later drive read does not overwrite it
    panel.serial.setText("TYPED")
    panel.prefill({"identity": svc.drive.identity})
    assert panel.serial.text() == "TYPED"
    panel.serial.setText(right)


def test_a_perst_pulse_puts_its_two_edges_on_the_timeline(rig_window):
    win, svc, bot = rig_window
    panel = win.power_panel
    panel.perst_ms.setValue(10.0)
    bot.waitUntil(lambda: _ready(svc), timeout=10_000)
    n = len(_edges(svc))
    panel.perst_button.click()
    d = _wait_result(bot, svc)
    assert d["state"] == "done", d
    assert [(e["output"], e["level"]) for e in d["edges"]] == [("PERST", 1), ("PERST", 0)]
    assert d["edges"][1]["index"] - d["edges"][0]["index"] == 10_000 // 4
    assert [e.name for e in _edges(svc)[n:]] == ["PERST# asserted", "PERST# released"]
    assert "holdup_s" not in d and "PERST# released at +10.000 ms" in panel.result.text()
    assert svc.connection.dev.power_status()["enabled"] is False


def test_closing_the_app_releases_a_power_session(rig_window):
    """A session left enabled (an action cut short) is released at shutdown: power on, actions off."""
    from powerrig.dut import destructive
    win, svc, bot = rig_window
    dev = svc.connection.dev
    bot.waitUntil(lambda: _ready(svc), timeout=10_000)    # after the pulse before, the drive enumerates again
    destructive.power_session(svc.drive.nvme, svc.drive.controller, win.power_panel.serial.text(), dev, 5000)
    assert dev.power_status()["enabled"] is True
    svc.power.shutdown()                                   # what Core.shutdown calls first at close
    st = dev.power_status()
    assert st["enabled"] is False and st["state"] == {"12V": 1, "3V3": 1, "PERST": 0, "PWRDIS": 0}


def test_no_interposer_is_one_line(qtbot, tmp_path):
    private_settings(tmp_path)
    svc = Services(capture_dir=tmp_path / "captures")
    win = MainWindow(svc)
    qtbot.addWidget(win)
    # the Power tab, raised on a 1366x768 screen: whole across, the window no wider
    win.resize(1366, 768)
    win.show()
    qtbot.waitExposed(win)
    qtbot.wait(200)                                       # the window raises Connect after show
    win.docks["Power"].raise_()
    qtbot.waitUntil(lambda: not win.docks["Power"].visibleRegion().isEmpty(), timeout=5000)
    area = win.docks["Power"].widget()
    assert win.width() == 1366
    assert area.widget().width() >= area.widget().minimumSizeHint().width()
    assert not area.horizontalScrollBar().isVisible()
    got = []
    svc.power.updated.connect(got.append)
    win.power_panel.serial.setText("SN1")
    win.power_panel.cycle_button.click()
    qtbot.waitUntil(lambda: any(d["state"] == "failed" for d in got), timeout=10_000)
    msg = win.statusBar().currentMessage()
    assert "no interposer connected" in msg and "\n" not in msg, msg
    win.power_panel.restore_button.click()                 # restore needs an interposer too: said, not raised
    qtbot.waitUntil(lambda: sum(d["state"] == "failed" for d in got) == 2, timeout=10_000)
    win.close()


def test_firmware_without_power_actions_is_said_so():
    """The real firmware's reply to a command it lacks, through the real client, made one line."""
    from powerrig.core.errors import PowerrigError
    from powerrig.gui.services.power import one_line
    from powerrig.interposer.client import Interposer
    from powerrig.sim.interposer.board import VirtualInterposer
    from powerrig.sim.ssd.power import SteadyLoad
    sim = VirtualInterposer(load=SteadyLoad()).start()
    try:
        sim.device.commands.pop("power")                 # a firmware from before issue 29
        with Interposer.open(sim.port) as dev, pytest.raises(PowerrigError) as e:
            dev.power_status()
    finally:
        sim.stop()
    said = one_line(str(e.value))
    assert "firmware has no power actions" in said and "\n" not in said, (str(e.value), said)
    assert one_line("refusing power on /dev/nvme0\nsecond") == "refusing power on /dev/nvme0"


def test_a_missing_hold_up_always_says_why():
    """The power panel never shows a bare "hold-up —": the burst's own reason, the missing burst's, or
    (a PERST# pulse: no cut) that there is no cut to count from."""
    from powerrig.analysis.power_events import cut_holdup
    from powerrig.gui.power.widget import PowerPanel
    edges = [{"name": "PERST# low", "at_ms": 0.0, "index": 10, "requested": 10}]
    # a burst whose drive side never falls (the decay runs past it): the analysis' reason, as computed
    flat = cut_holdup([12.0] * 500, [1.0] * 250 + [0.0] * 250, 10.8, 4e-6, reported=250)
    assert flat["holdup_s"] is None and flat["holdup_reason"]
    for d, why in (({"holdup_s": None, "holdup_reason": flat["holdup_reason"]}, flat["holdup_reason"]),
                   ({"holdup_s": None, "burst_error": "the interposer sent no burst in 5 s"},
                    "no burst: the interposer sent no burst in 5 s"),
                   ({"holdup_s": None}, "not measured")):
        text = PowerPanel.describe({"action": "perst", "edges": edges, "inrush_peak_a": None,
                                    "inrush_charge_c": None, **d})
        line = next(ln for ln in text.splitlines() if ln.startswith("hold-up"))
        assert line.startswith("hold-up — (") and why in line, line
