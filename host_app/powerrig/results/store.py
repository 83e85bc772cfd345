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
from pathlib import Path

from sqlalchemy import create_engine, event, func, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError, OperationalError

from powerrig.core.errors import PowerrigError
from powerrig.results import schema as S

logger = logging.getLogger(__name__)
DEFAULT_DB = Path("out/results/powerrig.sqlite")


class ResultsError(PowerrigError):
    """The results database is unusable or does not hold what was asked."""


def _url(target: str | Path) -> str:
    t = str(target)
    if "://" in t:
        return t
    Path(t).parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{Path(t).resolve()}"


def _clean(v):
    """NaN/inf are not valid JSON and mean 'no value' here."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class ResultStore:
    def __init__(self, target: str | Path = DEFAULT_DB):
        self.url = _url(target)
        self.path = Path(self.url[len("sqlite:///"):]) if self.url.startswith("sqlite:///") else None
        try:
            self.engine: Engine = create_engine(self.url, future=True)
        except Exception as e:        # bad URL, missing driver: say which
            raise ResultsError(f"cannot use results database {target}: {e}") from None
        if self.engine.dialect.name == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn, _):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.execute("PRAGMA busy_timeout=10000")
                cur.close()
        self._migrate()

    # -- schema ------------------------------------------------------------------------------
    def schema_version(self) -> int:
        with self.engine.connect() as c:
            row = c.execute(select(S.schema_info.c.value).where(S.schema_info.c.key == "version")).first()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        try:
            with self.engine.begin() as c:
                fresh = not self.engine.dialect.has_table(c, "runs")
                if fresh:
                    S.metadata.create_all(c)
                    c.execute(insert(S.schema_info).values(key="version", value=str(S.SCHEMA_VERSION)))
                    return
                row = c.execute(select(S.schema_info.c.value).where(S.schema_info.c.key == "version")).first()
                v = int(row[0]) if row else 1
                if v > S.SCHEMA_VERSION:
                    raise ResultsError(f"results database {self.url} has schema version {v}, newer than this powerrig "
                                       f"({S.SCHEMA_VERSION}): upgrade powerrig to write to it")
                while v < S.SCHEMA_VERSION:
                    S.MIGRATIONS[v](c)
                    v += 1
                    logger.info("results database migrated to schema version %d", v)
                c.execute(S.schema_info.delete().where(S.schema_info.c.key == "version"))
                c.execute(insert(S.schema_info).values(key="version", value=str(v)))
        except OperationalError as e:
            raise ResultsError(f"cannot open results database {self.url}: {e.orig}") from None

    # -- runs --------------------------------------------------------------------------------
    def plan_id(self, c, plan) -> int:
        row = c.execute(select(S.plans.c.id).where(S.plans.c.hash == plan.hash)).first()
        if row:
            return row[0]
        return c.execute(insert(S.plans).values(hash=plan.hash, name=plan.name, path=plan.path, text=plan.source,
                                                resolved=json.dumps(plan.resolved()))).inserted_primary_key[0]

    def start_run(self, plan, out_dir: str, station: str = "", drive: dict | None = None, rig: dict | None = None,
                  software: dict | None = None) -> int:
        drive = drive or {}
        with self.engine.begin() as c:
            pid = self.plan_id(c, plan)
            return c.execute(insert(S.runs).values(
                plan_id=pid, status="running", started_utc=time.time(), station=station,
                dut_serial=str(drive.get("sn", "")).strip(), dut_firmware=str(drive.get("fr", "")).strip(),
                dut_model=str(drive.get("mn", "")).strip(), drive=json.dumps(drive, default=str),
                rig=json.dumps(rig or {}, default=str), software=json.dumps(software or {}),
                out_dir=str(out_dir))).inserted_primary_key[0]

    def resumable_run(self, plan) -> dict | None:
        """The latest unfinished run of this exact plan (by hash), or None."""
        with self.engine.connect() as c:
            row = c.execute(select(S.runs).join(S.plans).where(S.plans.c.hash == plan.hash)
                            .where(S.runs.c.status != "done").order_by(S.runs.c.id.desc())).mappings().first()
        return dict(row) if row else None

    def latest_run_of_path(self, path: str) -> dict | None:
        with self.engine.connect() as c:
            row = c.execute(select(S.runs, S.plans.c.hash, S.plans.c.name.label("plan_name")).join(S.plans)
                            .where(S.plans.c.path == path).order_by(S.runs.c.id.desc())).mappings().first()
        return dict(row) if row else None

    def set_run_status(self, run_id: int, status: str, error: str | None = None) -> None:
        with self.engine.begin() as c:
            vals = {"status": status, "error": error}
            if status in ("done", "failed", "interrupted"):
                vals["finished_utc"] = time.time()
            c.execute(update(S.runs).where(S.runs.c.id == run_id).values(**vals))

    def run(self, run_id: int) -> dict:
        with self.engine.connect() as c:
            row = c.execute(select(S.runs, S.plans.c.name.label("plan_name"), S.plans.c.hash.label("plan_hash"),
                                   S.plans.c.text.label("plan_text"), S.plans.c.resolved.label("plan_resolved"))
                            .join(S.plans).where(S.runs.c.id == run_id)).mappings().first()
        if row is None:
            raise ResultsError(f"no run {run_id} in {self.url} (see `powerrig results list`)")
        return dict(row)

    def runs(self) -> list[dict]:
        n_steps = select(S.steps.c.run_id, func.count().label("steps")).group_by(S.steps.c.run_id).subquery()
        with self.engine.connect() as c:
            rows = c.execute(select(S.runs.c.id, S.runs.c.status, S.runs.c.started_utc, S.runs.c.finished_utc,
                                    S.runs.c.station, S.runs.c.dut_serial, S.runs.c.dut_firmware,
                                    S.plans.c.name.label("plan"), S.plans.c.hash.label("plan_hash"),
                                    func.coalesce(n_steps.c.steps, 0).label("steps"))
                             .join(S.plans).outerjoin(n_steps, n_steps.c.run_id == S.runs.c.id)
                             .order_by(S.runs.c.id)).mappings().all()
        return [dict(r) for r in rows]

    # -- steps -------------------------------------------------------------------------------
    def finished_steps(self, run_id: int) -> set[str]:
        with self.engine.connect() as c:
            return {r[0] for r in c.execute(select(S.steps.c.key).where(S.steps.c.run_id == run_id))}

    def store_step(self, run_id: int, step: dict, phases: list[dict], measurements: list[dict]) -> int:
        """One step, its phases (with per-rail metrics under 'rails') and measurements, atomically."""
        try:
            with self.engine.begin() as c:
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
        with self.engine.connect() as c:
            return [dict(r) for r in c.execute(select(S.steps).where(S.steps.c.run_id == run_id)
                                               .order_by(S.steps.c.idx)).mappings()]

    def measurements(self, run_id: int) -> list[dict]:
        with self.engine.connect() as c:
            q = (select(S.steps.c.idx, S.steps.c.key.label("step"), S.steps.c.power_state, S.steps.c.workload,
                        S.measurements).join(S.steps, S.steps.c.id == S.measurements.c.step_id)
                 .where(S.steps.c.run_id == run_id).order_by(S.steps.c.idx, S.measurements.c.id))
            return [dict(r) for r in c.execute(q).mappings()]

    def phases(self, run_id: int) -> list[dict]:
        with self.engine.connect() as c:
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
