"""Events to merge onto an import: powerrig's own run log (one Event per JSON line, as
Timeline.to_jsonl writes it) or fio's JSON output (--output-format=json: ``timestamp_ms`` when the
run ended, each job's ``job_runtime`` ms before it) as one fio event and a workload phase per job."""
from __future__ import annotations

import json
from pathlib import Path

from powerrig.core.errors import CaptureError
from powerrig.core.timeline import FIO, PHASE, Event


def read_events(path: str | Path) -> list[Event]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise CaptureError(f"cannot read events file {path}: {e.strerror or e}") from None
    if '"fio version"' in text[:4000]:          # fio may print lines before its JSON
        return _fio(path, text)
    try:
        return [Event.from_dict(json.loads(line)) for line in text.splitlines() if line.strip()]
    except (ValueError, TypeError) as e:
        raise CaptureError(f"{path} is neither a powerrig events log (one JSON event per line) nor fio JSON "
                           f"output ({e}); give `fio --output-format=json` output or a Timeline.to_jsonl file") from None


def _fio(path: Path, text: str) -> list[Event]:
    try:
        doc = json.loads(text[text.index("{"):])
        end = doc["timestamp_ms"] / 1000.0
        jobs = doc["jobs"]
    except (ValueError, KeyError) as e:
        raise CaptureError(f"{path}: fio JSON output without timestamp_ms/jobs ({e}); run fio with "
                           "--output-format=json") from None
    out = []
    longest = 0.0
    for job in jobs:
        run_s = float(job.get("job_runtime", 0)) / 1000.0
        longest = max(longest, run_s)
        opts = job.get("job options", {})
        meta = {"workload": True, "rw": opts.get("rw"), "bs": opts.get("bs"), "iodepth": opts.get("iodepth")}
        rd, wr = job.get("read", {}), job.get("write", {})
        result = {"io_bytes": int(rd.get("io_bytes", 0)) + int(wr.get("io_bytes", 0)),
                  "bw_bytes": int(rd.get("bw_bytes", 0)) + int(wr.get("bw_bytes", 0))}
        out.append(Event(PHASE, job.get("jobname", "fio"), end - run_s, end, result=result,
                         meta={k: v for k, v in meta.items() if v is not None}))
    out.insert(0, Event(FIO, doc.get("fio version", "fio"), end - longest, end, result={"jobs": len(jobs)}))
    return out
