"""The desktop app driven as a user drives it (pytest-qt, offscreen): connect to a virtual rig, watch
samples arrive, set a power state and see the step, run a preset and see its phase, place markers and
read the energy, open the capture; a wrong port gives a message in the window."""
from __future__ import annotations

import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402

from powerrig.gui.services import Services  # noqa: E402
from powerrig.gui.main_window import MainWindow  # noqa: E402


@pytest.fixture(scope="module")
def app_env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gui")
    old = os.environ.get("POWERRIG_SIM_DIR")
    os.environ["POWERRIG_SIM_DIR"] = str(tmp / "sim")
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp / "settings"))
    yield tmp
    if old is None:
        os.environ.pop("POWERRIG_SIM_DIR", None)
    else:
        os.environ["POWERRIG_SIM_DIR"] = old


@pytest.fixture(scope="module")
def rig_window(qapp, app_env):
    """One window connected to one virtual rig (client drive with non-operational states) for the module."""
    from pytestqt.qtbot import QtBot
    svc = Services(capture_dir=app_env / "captures")
    win = MainWindow(svc)
    win.show()
    bot = QtBot(qapp)
    svc.errors = []
    svc.core.error.connect(svc.errors.append)
    svc.connection.connect_sim("client-apst")
    try:
        bot.waitUntil(lambda: svc.recording.live is not None and svc.recording.live.length > 2000, timeout=30_000)
    except Exception:
        svc.shutdown()
        raise
    yield win, svc
    win.close()                   # saves settings, stops the recording, the rig and the workers
    assert svc.connection.rig is None or not svc.connection._started_rig


def _plotted_mean(win, t0, t1, signal="p_total"):
    s = win.svc.recording.live.summaries(t0, t1, 50, [signal])
    return float(np.nanmean(s.mean[signal]))


def test_connect_and_samples_arrive(qtbot, rig_window):
    win, svc = rig_window
    assert win.connect_panel.fields["port"].text() == svc.connection.port
    assert win.connect_panel.fields["firmware"].text() not in ("", "—")
    # every rail the board has is listed; one the stream leaves out (optional) says so, the rest are streamed
    listed = win.connect_panel.fields["rails"].text()
    streamed = set(svc.recording.live.rails)
    for r in svc.connection.dev.description["rails"]:
        assert r["name"] in listed
        assert (f"{r['name']} (optional: not streamed unless asked for)" in listed) == bool(r.get("optional"))
        assert (r["name"] in streamed) != bool(r.get("optional")), (r, streamed)
    # the plot scrolls: it paints finite power near the live end
    qtbot.waitUntil(lambda: win.live_view.last_summary is not None
                    and np.isfinite(win.live_view.last_summary.mean["p_total"]).any(), timeout=30_000)
    (x0, x1), _ = win.live_view.plot.getViewBox().viewRange()
    assert x1 >= svc.recording.live.duration_s - 1.0
    # the multimeter reads the same stream
    qtbot.waitUntil(lambda: win.multimeter.table.item(win.multimeter.table.rowCount() - 1, 0) is not None, timeout=5000)
    assert float(win.multimeter.table.item(win.multimeter.table.rowCount() - 1, 0).text()) > 0


def test_power_state_step_shows_on_the_plot(qtbot, rig_window):
    win, svc = rig_window
    win.drive_panel.refresh_button.click()
    qtbot.waitUntil(lambda: win.drive_panel.table.rowCount() == 5, timeout=60_000)
    if win.drive_panel.apst.isChecked():
        win.drive_panel.apst.click()                      # off: the drive stays where it is put
        assert not win.drive_panel.apst.isEnabled()       # until the drive confirms
        qtbot.waitUntil(lambda: win.drive_panel.apst.isEnabled() or bool(svc.errors), timeout=60_000)
        assert not svc.errors and not win.drive_panel.apst.isChecked()
    win.drive_panel.table.cellWidget(0, 0).click()        # Set PS0
    qtbot.waitUntil(lambda: "PS0" in win.drive_panel.state.text() or bool(svc.errors), timeout=60_000)
    assert not svc.errors
    qtbot.wait(1500)
    t_before = svc.recording.live.duration_s
    win.drive_panel.table.cellWidget(4, 0).click()        # Set PS4 (non-operational, 5 mW)
    qtbot.waitUntil(lambda: any(e["kind"] == "power_state" and e["name"] == "PS4" and e["t1"] is not None
                                for e in svc.captures.events_s()), timeout=60_000)
    step = next(e for e in svc.captures.events_s() if e["name"] == "PS4")
    qtbot.waitUntil(lambda: svc.recording.live.duration_s > step["t1"] + 1.5, timeout=30_000)
    before = _plotted_mean(win, t_before - 1.0, t_before)
    after = _plotted_mean(win, step["t1"] + 0.5, step["t1"] + 1.5)
    assert after < before - 0.5, (before, after)
    # the step is drawn on the plot's time axis with its name
    lv = win.live_view
    lv.pause()                             # the view holds still while its items are compared
    lv.plot.setXRange(step["t0"] - 2.0, step["t1"] + 1.5, padding=0)
    lv._draw_events()

    def labels():
        return [getattr(getattr(it, "label", None), "format", None) for it in lv._event_items]
    assert "PS4" in labels()
    # drawn incrementally: a redraw keeps the items of events already drawn (rebuilding all of them on
    # every new event, with the clock refit moving t0 by microseconds, grew the process overnight)
    before = list(lv._event_items)
    qtbot.wait(1500)                       # a clock refit happens in between
    lv._draw_events()
    after = {id(it) for it in lv._event_items}
    assert before and all(id(it) in after for it in before)
    # only events in or near the view have items (each labelled line is ~50 KB of Qt memory: a stream
    # polling the drive every 5 s grew the window by 15 MB in 25 minutes when all were drawn); moving
    # the view there draws them again, without a new event
    width = step["t1"] - step["t0"] + 3.5
    lv.plot.setXRange(step["t1"] + 2 * width, step["t1"] + 3 * width, padding=0)
    qtbot.waitUntil(lambda: "PS4" not in labels(), timeout=5_000)
    # and its line is gone from what the plot shows: hidden for reuse by the next event, or removed
    # (test_gui_live_view: reused, not recreated)
    assert not [it for it in lv.plot.getViewBox().addedItems
                if it.isVisible() and getattr(getattr(it, "label", None), "format", None) == "PS4"]
    lv.plot.setXRange(step["t0"] - 2.0, step["t1"] + 1.5, padding=0)
    qtbot.waitUntil(lambda: "PS4" in labels(), timeout=5_000)


def test_temperature_poll_leaves_a_non_operational_state_alone(qtbot, rig_window):
    """The drive was left in PS4 (non-operational) above: the poll reads no log there (it would wake
    the drive); in PS0 it reads the temperature and the throttle state, on the drive's worker."""
    from powerrig.core.timeline import NVME
    win, svc = rig_window
    assert svc.drive.ps_target == 4
    n_logs = len([e for e in svc.timeline.events(kind=NVME) if e.name == "smart-log"])
    with qtbot.waitSignal(svc.drive.updated, timeout=30_000, check_params_cb=lambda d: "thermal" in d or "throttle" in d):
        svc.drive.poll_thermal()
    assert "non-operational" in win.drive_panel.thermal.text()
    assert len([e for e in svc.timeline.events(kind=NVME) if e.name == "smart-log"]) == n_logs
    win.drive_panel.table.cellWidget(0, 0).click()        # Set PS0
    with qtbot.waitSignal(svc.drive.updated, timeout=60_000, check_params_cb=lambda d: "throttle" in d):
        svc.drive.poll_thermal()
    assert "throttling: none" in win.drive_panel.thermal.text()
    assert "°C" in win.drive_panel.state.text() and "PS0" in win.drive_panel.state.text()
    assert len([e for e in svc.timeline.events(kind=NVME) if e.name == "smart-log"]) > n_logs


def test_throttle_state_from_two_logs():
    from powerrig.dut.nvme import SmartLog
    from powerrig.gui.services.drive import throttle_of as throttle_state

    def log(t1, t2, warn=0):
        return SmartLog(warn, 320, 0, 0, 0, 0, 0, (t1, t2), (0, 0))
    assert throttle_state(None, log(3, 0)) == "none"
    assert throttle_state(log(3, 0), log(4, 0)) == "light throttling (TMT1)"
    assert throttle_state(log(3, 1), log(4, 2)) == "heavy throttling (TMT2)"
    assert throttle_state(log(3, 1), log(3, 1, warn=0x02)) == "over its temperature threshold"


def test_preset_runs_and_its_phase_appears(qtbot, rig_window):
    win, svc = rig_window
    wp = win.workload_panel
    wp.preset.setCurrentText("rand 4k read")
    wp.runtime.setValue(3)
    seen = []                                   # (state, what the panel showed then)
    svc.workload.updated.connect(lambda d: seen.append((d["state"], wp.result.text())))
    wp.run_button.click()
    qtbot.waitUntil(lambda: any(st in ("done", "failed") for st, _ in seen), timeout=60_000)
    assert "MiB/s" in wp.result.text(), wp.result.text()
    # while fio ran, the panel showed its MiB/s and IOPS of the last second (fio's status reports)
    states = [st for st, _ in seen]
    assert "live" in states and states.index("live") < states.index("done"), states
    shown = [text for st, text in seen if st == "live"]
    assert all("(fio's last second)" in t for t in shown), shown
    live_mib = [float(t.split(": ")[1].split(" MiB/s")[0]) for t in shown]
    assert max(live_mib) > 1.0, shown
    phases = [e for e in svc.captures.events_s() if e["kind"] == "phase"]
    assert phases and "rand-4k-read" in phases[-1]["name"]
    ph = phases[-1]
    assert 2.5 < ph["t1"] - ph["t0"] < 4.0
    qtbot.waitUntil(lambda: svc.recording.live.duration_s > ph["t1"] + 0.2, timeout=30_000)
    busy = _plotted_mean(win, ph["t0"] + 0.3, ph["t1"] - 0.3)
    idle = _plotted_mean(win, ph["t0"] - 1.0, ph["t0"] - 0.1)
    assert busy > idle + 0.5, (idle, busy)
    # its power beside its MiB/s and IOPS: the analysis' figures over the phase
    qtbot.waitUntil(lambda: "W mean" in wp.result.text(), timeout=30_000)
    from powerrig.analysis.selection import range_figures
    fig = range_figures(svc.recording.live, ph["t0"], ph["t1"])
    assert f"at {fig.mean_w['total']:.3f} W mean" in wp.result.text()
    assert "MiB/s per W" in wp.result.text()


def _run_preset(qtbot, win, svc, preset: str, seconds: int) -> dict:
    wp = win.workload_panel
    wp.preset.setCurrentText(preset)
    wp.runtime.setValue(seconds)
    ended = []
    # (a late "done" of an earlier job, its power figures, is not this one's end)
    svc.workload.updated.connect(lambda d: ended.append(d) if d["state"] in ("done", "failed")
                                 and d["name"] == preset and not ended else None)
    wp.run_button.click()
    qtbot.waitUntil(lambda: bool(ended), timeout=90_000)
    return ended[0]


def test_a_write_preset_passes_the_drive_guard_on_the_virtual_rig(qtbot, rig_window):
    """The GUI core's write path, end to end on the virtual rig: the runners come from dut.runners (the
    rig's own host view, so the guard resolves the rig's namespace), Fio.run guards the write with the
    drive's serial, and fio writes. With the GUI's own runners the guard refused the rig's namespace
    ("not a block device on this host"), and the serial was never passed to Fio.run."""
    from powerrig.core.timeline import FIO, NOTE
    win, svc = rig_window
    n_fio = len(svc.timeline.events(kind=FIO))
    d = _run_preset(qtbot, win, svc, "rand 4k write", 2)
    assert d["state"] == "done", d
    assert d["mib_s"] > 0 and d["iops"] > 0
    guards = [e for e in svc.timeline.events(kind=NOTE) if e.name == "guard"]
    assert guards and guards[-1].ok and guards[-1].meta["serial"] == svc.drive.serial
    assert guards[-1].meta["device"] == svc.drive.namespace
    assert len(svc.timeline.events(kind=FIO)) == n_fio + 1
    assert "MiB/s" in win.workload_panel.result.text()


def test_a_write_preset_on_the_wrong_drive_is_refused_and_nothing_runs(qtbot, rig_window):
    """The guard is the runner's, not the panel's: a serial that is not the drive's refuses the write
    before fio starts (one line in the panel); a read preset needs no serial."""
    from powerrig.core.timeline import FIO
    win, svc = rig_window
    serial = svc.drive.serial
    errors_before = len(svc.errors)
    try:
        for wrong, said in (("NOT-THIS-DRIVE", "NOT-THIS-DRIVE"), (None, "no drive serial number named")):
            svc.drive.serial = wrong
            n_fio = len(svc.timeline.events(kind=FIO))
            d = _run_preset(qtbot, win, svc, "seq 128k write", 2)
            assert d["state"] == "failed"
            assert said in d["error"] and "\n" not in d["error"], d["error"]
            assert len(svc.timeline.events(kind=FIO)) == n_fio            # fio never started
            assert "failed" in win.workload_panel.result.text()
    finally:
        svc.drive.serial = serial
        del svc.errors[errors_before:]


def test_markers_read_energy(qtbot, rig_window):
    win, svc = rig_window
    end = svc.recording.live.duration_s
    with qtbot.waitSignal(svc.markers.updated, timeout=30_000) as sig:
        win.live_view.place_markers(end - 3.0, end - 1.0)
    fig = sig.args[0]
    assert fig is not None and fig.dt_s == pytest.approx(2.0)
    # energy counts the data there is: mean power times the time not lost in gaps
    assert fig.energy_j["total"] == pytest.approx(fig.mean_w["total"] * (2.0 - fig.lost_s), rel=0.01)
    assert "Δt 2.0000 s" in win.multimeter.marker_label.text()
    assert win.multimeter.marker_table.item(len(svc.recording.live.rails), 1).text() == f"{fig.energy_j['total']:.4f}"
    assert win.multimeter.marker_table.rowCount() == len(svc.recording.live.rails) + 1


def test_open_the_capture_and_zoom_to_a_phase(qtbot, rig_window):
    win, svc = rig_window
    res = svc.recording.stop()
    assert res is not None and res.path.exists()
    with qtbot.waitSignal(svc.captures.analysis_ready, timeout=60_000):
        svc.captures.open(res.path)
    table = win.analysis_table
    assert table.table.rowCount() >= 2
    names = [table.table.item(k, 0).text() for k in range(table.table.rowCount())]
    k = next(i for i, n in enumerate(names) if "rand-4k-read" in n)
    table.table.cellClicked.emit(k, 0)
    a, b = table.spans[k]
    qtbot.waitUntil(lambda: win.live_view.last_summary is not None
                    and win.live_view.last_summary.t[0] <= a + 0.5 and win.live_view.last_summary.t[-1] >= b - 0.5
                    and win.live_view.last_summary.t[-1] - win.live_view.last_summary.t[0] < (b - a) * 1.5,
                    timeout=30_000)
    assert not win.live_view.following


def test_wrong_port_says_so_in_the_window(qtbot, app_env):
    svc = Services(capture_dir=app_env / "captures2")
    win = MainWindow(svc)
    try:
        win.connect_panel.set_port("/dev/ttyNOPE0")
        win.connect_panel.connect_button.click()
        qtbot.waitUntil(lambda: "does not exist" in win.connect_panel.message.text(), timeout=30_000)
        assert svc.connection.dev is None
    finally:
        win.close()


def test_read_drive_without_apst_fills_the_table_with_no_error(qtbot, app_env):
    """`powerrig gui --sim`: the default virtual drive, like many enterprise drives, has no APST
    (feature 0x0c; id-ctrl APSTA = 0). Read drive (run on connect) fills the power-state table and
    says APST is not supported; it asks nothing the drive lacks (this was a red "nvme-cli failed ...
    get-feature --feature-id=12" and an empty table)."""
    from powerrig.core.timeline import NVME
    svc = Services(capture_dir=app_env / "captures-noapst")
    win = MainWindow(svc)
    errors = []
    svc.core.error.connect(errors.append)
    try:
        svc.connection.connect_sim()                              # the default profile, as `powerrig gui --sim`
        qtbot.waitUntil(lambda: win.drive_panel.table.rowCount() > 0 or bool(errors), timeout=60_000)
        assert not errors, errors
        dp = win.drive_panel
        assert not svc.drive.identity.apsta
        assert dp.table.rowCount() == svc.drive.identity.npss + 1
        assert "not supported" in dp.apst.text() and not dp.apst.isEnabled() and not dp.apst.isChecked()
        assert win.connect_panel.message.text() == ""
        with qtbot.waitSignal(svc.drive.updated, timeout=60_000, check_params_cb=lambda d: "identity" in d):
            dp.refresh_button.click()                   # again, by hand: the same
        assert not errors and not dp.apst.isEnabled()
        failed = [e.name for e in svc.timeline.events(kind=NVME) if e.ok is False]
        assert not failed, failed
    finally:
        win.close()


def test_cli_gui_with_an_unknown_profile_is_one_line():
    from conftest import run_cli
    r = run_cli("gui", "--sim", "--profile", "nope")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "client-apst" in r.stderr and "d5-p5336" in r.stderr
    r = run_cli("gui", "--profile", "client-apst")
    assert r.returncode == 2 and "add --sim" in r.stderr


def test_cli_gui_with_a_missing_capture_is_one_line(tmp_path):
    from conftest import run_cli
    r = run_cli("gui", "--capture", str(tmp_path / "nope.jls"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no such file" in r.stderr


def test_interposer_lost_mid_stream_says_so_and_keeps_the_capture(qtbot, app_env):
    from powerrig.sim import rig
    svc = Services(capture_dir=app_env / "captures3")
    svc.recording.reconnect_s = 2.0                              # it does not come back: the capture ends
    win = MainWindow(svc)
    shown = []                                         # every message (a loaded machine may paint only the last)
    svc.core.error.connect(shown.append)
    try:
        svc.connection.connect_sim()
        qtbot.waitUntil(lambda: svc.recording.live is not None and svc.recording.live.length > 1000, timeout=60_000)
        path = svc.recording.capture_path
        rig.stop(svc.connection.rig["id"])                       # the interposer (and its SSD) go away
        qtbot.waitUntil(lambda: "lost" in win.connect_panel.message.text(), timeout=60_000)
        assert any("lost" in m and "waiting up to 2 s" in m for m in shown), shown
        qtbot.waitUntil(lambda: "Reconnect to go on" in win.connect_panel.message.text(), timeout=60_000)
        assert str(path) in win.connect_panel.message.text()
        assert svc.connection.dev is None and "link lost" in win.connect_panel.fields["port"].text()
        from powerrig.capture.reader import CaptureReader
        with CaptureReader(path) as cap:
            assert cap.length > 1000 and cap.recording["end_reason"] == "link-lost"
    finally:
        win.close()


def test_fio_status_follower_reads_real_fio_while_it_runs(tmp_path):
    """The live MiB/s and IOPS come from fio's own periodic status documents: real fio on a file."""
    import shutil

    from powerrig.dut.fio import Fio, FioJob, FioPlan
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (scripts/setup.sh installs it)")
    got = []
    job = FioJob("live", rw="write", bs="64k", iodepth=1, size="16m", runtime=3, time_based=True,
                 filename=str(tmp_path / "target.bin"))
    res = Fio(["fio"]).run(FioPlan([job], status_interval=1), tmp_path / "out", name="live", on_status=got.append)
    assert res.status_reports >= 1
    assert len(got) >= 1 and all(g["mib_s"] > 0 and g["iops"] > 0 for g in got), got
    # each report is a rate over its own interval: 64 KiB per I/O
    for g in got:
        assert g["mib_s"] * 2**20 / g["iops"] == pytest.approx(65536, rel=0.05)


def test_fio_status_follower_waits_for_a_whole_document(tmp_path):
    from powerrig.dut.fio import StatusFollower
    doc = {"timestamp_ms": 10_000, "jobs": [{"job_runtime": 1000, "read": {"io_bytes": 2**20, "total_ios": 256}}]}
    out = tmp_path / "fio.json"
    text = json.dumps(doc, indent=2) + "\n"
    out.write_text(text[:-20])                        # fio is still writing it
    got = []
    f = StatusFollower(out, got.append)
    assert f.poll() == 0 and not got
    doc2 = {"timestamp_ms": 10_500, "jobs": [{"job_runtime": 1500, "read": {"io_bytes": 3 * 2**20, "total_ios": 768}}]}
    out.write_text(text + json.dumps(doc2, indent=2) + "\n")
    assert f.poll() == 2
    assert got == [{"mib_s": 1.0, "iops": 256.0, "t": 10.0, "runtime_s": 1.0},
                   {"mib_s": 4.0, "iops": 1024.0, "t": 10.5, "runtime_s": 1.5}]
