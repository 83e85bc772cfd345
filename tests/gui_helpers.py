"""Shared by the GUI tests: a settings store of the test's own, a synthetic stream on the plot, and a
window on a virtual rig of its own."""
from __future__ import annotations

import os
from contextlib import contextmanager

from PySide6.QtCore import QSettings


def private_settings(folder) -> None:
    """QSettings (the app's INI file) under ``folder``, not the user's."""
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(folder / "settings"))


def show_synthetic(svc, seconds: float = 3.0):
    """A LiveSource fed with ``seconds`` of the synthetic board's blocks, put on the plot as the
    captures service would; returns it."""
    from powerrig.gui.source import LiveSource
    from powerrig.testing import synthetic as S
    blocks = list(S.interval_blocks(seconds, rows_per_block=1000, first_index=1000))
    live = LiveSource.for_block(blocks[0])
    for b in blocks:
        live.feed(b)
    svc.captures.show(live)
    return live


@contextmanager
def sim_window(qapp, folder, ready):
    """A main window connected to a virtual rig of its own (POWERRIG_SIM_DIR under ``folder``, private
    settings), yielded as (window, services, qtbot) once the live stream runs and ``ready(win, svc)``
    holds; errors in ``svc.errors``, status lines in ``svc.said``. The window closes and the sim folder
    setting is restored after."""
    from pytestqt.qtbot import QtBot

    from powerrig.gui.main_window import MainWindow
    from powerrig.gui.services import Services
    old = os.environ.get("POWERRIG_SIM_DIR")
    os.environ["POWERRIG_SIM_DIR"] = str(folder / "sim")
    private_settings(folder)
    svc = Services(capture_dir=folder / "captures")
    win = MainWindow(svc)
    win.show()
    bot = QtBot(qapp)
    svc.errors, svc.said = [], []
    svc.core.error.connect(svc.errors.append)
    svc.core.status.connect(svc.said.append)
    svc.connection.connect_sim()
    try:
        bot.waitUntil(lambda: svc.recording.live is not None and svc.recording.live.length > 2000
                      and ready(win, svc), timeout=60_000)
        yield win, svc, bot
    finally:
        win.close()
        if old is None:
            os.environ.pop("POWERRIG_SIM_DIR", None)
        else:
            os.environ["POWERRIG_SIM_DIR"] = old
