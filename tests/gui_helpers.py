"""Shared by the GUI tests: a settings store of the test's own, and a synthetic stream on the plot."""
from __future__ import annotations

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
