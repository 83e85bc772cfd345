"""The results schema (SQLAlchemy Core): run -> step -> phase / measurement, the OpenHTF model.

A run is one execution of a plan on one station (rig) and one DUT (drive serial + firmware). Each
step holds its phases (per-phase figures, and per rail in ``phase_metrics``) and its measurements
(value, units, limits, marginal band, outcome). The plan text itself is kept, and the resolved
plan (every value used). ``SCHEMA_VERSION`` and ``MIGRATIONS`` move an older database forward.
"""
from __future__ import annotations

from sqlalchemy import (Boolean, Column, Float, ForeignKey, Integer, MetaData, String, Table, Text, UniqueConstraint,
                        text)

SCHEMA_VERSION = 3

metadata = MetaData()

schema_info = Table(
    "schema_info", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(256), nullable=False),
)

plans = Table(
    "plans", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("hash", String(32), nullable=False, unique=True),
    Column("name", String(256), nullable=False),
    Column("path", Text),
    Column("text", Text, nullable=False),          # the plan file as written
    Column("resolved", Text, nullable=False),      # JSON: every value the sweep used
)

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("plan_id", Integer, ForeignKey("plans.id"), nullable=False),
    Column("status", String(16), nullable=False),  # running | done | failed | interrupted
    Column("started_utc", Float, nullable=False),
    Column("finished_utc", Float),
    Column("station", String(256)),                # the rig: interposer port / sim id
    Column("dut_serial", String(64)),
    Column("dut_firmware", String(64)),
    Column("dut_model", String(128)),
    Column("drive", Text),                         # JSON: id-ctrl
    Column("rig", Text),                           # JSON: interposer description with calibration
    Column("software", Text),                      # JSON: versions
    Column("out_dir", Text),                       # captures, fio output, logs
    Column("error", Text),
    Column("host", String(256)),                   # the machine and process that run it (resume refuses a
    Column("pid", Integer),                        # live one; see sweep/ownership.py)
)

steps = Table(
    "steps", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("key", String(256), nullable=False),
    Column("name", String(256), nullable=False),
    Column("power_state", Integer),
    Column("workload", String(128)),               # None for idle steps
    Column("repetition", Integer, nullable=False, default=0),
    Column("params", Text),                        # JSON: the workload as run (rw, bs, QD, streams, runtime)
    Column("status", String(16), nullable=False),  # done | invalid
    Column("invalid_reason", Text),
    Column("attempts", Integer, nullable=False, default=1),
    Column("started_utc", Float),
    Column("finished_utc", Float),
    Column("capture", Text),                       # path of the step's capture (.jls)
    Column("lost_s", Float),
    UniqueConstraint("run_id", "key", name="uq_step_key"),   # a finished step is stored once
)

phases = Table(
    "phases", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("step_id", Integer, ForeignKey("steps.id"), nullable=False),
    Column("name", String(256), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("power_state", Integer),
    Column("start_s", Float), Column("duration_s", Float), Column("lost_s", Float),
    Column("mean_w", Float), Column("energy_j", Float),
    Column("max_1s_w", Float), Column("max_10s_w", Float), Column("peak_100us_w", Float),
    Column("mib_s", Float), Column("iops", Float),
    Column("invalid", Text),
)

phase_metrics = Table(
    "phase_metrics", metadata,
    Column("phase_id", Integer, ForeignKey("phases.id"), primary_key=True),
    Column("rail", String(32), primary_key=True),     # 12V, 3V3, ..., total
    Column("metric", String(32), primary_key=True),   # mean_w, std_w, min_w, max_w, energy_j, ...
    Column("value", Float),
)

measurements = Table(
    "measurements", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("step_id", Integer, ForeignKey("steps.id"), nullable=False),
    Column("name", String(128), nullable=False),      # "power.mean", "efficiency.mib_s_per_w", "OCP PCM-1", ...
    Column("phase", String(256)),
    Column("value", Float),
    Column("units", String(32)),
    Column("lower", Float), Column("upper", Float),   # limits (None: none)
    Column("marginal_lower", Float), Column("marginal_upper", Float),   # within limits but near them
    Column("outcome", String(16), nullable=False),    # pass | marginal | fail | partial | invalid | n/a | info
    Column("requirement_met", Boolean),
    Column("published", Float),                       # the figure a datasheet or paper quotes, if any
    Column("notes", Text),
)

# each running run's state now (one row per run, overwritten about once a second): the web page's live view.
# A table of its own, not columns of runs: it needs no migration (created on open) and a finished step's
# transaction never waits for it.
live = Table(
    "live", metadata,
    Column("run_id", Integer, ForeignKey("runs.id"), primary_key=True),
    Column("station", String(256)),
    Column("step_key", String(256)),
    Column("step_name", String(256)),
    Column("n", Integer),                             # the step running, 1-based
    Column("m", Integer),                             # steps in the plan
    Column("watts", Float),                           # total W now
    Column("mib_s", Float),
    Column("ends_utc", Float),                        # when the sweep should end, at the pace so far
    Column("updated_utc", Float, nullable=False),
)


def _v1_to_v2(conn) -> None:
    """v2 added the published figure beside a measurement and step attempts (retries after throttling)."""
    conn.execute(text("ALTER TABLE measurements ADD COLUMN published FLOAT"))
    conn.execute(text("ALTER TABLE steps ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1"))


def _v2_to_v3(conn) -> None:
    """v3 records which host and process run a run (its owner), so a second shell's resume is refused."""
    conn.execute(text("ALTER TABLE runs ADD COLUMN host VARCHAR(256)"))
    conn.execute(text("ALTER TABLE runs ADD COLUMN pid INTEGER"))


# MIGRATIONS[v] moves a database at version v to v + 1
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}
