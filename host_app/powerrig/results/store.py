"""The results store: one SQLite file by default (WAL, so a GUI or notebook reads while a sweep
writes), or any SQLAlchemy URL (``postgresql://...``) through the same Core statements.

A step is written in one transaction with its phases and measurements, so the database is the
sweep's checkpoint: a step is either stored whole or not at all, and a resumed sweep skips exactly
the stored ones. A run belongs to one plan (by hash), so two plans' results never mix.
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, event, func, insert, inspect, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from powerrig.core import owned, paths
from powerrig.core.bounds import ROW_ID
from powerrig.core.errors import PowerrigError
from powerrig.results import schema as S

logger = logging.getLogger(__name__)


class ResultsError(PowerrigError):
    """The results database is unusable or does not hold what was asked."""


class OldSchema(ResultsError):
    """A powerrig store of an older schema, opened read-only: a writer moves it forward."""


class DatabaseFault(ResultsError):
    """The database could not take a write or a read (locked past the timeout, full, corrupt, the server
    gone): what was being written is still in the caller's hands, to be kept and stored later."""


def database_url(target: str | Path) -> str:
    """A file path becomes a SQLite URL; ``postgresql://`` (and ``postgres://``) mean psycopg 3 on every
    SQLAlchemy version (2.0 would pick psycopg2, which powerrig does not install)."""
    t = str(target)
    if "://" in t:
        for plain in ("postgresql://", "postgres://"):
            if t.startswith(plain):
                return "postgresql+psycopg://" + t[len(plain):]
        return t
    return f"sqlite:///{Path(t).resolve()}"


def _clean(v):
    """NaN/inf are not valid JSON and mean 'no value' here."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _reason(e: DBAPIError) -> str:
    """The database's own words, on one line (no SQL, no traceback)."""
    return " ".join(str(e.orig).split()) or type(e.orig).__name__


def _dialect_insert(c, table):
    """The connection's dialect's INSERT, which has ON CONFLICT (SQLite and PostgreSQL)."""
    if c.dialect.name == "postgresql":
        return postgresql_insert(table)
    if c.dialect.name == "sqlite":
        return sqlite_insert(table)
    raise ResultsError(f"the results store needs SQLite or PostgreSQL, not {c.dialect.name}")


def _insert_or_skip(c, table, keys: list[str]):
    """INSERT ... ON CONFLICT (keys) DO NOTHING."""
    return _dialect_insert(c, table).on_conflict_do_nothing(index_elements=keys)


def _upsert(c, table, keys: list[str], row: dict):
    """INSERT ... ON CONFLICT (keys) DO UPDATE SET the other columns."""
    return _dialect_insert(c, table).values(**row).on_conflict_do_update(
        index_elements=keys, set_={k: v for k, v in row.items() if k not in keys})


# the 64-bit key of the PostgreSQL advisory lock that serialises schema creation and migration
SCHEMA_LOCK = 0x706F77657272_6967 & 0x7FFFFFFFFFFFFFFF
SCHEMA_LOCK_WAIT_S = 300
# How long a write waits for other writers before it gives up, unless the caller says (``wait_s``): a lab
# sweep must not stop at 3 a.m. because another rig's writer held the lock a while on a loaded host.
WAIT_ENV = "POWERRIG_DB_WAIT_S"
DEFAULT_WAIT_S = 600.0
ATTEMPT_S = 5.0           # one attempt's lock wait (SQLite busy_timeout, PostgreSQL lock_timeout) ...
BACKOFF_S = (0.05, 2.0)   # ... then a jittered pause, doubling from the first to the second, and again
LONG_WAIT_S = 5.0         # a write that waited longer than this logs one warning line
CONNECT_TIMEOUT_S = 10
# PostgreSQL's "try the transaction again" states: serialization failure, deadlock, lock wait timed out
RETRY_SQLSTATES = {"40001", "40P01", "55P03"}


def default_wait_s() -> float:
    """``POWERRIG_DB_WAIT_S`` (seconds), else DEFAULT_WAIT_S."""
    v = os.environ.get(WAIT_ENV, "").strip()
    if not v:
        return DEFAULT_WAIT_S
    try:
        w = float(v)
    except ValueError:
        w = -1.0
    if not 0 < w < 1e7:
        raise ResultsError(f"{WAIT_ENV}={v!r} is not a number of seconds above 0: set it like {WAIT_ENV}=600")
    return w


def _retryable(e: DBAPIError) -> bool:
    """Another writer was in the way (the transaction was rolled back and can simply run again)."""
    code = getattr(e.orig, "sqlstate", None)
    if code:
        return code in RETRY_SQLSTATES
    low = str(e.orig).lower()
    return "database is locked" in low or "database table is locked" in low or "busy" in low


class ResultStore:
    def __init__(self, target: str | Path | None = None, timeout_s: float | None = None, read_only: bool = False):
        """``timeout_s``: how long a write waits for other writers (their locks, PostgreSQL's serialization
        failures and deadlocks) before it gives up; default ``POWERRIG_DB_WAIT_S`` or 600 s. A write tries
        for at most ATTEMPT_S at a time, then pauses and runs its transaction again, so it never fails
        while the lock is merely busy. ``read_only``: an existing database at the current schema, opened
        so nothing can write (the web page). No ``target``: the user's store (core/paths.py)."""
        self.url = database_url(paths.results_db() if target is None else target)
        self.timeout_s = default_wait_s() if timeout_s is None else float(timeout_s)
        self.read_only = read_only
        self.path = Path(self.url[len("sqlite:///"):]) if self.url.startswith("sqlite:///") else None
        if self.path and read_only and not self.path.is_file():
            raise ResultsError(f"no results database {self.path}: name an existing file or URL with --db")
        if self.path and not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if os.path.lexists(self.path):
                self._refuse_a_foreign_file()
            else:
                self._create_whole()
        try:
            self.engine: Engine = create_engine(self.url, **self._engine_args())
        except Exception as e:        # bad URL, missing driver: say which
            raise ResultsError(f"cannot use results database {target}: {e}") from None
        if self.engine.dialect.name == "sqlite":
            self._sqlite_connections()
        self._quick_check()
        if read_only:
            self._check_version()
        else:
            self._migrate()

    def __repr__(self) -> str:
        return f"ResultStore({self.engine.url.render_as_string(hide_password=True)!r})"

    def _engine_args(self) -> dict:
        if self.url.startswith("postgresql"):
            # lock_timeout: one attempt of a write blocked by another's lock ends (and is tried again, _transact)
            ro = " -c default_transaction_read_only=on" if self.read_only else ""
            return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S,
                                     "options": f"-c lock_timeout={self._attempt_ms()}{ro}"},
                    "pool_pre_ping": True}
        return {}

    def _sqlite_connections(self) -> None:
        """Transactions begun by powerrig, not by the driver: writes take the lock up front (BEGIN
        IMMEDIATE), so concurrent writers queue for busy_timeout instead of failing on a lock upgrade.
        Every connection: WAL (readers never wait for the writer) and a busy_timeout."""
        timeout_ms = self._attempt_ms()

        @event.listens_for(self.engine, "connect")
        def _pragmas(dbapi_conn, _):
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout={timeout_ms}")
            cur.execute("PRAGMA query_only=ON" if self.read_only else "PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _begin(conn):
            opts = conn.get_execution_options()
            if opts.get("powerrig_write"):
                conn.exec_driver_sql(f"PRAGMA busy_timeout={opts.get('powerrig_wait_ms', timeout_ms)}")
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.exec_driver_sql("BEGIN")

    @contextmanager
    def _read(self):
        """A connection for reading; database errors become one ResultsError line."""
        try:
            with self.engine.connect() as c:
                yield c
        except DBAPIError as e:
            raise self._error("cannot read", e) from None

    def _attempt_ms(self, budget_s: float | None = None) -> int:
        """One attempt's lock wait: ATTEMPT_S, or what is left of the budget if less."""
        return max(1, int(min(ATTEMPT_S, self.timeout_s if budget_s is None else budget_s) * 1000))

    def _transact(self, body, wait_s: float | None = None, what: str = "a write"):
        """``body(connection)`` in one write transaction, committed at its end. While another writer is in
        the way (SQLite's lock busy, PostgreSQL's lock wait, serialization failure or deadlock) the
        transaction is rolled back and run again after a jittered pause, for up to ``wait_s`` (default:
        the store's ``timeout_s``); past that, or on any other database error (disk full, corrupt, server
        gone), one DatabaseFault line. The body only writes: no long work while the lock is held, and
        run twice it stores once (its rows are keyed, see store_step)."""
        def attempt(ms):
            with self.engine.execution_options(powerrig_write=True, powerrig_wait_ms=ms).begin() as c:
                if c.dialect.name == "postgresql" and ms != self._attempt_ms():
                    c.execute(text(f"SET LOCAL lock_timeout = {ms}"))
                return body(c)
        return self._retrying(attempt, self.timeout_s if wait_s is None else wait_s, what, "cannot write to")

    def _retrying(self, attempt, budget: float, what: str, failing: str):
        """``attempt(lock_wait_ms)`` again after a jittered pause while another writer is in the way, for up
        to ``budget`` seconds. Reads need it too where a database is being created: SQLite answers "locked"
        at once, without its busy wait, to a connection that meets another switching a new file to WAL."""
        t0 = time.monotonic()
        pause, attempts = BACKOFF_S[0], 0
        while True:
            attempts += 1
            ms = self._attempt_ms(max(budget - (time.monotonic() - t0), 0.001))
            try:
                out = attempt(ms)
                break
            except IntegrityError:
                raise
            except DBAPIError as e:
                waited = time.monotonic() - t0
                if not _retryable(e) or waited >= budget:
                    raise self._error(failing, e, waited, budget) from None
                time.sleep(min(pause * random.uniform(0.5, 1.0), max(0.0, budget - waited)))
                pause = min(pause * 2, BACKOFF_S[1])
        waited = time.monotonic() - t0
        if waited > LONG_WAIT_S:
            logger.warning("results database %s: %s waited %.1f s for other writers (%d attempts)", self, what,
                           waited, attempts)
        return out

    def _error(self, what: str, e: DBAPIError, waited_s: float | None = None,
               budget_s: float | None = None) -> DatabaseFault:
        why = _reason(e)
        low = why.lower()
        if "locked" in low or "lock timeout" in low or _retryable(e):
            hint = (f"other writers held it longer than {budget_s or self.timeout_s:g} s (waited {waited_s or 0:.1f} s); "
                    f"try again when they are done, or wait longer ({WAIT_ENV})")
        elif "full" in low or "no space" in low:
            hint = "free disk space (or move it) and resume with --resume"
        elif "malformed" in low or "not a database" in low or "corrupt" in low:
            hint = "restore it from a backup or use a new file"
        else:
            hint = "check that the database server is up and the URL is right"
        return DatabaseFault(f"{what} results database {self}: {why}: {hint}")

    def __str__(self) -> str:
        return str(self.path) if self.path else self.engine.url.render_as_string(hide_password=True)

    # -- schema ------------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self._read() as c:
            row = c.execute(select(S.schema_info.c.value).where(S.schema_info.c.key == "version")).first()
        return int(row[0]) if row else 0

    def _quick_check(self) -> None:
        """A damaged SQLite file is refused at open (PRAGMA quick_check), before a sweep runs a step."""
        if self.path is None or not self.path.exists() or self.path.stat().st_size == 0:
            return
        def attempt(_ms):
            with self.engine.connect() as c:
                return [" ".join(r[0].split())[:160] for r in c.exec_driver_sql("PRAGMA quick_check").fetchall()
                        if r[0] != "ok"]
        # a file another process is creating: "locked" is tried again, damage is refused at once
        bad = self._retrying(attempt, max(self.timeout_s, SCHEMA_LOCK_WAIT_S), "checking the file", "cannot open")
        if bad:
            raise DatabaseFault(f"results database {self.path} is corrupt (quick_check: {bad[0]}"
                               f"{f' and {len(bad) - 1} more' if len(bad) > 1 else ''}): restore it from a backup "
                               "or use a new file")

    def _not_a_store(self, tables: list[str]) -> ResultsError:
        """The one line for a database that is empty or another program's (no schema_info)."""
        if self.read_only:
            fix = (f"check --db, or run `powerrig sweep PLAN --results {self}` to make one" if not tables
                   else "check --db")
        else:
            fix = "check --results (a new file's name makes a new store; nothing was written)"
        if not tables:
            return ResultsError(f"{self} is empty, not a powerrig results store: {fix}")
        return ResultsError(f"{self} is not a powerrig results store (it holds tables {', '.join(tables[:3])}"
                            f"{', ...' if len(tables) > 3 else ''}, no schema_info): {fix}")

    def _refuse_a_foreign_file(self) -> None:
        """A writer's existing SQLite file: a powerrig store (of any schema version), else refused in one
        line before any connection switches it to WAL or makes a table in it. Powerrig makes a new file
        whole (_create_whole), so an empty file or one with no table is never a store being made."""
        if self.path.is_file() and self.path.stat().st_size == 0:
            raise self._not_a_store([])
        try:
            c = sqlite3.connect(f"file:{quote(str(self.path))}?mode=ro", uri=True, timeout=self.timeout_s)
            try:
                tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                  "AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            finally:
                c.close()
        except sqlite3.Error:
            return                  # damaged, not SQLite, unreadable: the open below says which in one line
        if "schema_info" not in tables:
            raise self._not_a_store(tables)

    def _create_whole(self) -> None:
        """A brand-new SQLite path gets its schema in a file of its own, linked into place only when whole
        (another process linking first keeps its own, as whole): no process ever meets a half-made store,
        so an existing empty file is someone else's and refused."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{random.getrandbits(32):08x}.new")
        try:
            eng = create_engine(f"sqlite:///{tmp}")
            try:
                with eng.begin() as c:
                    S.metadata.create_all(c)
                    c.execute(insert(S.schema_info).values(key="version", value=str(S.SCHEMA_VERSION)))
            finally:
                eng.dispose()
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                pass
            except OSError:                      # a file system without hard links: a rename if still free
                if not os.path.lexists(self.path):
                    os.replace(tmp, self.path)
        except DBAPIError as e:
            raise self._error("cannot create", e) from None
        finally:
            tmp.unlink(missing_ok=True)

    def _check_version(self) -> None:
        with self._read() as c:
            if not self.engine.dialect.has_table(c, "schema_info"):
                raise self._not_a_store(inspect(c).get_table_names())
        v = self.schema_version()
        if v < S.SCHEMA_VERSION:
            raise OldSchema(f"results database {self} has schema version {v}, this powerrig reads "
                            f"{S.SCHEMA_VERSION}: open it once with `powerrig results --db {self} list` to migrate it")
        if v != S.SCHEMA_VERSION:
            raise ResultsError(f"results database {self} has schema version {v}, this powerrig reads "
                               f"{S.SCHEMA_VERSION}: " + ("upgrade powerrig" if v > S.SCHEMA_VERSION else
                                                          f"open it once with `powerrig results --db {self} list` "
                                                          "to migrate it"))

    def _schema_current(self) -> bool:
        """Every table there and the version this powerrig's: nothing to lock for (a lab's usual open)."""
        def attempt(_ms):
            with self.engine.connect() as c:
                if not set(S.metadata.tables) <= set(inspect(c).get_table_names()):
                    return False
                row = c.execute(select(S.schema_info.c.value).where(S.schema_info.c.key == "version")).first()
            return row is not None and row[0] == str(S.SCHEMA_VERSION)
        # many processes opening a new file at once: waits as long as _migrate's writers may
        return self._retrying(attempt, max(self.timeout_s, SCHEMA_LOCK_WAIT_S), "reading the schema version",
                              "cannot read")

    def _migrate(self) -> None:
        """Create or move the schema forward, once, however many processes open the database at once:
        under PostgreSQL's advisory lock or SQLite's write lock, the version read again once held."""
        if self._schema_current():
            return
        # the others wait for the one creating or migrating, however long that takes on a busy host
        self._transact(self._create_or_migrate, wait_s=max(self.timeout_s, SCHEMA_LOCK_WAIT_S),
                       what="creating or migrating the schema")

    def _create_or_migrate(self, c) -> None:
        """The schema's creation or migration, in _migrate's transaction."""
        if c.dialect.name == "postgresql":
            c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": SCHEMA_LOCK})
        if not self.engine.dialect.has_table(c, "schema_info"):
            tables = inspect(c).get_table_names()
            if tables:                   # another program's database (an empty one is made a store)
                raise self._not_a_store(tables)
        fresh = not self.engine.dialect.has_table(c, "runs")
        S.metadata.create_all(c)         # new tables appear in old databases too (checkfirst)
        if fresh:
            c.execute(insert(S.schema_info).values(key="version", value=str(S.SCHEMA_VERSION)))
            return
        row = c.execute(select(S.schema_info.c.value).where(S.schema_info.c.key == "version")).first()
        v = int(row[0]) if row else 1
        if v > S.SCHEMA_VERSION:
            raise ResultsError(f"results database {self} has schema version {v}, newer than this powerrig "
                               f"({S.SCHEMA_VERSION}): upgrade powerrig to write to it")
        if v == S.SCHEMA_VERSION and row:
            return
        while v < S.SCHEMA_VERSION:
            S.MIGRATIONS[v](c)
            v += 1
            logger.info("results database migrated to schema version %d", v)
        c.execute(S.schema_info.delete().where(S.schema_info.c.key == "version"))
        c.execute(insert(S.schema_info).values(key="version", value=str(v)))

    # -- runs --------------------------------------------------------------------------------
    def plan_id(self, c, plan) -> int:
        """The plan's row, made if new: an upsert, so the same plan started from many places at once
        is stored once and none of them fails."""
        row = c.execute(select(S.plans.c.id).where(S.plans.c.hash == plan.hash)).first()
        if row:
            return row[0]
        c.execute(_insert_or_skip(c, S.plans, ["hash"]).values(
            hash=plan.hash, name=plan.name, path=plan.path, text=plan.source, resolved=json.dumps(plan.resolved())))
        return c.execute(select(S.plans.c.id).where(S.plans.c.hash == plan.hash)).scalar_one()

    def start_run(self, plan, out_dir: str, station: str = "", drive: dict | None = None, rig: dict | None = None,
                  software: dict | None = None, host: str | None = None, pid: int | None = None) -> int:
        """host, pid: the process that runs it (its owner until it ends)."""
        drive = drive or {}
        row = dict(status="running", started_utc=time.time(), station=station,
                   dut_serial=str(drive.get("sn", "")).strip(), dut_firmware=str(drive.get("fr", "")).strip(),
                   dut_model=str(drive.get("mn", "")).strip(), drive=json.dumps(drive, default=str),
                   rig=json.dumps(rig or {}, default=str), software=json.dumps(software or {}),
                   out_dir=str(out_dir), host=host, pid=pid)
        return self._transact(lambda c: c.execute(insert(S.runs).values(plan_id=self.plan_id(c, plan), **row))
                              .inserted_primary_key[0], what="starting a run")

    def claim_run(self, run_id: int, host: str, pid: int) -> None:
        """A resumed run is running again, owned by this process."""
        q = update(S.runs).where(S.runs.c.id == run_id).values(status="running", error=None, finished_utc=None,
                                                               host=host, pid=pid)
        self._transact(lambda c: c.execute(q), what="claiming a run")

    def resumable_run(self, plan) -> dict | None:
        """The latest unfinished run of this exact plan (by hash), or None."""
        with self._read() as c:
            row = c.execute(select(S.runs).join(S.plans).where(S.plans.c.hash == plan.hash)
                            .where(S.runs.c.status != "done").order_by(S.runs.c.id.desc())).mappings().first()
        return dict(row) if row else None

    def latest_run_of_path(self, path: str) -> dict | None:
        with self._read() as c:
            row = c.execute(select(S.runs, S.plans.c.hash, S.plans.c.name.label("plan_name")).join(S.plans)
                            .where(S.plans.c.path == path).order_by(S.runs.c.id.desc())).mappings().first()
        return dict(row) if row else None

    def set_run_status(self, run_id: int, status: str, error: str | None = None) -> None:
        vals = {"status": status, "error": error}
        if status in ("done", "failed", "interrupted"):
            vals["finished_utc"] = time.time()
        q = update(S.runs).where(S.runs.c.id == run_id).values(**vals)
        self._transact(lambda c: c.execute(q), what=f"marking run {run_id} {status}")

    def run(self, run_id: int) -> dict:
        if not ROW_ID.lo <= run_id <= ROW_ID.hi:      # no SQL binds it (SQLite past 2**63, PostgreSQL past 2**31)
            raise ResultsError(f"no run {run_id} in {self.url} (see `powerrig results list`)")
        with self._read() as c:
            row = c.execute(select(S.runs, S.plans.c.name.label("plan_name"), S.plans.c.hash.label("plan_hash"),
                                   S.plans.c.text.label("plan_text"), S.plans.c.resolved.label("plan_resolved"))
                            .join(S.plans).where(S.runs.c.id == run_id)).mappings().first()
        if row is None:
            raise ResultsError(f"no run {run_id} in {self.url} (see `powerrig results list`)")
        return dict(row)

    def runs(self) -> list[dict]:
        n_steps = select(S.steps.c.run_id, func.count().label("steps")).group_by(S.steps.c.run_id).subquery()
        with self._read() as c:
            rows = c.execute(select(S.runs.c.id, S.runs.c.status, S.runs.c.started_utc, S.runs.c.finished_utc,
                                    S.runs.c.station, S.runs.c.dut_serial, S.runs.c.dut_firmware,
                                    S.plans.c.name.label("plan"), S.plans.c.hash.label("plan_hash"),
                                    func.coalesce(n_steps.c.steps, 0).label("steps"))
                             .join(S.plans).outerjoin(n_steps, n_steps.c.run_id == S.runs.c.id)
                             .order_by(S.runs.c.id)).mappings().all()
        return [dict(r) for r in rows]

    def runs_page(self, before: int | None = None, after: int | None = None, limit: int = 50) -> dict:
        """One page of runs, newest first, by keyset on the run id (never OFFSET): the ``limit`` newest runs
        below ``before``, or the ``limit`` oldest above ``after`` (the page before, going back), or the newest.
        Every query walks the runs' primary key (ORDER BY id ... LIMIT), and a run's steps are counted
        through uq_step_key (run_id, key), so a page costs the same with 10 runs or 100,000.
        Returns {"runs": [...], "older": bool, "newer": bool}: whether a page lies past each end."""
        n_steps = select(func.count()).where(S.steps.c.run_id == S.runs.c.id).scalar_subquery()
        q = (select(S.runs.c.id, S.runs.c.status, S.runs.c.started_utc, S.runs.c.finished_utc, S.runs.c.station,
                    S.runs.c.dut_serial, S.runs.c.dut_firmware, S.plans.c.name.label("plan"),
                    S.plans.c.hash.label("plan_hash"), n_steps.label("steps")).join(S.plans))
        # bounds every SQL binds (PostgreSQL's integer ends at ROW_ID.hi): every id lies below a larger before
        if before is not None and before > ROW_ID.hi:
            before = None
        before, after = (None if v is None else max(ROW_ID.lo - 1, min(v, ROW_ID.hi)) for v in (before, after))
        if after is not None:
            q = q.where(S.runs.c.id > after).order_by(S.runs.c.id.asc())
        else:
            if before is not None:
                q = q.where(S.runs.c.id < before)
            q = q.order_by(S.runs.c.id.desc())
        with self._read() as c:
            rows = [dict(r) for r in c.execute(q.limit(limit + 1)).mappings()]
            more = len(rows) > limit
            rows = rows[:limit]
            if after is not None:
                rows.reverse()

            def any_run(cond) -> bool:
                return c.execute(select(S.runs.c.id).where(cond).limit(1)).first() is not None
            if rows:
                newer = more if after is not None else any_run(S.runs.c.id > rows[0]["id"])
                older = more if after is None else any_run(S.runs.c.id < rows[-1]["id"])
            else:
                newer = before is not None and any_run(S.runs.c.id >= before)
                older = after is not None and any_run(S.runs.c.id <= after)
        return {"runs": rows, "older": older, "newer": newer}

    def runs_of_plan(self, plan_hash: str, limit: int = 50, exclude: int | None = None) -> list[dict]:
        """The newest ``limit`` runs of one plan (by hash), newest first."""
        q = (select(S.runs.c.id, S.runs.c.status, S.runs.c.dut_serial).join(S.plans)
             .where(S.plans.c.hash == plan_hash))
        if exclude is not None:
            q = q.where(S.runs.c.id != exclude)
        with self._read() as c:
            return [dict(r) for r in c.execute(q.order_by(S.runs.c.id.desc()).limit(limit)).mappings()]

    # -- the live state of running runs ------------------------------------------------------
    def record_live(self, run_id: int, **state) -> None:
        """Overwrite a run's live row (step, W now, end time): an upsert, about once a second. It waits one
        attempt at most (ATTEMPT_S): the next second's row replaces a missed one, and a backlog of live
        rows must not queue ahead of the steps."""
        row = {"run_id": run_id, "updated_utc": time.time(), **{k: _clean(v) for k, v in state.items()}}
        self._transact(lambda c: c.execute(_upsert(c, S.live, ["run_id"], row)), wait_s=min(ATTEMPT_S, self.timeout_s),
                       what="the live state")

    def clear_live(self, run_id: int) -> None:
        q = S.live.delete().where(S.live.c.run_id == run_id)
        self._transact(lambda c: c.execute(q), wait_s=min(ATTEMPT_S, self.timeout_s), what="the live state")

    def live(self) -> list[dict]:
        """The live rows of runs still marked running, by station."""
        with self._read() as c:
            if not self.engine.dialect.has_table(c, "live"):
                return []
            # the live rows first (a handful), then their runs by primary key: a join let SQLite walk every run
            rows = [dict(r) for r in c.execute(select(S.live).order_by(S.live.c.station, S.live.c.run_id)).mappings()]
            if not rows:
                return []
            runs = {r.id: r for r in c.execute(select(S.runs.c.id, S.runs.c.status, S.plans.c.name.label("plan"))
                                               .join(S.plans).where(S.runs.c.id.in_([r["run_id"] for r in rows]))
                                               .where(S.runs.c.status == "running"))}
        return [{**r, "status": runs[r["run_id"]].status, "plan": runs[r["run_id"]].plan}
                for r in rows if r["run_id"] in runs]

    # -- steps -------------------------------------------------------------------------------
    def finished_steps(self, run_id: int) -> set[str]:
        with self._read() as c:
            return {r[0] for r in c.execute(select(S.steps.c.key).where(S.steps.c.run_id == run_id))}

    def store_step(self, run_id: int, step: dict, phases: list[dict], measurements: list[dict]) -> int:
        """One step, its phases (with per-rail metrics under 'rails') and measurements, atomically. The rows
        are made before the write lock is taken; a transaction run again after another writer was in the
        way (_transact) had been rolled back, and the (run, key) unique constraint stores a step once."""
        step_row = {"run_id": run_id, **{k: _clean(v) for k, v in step.items()}}
        phase_rows = []
        for p in phases:
            phase_rows.append(({k: _clean(v) for k, v in p.items() if k != "rails"},
                               [{"rail": rail, "metric": m, "value": _clean(float(v))}
                                for rail, ms in p.get("rails", {}).items() for m, v in ms.items()
                                if isinstance(v, (int, float)) and not isinstance(v, bool)]))
        cols = [col.name for col in S.measurements.columns if col.name not in ("id", "step_id")]
        unknown = {k for m in measurements for k in m} - set(cols)
        if unknown:
            raise ResultsError(f"measurement fields {sorted(unknown)} are not in the schema")
        # executemany takes its columns from every row alike: give each row all of them
        m_rows = [{k: _clean(m.get(k)) for k in cols} for m in measurements]

        def write(c) -> int:
            sid = c.execute(insert(S.steps).values(**step_row)).inserted_primary_key[0]
            for row, metrics in phase_rows:
                pid = c.execute(insert(S.phases).values(step_id=sid, **row)).inserted_primary_key[0]
                if metrics:
                    c.execute(insert(S.phase_metrics), [{"phase_id": pid, **v} for v in metrics])
            if m_rows:
                c.execute(insert(S.measurements), [{"step_id": sid, **m} for m in m_rows])
            return sid

        try:
            return self._transact(write, what=f"step {step.get('key')!r}")
        except IntegrityError:
            raise ResultsError(f"step {step.get('key')!r} of run {run_id} is already stored (resume skips it)") from None

    @staticmethod
    def _idx_range(q, lo: int | None, hi: int | None):
        """Only the steps with lo <= idx <= hi (either end open when None)."""
        if lo is not None:
            q = q.where(S.steps.c.idx >= max(-ROW_ID.hi, min(lo, ROW_ID.hi)))
        if hi is not None:
            q = q.where(S.steps.c.idx <= max(-ROW_ID.hi, min(hi, ROW_ID.hi)))
        return q

    def steps(self, run_id: int, lo: int | None = None, hi: int | None = None) -> list[dict]:
        """The run's steps in order (those with lo <= idx <= hi when given)."""
        with self._read() as c:
            q = self._idx_range(select(S.steps).where(S.steps.c.run_id == run_id), lo, hi)
            return [dict(r) for r in c.execute(q.order_by(S.steps.c.idx)).mappings()]

    def steps_page(self, run_id: int, start: int | None = None, before: int | None = None,
                   limit: int = 50) -> dict:
        """One page of a run's steps by keyset on the step index (never OFFSET): the ``limit`` first steps
        from index ``start``, or the ``limit`` last below ``before``, or the first. Returns {"steps": [...],
        "prev": bool, "next": bool}: whether steps lie before or after the page."""
        q = select(S.steps).where(S.steps.c.run_id == run_id)
        b = None if before is None else max(-ROW_ID.hi, min(before, ROW_ID.hi))     # bounds every SQL binds
        start = None if start is None else max(-ROW_ID.hi, min(start, ROW_ID.hi))
        with self._read() as c:
            if b is not None:
                rows = [dict(r) for r in c.execute(q.where(S.steps.c.idx < b).order_by(S.steps.c.idx.desc())
                                                   .limit(limit + 1)).mappings()]
                more = len(rows) > limit
                rows = rows[:limit][::-1]
            else:
                rows = [dict(r) for r in c.execute(self._idx_range(q, start, None).order_by(S.steps.c.idx)
                                                   .limit(limit + 1)).mappings()]
                more = len(rows) > limit
                rows = rows[:limit]

            def any_step(cond) -> bool:
                return c.execute(select(S.steps.c.id).where(S.steps.c.run_id == run_id).where(cond)
                                 .limit(1)).first() is not None
            if rows:
                prev = more if b is not None else any_step(S.steps.c.idx < rows[0]["idx"])
                nxt = more if b is None else any_step(S.steps.c.idx > rows[-1]["idx"])
            else:
                prev, nxt = (b is None and start is not None and any_step(S.steps.c.idx < start),
                             b is not None and any_step(S.steps.c.idx >= b))
        return {"steps": rows, "prev": prev, "next": nxt}

    def measurements(self, run_id: int, lo: int | None = None, hi: int | None = None) -> list[dict]:
        """The run's measurements in step order (of the steps with lo <= idx <= hi when given)."""
        with self._read() as c:
            q = (select(S.steps.c.idx, S.steps.c.key.label("step"), S.steps.c.power_state, S.steps.c.workload,
                        S.measurements).join(S.steps, S.steps.c.id == S.measurements.c.step_id)
                 .where(S.steps.c.run_id == run_id))
            q = self._idx_range(q, lo, hi).order_by(S.steps.c.idx, S.measurements.c.id)
            return [dict(r) for r in c.execute(q).mappings()]

    def phases(self, run_id: int, lo: int | None = None, hi: int | None = None) -> list[dict]:
        """The run's phases in step order (of the steps with lo <= idx <= hi when given)."""
        with self._read() as c:
            q = (select(S.steps.c.key.label("step"), S.phases).join(S.steps, S.steps.c.id == S.phases.c.step_id)
                 .where(S.steps.c.run_id == run_id))
            q = self._idx_range(q, lo, hi).order_by(S.steps.c.idx, S.phases.c.id)
            return [dict(r) for r in c.execute(q).mappings()]

    # -- the JSON record beside the database ---------------------------------------------------
    def run_record(self, run_id: int) -> dict:
        """The whole run as one document (OpenHTF-like: run -> steps -> measurements)."""
        run = self.run(run_id)
        for k in ("drive", "rig", "software", "plan_resolved"):
            run[k] = json.loads(run[k]) if run.get(k) else {}
        ms = self.measurements(run_id)
        steps = []
        for s in self.steps(run_id):
            s = dict(s)
            s["params"] = json.loads(s["params"]) if s.get("params") else {}
            s["measurements"] = [{k: v for k, v in m.items() if k not in ("idx", "step", "power_state", "workload",
                                                                           "step_id")}
                                 for m in ms if m["step"] == s["key"]]
            steps.append(s)
        run["steps"] = steps
        return run

    def write_record(self, run_id: int, directory: str | Path | None = None) -> Path:
        d = Path(directory) if directory else (self.path.parent if self.path else Path("."))
        owned.owned_dir(d, top=True)
        return owned.write_owned(d / f"run-{run_id}.json", json.dumps(self.run_record(run_id), indent=1, default=str),
                                 atomic=True)


def open_existing(db: str | None):
    """The results database to read from, opened read-only. A SQLite file that is not there, is empty
    or is another program's is refused in one line and nothing is created in it (a typo in --db must not
    leave an empty database and its folder behind, nor powerrig's tables in someone's file); only a
    powerrig store of an older schema is opened to be moved forward."""
    target = str(db or paths.results_db())
    if "://" not in target and not Path(target).is_file():
        if db:
            raise ResultsError(f"no results database at {target}: check --db, or run `powerrig sweep PLAN "
                               f"--results {target}` first")
        raise ResultsError(f"no results yet in your results store {target}: run `make demo` or `powerrig sweep "
                           "PLAN` first (or name another store with --db)")
    try:
        return ResultStore(target, read_only=True)
    except OldSchema:
        return ResultStore(target)
