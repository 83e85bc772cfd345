"""Screenshots of the desktop app's main views from a real window, for docs/user-guide.md.

    xvfb-run -a -s "-screen 0 1366x768x24" python scripts/gui_screenshots.py [--out docs/img]

First the window as `powerrig gui --sim` opens it (``--views start``): the default virtual drive read,
its power-state table filled, no error shown, and no panel cut off on the screen (checked; exit 1
otherwise). Then it brings up a virtual rig (client drive with APST and non-operational states), connects, runs a preset,
sets a power state, places markers, then opens the recording as a saved capture; then runs the
D5-P5336 power-state plan (timings shortened) in the Sweep panel, opens a workload step's capture
whole (the sweep's events on it) and drags the bottom dock up as far as it goes; saves one PNG per view
(``--views live`` or ``--views sweep`` for one part; tests/test_gui_screenshots.py takes ``live``). Needs a display (Xvfb) so the window is a real one, not the offscreen platform.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def wait(app, cond, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"gui_screenshots: timed out waiting for {what}")
        app.processEvents()
        time.sleep(0.02)


def settle(app, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        app.processEvents()
        time.sleep(0.02)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "docs" / "img"))
    ap.add_argument("--profile", default="client-apst")
    ap.add_argument("--views", default="all", choices=("all", "start", "live", "sweep"),
                    help="which screenshots to take")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="powerrig-shots-"))
    os.environ.setdefault("POWERRIG_SIM_DIR", str(tmp / "sim"))

    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp / "settings"))
    app = QApplication(sys.argv[:1])
    from powerrig.gui.app import start
    from powerrig.gui.main_window import MainWindow
    from powerrig.gui.services import Services

    errors: list[str] = []
    problems: list[str] = []

    def shooter(win):
        def shot(name: str) -> None:
            settle(app, 0.8)
            path = out / f"{name}.png"
            win.grab().save(str(path))
            print(path)
        return shot

    if a.views in ("all", "start"):
        from powerrig.gui.prefs import settings
        settings().setValue("capture_dir", str(tmp / "captures-start"))
        _app, svc, win = start(sim=True)             # as `powerrig gui --sim` opens
        svc.core.error.connect(errors.append)
        try:
            problems += start_view(app, svc, win, shooter(win))
        finally:
            win.close()
    if a.views != "start":
        svc = Services(capture_dir=tmp / "captures")
        win = MainWindow(svc)
        win.show()
        svc.core.error.connect(errors.append)
        try:
            if a.views in ("all", "live"):
                live_views(app, svc, win, shooter(win), a.profile)
            if a.views in ("all", "sweep"):
                problems += sweep_views(app, win, shooter(win), tmp)
        finally:
            win.close()
    if errors or problems:
        print("errors shown in the window:", *errors, "cut off:", *problems, sep="\n  ")
        return 1
    return 0


def cut_off(win) -> list[str]:
    """What of the window a user could not see: the window past the screen, a panel outside the window
    or narrower than its content (panels scroll up and down only), a plot control past its edge."""
    from PySide6.QtCore import QPoint, QRect
    out = []
    screen = win.screen().availableGeometry()
    if not screen.contains(win.frameGeometry()):
        out.append(f"the window {win.frameGeometry()} is not inside the screen {screen}")

    def inside(child, ancestor) -> bool:
        return ancestor.rect().contains(QRect(child.mapTo(ancestor, QPoint(0, 0)), child.size()))
    for name, d in win.docks.items():
        if d.visibleRegion().isEmpty():
            continue                                  # a tab behind another
        if not inside(d, win):
            out.append(f"the {name} panel reaches past the window")
        panel = d.widget().widget()
        if panel.width() < panel.minimumSizeHint().width() or d.widget().horizontalScrollBar().isVisible():
            out.append(f"the {name} panel is cut at its side ({panel.width()} < {panel.minimumSizeHint().width()} px)")
    lv = win.live_view
    for w in (lv.quantity, lv.auto_y, lv.y_min, lv.y_max, lv.markers_button, lv.float_button, lv.zoom_all,
              lv.live_button):
        name = w.text() if hasattr(w, 'text') else type(w).__name__
        if not inside(w, lv):
            out.append(f"the plot's {name} control is cut off")
        elif QRect(w.mapTo(lv, QPoint(0, 0)), w.size()).intersects(lv.plot.geometry()):
            out.append(f"the plot covers its {name} control")
    if lv.plot.height() < lv.PLOT_MIN_H:
        out.append(f"the plot is squeezed to {lv.plot.height()} px (its axes need {lv.PLOT_MIN_H})")
    mm = win.multimeter
    if mm.table.horizontalHeader().length() > mm.table.viewport().width():
        out.append("the multimeter's columns do not all show")
    return out


def start_view(app, svc, win, shot) -> list[str]:
    """`powerrig gui --sim` on this screen as it opens: connected, the drive read (the default virtual
    drive has no APST), samples on the plot, the Connect tab raised with the Drive, Workload and Power
    tabs beside it (no tab raised by hand)."""
    from PySide6.QtWidgets import QTabBar
    wait(app, lambda: svc.recording.live is not None and svc.recording.live.duration_s > 4
         and win.live_view.last_summary is not None, 60, "samples")
    wait(app, lambda: win.drive_panel.table.rowCount() > 0, 60, "the drive's power-state table")
    settle(app, 2.0)
    g = win.screen().geometry()
    shot(f"gui-sim-{g.width()}x{g.height()}")
    found = cut_off(win)
    bars = [tb for tb in win.findChildren(QTabBar) if tb.isVisible() and "Connect" in
            [tb.tabText(i) for i in range(tb.count())]]
    tabs = [tb.tabText(i) for tb in bars[:1] for i in range(tb.count())]
    raised = bars[0].tabText(bars[0].currentIndex()) if bars else None
    if raised != "Connect" or "Power" not in tabs:
        found.append(f"the window opens on {raised!r} with tabs {tabs}, not on Connect with a Power tab")
    print(f"window {win.width()}x{win.height()} on a {g.width()}x{g.height()} screen; tabs {' | '.join(tabs)}, "
          f"{raised} raised; {win.drive_panel.table.rowCount()} power states; {win.drive_panel.apst.text()}; "
          f"cut off: {found or 'nothing'}")
    return found


def sweep_views(app, win, shot, tmp: Path) -> list[str]:
    """The overnight sweep walk-through: the shipped D5-P5336 plan, timings cut to a minute's run."""
    from PySide6.QtCore import Qt
    plans = Path(__file__).resolve().parents[1] / "fixtures" / "plans"
    text = (plans / "d5-p5336-power-states.toml").read_text()
    text = text.replace("settle_s = 1.0", "settle_s = 0.5").replace("idle_s = 3.0", "idle_s = 1.5") \
               .replace("measure_s = 8.0", "measure_s = 3.0")
    plan = tmp / "d5-p5336-power-states.toml"
    plan.write_text(text)
    panel = win.sweep_panel
    panel.db.setText(str(tmp / "results.sqlite"))
    panel.out_root.setText(str(tmp / "sweeps"))
    panel.open_url = lambda url: print("report:", url.toLocalFile())
    panel.load_plan(str(plan))
    settle(app, 0.5)                              # the window's own first-show tab choice goes first
    win.docks["Sweep"].raise_()
    win.resizeDocks([win.docks["Sweep"]], [560], Qt.Vertical)
    settle(app, 0.5)
    shot("sweep-plan")
    panel.run_button.click()
    wait(app, lambda: panel.table.rowCount() >= 4 or not panel.runner.running, 300, "four steps of the sweep")
    show_table(panel)
    shot("sweep-running")
    wait(app, lambda: not panel.runner.running, 600, "the end of the sweep")
    wait(app, lambda: panel.table.rowCount() == 9, 60, "the whole results table")
    settle(app, 1.0)
    show_table(panel)
    shot("sweep-done")
    panel.report_button.click()
    wait(app, lambda: hasattr(panel, "report_path"), 120, "the sweep report")

    # a workload step's capture opened whole: its fio:/measure: phases, the power-state change and the
    # drive polls of the step (a quiet track, not labels)
    caps = sorted(Path(panel.out_root.text()).rglob("*.jls"))
    step = next((c for c in caps if "seq-write" in c.name), caps[-1])
    win.svc.captures.open(step)
    wait(app, lambda: getattr(win.svc.captures.source, "path", None) == step
         and win.analysis_table.table.rowCount() > 0, 120, "the step's capture")
    win.docks["Analysis"].raise_()
    win.resizeDocks([win.docks["Analysis"]], [250], Qt.Vertical)
    win.live_view.show_all()
    settle(app, 1.5)
    shot("gui-whole-capture-sweep")
    win.resizeDocks([win.docks["Analysis"]], [2000], Qt.Vertical)     # dragged up as far as it goes
    settle(app, 1.5)
    shot("gui-bottom-dock-enlarged")
    return cut_off(win)


def show_table(panel) -> None:
    """The sweep panel's controls scrolled down to its results table, as a user does on a short dock
    (the plot above keeps its room; the charts beside always show whole)."""
    from PySide6.QtWidgets import QScrollArea
    area = next(a for a in panel.findChildren(QScrollArea) if a.widget().isAncestorOf(panel.table))
    area.verticalScrollBar().setValue(area.verticalScrollBar().maximum())


def live_views(app, svc, win, shot, profile: str) -> None:
    """Connect, watch, set power states, run a preset with markers, open the capture, dark theme."""
    svc.connection.connect_sim(profile)
    wait(app, lambda: svc.recording.live is not None and svc.recording.live.duration_s > 4 and win.live_view.last_summary is not None,
         60, "samples")
    win.live_view.rail_boxes[svc.recording.live.rails[1]].setChecked(True)
    win.docks["Connect"].raise_()
    settle(app, 2.0)
    shot("connect-live")

    win.docks["Drive"].raise_()
    wait(app, lambda: win.drive_panel.table.rowCount() > 0, 60, "the drive's power states")
    if win.drive_panel.apst.isChecked():
        win.drive_panel.apst.click()
        wait(app, lambda: win.drive_panel.apst.isEnabled(), 60, "APST off")
    svc.drive.set_power_state(0)
    wait(app, lambda: "PS0" in win.drive_panel.state.text(), 60, "PS0")
    settle(app, 2.0)
    svc.drive.set_power_state(4)
    wait(app, lambda: "PS4" in win.drive_panel.state.text(), 60, "PS4")
    settle(app, 2.5)
    svc.drive.set_power_state(0)
    wait(app, lambda: "PS0" in win.drive_panel.state.text(), 60, "PS0 again")
    settle(app, 2.0)
    end = svc.recording.live.duration_s
    steps = [e for e in svc.captures.events_s() if e["kind"] == "power_state"]
    win.live_view.pause()
    win.live_view.zoom_to(max(0.0, steps[-3]["t0"] - 2.0 if len(steps) >= 3 else end - 20), end)
    shot("drive-power-states")
    win.live_view.go_live()

    win.docks["Workload"].raise_()
    wp = win.workload_panel
    wp.preset.setCurrentText("rand 4k read")
    wp.runtime.setValue(4)
    wp.run_button.click()
    # the job's end: the live figures while it runs say MiB/s too
    wait(app, lambda: not wp.stop_button.isEnabled() and ("MiB/s" in wp.result.text() or "failed" in wp.result.text()),
         120, "the preset")
    settle(app, 2.0)
    end = svc.recording.live.duration_s
    win.live_view.pause()
    win.live_view.zoom_to(max(0.0, end - 12.0), end)
    settle(app, 0.5)
    ph = [e for e in svc.captures.events_s() if e["kind"] == "phase"][-1]
    win.live_view.place_markers(ph["t0"] + 0.5, ph["t1"] - 0.5)
    wait(app, lambda: win.multimeter.figures is not None, 30, "marker figures")
    shot("workload-markers")

    res = svc.recording.stop()
    svc.captures.open(res.path)
    wait(app, lambda: win.analysis_table.table.rowCount() > 0, 120, "the capture's analysis")
    settle(app, 1.0)
    shot("open-capture")
    names = [win.analysis_table.table.item(k, 0).text() for k in range(win.analysis_table.table.rowCount())]
    k = next((i for i, n in enumerate(names) if "rand-4k-read" in n), 0)
    win.analysis_table.table.selectRow(k)
    win.analysis_table.table.cellClicked.emit(k, 0)
    settle(app, 1.5)
    shot("open-capture-zoomed")

    win.set_theme("dark")
    settle(app, 1.0)
    shot("dark-theme")
    win.set_theme("light")


if __name__ == "__main__":
    raise SystemExit(main())
