"""The ``powerrig`` command. Each subcommand lives in its own module with a ``register(sub)``."""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from powerrig import __version__

from powerrig.cli._options import Terminated
from powerrig.core import log
from powerrig.core.errors import PowerrigError
from powerrig.core.shown import printable


def subcommand_modules() -> list[str]:
    """Every module of this package is one command, named after it, with a ``register(sub)``: adding a
    command is adding a file."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="powerrig", description="Power measurement for NVMe SSDs on an interposer rig.")
    ap.add_argument("--version", action="version", version=f"powerrig {__version__}")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="log more on stderr: -v info, -vv debug (default: warnings and errors)")
    ap.add_argument("--log-file", metavar="PATH", default=None,
                    help="also write a detailed, timestamped log to this file")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for name in subcommand_modules():
        importlib.import_module(f"powerrig.cli.{name}").register(sub)
    for p in sub.choices.values():
        if p.get_default("func") is None:     # a command of parts (`sim`, `import`) typed alone: its parts
            p.set_defaults(func=_help_of(p))
    return ap


def _help_of(parser: argparse.ArgumentParser):
    """What a command of parts runs with no part named: its own help (not the top level's), status 2."""
    def show(_args) -> int:
        parser.print_help()
        return 2
    return show


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) >= 2 and argv[0] == "sim" and argv[1] in ("nvme", "fio"):
        # impersonated tools take their own arguments verbatim (nvme-cli / fio syntax)
        mod = importlib.import_module(f"powerrig.sim.tools.{argv[1]}_cli")
        return int(mod.main(argv[2:]) or 0)
    ap = build_parser()
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return 2
    try:
        log.setup(args.verbose, args.log_file)
        return int(args.func(args) or 0)
    except PowerrigError as e:          # one line, whatever a stored or given name held
        print(f"powerrig: error: {printable(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print(f"powerrig: {str(e) or 'interrupted by Ctrl-C'}", file=sys.stderr)     # an exception is always true
        return 143 if isinstance(e, Terminated) else 130
    except OSError as e:      # the environment (a full or read-only disk): what and where, in one line
        where = f": {e.filename}" if e.filename else ""
        print(f"powerrig: error: {e.strerror or e}{where}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
