"""A throwaway PostgreSQL server for tests and benchmarks: the distribution's own binaries, a cluster
in a temporary folder, listening on a unix socket only (no TCP port), removed on stop.

initdb refuses to run as root, so as root the server runs as an unprivileged user (``nobody``) through
runuser; as anyone else it runs as that user. ``database()`` makes a fresh, empty database per test.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, text

from powerrig.results.store import database_url

PG_BIN_GLOB = "/usr/lib/postgresql/*/bin"
SUPERUSER = "powerrig"


class PostgresMissing(RuntimeError):
    """The PostgreSQL server binaries are not installed (scripts/setup.sh installs them)."""


def pg_bin() -> Path:
    """The newest installed server's bin folder (initdb, pg_ctl)."""
    found = sorted(glob.glob(PG_BIN_GLOB), key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                   else 0)
    for d in reversed(found):
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists():
            return Path(d)
    raise PostgresMissing(f"no PostgreSQL server binaries under {PG_BIN_GLOB} (apt-get install postgresql-15, "
                          "or run scripts/setup.sh)")


class Cluster:
    def __init__(self, user: str = "nobody"):
        self.bin = pg_bin()
        self.as_root = os.geteuid() == 0
        self.user = user if self.as_root else pwd.getpwuid(os.geteuid()).pw_name
        self.dir = Path(tempfile.mkdtemp(prefix="powerrig-pg-"))
        self.data, self.sock = self.dir / "data", self.dir / "sock"
        self.sock.mkdir()
        self._n = 0
        if self.as_root:
            pw = pwd.getpwnam(self.user)
            for p in (self.dir, self.sock):
                os.chown(p, pw.pw_uid, pw.pw_gid)

    def _run(self, *argv: str, timeout: float = 60) -> str:
        cmd = [str(self.bin / argv[0]), *argv[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.dir)
        if r.returncode:
            raise RuntimeError(f"{argv[0]} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}")
        return r.stdout

    def start(self, max_connections: int = 100) -> "Cluster":
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-sync",
                  "--no-instructions")
        # unix socket only; fsync off: a throwaway cluster need not survive a power cut
        opts = (f"-c listen_addresses='' -k {self.sock} -c max_connections={max_connections} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c shared_buffers=32MB")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"), "-o", opts, "-w", "-t", "60",
                  "start")
        return self

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{db}?host={self.sock}"

    def database(self, name: str | None = None) -> str:
        """A new empty database; its URL."""


        self._n += 1
        name = name or f"t{os.getpid()}_{self._n}"
        eng = create_engine(database_url(self.url()), isolation_level="AUTOCOMMIT")
        try:
            with eng.connect() as c:
                c.execute(text(f'CREATE DATABASE "{name}"'))
        finally:
            eng.dispose()
        return self.url(name)

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
