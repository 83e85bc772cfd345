"""The results web page's pages through Flask's test client, on SQLite and PostgreSQL: runs per rig, a
run's steps with W, MiB/s, MiB/s/W and verdicts, a step's measurements, the curves per plan and drive,
two runs compared, the live state of a running rig, and a store that cannot write."""
from __future__ import annotations

import re
import time

import pytest
from sqlalchemy import insert

from powerrig.results import ResultsError, ResultStore
from powerrig.results import schema as S
from powerrig.sweep.plan import parse
from powerrig.web.app import create_app

from test_results_store import PLAN, fill


@pytest.fixture
def site(results_db):
    writer = ResultStore(results_db)
    plan = parse(PLAN)
    a = fill(writer, plan, [5.0, 10.0, 6.0, 9.0])
    b = fill(writer, plan, [5.5, 8.0, 6.0, 9.0])
    running = writer.start_run(plan, "out", station="rig-2", drive={"sn": "SN2"})
    writer.record_live(running, station="rig-2", n=2, m=4, step_key="ps0/seq-read/r1", step_name="PS0 seq-read",
                       watts=7.25, mib_s=3100.0, ends_utc=None)
    store = ResultStore(results_db, read_only=True)
    return create_app(store).test_client(), (a, b, running), writer, store


def test_index_shows_runs_per_rig_and_the_live_state(site):
    client, (a, b, running), writer, _ = site
    html = client.get("/").get_data(as_text=True)
    assert "<h3>rig-1</h3>" in html and "<h3>rig-2</h3>" in html
    live = html[html.index('id="live-table"'):html.index('id="rigs"')]
    assert f'href="/run/{running}"' in live and "2 of 4" in live and "7.25" in live and "PS0 seq-read" in live
    writer.set_run_status(running, "interrupted")          # a run no longer running leaves the live view
    assert "No sweep is running" in client.get("/").get_data(as_text=True)


def test_run_step_curves_and_compare_pages(site):
    client, (a, b, _), _, _ = site
    html = client.get(f"/run/{a}").get_data(as_text=True)
    rows = re.findall(r"<tr><td>\d+</td>.*?</tr>", html, re.S)
    assert len(rows) == 4
    assert "10.00" in rows[1] and "1000.0" in rows[1] and "100.00" in rows[1] and "1 pass" in rows[1]
    assert '<figure id="run-chart"><svg' in html
    step = client.get(f"/run/{a}/step/2").get_data(as_text=True)
    assert "OCP PCM-1" in step and "25.000" in step and 'class="l pass"' in step
    curves = client.get(f"/curves?plan={parse(PLAN).hash}&drive=SN1").get_data(as_text=True)
    assert curves.count("<svg") == 1 and f'href="/run/{a}"' in curves and f'href="/run/{b}"' in curves
    cmp = client.get(f"/compare?a={a}&b={b}").get_data(as_text=True)
    assert "ps0/seq-read/r1" in cmp and "-2.00" in cmp and "25.0" in cmp
    assert client.get("/run/999").status_code == 404 and "no run 999" in client.get("/run/999").get_data(as_text=True)


def test_the_page_cannot_write_and_does_not_create_databases(site, tmp_path):
    _, (a, _, _), _, store = site
    with pytest.raises(ResultsError):
        store.set_run_status(a, "failed")
    assert ResultStore(store.url).run(a)["status"] == "done"
    with pytest.raises(ResultsError, match="no results database"):
        ResultStore(tmp_path / "typo" / "r.sqlite", read_only=True)
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("url", ["/run/9223372036854775808", "/run/99999999999999999999999", "/run/2147483648",
                                 "/run/0", "/run/9223372036854775808/step/1", "/run/1/step/99999999999999999999999",
                                 "/compare?a=99999999999999999999&b=1", "/compare?a=1&b=2147483648"])
def test_ids_out_of_range_answer_404_not_a_500_with_a_traceback(site, url, caplog):
    """SQLite cannot bind an integer past 2**63 - 1 and PostgreSQL's ids stop at 2**31 - 1: both were a 500."""
    client, *_ = site
    r = client.get(url)
    assert r.status_code == 404, (url, r.status_code)
    assert "no run" in r.get_data(as_text=True) or "no step" in r.get_data(as_text=True)
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("args,says", [
    (["--port", "-1"], "--port must be a whole number from 1 to 65535, not -1"),
    (["--port", "0"], "--port must be a whole number from 1 to 65535, not 0"),
    (["--port", "70000"], "--port must be a whole number from 1 to 65535, not 70000"),     # listened on 4464
    (["--threads", "0"], "--threads must be a whole number from 1 to 64, not 0"),           # never answered
    (["--threads", "100000"], "--threads must be a whole number from 1 to 64, not 100000"),
    (["--host", "no-such-host.invalid"], "cannot listen on no-such-host.invalid port 8080: "),
])
def test_serve_refuses_bad_listen_options_in_one_line(tmp_path, args, says):
    from conftest import run_cli
    db = tmp_path / "r.sqlite"
    ResultStore(db).engine.dispose()
    r = run_cli("serve", "--db", str(db), *args, timeout=30)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"powerrig: error: {says}"), r.stderr
    assert r.stdout == ""           # no "powerrig results ... on http://..." line for a server that is not there


def bulk_runs(store, plan, n: int, station: str = "rig-3") -> None:
    """n finished runs (no steps) in one transaction: a long index without a slow test."""
    now = time.time()

    def write(c):
        pid = store.plan_id(c, plan)
        c.execute(insert(S.runs), [dict(plan_id=pid, status="done", started_utc=now + k, finished_utc=now + k + 1,
                                        station=station, dut_serial="SN9") for k in range(n)])
    store._transact(write)


def _run_ids(html: str) -> list[int]:
    """The runs an index page shows, newest first (the page groups them by rig)."""
    return sorted((int(x) for x in re.findall(r'class="run-link" href="/run/(\d+)"', html)), reverse=True)


def _link(html: str, rel: str) -> str | None:
    m = re.search(rf'<a id="{rel}" href="([^"]+)"', html)
    return m.group(1).replace("&amp;", "&") if m else None


def test_the_index_shows_one_page_of_runs_and_links_to_the_next_by_run_id(site):
    """123 runs, 50 a page: newest first, an older link to the next 50 (keyset: the run id, not an offset),
    a newer link back, every run once; no page lists every run in a picker."""
    client, (a, b, running), writer, _ = site
    bulk_runs(writer, parse(PLAN), 120)
    everything = {r["id"] for r in writer.runs()}
    assert len(everything) == 123
    first = client.get("/").get_data(as_text=True)
    ids = _run_ids(first)
    assert ids == sorted(everything, reverse=True)[:50]
    assert "<option" not in first and _link(first, "prev-page") is None
    assert re.search(r'<input[^>]*name="a"', first) and re.search(r'<input[^>]*name="b"', first)
    pages, url = [ids], _link(first, "next-page")
    while url:
        assert re.fullmatch(r"/\?before=\d+", url), url
        html = client.get(url).get_data(as_text=True)
        pages.append(_run_ids(html))
        last, url = html, _link(html, "next-page")
    assert [len(p) for p in pages] == [50, 50, 23]
    assert [i for p in pages for i in p] == sorted(everything, reverse=True)
    back = client.get(_link(last, "prev-page")).get_data(as_text=True)         # the newer link from the last page
    assert _run_ids(back) == pages[1]
    assert _run_ids(client.get(_link(back, "prev-page")).get_data(as_text=True)) == pages[0]
    assert client.get("/?before=1").status_code == 200 and client.get("/?before=x").status_code == 400
    for far in ("/?before=99999999999999999999", "/?after=-99999999999999999999", f"/run/{a}?from=99999999999999999999",
                f"/run/{a}?before=-99999999999999999999"):        # past any id SQL binds: a page, not a 500
        assert client.get(far).status_code == 200, far
    assert _run_ids(client.get("/?before=99999999999999999999").get_data(as_text=True)) == pages[0]


def test_a_run_page_with_many_steps_pages_them_and_compare_takes_run_ids(site):
    client, (a, b, _), writer, _ = site
    bulk_runs(writer, parse(PLAN), 120)                     # 120 more runs of the plan: not in a picker
    many = writer.start_run(parse(PLAN), "out", station="rig-1")
    writer._transact(lambda c: c.execute(insert(S.steps), [
        dict(run_id=many, idx=k, key=f"ps0/s{k}/r1", name=f"step {k}", power_state=0, workload=None,
             repetition=0, status="done", attempts=1) for k in range(120)]))
    html = client.get(f"/run/{many}").get_data(as_text=True)
    steps = [int(x) for x in re.findall(rf'class="step-link" href="/run/{many}/step/(\d+)"', html)]
    assert steps == list(range(1, 51)) and _link(html, "prev-page") is None
    assert html.count("<option") <= 50 and re.search(r'<input[^>]*name="b"', html)
    nxt = client.get(_link(html, "next-page")).get_data(as_text=True)
    assert [int(x) for x in re.findall(rf'class="step-link" href="/run/{many}/step/(\d+)"', nxt)] == list(range(51, 101))
    last = client.get(_link(nxt, "next-page")).get_data(as_text=True)
    assert [int(x) for x in re.findall(rf'class="step-link" href="/run/{many}/step/(\d+)"', last)] == list(range(101, 121))
    assert _link(last, "next-page") is None
    back = client.get(_link(last, "prev-page")).get_data(as_text=True)
    assert [int(x) for x in re.findall(rf'class="step-link" href="/run/{many}/step/(\d+)"', back)] == list(range(51, 101))
    assert "step 119" in client.get(f"/run/{many}/step/120").get_data(as_text=True)
    cmp = client.get(f"/compare?a={a}&b={b}").get_data(as_text=True)          # compare, by run id
    assert "ps0/seq-read/r1" in cmp and "-2.00" in cmp


def test_a_step_page_shows_the_referee_s_claims_beside_the_slot_with_plots(results_db):
    """Issue 38: the drive's own power claims refereed (the lagging virtual drive's meter on a model of known
    power, analysis/referee.py) on the step page as in the report: the table, the drive's IPM against the
    slot's last second over time and the two histograms side by side, as inline SVG."""
    from powerrig.sweep import measure
    from test_referee import verdicts_of

    writer = ResultStore(results_db)
    plan = parse(PLAN)
    run = writer.start_run(plan, "out", station="rig-1", drive={"sn": "SN1"})
    s = plan.steps()[1]
    ms = measure.referee(verdicts_of({"lag_s": 5.0}))
    writer.store_step(run, {"idx": s.index, "key": s.key, "name": s.name, "power_state": s.power_state,
                            "workload": s.workload.name, "repetition": 0, "status": "done", "params": "{}"}, [], ms)
    writer.set_run_status(run, "done")
    client = create_app(ResultStore(results_db, read_only=True)).test_client()
    page = client.get(f"/run/{run}/step/{s.index + 1}").get_data(as_text=True)
    sec = page[page.index('id="referee"'):page.index('id="phases"')]
    table = sec[sec.index('id="referee-table"'):sec.index("</table>")]
    row = re.search(r"<tr><td[^>]*>ipm</td>.*?</tr>", table, re.S).group(0)
    assert "IPM lag behind the slot" in row and "class=fail" in row and re.search(r">[45]\.\d+ s<", row), row
    assert "average interval power (AIPWR)" in table and "250 mW histogram" in table
    figs = re.findall(r'<figure class="referee-chart">(<svg.*?</svg>)\s*<figcaption>(.*?)</figcaption>', sec, re.S)
    assert len(figs) == 3, [c for _, c in figs]      # IPM over time; the idle and the workload window's histograms
    [(ipm_svg, caption)] = [f for f in figs if "IPM polled every second" in f[1]]
    assert "lag found 5.0 s: fail" in caption
    assert "slot: mean over the second before each poll" in ipm_svg and "drive: SMART IPM" in ipm_svg
    assert len(re.findall(r'<g id="line2d_\d+">\s*<path', ipm_svg)) >= 2       # two series drawn, not an empty axis
    assert sec.count('id="patch_') > 20              # the histograms' bars
    plain = client.get(f"/run/{run}/step/1").get_data(as_text=True)
    assert 'id="referee"' not in plain               # a step without claims has no such section


def test_a_step_page_shows_its_power_over_time_from_the_capture(results_db, tmp_path):
    """The step page draws the step's trace as the report's first screen does (its own plotter, inline
    SVG) from the capture the sweep wrote; a capture not on this host is said, not a broken image."""
    from powerrig.capture import CaptureWriter
    from powerrig.testing import synthetic as syn

    cap = tmp_path / "step.jls"
    with CaptureWriter(cap, metadata={"device": {"device": "t"}}, clock=syn.clock(0)) as w:
        for b in syn.interval_blocks(3.0, rows_per_block=250):
            w.write(b)
    writer = ResultStore(results_db)
    plan = parse(PLAN)
    run = writer.start_run(plan, "out", station="rig-1", drive={"sn": "SN1"})
    for k, (s, path) in enumerate(zip(plan.steps(), (cap, tmp_path / "moved.jls"))):
        writer.store_step(run, {"idx": s.index, "key": s.key, "name": s.name, "power_state": s.power_state,
                                "workload": None, "repetition": 0, "status": "done", "params": "{}",
                                "capture": str(path)},
                          [{"name": "idle", "kind": "idle", "start_s": 0.5, "duration_s": 2.0, "mean_w": 5.0,
                            "energy_j": 10.0}], [])
    client = create_app(ResultStore(results_db, read_only=True)).test_client()
    page = client.get(f"/run/{run}/step/1").get_data(as_text=True)
    trace = page.split('<h2 id="trace">')[1].split("<h2")[0]
    assert "<svg" in trace and "busiest 40 ms" in trace and "no trace" not in trace
    assert "<text" in trace                        # labels as text (selectable), not paths
    gone = client.get(f"/run/{run}/step/2").get_data(as_text=True).split('<h2 id="trace">')[1].split("<h2")[0]
    assert "<svg" not in gone and "moved.jls is not on this host" in gone
