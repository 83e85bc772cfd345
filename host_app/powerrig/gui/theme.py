"""Light and dark themes (Qt's Fusion style with a palette; the plot follows)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

THEMES = ("light", "dark")


def apply(name: str) -> None:
    app = QApplication.instance()
    if app is None:
        return
    app.setStyle("Fusion")
    if name == "dark":
        p = QPalette()
        for role, c in ((QPalette.Window, "#2b2b2b"), (QPalette.WindowText, "#e0e0e0"), (QPalette.Base, "#1e1e1e"),
                        (QPalette.AlternateBase, "#2b2b2b"), (QPalette.Text, "#e0e0e0"), (QPalette.Button, "#3a3a3a"),
                        (QPalette.ButtonText, "#e0e0e0"), (QPalette.Highlight, "#3d7bd9"),
                        (QPalette.HighlightedText, "#ffffff"), (QPalette.ToolTipBase, "#2b2b2b"),
                        (QPalette.ToolTipText, "#e0e0e0")):
            p.setColor(role, QColor(c))
        for role in (QPalette.WindowText, QPalette.Text, QPalette.ButtonText):
            p.setColor(QPalette.Disabled, role, QColor("#7a7a7a"))
        app.setPalette(p)
        pg.setConfigOptions(foreground="#d0d0d0")
    else:
        app.setPalette(app.style().standardPalette())
        pg.setConfigOptions(foreground="#202020")


def plot_background(name: str) -> str:
    return "#1e1e1e" if name == "dark" else "#ffffff"


def foreground(name: str) -> str:
    return "#d0d0d0" if name == "dark" else "#202020"


def legend_background(name: str) -> str:
    return "#2b2b2bd0" if name == "dark" else "#ffffffd0"


def show_numbers(plot, shown: bool, sides=("left", "bottom")) -> None:
    """Tick numbers on a plot's axes, or none: a plot with nothing drawn showed numbers of nothing
    (-400...400 mW, "power state 0.2"); ``shown`` gives the axis its own ticks back."""
    for side in sides:
        plot.getAxis(side).setTicks(None if shown else [[]])


def restyle_plot(widget, name: str) -> None:
    """Re-colour a plot made under the other theme: pyqtgraph fixes axis, title and legend text colours
    when they are created, so a switch must repaint them (dark text on a dark plot is unreadable)."""
    fg = foreground(name)
    widget.setBackground(plot_background(name))
    item = widget.getPlotItem()
    for ax in ("left", "bottom", "right", "top"):
        a = item.getAxis(ax)
        a.setPen(fg)
        a.setTextPen(fg)
        if a.label is not None:
            a.label.setDefaultTextColor(pg.mkColor(fg))
    title = item.titleLabel
    if title.text:
        title.setText(title.text, color=fg)
    legend = item.legend
    if legend is not None:
        legend.setLabelTextColor(fg)
        legend.setBrush(pg.mkBrush(legend_background(name)))
        for _sample, label in legend.items:
            label.setText(label.text, color=fg)
