"""Start the app: ``powerrig gui [--sim [--profile NAME]] [--port PORT] [--capture FILE]``."""
from __future__ import annotations

import signal
import sys


def start(sim: bool = False, capture: str | None = None, port: str | None = None, profile: str | None = None):
    """The window as ``powerrig gui`` opens it (shown, connecting): (QApplication, Services, MainWindow).
    The screenshot script starts it the same way."""
    from PySide6.QtWidgets import QApplication

    from powerrig.gui.main_window import MainWindow
    from powerrig.gui.prefs import settings
    from powerrig.gui.services import Services

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName("powerrig")
    app.setApplicationName("powerrig-gui")
    svc = Services(capture_dir=settings().value("capture_dir") or None)
    win = MainWindow(svc)
    win.show()
    if sim:
        svc.connection.connect_sim(profile)
    elif port:
        svc.connection.connect_port(port)
    if capture:
        svc.captures.open(capture)
    return app, svc, win


def main(sim: bool = False, capture: str | None = None, port: str | None = None, profile: str | None = None) -> int:
    app, _svc, win = start(sim, capture, port, profile)
    # Ctrl-C or a kill closes the window the normal way: the recording is closed, the virtual rig
    # stopped (the core's timer lets Python run the handler)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: win.close())
    return app.exec()
