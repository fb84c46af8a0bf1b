"""The DuckDB store: connections with lock retries, the versioned schema, and the one write path for runs.

DuckDB allows one writer process or many readers, never both, so nothing here keeps a connection: every
operation opens, works and closes. Writers and readers retry on the lock error with jittered back-off.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from tracker.common.processes import process_alive
from tracker.store.schema import MIGRATIONS, RUN_TABLES, SCHEMA_VERSION, TABLE_COLUMNS, VERDICTS

DEFAULT_STORE = "experiments.duckdb"
LOCK_RETRY_SECONDS = float(os.environ.get("KERNELBEAM_LOCK_RETRY_SECONDS", "20"))


class StoreLockedError(RuntimeError):
    """The store stayed locked by another process past the retry limit."""


class NotAStoreError(RuntimeError):
    """The path exists but is not a DuckDB database."""


def now() -> datetime:
    return datetime.now(UTC)


# DuckDB's wording when another process (or another connection of this one, opened differently) holds the file.
_LOCK_MESSAGES = ("Could not set lock on file", "Conflicting lock", "different configuration than existing")


def _is_lock_error(exc: Exception) -> bool:
    return any(m in str(exc) for m in _LOCK_MESSAGES)


@contextlib.contextmanager
def connect(
    path: str | os.PathLike,
    *,
    read_only: bool = False,
    retry_seconds: float | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open the store, retrying while another process holds the lock; always closed on exit.

    A writer also brings the schema up to date and marks runs whose process died as crashed.
    """
    path = Path(path)
    if read_only and not path.exists():
        raise FileNotFoundError(f"no store at {path}")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot create a store at {path}: folder {path.parent} does not exist")
    deadline = time.monotonic() + (LOCK_RETRY_SECONDS if retry_seconds is None else retry_seconds)
    delay = 0.05
    while True:
        try:
            con = duckdb.connect(str(path), read_only=read_only)
            break
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise NotAStoreError(f"{path} is not a DuckDB store: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreLockedError(f"store {path} is locked by another process: {exc}") from exc
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 1.0)
    try:
        if not read_only:
            migrate(con)
            reap_dead_runs(con)
        yield con
    finally:
        con.close()


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_version'"
    ).fetchone()[0]
    if not exists:
        return 0
    return con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply the migrations this store lacks, each in its own transaction. Returns the new version."""
    con.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER, applied_at TIMESTAMPTZ)")
    current = schema_version(con)
    if current > SCHEMA_VERSION:
        raise RuntimeError(f"store schema v{current} is newer than this tracker (v{SCHEMA_VERSION}); upgrade")
    for version in range(current, SCHEMA_VERSION):
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(MIGRATIONS[version])
            con.execute("INSERT INTO schema_version VALUES (?, ?)", [version + 1, now()])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return SCHEMA_VERSION


def reap_dead_runs(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Mark `running` rows of this host whose recording process is gone as `crashed`."""
    host = socket.gethostname()
    rows = con.execute("SELECT run_id, pid FROM runs WHERE status = 'running' AND host = ?", [host]).fetchall()
    dead = [run_id for run_id, pid in rows if not process_alive(pid)]
    for run_id in dead:
        con.execute(
            "UPDATE runs SET status = 'crashed', finished_at = ?, "
            "error = coalesce(error, 'the recording process ended before the run was completed') "
            "WHERE run_id = ?",
            [now(), run_id],
        )
    return dead


@dataclass
class RunRecord:
    """Everything one run produced, held in memory until it is written in one transaction."""

    run: dict[str, Any]
    variant: dict[str, Any]
    cases: list[dict[str, Any]] = field(default_factory=list)
    samples: list[tuple[int, int, float]] = field(default_factory=list)  # (case_idx, rep, time_us)
    profile_cases: list[dict[str, Any]] = field(default_factory=list)
    profile_kernels: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        data = json.loads(text)
        data["samples"] = [tuple(s) for s in data["samples"]]
        return cls(**data)


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = TABLE_COLUMNS[table]
    sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    con.executemany(sql, [[row.get(c) for c in cols] for row in rows])


def _insert_samples(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    samples: Sequence[tuple[int, int, float]],
) -> None:
    if not samples:
        return
    import pyarrow as pa

    case_idx, rep, time_us = zip(*samples, strict=True)
    table = pa.table(
        {
            "run_id": pa.array([run_id] * len(samples), pa.string()),
            "case_idx": pa.array(case_idx, pa.int32()),
            "rep": pa.array(rep, pa.int32()),
            "time_us": pa.array(time_us, pa.float64()),
        }
    )
    con.register("new_samples", table)
    try:
        con.execute("INSERT INTO samples SELECT run_id, case_idx, rep, time_us FROM new_samples")
    finally:
        con.unregister("new_samples")


def start_run(path: str | os.PathLike, record: RunRecord) -> None:
    """Write the run row as `running` (and its variant) so a crash of the tracker itself stays visible."""
    with connect(path) as con:
        con.execute("BEGIN TRANSACTION")
        _upsert_variant(con, record.variant)
        _insert(con, "runs", [{**record.run, "status": "running"}])
        con.execute("COMMIT")


def _upsert_variant(con: duckdb.DuckDBPyConnection, variant: dict[str, Any]) -> None:
    exists = con.execute("SELECT 1 FROM variants WHERE sha256 = ?", [variant["sha256"]]).fetchone()
    if not exists:  # only the columns a run knows, so a store not yet migrated (see migrate) still takes it
        cols = [c for c in TABLE_COLUMNS["variants"] if c in variant]
        sql = f"INSERT INTO variants ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        con.execute(sql, [variant[c] for c in cols])


# Registration metadata filled in on a variant that a run recorded first (a run knows no commit message).
_VARIANT_META = ("commit", "committed_at", "message", "family", "parent", "registered_at")


def register_variants(path: str | os.PathLike, variants: Sequence[dict[str, Any]]) -> list[str]:
    """Register variants without running them, in one transaction; returns the sha256 of those added.

    Content already in the store adds nothing; only registration fields it lacks are filled in."""
    added: list[str] = []
    with connect(path) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            for v in variants:
                if con.execute("SELECT 1 FROM variants WHERE sha256 = ?", [v["sha256"]]).fetchone():
                    sets = ", ".join(f"{c} = coalesce({c}, ?)" for c in _VARIANT_META)
                    con.execute(
                        f"UPDATE variants SET {sets} WHERE sha256 = ?",
                        [*(v.get(c) for c in _VARIANT_META), v["sha256"]],
                    )
                else:
                    _insert(con, "variants", [v])
                    added.append(v["sha256"])
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return added


def write_run(con: duckdb.DuckDBPyConnection, record: RunRecord) -> None:
    """Write a complete run in one transaction, replacing a `running` row of the same id."""
    run_id = record.run["run_id"]
    con.execute("BEGIN TRANSACTION")
    try:
        _upsert_variant(con, record.variant)
        con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        for table in RUN_TABLES:
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        _insert(con, "runs", [record.run])
        _insert(con, "case_results", [{**c, "run_id": run_id} for c in record.cases])
        _insert_samples(con, run_id, record.samples)
        _insert(
            con,
            "profile_cases",
            [{**p, "run_id": run_id} for p in record.profile_cases],
        )
        _insert(
            con,
            "profile_kernels",
            [{**p, "run_id": run_id} for p in record.profile_kernels],
        )
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise


def pending_dir(path: str | os.PathLike) -> Path:
    """Side folder for runs that could not be written because the store stayed locked."""
    return Path(f"{path}.pending")


@dataclass(frozen=True)
class PendingRun:
    """A run kept in a side file because it could not be written into the store, and why."""

    path: Path
    reason: str


def finish_run(path: str | os.PathLike, record: RunRecord, *, retry_seconds: float | None = None) -> PendingRun | None:
    """Complete a run in the store. If that fails (a lock held past the retry limit, or any other error),
    save the run to a JSON side file and say where; the next successful writer brings it in (`flush_pending`).
    """
    try:
        with connect(path, retry_seconds=retry_seconds) as con:
            write_run(con, record)
            _flush_pending(con, path)
        return None
    except Exception as exc:  # keep the run on disk rather than lose it
        folder = pending_dir(path)
        folder.mkdir(parents=True, exist_ok=True)
        side = folder / f"{record.run['run_id']}.json"
        side.write_text(record.to_json())
        locked = isinstance(exc, StoreLockedError)
        return PendingRun(side, "the store stayed locked" if locked else f"writing failed: {exc}")


def _flush_pending(con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> list[str]:
    folder = pending_dir(path)
    done = []
    for side in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            write_run(con, RunRecord.from_json(side.read_text()))
        except Exception:  # a bad side file must not block every later write; it stays for a person to see
            continue
        side.unlink()
        done.append(side.stem)
    return done


def flush_pending(path: str | os.PathLike) -> list[str]:
    """Write runs saved in side files into the store; returns their run ids."""
    with connect(path) as con:
        return _flush_pending(con, path)


def add_verdict(path: str | os.PathLike, run_id: str, verdict: str, reason: str = "") -> None:
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}, not {verdict!r}")
    with connect(path) as con:
        row = con.execute("SELECT variant_sha256 FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise KeyError(f"no run {run_id!r} in {path}")
        _insert(
            con,
            "verdicts",
            [
                {
                    "run_id": run_id,
                    "variant_sha256": row[0],
                    "verdict": verdict,
                    "reason": reason,
                    "created_at": now(),
                }
            ],
        )
