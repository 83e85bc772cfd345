"""The desktop app's drive actions placed on the drive host kernel's traced submission and completion
(issue 37), as a sweep step's are: a power state set through the Drive service on a virtual rig is
moved from nvme-cli's host interval (~100 ms: a process start and a device open) to the virtual
drive host's trace (a few ms), and the live view and the capture file show it once; a rig whose
tools run on this host keeps the host interval and says why in one line."""
from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("pytestqt")

from gui_helpers import sim_window  # noqa: E402
from powerrig.core.timeline import NOTE, NVME, POWER_STATE  # noqa: E402
from powerrig.sweep.command_trace import LOCAL  # noqa: E402


@pytest.fixture(scope="module")
def rig_window(qapp, tmp_path_factory):
    """One window on one virtual rig (the default enterprise drive) for the module."""
    with sim_window(qapp, tmp_path_factory.mktemp("gui-placed"), lambda win, svc: svc.drive.nvme is not None) as got:
        yield got


def _set_ps(svc, bot, ps: int) -> list:
    """Set ``ps`` through the Drive service; the events the set added (originals and copies)."""
    k0 = svc.timeline.added
    got = []
    svc.drive.updated.connect(got.append)
    svc.drive.set_power_state(ps)
    bot.waitUntil(lambda: any(d.get("power_state") == ps for d in got) or bool(svc.errors), timeout=60_000)
    svc.drive.updated.disconnect(got.append)
    assert not svc.errors, svc.errors
    return [e for e in svc.timeline.since(k0)[1] if e.kind in (NVME, POWER_STATE, NOTE)]


def _other_ps(svc, bot) -> int:
    """An operational power state other than the drive's present one."""
    got = []
    svc.drive.updated.connect(got.append)
    svc.drive.refresh()
    bot.waitUntil(lambda: any("identity" in d for d in got) or bool(svc.errors), timeout=60_000)
    svc.drive.updated.disconnect(got.append)
    d = next(d for d in got if "identity" in d)
    return next(s.ps for s in d["identity"].power_states if not s.non_operational and s.ps != d["power_state"])


def test_a_power_state_set_in_the_app_is_placed_from_the_drive_hosts_trace(rig_window):
    win, svc, bot = rig_window
    k0 = svc.timeline.added
    ps = _other_ps(svc, bot)
    # Read drive's commands are placed too (id-ctrl, get-feature power, smart-log)
    read = [e for e in svc.timeline.since(k0)[1] if e.kind == NVME and "replaces" in e.meta]
    assert {e.name for e in read} >= {"id-ctrl", "get-feature power", "smart-log"}, [e.name for e in read]
    assert all(e.meta.get("placed") == "nvme_trace" for e in read), [e.meta for e in read]
    evs = _set_ps(svc, bot, ps)
    sets = [e for e in evs if e.kind == NVME and e.name == "set-feature power" and e.meta.get("value") == ps]
    host = [e for e in sets if "replaces" not in e.meta]
    placed = [e for e in sets if "replaces" in e.meta]
    assert len(host) == 1 and len(placed) == 1, [(e.name, e.meta) for e in sets]
    h, p = host[0], placed[0]
    assert p.meta["placed"] == "nvme_trace" and p.meta["replaces"] == h.t_start
    assert p.meta["host_t_start"] == h.t_start and p.meta["host_t_end"] == h.t_end
    width, host_width = p.t_end - p.t_start, h.t_end - h.t_start
    print(f"set-feature power: placed {width * 1e3:.3f} ms wide, host interval {host_width * 1e3:.1f} ms")
    assert 0 <= width < 0.01, width                   # the controller's few ms ...
    assert host_width > 3 * width, (host_width, width)  # ... not nvme-cli's process and device open
    assert h.t_start - 0.005 <= p.t_start and p.t_end <= h.t_end + 0.005
    # the power-state change starts where the set-feature reached the controller
    pse = [e for e in evs if e.kind == POWER_STATE and e.name == f"PS{ps}" and "replaces" in e.meta]
    assert len(pse) == 1 and pse[0].t_start == p.t_start and pse[0].meta["placed"] == "nvme_trace"
    assert svc.drive.trace_note is None and f"drive in PS{ps}" in svc.said
    # the live view draws it once, at the placed time
    bot.waitUntil(lambda: svc.recording.live.sample_id(p.t_end) is not None, timeout=10_000)
    shown = [e for e in svc.captures.events_s() if e["name"] == "set-feature power" and e["utc0"] in (h.t_start, p.t_start)]
    assert [e["utc0"] for e in shown] == [p.t_start]
    # and so does the capture file
    bot.wait(1500)                                      # the recording writes the copies as it goes
    res = svc.recording.stop()
    from powerrig.capture.reader import CaptureReader
    with CaptureReader(res.path) as cap:
        got = [e for e in cap.events if e.kind == NVME and e.name == "set-feature power"
               and e.t_start in (h.t_start, p.t_start)]
    assert [(e.t_start, e.meta.get("placed")) for e in got] == [(p.t_start, "nvme_trace")]
    svc.recording.start()
    bot.waitUntil(lambda: svc.recording.live is not None and svc.recording.live.length > 500, timeout=30_000)


def test_a_local_rig_keeps_the_host_interval_and_says_why(rig_window):
    win, svc, bot = rig_window
    rig = svc.connection.rig
    # the same tools, described as running on this host: no virtual drive host, no drive host
    svc.drive.use_rig({k: v for k, v in rig.items() if k not in ("endpoint", "drive_host")})
    try:
        ps = _other_ps(svc, bot)
        said = len(svc.said)
        evs = _set_ps(svc, bot, ps)
    finally:
        svc.drive.use_rig(rig)
    sets = [e for e in evs if e.kind == NVME and e.name == "set-feature power" and e.meta.get("value") == ps]
    copies = [e for e in sets if "replaces" in e.meta]
    assert len(copies) == 1 and "placed" not in copies[0].meta
    host = next(e for e in sets if "replaces" not in e.meta)
    assert (copies[0].t_start, copies[0].t_end) == (host.t_start, host.t_end)
    assert copies[0].meta["nvme_trace"] == LOCAL and svc.drive.trace_note == LOCAL
    # one line says why: on the status bar with the new state (and once as a NOTE on the timeline)
    assert any(m.startswith(f"drive in PS{ps}") and LOCAL in m for m in svc.said[said:]), svc.said[said:]
    assert [e.meta["nvme_trace"] for e in svc.timeline if e.kind == NOTE and e.name == "nvme_trace"] == [LOCAL]
    shown = [e for e in svc.captures.events_s() if e["name"] == "set-feature power" and e["utc0"] == host.t_start]
    assert len(shown) == 1
