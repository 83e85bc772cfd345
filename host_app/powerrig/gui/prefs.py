"""The app's persisted settings (QSettings: last port, theme, units, colours, panel layout, sweep paths),
one place so every panel reads and writes the same store."""
from __future__ import annotations

from PySide6.QtCore import QSettings

ORG, APP = "powerrig", "powerrig-gui"


def settings() -> QSettings:
    return QSettings(ORG, APP)
