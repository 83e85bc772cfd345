"""The analysis table of an opened capture says when a channel was at full scale: the phase's mean
power and energy read "(lower bound)", its cells' tooltip is the verdict's why (synthetic records
decoded by the host, test_range_clipping's helpers; the widget offscreen)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from PySide6.QtCore import QObject, Signal

from powerrig.analysis.pipeline import analyse
from powerrig.analysis.source import ArraySource
from powerrig.core.rails import rails
from powerrig.core.timeline import PHASE, Event
from powerrig.gui.capture_browser.widget import COLUMNS, AnalysisTable
from powerrig.testing.synthetic import clock
from test_range_clipping import CODE_MAX, SPI, decode, raw_trace


class _Captures(QObject):
    analysis_ready = Signal(object)


def test_clipped_phase_reads_lower_bound_with_the_why(qapp, qtbot):
    n = 2000
    v, i = raw_trace(n, seed=5)
    i[1200 * SPI:1500 * SPI, 1] = 1.3 * CODE_MAX
    cl = clock()
    utc = lambda sid: float(cl.utc(1_000_000 + sid * SPI))          # noqa: E731
    src = ArraySource.from_blocks(decode(v, i), cl)
    meta = {"device": {"rails": [{"name": r.name, "v_lsb": r.v_lsb, "i_lsb": r.i_lsb} for r in rails().rails]}}
    an = analyse(src, [Event(PHASE, "idle ps0", utc(100), utc(900)), Event(PHASE, "format", utc(1000), utc(1900))],
                 meta)
    table = AnalysisTable(SimpleNamespace(captures=_Captures()))
    qtbot.addWidget(table)
    table.show_analysis(an)
    rows = {table.table.item(k, 0).text(): k for k in range(table.table.rowCount())}
    energy, mean = COLUMNS.index("energy J"), COLUMNS.index("mean W")
    fmt = rows["format"]
    assert table.table.item(fmt, energy).text().endswith(" (lower bound)")
    assert table.table.item(fmt, mean).text().endswith(" (lower bound)")
    why = table.table.item(fmt, energy).toolTip()
    assert why.startswith("3V3 current at the channel's 1.0 A full scale in 300 of ") and "lower bounds" in why
    idle = rows["idle ps0"]
    assert "lower bound" not in table.table.item(idle, energy).text() and not table.table.item(idle, energy).toolTip()
    assert "range saturated" in table.title.toolTip()
    assert np.isfinite(float(table.table.item(fmt, energy).text().split()[0]))
