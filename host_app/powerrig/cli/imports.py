"""`powerrig import`: another instrument's measurement as a powerrig capture (Joulescope recordings,
each rail's unit named; a CSV from any meter with a mapping file), with an events file merged on, so analysis,
checks, report and sweeps' figures run on it. See docs/lab-instruments.md."""
from __future__ import annotations

import sys

from powerrig.core.errors import PowerrigError


class UsageError(PowerrigError):
    """The import was asked without its inputs."""


def register(sub) -> None:
    p = sub.add_parser("import", help="turn a Joulescope recording or a meter's CSV into a powerrig capture",
                       description="Convert another instrument's measurement into a powerrig capture (.jls). "
                                   "See docs/lab-instruments.md.")
    kind = p.add_subparsers(dest="kind", metavar="KIND")
    js = kind.add_parser("joulescope", help="Joulescope recordings (.jls): each rail's unit")
    js.add_argument("rails", nargs="+", metavar="RAIL=FILE[#UNIT]",
                    help="each rail's recording, e.g. 12V=js-12v.jls 3V3=js-3v3.jls; a file holding several units "
                         "(the UI recording two together) names each rail's by serial or source name: "
                         "12V=both.jls#003512 3V3=both.jls#003688")
    cs = kind.add_parser("csv", help="a CSV from any meter, read through a mapping file")
    cs.add_argument("csv", help="the meter's CSV file")
    cs.add_argument("--mapping", required=True, help="TOML mapping: time column and base, each rail's V and I columns")
    for q in (js, cs):
        q.add_argument("--out", default=None, help="the capture to write (.jls; never overwritten; default: a new "
                                                   "file in ~/.local/share/powerrig/captures)")
        q.add_argument("--events", action="append", default=[], metavar="FILE",
                       help="events to merge: powerrig's run log (JSONL) or fio --output-format=json output")
    js.add_argument("--interval-us", type=int, default=1000, help="capture interval (default 1000 us)")
    cs.add_argument("--interval-us", type=int, default=None,
                    help="capture interval (default: the meter's own, one row per record; another interval "
                         "resamples by time-weighted overlap and states each row's coverage)")
    for q in (js, cs):
        q.set_defaults(func=run)


def run(args) -> int:
    from powerrig.imports.build import write_import
    from powerrig.imports.events import read_events

    if args.interval_us is not None and (args.interval_us <= 0 or 1_000_000 % args.interval_us):
        raise UsageError(f"--interval-us {args.interval_us}: choose an interval that divides one second (e.g. 1000)")
    interval_s = args.interval_us * 1e-6 if args.interval_us is not None else None
    events = [e for path in args.events for e in read_events(path)]      # read all before writing anything
    if args.kind == "joulescope":
        from powerrig.imports.joulescope import read_joulescope
        files = {}
        for item in args.rails:
            rail, eq, path = item.partition("=")
            if not eq or not rail or not path:
                raise UsageError(f"{item!r} is not RAIL=FILE[#UNIT]; e.g. 12V=js-12v.jls or 12V=both.jls#003512")
            files[rail] = path
        t0, cols, sampling, prov = read_joulescope(files, interval_s)
        rails = list(files)
    else:
        from powerrig.imports.meter_csv import load_mapping, read_meter_csv
        mapping = load_mapping(args.mapping)
        t0, cols, sampling, prov = read_meter_csv(args.csv, mapping, interval_s)
        interval_s = prov["resampling"]["interval_s"]
        rails = list(mapping["rails"])
    prov["events"] = list(args.events)
    if args.out is None:
        from powerrig.core import paths
        args.out = str(paths.new_file(paths.captures_dir(), "import", ".jls"))
    out = write_import(args.out, t0, interval_s, rails, cols, sampling, events, prov)
    n = len(cols["p"])
    bad = prov.get("invalid_samples", 0)
    print(f"{out}: {n * interval_s:.3f} s, {n} intervals of {interval_s * 1e6:g} us, rails {', '.join(rails)}, "
          f"{len(events)} events; source {sampling.source} ({sampling.sample_s * 1e6:g} us sampling)"
          + (f"; {bad} records with no valid reading (overload, not-a-number or out of range) marked as gaps"
             if bad else "")
          + (f"; {partial} intervals partly covered (each listed with its coverage in the metadata)"
             if (partial := prov.get("resampling", {}).get("coverage", {}).get("partial", 0)) else ""), file=sys.stderr)
    return 0
