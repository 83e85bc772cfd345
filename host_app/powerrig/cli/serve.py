"""`powerrig serve --db FILE|URL [--host H] [--port P]`: the results web page (read-only).

Runs per rig, steps with W, MiB/s, MiB/s/W and verdicts, throughput-per-watt curves per plan and drive,
two runs compared, and each running sweep's live state. Listens on 127.0.0.1 unless told otherwise.
"""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("serve", help="the results web page (read-only): runs per rig, steps, curves, live rigs")
    p.add_argument("--db", default=None, help="results database: a SQLite file (default out/results/powerrig.sqlite) "
                                              "or postgresql://user@host/db")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface of a lab LAN)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--threads", type=int, default=4)
    p.set_defaults(func=run)


def run(args) -> int:
    from powerrig.core.errors import PowerrigError
    from powerrig.results import DEFAULT_DB, ResultStore

    try:
        from waitress import serve

        from powerrig.web.app import create_app
    except ImportError as e:
        raise PowerrigError(f"`powerrig serve` needs Flask and waitress ({e.name} is missing): "
                            "pip install -e '.[web]'") from None
    store = ResultStore(args.db or DEFAULT_DB, read_only=True)
    print(f"powerrig results for {store} on http://{args.host}:{args.port}/", flush=True)
    serve(create_app(store), host=args.host, port=args.port, threads=args.threads, ident="powerrig")
    return 0
