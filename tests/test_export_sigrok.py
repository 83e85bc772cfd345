"""sigrok export and decoders, checked with the distribution's real sigrok-cli.

The exported .sr files are read back by sigrok-cli (samplerate, channels, analog values, logic lanes);
the powerrig_timeline decoder runs on an export, powerrig_wire on a bit-banged UART capture of the
golden wire vectors, and both must give exactly the expected annotations.
"""
import csv
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from powerrig.testing import synthetic as S
from powerrig.interposer import frames as wire
from powerrig.capture import CaptureReader, CaptureWriter
from powerrig.export import DECODERS_DIR
from powerrig.export.sigrok import export_sigrok
from sigrok_helpers import SIGROK_CLI, sigrok, write_uart_capture

pytestmark = pytest.mark.skipif(SIGROK_CLI is None, reason="sigrok-cli is not installed")

VECTORS = Path(__file__).resolve().parent / "vectors"
FIRST = 1_000_000
SPI = 250                     # raw samples per 1 ms interval

SEGS = [S.Segment("idle", 1.0, {"12V": 5.0, "3V3": 0.25}),
        S.Segment("set ps1", 0.05, {"12V": 5.0, "3V3": 0.25}, kind="power_state", meta={"power_state": 1}),
        S.Segment("id-ctrl", 0.02, {"12V": 5.5, "3V3": 0.25}, kind="command"),
        S.Segment("idle", 0.5, {"12V": 5.0, "3V3": 0.25}),
        S.Segment("fio:write-128k", 2.0, {"12V": 11.0, "3V3": 0.3}, kind="workload", meta={"rw": "write"}),
        S.Segment("fio:read-4k", 1.0, {"12V": 9.0, "3V3": 0.3}, kind="workload", meta={"rw": "read"}),
        S.Segment("set ps3", 0.05, {"12V": 5.0, "3V3": 0.25}, kind="power_state", meta={"power_state": 3}),
        S.Segment("idle", 1.5, {"12V": 2.0, "3V3": 0.25})]
GAP = (2500, 40)              # rows lost on the link (inside the write phase)
LED_ROWS = (200, 260)         # activity LED seen high
MARKER_ROW = 5000


def _sid(raw_index):
    return (raw_index - FIRST) // SPI


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    tr = S.interval_trace(SEGS, rows_per_block=700, first_index=FIRST)
    model = S.clock(FIRST)
    blocks = list(S.drop_rows(tr.blocks, *GAP))
    at = 0
    for b in blocks:                            # digital inputs at known rows
        for row in range(*LED_ROWS):
            if at <= row < at + len(b):
                b.dig_or[row - at] |= 1
        if at <= MARKER_ROW < at + len(b):
            b.dig_or[MARKER_ROW - at] |= 4
        at += len(b)
    path = tmp_path_factory.mktemp("cap") / "c.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}, "drive": {"power_state": 0}},
                       timeline=S.timeline(tr, model), clock=model) as w:
        for b in blocks:
            w.write(b)
    return path, tr


@pytest.fixture(scope="module")
def exported(capture, tmp_path_factory):
    path, tr = capture
    out = tmp_path_factory.mktemp("sr") / "c.sr"
    r = run_cli("export", "--sigrok", str(path), "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


def _analog(sr, channels=None):
    args = ["-i", str(sr), "-O", "analog"] + (["-C", ",".join(channels)] if channels else [])
    vals: dict[str, list[float]] = {}
    for line in sigrok(*args).splitlines():
        m = re.match(r"^(\S+): (\S+) V DC$", line)
        if m:
            vals.setdefault(m.group(1), []).append(float(m.group(2)))
    return {k: np.array(v) for k, v in vals.items()}


def _bits(sr, channels):
    out: dict[str, list[str]] = {c: [] for c in channels}
    for line in sigrok("-i", str(sr), "-C", ",".join(channels), "-O", "bits").splitlines():
        name, _, bits = line.partition(":")
        if name in out and set(bits) <= set("01 "):
            out[name].append(bits.replace(" ", ""))
    return {k: np.array([int(c) for c in "".join(v)], np.uint8) for k, v in out.items()}


def _annotations(*args):
    return [line for line in sigrok(*args, "--protocol-decoder-samplenum").splitlines() if line.strip()]


# ---- the session file ---------------------------------------------------------------------------------

def test_sigrok_cli_sees_the_samplerate_channels_and_length(capture, exported):
    show = sigrok("-i", str(exported), "--show")
    with CaptureReader(capture[0]) as cap:
        length = cap.length
    assert "Samplerate: 1000\n" in show
    chans = re.findall(r"^- (\S+): (logic|analog)$", show, re.M)
    assert chans == [(c, "logic") for c in ("PHASE", "NVME", "LABEL", "GAP", "PS_VALID", "PS_B0", "PS_B1", "PS_B2",
                                            "PS_B3", "PS_B4", "LED", "PERST#", "MARKER")] + \
        [(c, "analog") for c in ("P12V_W", "V12V_V", "I12V_A", "P3V3_W", "V3V3_V", "I3V3_A", "PTOTAL_W")]
    assert f"Logic sample count: {length}\n" in show and f"Analog sample count: {length}\n" in show


def test_analog_values_are_the_captures_at_every_sample(capture, exported):
    vals = _analog(exported)
    with CaptureReader(capture[0]) as cap:
        for name, sig in (("P12V_W", "p_12V"), ("V3V3_V", "v_3V3"), ("I12V_A", "i_12V"), ("PTOTAL_W", "p_total")):
            want = cap.samples(sig).astype(np.float64)
            got = vals[name]
            assert len(got) == cap.length
            # sigrok-cli prints two decimals; NaN (lost intervals) stays NaN
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            ok = ~np.isnan(want)
            assert np.max(np.abs(got[ok] - want[ok])) <= 0.005 + 1e-6
        # at known times: idle 5 W, writing 11 W, reading 9 W on 12 V
        for t_s, watts in ((0.5, 5.0), (2.0, 11.0), (4.5, 9.0)):
            assert vals["P12V_W"][int(t_s * 1000)] == pytest.approx(watts, abs=0.05)
        assert np.isnan(vals["PTOTAL_W"][GAP[0]:GAP[0] + GAP[1]]).all()


def test_logic_lanes_hold_gaps_digital_inputs_and_phases(capture, exported):
    path, tr = capture
    bits = _bits(exported, ["GAP", "LED", "MARKER", "PHASE", "PS_VALID", "PS_B0", "PS_B1"])
    with CaptureReader(path) as cap:
        n = cap.length
        np.testing.assert_array_equal(bits["GAP"], np.isnan(cap.samples("p_total")).astype(np.uint8))
        np.testing.assert_array_equal(bits["LED"], (cap.samples("dig_or") & 1).astype(np.uint8))
    assert bits["LED"][LED_ROWS[0]:LED_ROWS[1]].all() and bits["LED"].sum() == LED_ROWS[1] - LED_ROWS[0]
    assert np.flatnonzero(bits["MARKER"]).tolist() == [MARKER_ROW]
    write = next(b for s, *b in tr.bounds if s.name == "fio:write-128k")
    a, b = _sid(write[0]), _sid(write[1])
    assert bits["PHASE"][a:b - 1].all() and not bits["PHASE"][a - 1] and not bits["PHASE"][b - 1]
    # power state 1 (binary 01) after the first change, 3 (11) after the second, known from the start
    ps = bits["PS_B0"] + 2 * bits["PS_B1"]
    assert bits["PS_VALID"][0] == 1 and ps[0] == 0 and ps[2000] == 1 and ps[n - 100] == 3
    assert bits["PS_VALID"][n - 1] == 0 and len(bits["PHASE"]) == n


def test_a_range_exports_only_that_part_with_its_timeline(capture, tmp_path):
    path, tr = capture
    out = tmp_path / "part.sr"
    r = run_cli("export", "--sigrok", str(path), "--from", "2.0", "--to", "4.0", "--out", str(out))
    assert r.returncode == 0, r.stderr
    vals = _analog(out, ["P12V_W"])["P12V_W"]
    with CaptureReader(path) as cap:
        want = cap.samples("p_12V", 2000, 4000)
    ok = ~np.isnan(want)
    assert len(vals) == 2000 and np.max(np.abs(vals[ok] - want[ok])) <= 0.005 + 1e-6
    # the write phase was running when the range begins: it starts at sample 0, still named
    b_write = _sid(next(b for s, a, b in tr.bounds if s.name == "fio:write-128k")) - 2000
    phases = _annotations("-i", str(out), "-P", "powerrig_timeline", "-A", "powerrig_timeline=phases:power-states")
    assert phases == [f"0-{b_write - 1} powerrig_timeline-1: fio:write-128k",
                      f"{b_write}-1999 powerrig_timeline-1: fio:read-4k",
                      "0-1999 powerrig_timeline-1: PS1"]


# ---- the timeline decoder -----------------------------------------------------------------------------

def _expected_timeline(tr, length):
    """Annotations the decoder must give, from the segments' true raw edges and the export's rules:
    a phase touching the next ends a sample early; a power state holds from the end of its change."""
    phases, cmds, states = [], [], []
    spans = [(s, _sid(a), _sid(b)) for s, a, b in tr.bounds]
    for k, (seg, a, b) in enumerate(spans):
        if seg.kind == "workload":
            touching = k + 1 < len(spans) and spans[k + 1][0].kind == "workload" and spans[k + 1][1] == b
            phases.append(f"{a}-{b - 1 if touching else b} powerrig_timeline-1: {seg.name}")
        elif seg.kind == "command":
            cmds.append(f"{a}-{b} powerrig_timeline-1: {seg.name}")
    changes = [(a + 2, seg.meta["power_state"]) for seg, a, b in spans if seg.kind == "power_state"]
    prev = (0, 0)                                   # the drive's initial state (metadata)
    for a, ps in changes:
        states.append(f"{prev[0]}-{a - 2} powerrig_timeline-1: PS{prev[1]}")
        prev = (a, ps)
    states.append(f"{prev[0]}-{length - 1} powerrig_timeline-1: PS{prev[1]}")
    return phases, cmds, states


def test_timeline_decoder_names_phases_commands_and_power_states(capture, exported):
    path, tr = capture
    with CaptureReader(path) as cap:
        length = cap.length
    phases, cmds, states = _expected_timeline(tr, length)
    got = _annotations("-i", str(exported), "-P", "powerrig_timeline", "-A", "powerrig_timeline=phases")
    assert got == phases
    got = _annotations("-i", str(exported), "-P", "powerrig_timeline", "-A", "powerrig_timeline=commands")
    assert got == cmds
    got = _annotations("-i", str(exported), "-P", "powerrig_timeline", "-A", "powerrig_timeline=power-states")
    assert got == states
    got = _annotations("-i", str(exported), "-P", "powerrig_timeline", "-A", "powerrig_timeline=gaps")
    assert got == [f"{GAP[0]}-{GAP[0] + GAP[1]} powerrig_timeline-1: {GAP[1]} lost intervals"]
    assert _annotations("-i", str(exported), "-P", "powerrig_timeline", "-A", "powerrig_timeline=warnings") == []


def test_names_that_cannot_precede_their_events_still_pair_in_order(tmp_path):
    """Short commands at the very start: each name takes longer to send than its command lasts, so
    the names arrive late, one after another; the decoder still gives each command its own name."""
    names = [f"get-log-page lid={k} (smart)" for k in range(6)]
    segs = []
    for name in names:
        segs += [S.Segment(name, 0.02, {"12V": 6.0}, kind="command"), S.Segment("idle", 0.01, {"12V": 5.0})]
    segs.append(S.Segment("idle", 2.0, {"12V": 5.0}))
    tr = S.interval_trace(segs, rails=("12V",), first_index=FIRST)
    model = S.clock(FIRST)
    path = tmp_path / "cmds.jls"
    with CaptureWriter(path, metadata={}, timeline=S.timeline(tr, model), clock=model) as w:
        for b in tr.blocks:
            w.write(b)
    res = export_sigrok(path, tmp_path / "cmds.sr")
    assert res.labels_cut == 0 and res.events == 6
    got = _annotations("-i", str(tmp_path / "cmds.sr"), "-P", "powerrig_timeline", "-A", "powerrig_timeline=commands")
    want = [f"{_sid(a)}-{_sid(b)} powerrig_timeline-1: {s.name}" for s, a, b in tr.bounds if s.kind == "command"]
    assert got == want
    labels = _annotations("-i", str(tmp_path / "cmds.sr"), "-P", "powerrig_timeline", "-A", "powerrig_timeline=labels")
    ends = [int(x.split()[0].split("-")[1]) for x in labels]
    assert ends[-1] > _sid(tr.bounds[-2][2])          # the last name did arrive after its command ended


def test_names_on_label_are_plain_uart_for_sigroks_own_decoder(exported):
    out = sigrok("-i", str(exported), "-P", "uart:rx=LABEL:baudrate=1000:format=ascii", "-A", "uart=rx-data")
    text = "".join(re.findall(r"^uart-1: (.)$", out, re.M))
    # names in the order of the events' starts; "[0A]"-lines (newlines) are not single characters
    assert text == "id-ctrlfio:write-128kfio:read-4k"


def test_timeline_decoder_with_channels_named_explicitly(exported):
    got = _annotations("-i", str(exported), "-P",
                       "powerrig_timeline:phase=PHASE:nvme=NVME:label=LABEL",
                       "-A", "powerrig_timeline=phases:power-states")
    assert [g.split(": ", 1)[1] for g in got] == ["fio:write-128k", "fio:read-4k"]   # no PS channels named


# ---- the wire decoder ---------------------------------------------------------------------------------

def _split_frames(data: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        length = int.from_bytes(data[at + 6:at + 8], "little")
        out.append(data[at:at + wire.HEADER.size + length + 4])
        at += len(out[-1])
    return out


def test_wire_decoder_on_a_uart_capture_of_the_golden_vectors(tmp_path):
    cmds = [bytes.fromhex(d["frame_hex"]) for d in json.loads((VECTORS / "commands.json").read_text())]
    data = _split_frames((VECTORS / "r3_1ms_offsets.frames.bin").read_bytes())
    bad = bytearray(cmds[0])
    bad[20] ^= 0x10                                   # one payload bit flipped on the line
    chunks = cmds + [b"\x00\x11"] + [bytes(bad)] + data
    sr = tmp_path / "uart.sr"
    spans = write_uart_capture(sr, chunks, samplerate=8_000_000, baud=1_000_000)
    byte = 80                                          # samples per byte: 8 per bit, 10 bits

    want_frames, want_warn = [], []
    for chunk, (a, e) in zip(chunks, spans):
        frames = wire.FrameDecoder().feed(chunk)      # the host's own decoder says what is a frame
        if frames:
            f = frames[0]
            name = {1: "DATA", 2: "COMMAND", 3: "REPLY", 4: "BURST", 5: "NOTICE"}[f.type]
            want_frames.append(f"{a}-{e} powerrig_wire-1: {name} seq {f.seq}, {len(f.payload)} bytes, CRC ok")
        elif chunk == bytes(bad):
            said = int.from_bytes(bad[-4:], "little")
            want_warn.append(f"{a}-{e} powerrig_wire-1: CRC error: frame says {said:08x}, "
                             f"bytes give {zlib.crc32(bad[2:-4]):08x}")
            # like the host and the firmware, the bad frame's bytes count as bytes outside a (good) frame
            want_warn.append(f"{a}-{e} powerrig_wire-1: {len(bad)} bytes outside a frame")
        else:
            want_warn.append(f"{a}-{e} powerrig_wire-1: {len(chunk)} bytes outside a frame")
    assert len(want_frames) == 3 + len(data)

    pd = ["-P", "uart:rx=RX:baudrate=1000000,powerrig_wire"]
    assert _annotations("-i", str(sr), *pd, "-A", "powerrig_wire=rx-frames") == want_frames
    assert _annotations("-i", str(sr), *pd, "-A", "powerrig_wire=rx-warnings") == want_warn

    # the fields of the first frame (describe), byte for byte
    a = spans[0][0]
    fields = _annotations("-i", str(sr), *pd, "-A", "powerrig_wire=rx-fields")[:10]
    at = lambda k0, k1: f"{a + k0 * byte}-{a + k1 * byte} powerrig_wire-1: "   # noqa: E731
    assert fields == [at(0, 2) + "sync A5 5A", at(2, 3) + "version 1", at(3, 4) + "COMMAND", at(4, 5) + "flags -",
                      at(5, 6) + "count 0", at(6, 8) + "length 25", at(8, 10) + "seq 1", at(10, 18) + "index 0",
                      at(18, 43) + '{"id":1,"cmd":"describe"}',
                      at(43, 47) + f"CRC {int.from_bytes(cmds[0][-4:], 'little'):08x} ok"]


def test_wire_decoder_on_tx_rejects_another_version_and_resyncs(tmp_path):
    cmds = [bytes.fromhex(d["frame_hex"]) for d in json.loads((VECTORS / "commands.json").read_text())]
    v2 = bytearray(cmds[0])
    v2[2] = 2                                          # a frame of protocol version 2
    burst = wire.encode(wire.T_BURST, bytes(range(28)) * 2, seq=40, flags=wire.F_LAST, count=7, index=2**40 + 3)
    sr = tmp_path / "tx.sr"
    (a0, e0), (a1, e1), (a2, e2) = write_uart_capture(sr, [bytes(v2), cmds[1], burst], channel="TX")
    got = _annotations("-i", str(sr), "-P", "uart:tx=TX:baudrate=1000000,powerrig_wire",
                       "-A", "powerrig_wire=tx-frames:tx-warnings")
    assert got == [f"{a0}-{a0 + 18 * 80} powerrig_wire-1: not a frame: version 2, not 1",
                   f"{a0}-{e0} powerrig_wire-1: {len(v2)} bytes outside a frame",
                   f"{a1}-{e1} powerrig_wire-1: COMMAND seq 2, 62 bytes, CRC ok",
                   f"{a2}-{e2} powerrig_wire-1: BURST seq 40, 56 bytes, CRC ok"]
    fields = _annotations("-i", str(sr), "-P", "uart:tx=TX:baudrate=1000000,powerrig_wire",
                          "-A", "powerrig_wire=tx-fields")[-7:]
    assert [f.split(": ", 1)[1] for f in fields] == ["flags LAST", "count 7", "length 56", "seq 40",
                                                     f"index {2**40 + 3}", "4 samples x 7 words",
                                                     f"CRC {int.from_bytes(burst[-4:], 'little'):08x} ok"]


# ---- CSV, CLI and bad input ---------------------------------------------------------------------------

def test_csv_export_of_a_range(capture, tmp_path):
    out = tmp_path / "part.csv"
    r = run_cli("export", "--csv", str(capture[0]), "--from", "2.4", "--to", "2.6", "--out", str(out))
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        rows = list(csv.DictReader(f))
    with CaptureReader(capture[0]) as cap:
        want = cap.samples("p_12V", 2400, 2600)
    assert len(rows) == 200 and float(rows[0]["time_s"]) == pytest.approx(2.4)
    got = np.array([float(r["p_12V_W"]) if r["p_12V_W"] else np.nan for r in rows])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))       # the lost rows are empty cells
    assert np.isnan(got).sum() == 40
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-6)


def test_decoders_dir_is_printed_and_holds_both_decoders():
    r = run_cli("export", "--decoders-dir")
    assert r.returncode == 0 and Path(r.stdout.strip()) == DECODERS_DIR
    assert sorted(p.name for p in DECODERS_DIR.iterdir() if (p / "pd.py").exists()) == \
        ["powerrig_timeline", "powerrig_wire"]
    decs = sigrok("-L")
    assert re.search(r"^\s+powerrig_timeline\s", decs, re.M) and re.search(r"^\s+powerrig_wire\s", decs, re.M)


@pytest.mark.parametrize("args, needle", [
    (["--sigrok", "{cap}", "--out", "{tmp}/x.zip"], "must end in .sr"),
    (["--sigrok", "{tmp}/missing.jls", "--out", "{tmp}/x.sr"], "not found"),
    (["--sigrok", "{cap}", "--from", "99", "--out", "{tmp}/x.sr"], "past the end"),
    (["--sigrok", "{cap}", "--from", "3", "--to", "2", "--out", "{tmp}/x.sr"], "empty range"),
    (["--sigrok", "{cap}", "--out", "{tmp}/nodir/x.sr"], "does not exist"),
    (["--csv", "{cap}", "--from", "-1", "--out", "{tmp}/x.csv"], "--from -1"),
    (["{cap}", "--out", "{tmp}/x.sr"], "--sigrok"),
])
def test_bad_input_is_one_line_and_writes_nothing(capture, tmp_path, args, needle):
    r = run_cli("export", *[a.format(cap=capture[0], tmp=tmp_path) for a in args])
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not list(tmp_path.glob("x.*")) and not list(tmp_path.glob("*.part"))


# ---- a 15-minute capture at 1 ms ----------------------------------------------------------------------

def test_fifteen_minute_capture_opens_in_sigrok_cli(tmp_path):
    seconds = 900
    model = S.clock(0)
    path = tmp_path / "long.jls"
    with CaptureWriter(path, metadata={"device": {"device": "test"}},
                       timeline=S.alternating_timeline(seconds, model), clock=model) as w:
        for b in S.interval_blocks(seconds):
            w.write(b)
    out = tmp_path / "long.sr"
    res = export_sigrok(path, out)
    assert res.samples == 900_000 and res.events == 15
    show = sigrok("-i", str(out), "--show")
    assert "Samplerate: 1000\n" in show and "Analog sample count: 900000\n" in show
    assert "Logic sample count: 900000\n" in show and "- PTOTAL_W: analog" in show
    got = _analog(out, ["PTOTAL_W"])["PTOTAL_W"]
    with CaptureReader(path) as cap:
        want = cap.samples("p_total").astype(np.float64)
    assert len(got) == 900_000 and np.max(np.abs(got - want)) <= 0.005 + 1e-6
    # idle (5 W + 0.3 W) in the first half minute, active (12.3 W) in the second, every minute
    assert got[:30_000].mean() == pytest.approx(5.3, abs=0.02) and got[30_000:60_000].mean() == pytest.approx(12.3, abs=0.02)
    phases = _annotations("-i", str(out), "-P", "powerrig_timeline", "-A", "powerrig_timeline=phases")
    assert [p.split(": ", 1)[1] for p in phases] == [f"write {k}" for k in range(15)]
    assert phases[3].startswith("210000-240000 ")
    assert phases[-1].startswith("870000-899999 ")          # running at the end: low in the last sample


# ---- a raw burst at its own rate ----------------------------------------------------------------------

def test_a_raw_burst_exports_at_250_khz(sim, tmp_path):
    from powerrig.export.sigrok import export_burst
    from powerrig.interposer.client import Interposer
    s = sim()
    with Interposer.open(s.port) as dev:
        b = dev.burst(pre=200, post=800, trigger="now")
    s.stop()
    out = tmp_path / "burst.sr"
    export_burst(b, out)
    show = sigrok("-i", str(out), "--show")
    assert "Samplerate: 250000\n" in show and "Analog sample count: 1000\n" in show
    assert re.findall(r"^- (\S+): logic$", show, re.M) == ["LED", "PERST#", "MARKER"]
    vals = _analog(out, ["P12V_W", "I3V3_A"])
    _, _, p12 = b.rail("12V")
    _, i33, _ = b.rail("3V3")
    assert np.max(np.abs(vals["P12V_W"] - p12)) <= 0.005 + 1e-5
    assert np.max(np.abs(vals["I3V3_A"] - i33)) <= 0.005 + 1e-5
    bits = _bits(out, ["PERST#"])["PERST#"]
    assert bits.all()                                          # the drive is out of reset (PERST# high)
    np.testing.assert_array_equal(bits, (b.codes[:, -1] >> 1) & 1)


def test_events_without_a_clock_are_counted_not_placed(tmp_path):
    tr = S.interval_trace(SEGS[:5], first_index=FIRST)
    path = tmp_path / "noclock.jls"
    with CaptureWriter(path, metadata={}, timeline=S.timeline(tr, S.clock(FIRST)), clock=None) as w:
        for b in tr.blocks:
            w.write(b)
    r = run_cli("export", "--sigrok", str(path), "--out", str(tmp_path / "n.sr"))
    assert r.returncode == 0, r.stderr
    assert "3 events not shown: the capture has no clock anchors" in r.stderr
    bits = _bits(tmp_path / "n.sr", ["PHASE", "NVME", "PS_VALID"])
    assert not any(b.any() for b in bits.values()) and len(bits["PHASE"]) == sum(len(b) for b in tr.blocks)


def test_export_memory_does_not_grow_with_capture_length(tmp_path):
    import tracemalloc
    peaks = []
    for minutes in (1, 4):
        model = S.clock(0)
        path = tmp_path / f"m{minutes}.jls"
        with CaptureWriter(path, metadata={}, timeline=S.alternating_timeline(minutes * 60, model, period_s=20),
                           clock=model) as w:
            for b in S.interval_blocks(minutes * 60, period_s=20):
                w.write(b)
        tracemalloc.start()
        export_sigrok(path, tmp_path / f"m{minutes}.sr", chunk=1 << 15)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    # four times the intervals (and events), the same chunks: the peak stays where it was
    assert peaks[1] < 1.25 * peaks[0], peaks


def test_timeline_decoder_warns_of_a_broken_name_and_keeps_the_next(tmp_path):
    from powerrig.export.srzip import SrZipWriter
    from sigrok_helpers import uart_bits
    n = 300
    label = np.ones(n, np.uint8)
    label[5:15] = [0, 1, 0, 1, 0, 1, 0, 1, 0, 0]           # a byte whose stop bit is low
    good = uart_bits(b"ok\n", 1)
    label[40:40 + len(good)] = good
    phase = np.zeros(n, np.uint8)
    phase[100:200] = 1
    with SrZipWriter(tmp_path / "t.sr", 1000, ["PHASE", "NVME", "LABEL"]) as w:
        w.write(phase | label << 2, {})
    got = _annotations("-i", str(tmp_path / "t.sr"), "-P", "powerrig_timeline",
                       "-A", "powerrig_timeline=phases:warnings")
    assert got == ["5-15 powerrig_timeline-1: LABEL framing error", "100-200 powerrig_timeline-1: ok"]
