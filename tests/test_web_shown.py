"""The web page for people (issue 40 item 9): a measurement's notes as a table of figures with units and
four significant digits instead of raw JSON, what a measurement means beside it (ready-idle GB per W),
steps numbered in the URL as on the page, and two runs compared as a chart as well as a table."""
from __future__ import annotations

import json
import re

from powerrig.results import ResultStore
from powerrig.sweep.plan import parse
from powerrig.web.app import create_app
from powerrig.web.shown import meaning, notes_rows, number

from test_results_store import PLAN, fill


def test_notes_read_as_figures_with_units():
    rows = dict(notes_rows(json.dumps({"from": "set-feature start", "command_s": 0.24615450131502786,
                                       "before_w": 5.49837777523846, "to_ps": 0, "limit": None})))
    assert rows == {"from": "set-feature start", "command s": "0.2462 s", "before w": "5.498 W", "to ps": "0",
                    "limit": "-"}
    assert notes_rows(json.dumps(["phase is 8 s; OCP asks for >= 15 min"])) == [("", "phase is 8 s; OCP asks for >= 15 min")]
    assert notes_rows("plain words") == [("", "plain words")] and notes_rows(None) == []
    assert [number(v) for v in (1234.5678, 0.000123456, 12.0, 3.5e-7)] == ["1235", "0.0001235", "12.00", "3.500e-07"]
    assert "capacity" in meaning("efficiency.ready_idle_gb_per_w") and meaning("no.such") == ""


def test_step_page_compare_chart_and_step_numbers(results_db):
    writer = ResultStore(results_db)
    plan = parse(PLAN)
    a = fill(writer, plan, [5.0, 10.0, 6.0, 9.0])
    b = fill(writer, plan, [5.5, 8.0, 6.0, 9.0])
    client = create_app(ResultStore(results_db, read_only=True)).test_client()
    run = client.get(f"/run/{a}").get_data(as_text=True)
    links = re.findall(rf'class="step-link" href="/run/{a}/step/(\d+)"', run)
    numbers = re.findall(r"<tr><td>(\d+)</td><td class=\"l\"><a class=\"step-link\"", run)
    assert links == numbers and links[0] == "1"                 # the URL says the number the page shows
    step = client.get(f"/run/{a}/step/1").get_data(as_text=True)
    assert 'class="notes"' in step and "<td class=\"l\" colspan=\"2\">short</td>" in step
    assert '["short"]' not in step                              # no raw JSON
    assert 'id="meanings"' in step and "MiB/s divided by the phase" in step
    assert client.get(f"/run/{a}/step/0").status_code == 404
    cmp = client.get(f"/compare?a={a}&b={b}").get_data(as_text=True)
    chart = cmp[cmp.index('id="compare-chart"'):cmp.index("</figure>")]
    assert "<svg" in chart and "throughput against power" in chart and "idle and active power" in chart
    assert "MiB/s a" in cmp and "idle W a" in cmp
