"""`powerrig serve --db FILE|URL [--host H] [--port P]`: the results web page (read-only).

Runs per rig, steps with W, MiB/s, MiB/s/W and verdicts, throughput-per-watt curves per plan and drive,
two runs compared, and each running sweep's live state. Listens on 127.0.0.1 unless told otherwise.
"""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("serve", help="the results web page (read-only): runs per rig, steps, curves, live rigs")
    p.add_argument("--db", default=None, help="results database: a SQLite file "
                                              "(default: your results store, ~/.local/share/powerrig/results.sqlite, XDG_DATA_HOME) "
                                              "or postgresql://user@host/db")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface of a lab LAN)")
    p.add_argument("--port", type=int, default=8080, help="TCP port, 1..65535 (default 8080)")
    p.add_argument("--threads", type=int, default=4, help="requests served at once, 1..64 (default 4)")
    p.set_defaults(func=run)


def run(args) -> int:
    from powerrig.core.bounds import OPTIONS, show
    from powerrig.core.errors import PowerrigError
    from powerrig.results.store import open_existing

    try:
        from waitress import create_server

        from powerrig.web.app import create_app
    except ImportError as e:
        raise PowerrigError(f"`powerrig serve` needs Flask and waitress ({e.name} is missing): "
                            "pip install -e '.[web]'") from None
    for option, value in (("--port", args.port), ("--threads", args.threads)):
        b = OPTIONS[option]            # port 70000 listened on 4464 (mod 65536); 0 threads never answered
        if not b.lo <= value <= b.hi:
            raise PowerrigError(f"{option} must be a whole number from {show(b.lo)} to {show(b.hi)}, not {value}")
    store = open_existing(args.db)
    try:                               # bound before the line that says where: a name that does not resolve,
        server = create_server(create_app(store), host=args.host, port=args.port, threads=args.threads,
                               ident="powerrig")                   # a port in use, an address not of this host
    except (OSError, ValueError) as e:
        why = (getattr(e, "strerror", None) or str(e)).rstrip(".")
        raise PowerrigError(f"cannot listen on {args.host} port {args.port}: {why}; "
                            "give an address of this machine (127.0.0.1, 0.0.0.0 for every interface) and a free "
                            "--port") from None
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"powerrig results for {store} on http://{host}:{args.port}/", flush=True)
    server.run()
    return 0
