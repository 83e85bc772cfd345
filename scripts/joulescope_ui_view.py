"""Open a powerrig capture in the Joulescope UI and save a screenshot (run with the Joulescope tier's
virtualenv under X, e.g. `xvfb-run -s '-screen 0 1366x768x24' .venv-jsui/bin/python
scripts/joulescope_ui_view.py CAPTURE.jls OUT.png`).

The UI is started as a user starts it (its own `run(filename=...)`) in a throw-away profile folder,
with its network calls (software update check, reporter) refused: nothing leaves the machine. After
``--wait`` seconds the screen is grabbed and the UI closed. Exit 1 if the window never showed.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture")
    ap.add_argument("out")
    ap.add_argument("--wait", type=float, default=12.0, help="seconds to let the UI load and draw")
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="jsui-home-")
    os.environ["HOME"] = home                      # the UI's settings and logs go to a throw-away profile
    os.environ.setdefault("XDG_CONFIG_HOME", os.path.join(home, ".config"))

    import requests

    def offline(*_a, **_k):
        raise requests.ConnectionError("powerrig: the Joulescope UI runs offline here")
    requests.get = requests.put = requests.post = offline

    from PySide6 import QtCore, QtWidgets
    shown = {"ok": False}
    real_exec = QtWidgets.QApplication.exec

    def show_every_rail():
        """What a user clicks: the power plot on, and one trace per source (rail) instead of the default."""
        app = QtWidgets.QApplication.instance()
        for top in app.topLevelWidgets():
            for w in top.findChildren(QtWidgets.QWidget):
                if type(w).__name__ != "WaveformWidget":
                    continue
                pubsub = w.pubsub
                subs = [s for s in (pubsub.query(f"{w.topic}/settings/subsources") or []) if s != "default"]
                pubsub.publish(f"{w.topic}/actions/!plot_show", ["p", True])
                pubsub.publish(f"{w.topic}/settings/trace_subsources", (subs + [None] * 4)[:4])
                pubsub.publish(f"{w.topic}/settings/trace_priority", [k if k < len(subs) else None for k in range(4)])
                print(f"waveform {w.topic}: traces {subs}", file=sys.stderr)

    def exec_with_screenshot(*a, **k):
        app = QtWidgets.QApplication.instance()

        def shot():
            wins = [w for w in app.topLevelWidgets() if w.isVisible() and isinstance(w, QtWidgets.QMainWindow)]
            if wins:
                win = wins[0]
                win.showMaximized()
                app.processEvents()
                pix = app.primaryScreen().grabWindow(0)
                shown["ok"] = pix.save(args.out)
            app.quit()
        QtCore.QTimer.singleShot(int(args.wait * 500), show_every_rail)
        QtCore.QTimer.singleShot(int(args.wait * 1000), shot)
        return real_exec()
    QtWidgets.QApplication.exec = exec_with_screenshot

    from joulescope_ui import main as ui_main
    ui_main.MainWindow._startup_software_check = lambda self: None
    try:
        ui_main.run(filename=os.path.abspath(args.capture))
    except SystemExit:
        pass
    print(f"screenshot {'saved to ' + args.out if shown['ok'] else 'NOT taken: no main window'}", file=sys.stderr)
    return 0 if shown["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
