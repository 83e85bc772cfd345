"""Other instruments' files -> powerrig captures, so analysis, checks, report and sweeps' efficiency
figures run on them (`powerrig import`):

    joulescope.py  JLS files Joulescope software records: each file's units enumerated, each rail's named
    meter_csv.py   a CSV from any meter, read through a small mapping file (columns, units, time base, rail)
    events.py      an events file merged on: powerrig's run log (JSONL), fio's JSON output
    build.py       interval columns + events -> a capture, written by the capture writer
"""
