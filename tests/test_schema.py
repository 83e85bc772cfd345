"""One schema for the names every layer shares (powerrig.core.names): the link, the blocks, the capture
file and the analysis spell rail fields and signals the same way; kinds and verdicts are enums that
stay plain strings in JSON; the interposer's identity is the firmware's own."""
from __future__ import annotations

import json

import numpy as np
import pytest

import powerrig_fw
from powerrig.core import names as schema
from powerrig.interposer import frames as wire
from powerrig.analysis import AnalysisSource, ArraySource, analyse
from powerrig.analysis.result import CheckResult
from powerrig.capture import CaptureReader, CaptureWriter
from powerrig.capture import layout
from powerrig.core.timeline import PHASE, Event, Timeline
from powerrig.core.blocks import IntervalBlock
from powerrig.core.names import EventKind, GapReason, PhaseKind, RailField, Verdict
from powerrig.testing import synthetic as S


def _blocks(seconds=2.0):
    return list(S.interval_blocks(seconds, rows_per_block=500))


def test_every_layer_names_rail_columns_and_signals_from_the_schema():
    rails = ("12V", "3V3")
    expected = [schema.rail_signal(f, r) for r in rails for f in schema.RAIL_FIELDS] + [schema.TOTAL_POWER]
    assert [n for n, _ in layout.signal_names(rails)] == expected
    assert dict(layout.signal_names(rails))["v_12V"] == "V" and dict(layout.signal_names(rails))["i_3V3"] == "A"
    src = ArraySource.from_blocks(_blocks())
    assert sorted(src.cols) == sorted(expected)
    block = _blocks()[0]
    for f in schema.RAIL_FIELDS:                        # IntervalBlock has a 2-D column per rail field
        assert getattr(block, f).shape == (len(block), len(rails))
    desc = {"rails": [{"name": r, "v_lsb": 1e-3, "i_lsb": 1e-4} for r in rails]}
    rec = np.zeros(3, dtype=wire.record_dtype(2))
    si = wire.records_to_si(rec, wire.rail_scales(desc, list(rails)), 250, 25)
    assert set(schema.RAIL_FIELDS) | set(schema.DIGITAL_FIELDS) == set(si)


def test_capture_reader_and_array_source_are_analysis_sources(tmp_path):
    blocks = _blocks()
    model = S.clock(blocks[0].first_index)
    with CaptureWriter(tmp_path / "c.jls", metadata={}, clock=model) as w:
        for b in blocks:
            w.write(b)
    with CaptureReader(tmp_path / "c.jls") as reader:
        assert isinstance(reader, AnalysisSource)
        assert reader.has(schema.rail_signal(RailField.P_PEAK, "12V")) and reader.has(schema.TOTAL_POWER)
    assert isinstance(ArraySource.from_blocks(blocks, model), AnalysisSource)
    assert not isinstance(object(), AnalysisSource)


def test_event_kinds_are_enums_that_stay_strings_in_json():
    e = Event(PHASE, "write", 1.0, 2.0)
    assert e.kind is EventKind.PHASE
    text = json.dumps(e.to_dict())
    assert json.loads(text)["kind"] == "phase"
    back = Event.from_dict(json.loads(text))
    assert back.kind is EventKind.PHASE and back.kind == "phase"
    assert Event.from_dict({"kind": "phase", "name": "x", "t_start": 0.0}).kind is EventKind.PHASE
    future = Event.from_dict({"kind": "thermal-trip", "name": "x", "t_start": 0.0})
    assert future.kind == "thermal-trip"                 # a kind this version does not know is kept


def test_timeline_file_text_is_unchanged_by_the_enums(tmp_path):
    tl = Timeline([Event("nvme", "id-ctrl", 1.0, 1.5), Event(EventKind.FIO, "job", 2.0, 3.0)])
    tl.to_jsonl(tmp_path / "t.jsonl")
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert kinds == ["nvme", "fio"]
    assert [e.kind for e in Timeline.from_jsonl(tmp_path / "t.jsonl")] == [EventKind.NVME, EventKind.FIO]


def test_analysis_phases_and_verdicts_are_schema_enums():
    blocks = _blocks(3.0)
    model = S.clock(blocks[0].first_index)
    t0 = float(model.utc(blocks[0].first_index))
    events = [Event(PHASE, "write", t0 + 0.5, t0 + 2.5, meta={"rw": "write", "power_state": 0})]
    a = analyse(ArraySource.from_blocks(blocks, model), events, {"drive": {"id_ctrl": S.id_ctrl()}})
    kinds = {r.kind for r in a.phases}
    assert PhaseKind.WORKLOAD in kinds and all(isinstance(k, PhaseKind) for k in kinds)
    assert a.checks and all(isinstance(c.status, Verdict) for c in a.checks)
    d = json.loads(json.dumps(a.checks[0].to_dict()))
    assert d["status"] in {v.value for v in Verdict}
    assert CheckResult("x", "p", None, None, "W", Verdict.NA, False).to_dict()["status"] == "n/a"


def test_a_misspelt_gap_reason_is_refused_not_recorded():
    IntervalBlock.gap(0, 3, 250, 4e-6, ("12V",), "link")
    with pytest.raises(ValueError):
        IntervalBlock.gap(0, 3, 250, 4e-6, ("12V",), "lnik")
    assert IntervalBlock.gap(0, 3, 250, 4e-6, ("12V",), GapReason.OVERRUN).flags["gap"] == "overrun"


class _Board:
    """Just enough of firmware/board for describe()."""
    name = "test"
    serial = "T1"

    def __init__(self, tmp):
        self.cal_path = str(tmp / "cal.json")

    def write(self, data):
        pass


def test_interposer_identity_is_the_firmwares_own(tmp_path):
    from powerrig_fw.device import Device

    desc = Device(_Board(tmp_path)).describe()
    assert desc["device"] == schema.DEVICE_NAME == powerrig_fw.DEVICE_NAME
    assert desc["protocol"] == schema.PROTOCOL
    assert desc["digital"] == list(schema.DIGITAL_INPUTS)
    assert desc["state"] == schema.STATE_IDLE != schema.STATE_STREAMING
    assert schema.digital_bit("activity") == 1 and schema.digital_bit("marker") == 4
    with pytest.raises(KeyError, match="activity"):
        schema.digital_bit("led")
