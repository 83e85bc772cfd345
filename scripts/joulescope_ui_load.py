"""Load a capture with the Joulescope UI's own JLS loading code and print what it loaded as JSON (run
with the Joulescope tier's virtualenv: `.venv-jsui/bin/python scripts/joulescope_ui_load.py CAPTURE`).

The loader is the UI's: ``joulescope_ui.jls_v2.JlsV2`` (signals, their ranges and a data request for
each, as the waveform makes them) and ``joulescope_ui.jls_v2_annotations.load`` (the annotations the
waveform draws). Only the UI's pubsub is stood in for, by a recorder of what was published.
"""
from __future__ import annotations

import json
import sys

import numpy as np


class RecordingPubSub:
    """The two calls the loaders make on the UI's pubsub."""

    def __init__(self):
        self.topics, self.published = {}, []

    def topic_add(self, topic, meta, *a, **k):
        self.topics[topic] = getattr(meta, "default", None)

    def publish(self, topic, value, *a, **k):
        self.published.append((topic, value))


def main(path: str) -> int:
    from joulescope_ui.jls_v2 import JlsV2
    from joulescope_ui import jls_v2_annotations

    ps = RecordingPubSub()
    jls = JlsV2(path, ps, "registry/JlsSource:1")
    signals = {}
    for name, sig in jls._signals.items():       # what the waveform can show: f"{source}.{field}"
        n = sig["length"]
        rsp = jls.process({"signal_id": f"JlsSource:1.{name}", "time_type": "samples", "start": 0,
                           "end": n - 1, "length": min(100, n // 2), "rsp_id": name})
        data = np.asarray(rsp["data"], dtype=float)
        mean = float(np.nanmean(data[:, 0] if data.ndim == 2 else data))
        utc = rsp["info"]["time_range_utc"]
        signals[name] = {"field": sig["field"], "units": sig["units"], "length": n, "mean": mean,
                         "response": rsp["response_type"], "utc": [int(utc["start"]), int(utc["end"])]}
    plots = jls.metadata()["plots"]
    jls.close()
    ann = RecordingPubSub()
    jls_v2_annotations.load(path, ann, "rsp").join(120)
    texts = [{"plot": a.get("plot_name"), "text": a.get("text"), "x": int(a.get("x"))}
             for _t, batch in ann.published if batch for a in batch if a.get("annotation_type") == "text"]
    print(json.dumps({"signals": signals, "plots": {k: v["enabled"] for k, v in plots.items()},
                      "annotations": texts, "done": ann.published[-1][1] is None if ann.published else False}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
