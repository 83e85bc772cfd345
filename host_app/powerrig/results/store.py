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
import time
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, func, insert, inspect, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from powerrig.core.errors import PowerrigError
from powerrig.results import schema as S

logger = logging.getLogger(__name__)
DEFAULT_DB = Path("out/results/powerrig.sqlite")


class ResultsError(PowerrigError):
    """The results database is unusable or does not hold what was asked."""


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
        from sqlalchemy.dialects.postgresql import insert as dialect_insert
    elif c.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as dialect_insert
    else:
        raise ResultsError(f"the results store needs SQLite or PostgreSQL, not {c.dialect.name}")
    return dialect_insert(table)


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


class ResultStore:
    def __init__(self, target: str | Path = DEFAULT_DB, timeout_s: float = 10.0, read_only: bool = False):
        """``timeout_s``: how long a write waits for another writer's lock before it gives up.
        ``read_only``: an existing database at the current schema, opened so nothing can write (the web page)."""
        self.url = database_url(target)
        self.timeout_s, self.read_only = timeout_s, read_only
        self.path = Path(self.url[len("sqlite:///"):]) if self.url.startswith("sqlite:///") else None
        if self.path and read_only and not self.path.is_file():
            raise ResultsError(f"no results database {self.path}: name an existing file or URL with --db")
        if self.path and not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
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
            # lock_timeout: a writer blocked by another's lock gives up after timeout_s, as on SQLite
            ro = " -c default_transaction_read_only=on" if self.read_only else ""
            return {"connect_args": {"connect_timeout": max(1, round(self.timeout_s)),
                                     "options": f"-c lock_timeout={int(self.timeout_s * 1000)}{ro}"},
                    "pool_pre_ping": True}
        return {}

    def _sqlite_connections(self) -> None:
        """Transactions begun by powerrig, not by the driver: writes take the lock up front (BEGIN
        IMMEDIATE), so concurrent writers queue for busy_timeout instead of failing on a lock upgrade."""
        timeout_ms = int(self.timeout_s * 1000)

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

    @contextmanager
    def _write(self, wait_s: float | None = None):
        """One write transaction (committed at the end, rolled back on error); database errors (locked
        past the timeout, disk full, corrupt) become one ResultsError line. ``wait_s``: how long to wait
        for other writers' locks, if not the store's timeout."""
        wait_ms = int((self.timeout_s if wait_s is None else wait_s) * 1000)
        try:
            with self.engine.execution_options(powerrig_write=True, powerrig_wait_ms=wait_ms).begin() as c:
                if wait_s is not None and c.dialect.name == "postgresql":
                    c.execute(text(f"SET LOCAL lock_timeout = {wait_ms}"))
                yield c
        except IntegrityError:
            raise
        except DBAPIError as e:
            raise self._error("cannot write to", e) from None

    def _error(self, what: str, e: DBAPIError) -> DatabaseFault:
        why = _reason(e)
        low = why.lower()
        if "locked" in low or "lock timeout" in low:
            hint = f"another process held it longer than {self.timeout_s:g} s; try again when it is done"
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
        try:
            with self.engine.connect() as c:
                bad = [" ".join(r[0].split())[:160] for r in c.exec_driver_sql("PRAGMA quick_check").fetchall()
                       if r[0] != "ok"]
        except DBAPIError as e:
            raise self._error("cannot open", e) from None
        if bad:
            raise DatabaseFault(f"results database {self.path} is corrupt (quick_check: {bad[0]}"
                               f"{f' and {len(bad) - 1} more' if len(bad) > 1 else ''}): restore it from a backup "
                               "or use a new file")

    def _check_version(self) -> None:
        with self._read() as c:
            if not self.engine.dialect.has_table(c, "schema_info"):
                raise ResultsError(f"{self} is not a powerrig results database (no schema_info table)")
        v = self.schema_version()
        if v != S.SCHEMA_VERSION:
            raise ResultsError(f"results database {self} has schema version {v}, this powerrig reads "
                               f"{S.SCHEMA_VERSION}: " + ("upgrade powerrig" if v > S.SCHEMA_VERSION else
                                                          f"open it once with `powerrig results --db {self} list` "
                                                          "to migrate it"))

    def _schema_current(self) -> bool:
        """Every table there and the version this powerrig's: nothing to lock for (a lab's usual open)."""
        with self._read() as c:
            if not set(S.metadata.tables) <= set(inspect(c).get_table_names()):
                return False
            row = c.execute(select(S.schema_info.c.value).where(S.schema_info.c.key == "version")).first()
        return row is not None and row[0] == str(S.SCHEMA_VERSION)

    def _migrate(self) -> None:
        """Create or move the schema forward, once, however many processes open the database at once:
        under PostgreSQL's advisory lock or SQLite's write lock, the version read again once held."""
        if self._schema_current():
            return
        # the others wait for the one creating or migrating, however long that takes on a busy host
        with self._write(wait_s=SCHEMA_LOCK_WAIT_S) as c:
            if c.dialect.name == "postgresql":
                c.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": SCHEMA_LOCK})
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
        with self._write() as c:
            plan_row = self.plan_id(c, plan)
            return c.execute(insert(S.runs).values(
                plan_id=plan_row, status="running", started_utc=time.time(), station=station,
                dut_serial=str(drive.get("sn", "")).strip(), dut_firmware=str(drive.get("fr", "")).strip(),
                dut_model=str(drive.get("mn", "")).strip(), drive=json.dumps(drive, default=str),
                rig=json.dumps(rig or {}, default=str), software=json.dumps(software or {}),
                out_dir=str(out_dir), host=host, pid=pid)).inserted_primary_key[0]

    def claim_run(self, run_id: int, host: str, pid: int) -> None:
        """A resumed run is running again, owned by this process."""
        with self._write() as c:
            c.execute(update(S.runs).where(S.runs.c.id == run_id).values(status="running", error=None,
                                                                         finished_utc=None, host=host, pid=pid))

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
        with self._write() as c:
            vals = {"status": status, "error": error}
            if status in ("done", "failed", "interrupted"):
                vals["finished_utc"] = time.time()
            c.execute(update(S.runs).where(S.runs.c.id == run_id).values(**vals))

    def run(self, run_id: int) -> dict:
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

    # -- the live state of running runs ------------------------------------------------------
    def record_live(self, run_id: int, **state) -> None:
        """Overwrite a run's live row (step, W now, end time): an upsert, about once a second."""
        row = {"run_id": run_id, "updated_utc": time.time(), **{k: _clean(v) for k, v in state.items()}}
        with self._write() as c:
            c.execute(_upsert(c, S.live, ["run_id"], row))

    def clear_live(self, run_id: int) -> None:
        with self._write() as c:
            c.execute(S.live.delete().where(S.live.c.run_id == run_id))

    def live(self) -> list[dict]:
        """The live rows of runs still marked running, by station."""
        with self._read() as c:
            if not self.engine.dialect.has_table(c, "live"):
                return []
            rows = c.execute(select(S.live, S.runs.c.status, S.plans.c.name.label("plan"))
                             .join(S.runs, S.runs.c.id == S.live.c.run_id).join(S.plans)
                             .where(S.runs.c.status == "running").order_by(S.live.c.station)).mappings().all()
        return [dict(r) for r in rows]

    # -- steps -------------------------------------------------------------------------------
    def finished_steps(self, run_id: int) -> set[str]:
        with self._read() as c:
            return {r[0] for r in c.execute(select(S.steps.c.key).where(S.steps.c.run_id == run_id))}

    def store_step(self, run_id: int, step: dict, phases: list[dict], measurements: list[dict]) -> int:
        """One step, its phases (with per-rail metrics under 'rails') and measurements, atomically."""
        try:
            with self._write() as c:
                sid = c.execute(insert(S.steps).values(run_id=run_id, **{k: _clean(v) for k, v in step.items()})
                                ).inserted_primary_key[0]
                for p in phases:
                    rails = p.get("rails", {})
                    row = {k: _clean(v) for k, v in p.items() if k != "rails"}
                    pid = c.execute(insert(S.phases).values(step_id=sid, **row)).inserted_primary_key[0]
                    vals = [{"phase_id": pid, "rail": rail, "metric": m, "value": _clean(float(v))}
                            for rail, ms in rails.items() for m, v in ms.items()
                            if isinstance(v, (int, float)) and not isinstance(v, bool)]
                    if vals:
                        c.execute(insert(S.phase_metrics), vals)
                if measurements:
                    cols = [col.name for col in S.measurements.columns if col.name not in ("id", "step_id")]
                    unknown = {k for m in measurements for k in m} - set(cols)
                    if unknown:
                        raise ResultsError(f"measurement fields {sorted(unknown)} are not in the schema")
                    # executemany takes its columns from every row alike: give each row all of them
                    c.execute(insert(S.measurements), [{"step_id": sid, **{k: _clean(m.get(k)) for k in cols}}
                                                       for m in measurements])
                return sid
        except IntegrityError:
            raise ResultsError(f"step {step.get('key')!r} of run {run_id} is already stored (resume skips it)") from None

    def steps(self, run_id: int) -> list[dict]:
        with self._read() as c:
            return [dict(r) for r in c.execute(select(S.steps).where(S.steps.c.run_id == run_id)
                                               .order_by(S.steps.c.idx)).mappings()]

    def measurements(self, run_id: int) -> list[dict]:
        with self._read() as c:
            q = (select(S.steps.c.idx, S.steps.c.key.label("step"), S.steps.c.power_state, S.steps.c.workload,
                        S.measurements).join(S.steps, S.steps.c.id == S.measurements.c.step_id)
                 .where(S.steps.c.run_id == run_id).order_by(S.steps.c.idx, S.measurements.c.id))
            return [dict(r) for r in c.execute(q).mappings()]

    def phases(self, run_id: int) -> list[dict]:
        with self._read() as c:
            q = (select(S.steps.c.key.label("step"), S.phases).join(S.steps, S.steps.c.id == S.phases.c.step_id)
                 .where(S.steps.c.run_id == run_id).order_by(S.steps.c.idx, S.phases.c.id))
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
        d.mkdir(parents=True, exist_ok=True)
        out = d / f"run-{run_id}.json"
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.run_record(run_id), indent=1, default=str))
        tmp.replace(out)
        return out
