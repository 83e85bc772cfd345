"""The app's persisted settings (QSettings: last port, theme, units, colours, panel layout, sweep paths),
one place so every panel reads and writes the same store."""
from __future__ import annotations

from PySide6.QtCore import QSettings

ORG, APP = "powerrig", "powerrig-gui"


def settings() -> QSettings:
    """An INI file per user (~/.config/powerrig/powerrig-gui.ini), named explicitly: QSettings(org, app)
    ignores QSettings.setPath, so tests and the screenshot script could not keep theirs apart."""
    return QSettings(QSettings.IniFormat, QSettings.UserScope, ORG, APP)
